/* sampler_probs: the filtered, renormalised distribution of the sampler
 * (gf_sampler_probs) on a fixed row, checked the way the peers' own tests
 * check theirs: an exact probability vector at an atol, the kept set, bounds
 * on the kept count (kept <= k, kept >= 1), bounds on the largest and smallest
 * kept probability at a temperature, and one entry compared with another
 * (a higher temperature is flatter). Every entry is one parameter set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/sampler.h"
#include "genfence/sampler_fields.h"
#include "kept_list.h"
#include "keys.h"
#include "slot.h"

typedef struct bound {
    double le, ge; /* NAN: unchecked */
} bound;

typedef struct probs_expect {
    gf_sampler_params p;
    int line;
    int32_t *keep; /* NULL: unchecked */
    size_t n_keep;
    double *probs; /* expect_probs (V), NULL: unchecked */
    size_t n_probs;
    double atol;
    long long kept_max, kept_min; /* -1: unchecked */
    bound max_prob, min_prob;
    long long flatter_than, sharper_than; /* index of another entry, -1: none */
    long long fewer_than;                 /* index of an entry that must keep more tokens, -1: none */
    int32_t *draw_in;                     /* the draws must be among these ids (NULL: unchecked) */
    size_t n_draw_in;
} probs_expect;

typedef struct probs_spec {
    float *logits; /* (V) */
    int32_t V;
    int from_probs, random;
    long long r_vocab, r_seed, r_row;
    double r_scale, r_mask;
    double atol;
    probs_expect *ex;
    size_t n_ex;
} probs_spec;

static void probs_free(void *v)
{
    probs_spec *s = v;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_ex; i++) {
        free(s->ex[i].keep);
        free(s->ex[i].probs);
        free(s->ex[i].draw_in);
    }
    free(s->ex);
    free(s->logits);
    free(s);
}

static int parse_bound(gf_cctx *ctx, const gf_ynode *m, const char *key, bound *b)
{
    b->le = b->ge = NAN;
    const gf_ynode *n = gf_y_get(ctx, m, key, 0);
    if (!n)
        return 0;
    if (!gf_y_node_is_map(ctx, n, key))
        return -1;
    int bad = gf_y_double(ctx, n, "le", 0, &b->le) < 0;
    bad |= gf_y_double(ctx, n, "ge", 0, &b->ge) < 0;
    char where[64];
    snprintf(where, sizeof where, "in '%s' (known: le, ge)", key);
    gf_y_check_unknown(ctx, n, where);
    if (!bad && isnan(b->le) && isnan(b->ge)) {
        gf_y_error(ctx, n, "'%s' needs 'le' or 'ge'", key);
        bad = 1;
    }
    return bad ? -1 : 1;
}

static int parse_probs(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    probs_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->atol = 1e-6;
    s->r_vocab = 1024;
    s->r_seed = 35;
    s->r_scale = 1.0;
    int rd = gf_y_probs_or_logits(ctx, m, 0, &s->logits, &s->V, &s->from_probs);
    int bad = rd < 0;
    const gf_ynode *r = gf_y_get(ctx, m, "random", 0), *fill = gf_y_get(ctx, m, "fill", 0);
    long long ramp = 0;
    int rr = gf_y_int(ctx, m, "log_ramp", 0, 2, 1 << 20, &ramp);
    bad |= rr < 0;
    if ((rd > 0) + (r != NULL) + (fill != NULL) + (rr > 0) > 1) {
        gf_y_error(ctx, m, "give one of 'probs', 'logits', 'random', 'fill' or 'log_ramp'");
        return -1;
    }
    if (r) {
        if (!gf_y_node_is_map(ctx, r, "'random'"))
            return -1;
        s->random = 1;
        bad |= gf_y_int(ctx, r, "vocab", 0, 2, 1 << 20, &s->r_vocab) < 0;
        bad |= gf_y_int(ctx, r, "seed", 0, 0, 0x7fffffffffffffffLL, &s->r_seed) < 0;
        bad |= gf_y_double(ctx, r, "scale", 0, &s->r_scale) < 0;
        bad |= gf_y_int(ctx, r, "row", 0, 0, 0x7fffffffffffffffLL, &s->r_row) < 0;
        int rm = gf_y_double(ctx, r, "mask", 0, &s->r_mask);
        bad |= rm < 0;
        if (rm > 0 && !(s->r_mask >= 0.0 && s->r_mask <= 1.0)) {
            gf_y_error(ctx, gf_y_get(ctx, r, "mask", 0), "'mask' is the fraction of -inf logits, in [0, 1]; got %g",
                       s->r_mask);
            bad = 1;
        }
        gf_y_check_unknown(ctx, r, "in 'random' (known: vocab, seed, scale, row, mask)");
        s->V = (int32_t)s->r_vocab;
    } else if (fill) { /* a constant row, some entries set: {vocab, value, set: {id: logit}} */
        if (!gf_y_node_is_map(ctx, fill, "'fill'"))
            return -1;
        long long vocab = 0;
        double value = 0;
        bad |= gf_y_int(ctx, fill, "vocab", GF_Y_REQUIRED, 1, 1 << 20, &vocab) < 0;
        bad |= gf_y_double(ctx, fill, "value", GF_Y_REQUIRED, &value) < 0;
        const gf_ynode *set = gf_y_get(ctx, fill, "set", 0);
        gf_y_check_unknown(ctx, fill, "in 'fill' (known: vocab, value, set)");
        if (bad || (set && !gf_y_node_is_map(ctx, set, "'set' (token id: logit)")))
            return -1;
        s->V = (int32_t)vocab;
        s->logits = malloc((size_t)s->V * sizeof *s->logits);
        if (!s->logits)
            return -1;
        for (int32_t i = 0; i < s->V; i++)
            s->logits[i] = (float)value;
        for (size_t i = 0; set && i < set->n; i++) {
            long long id;
            double v;
            if (gf_y_node_int(ctx, set->items[2 * i], "a 'set' token id", 0, vocab - 1, &id) < 0 ||
                gf_y_node_double(ctx, set->items[2 * i + 1], "a 'set' logit", &v) < 0) {
                bad = 1;
                continue;
            }
            s->logits[id] = (float)v;
        }
    } else if (rr > 0) { /* logits log(i): llama.cpp's sampler_tester(n_vocab); token 0 is -inf */
        s->V = (int32_t)ramp;
        s->logits = malloc((size_t)s->V * sizeof *s->logits);
        if (!s->logits)
            return -1;
        for (int32_t i = 0; i < s->V; i++)
            s->logits[i] = i == 0 ? -INFINITY : logf((float)i);
    } else if (rd == 0 && !bad) {
        gf_y_error(ctx, m, "missing required key 'probs', 'logits', 'random', 'fill' or 'log_ramp'");
        bad = 1;
    }
    /* the case-level keys are read even without a row (their errors too, and
     * gf_kind_keys sees them); the entries need the row */
    int no_row = bad;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    /* case-level sampler parameters are every entry's defaults */
    gf_sampler_params base = gf_sampler_greedy();
    base.temperature = 1.0;
    bad |= gf_y_sampler_raw(ctx, m, &base) < 0;
    const gf_ynode *ex = gf_y_get(ctx, m, "expect", no_row ? 0 : GF_Y_REQUIRED);
    if (no_row || !ex || !gf_y_node_is_seq(ctx, ex, "'expect'"))
        return -1;
    if (ex->n == 0) {
        gf_y_error(ctx, ex, "'expect' is empty");
        return -1;
    }
    s->ex = calloc(ex->n, sizeof *s->ex);
    if (!s->ex)
        return -1;
    s->n_ex = ex->n;
    for (size_t i = 0; i < ex->n; i++) {
        const gf_ynode *e = ex->items[i];
        probs_expect *x = &s->ex[i];
        x->kept_max = x->kept_min = x->flatter_than = x->sharper_than = x->fewer_than = -1;
        x->max_prob.le = x->max_prob.ge = x->min_prob.le = x->min_prob.ge = NAN;
        if (!gf_y_node_is_map(ctx, e, "an 'expect' entry")) {
            bad = 1;
            continue;
        }
        x->line = e->line;
        x->p = base;
        x->atol = s->atol;
        bad |= gf_y_sampler(ctx, e, &x->p) < 0;
        if (base.ext && x->p.ext != base.ext) { /* the entry's block would replace the case's, not extend it */
            gf_y_error(ctx, e,
                       "this entry names sampler filters or a profile and so does the case: they are not merged; "
                       "give them per entry");
            bad = 1;
        }
        bad |= gf_y_ints(ctx, e, "keep", 0, 0, s->V - 1, 0, &x->keep, &x->n_keep) < 0;
        int rp = gf_y_doubles(ctx, e, "expect_probs", 0, 1, &x->probs, &x->n_probs);
        if (rp < 0) {
            bad = 1;
        } else if (rp > 0 && (int32_t)x->n_probs != s->V) {
            gf_y_error(ctx, gf_y_get(ctx, e, "expect_probs", 0), "'expect_probs' has %zu entries; the row has %d",
                       x->n_probs, s->V);
            bad = 1;
        }
        bad |= gf_y_double(ctx, e, "atol", 0, &x->atol) < 0;
        bad |= gf_y_int(ctx, e, "kept_max", 0, 0, s->V, &x->kept_max) < 0;
        bad |= gf_y_int(ctx, e, "kept_min", 0, 0, s->V, &x->kept_min) < 0;
        bad |= parse_bound(ctx, e, "max_prob", &x->max_prob) < 0;
        bad |= parse_bound(ctx, e, "min_prob", &x->min_prob) < 0;
        bad |= gf_y_ints(ctx, e, "draw_in", 0, 0, s->V - 1, 1, &x->draw_in, &x->n_draw_in) < 0;
        long long hi = (long long)ex->n - 1;
        bad |= gf_y_int(ctx, e, "flatter_than", 0, 0, hi, &x->flatter_than) < 0;
        bad |= gf_y_int(ctx, e, "sharper_than", 0, 0, hi, &x->sharper_than) < 0;
        bad |= gf_y_int(ctx, e, "fewer_kept_than", 0, 0, hi, &x->fewer_than) < 0;
        if ((long long)i == x->flatter_than || (long long)i == x->sharper_than || (long long)i == x->fewer_than) {
            gf_y_error(ctx, e, "an entry cannot be compared with itself");
            bad = 1;
        }
        if (!x->keep && !x->probs && x->kept_max < 0 && x->kept_min < 0 && isnan(x->max_prob.le) &&
            isnan(x->max_prob.ge) && isnan(x->min_prob.le) && isnan(x->min_prob.ge) && x->flatter_than < 0 &&
            x->sharper_than < 0 && x->fewer_than < 0 && !x->draw_in) {
            gf_y_error(ctx, e,
                       "an 'expect' entry needs an expectation: keep, expect_probs, kept_max, kept_min, max_prob, "
                       "min_prob, flatter_than, sharper_than, fewer_kept_than or draw_in");
            bad = 1;
        }
        gf_y_check_unknown(ctx, e,
                           "in an 'expect' entry (known: the sampler parameters, keep, expect_probs, atol, kept_max, "
                           "kept_min, max_prob, min_prob, flatter_than, sharper_than, fewer_kept_than, draw_in)");
    }
    return bad ? -1 : 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* What one entry measured. */
typedef struct probs_seen {
    int ok; /* the sampler accepted the row */
    double max_p, min_p, entropy;
    size_t n_kept;
} probs_seen;

/* " name=value" for one non-default extension field (the field table's
 * names): lists in brackets, at most a few of their entries. */
static size_t label_field(const gf_sampler_field *f, const gf_sampler_params *p, char *buf, size_t cap)
{
    const gf_sampler_ext *e = p->ext;
    const void *v = gf_sf_cat(f, p, e, f->off);
    const int32_t n = gf_sf_count(f, p, e);
    size_t w = (size_t)snprintf(buf, cap, " %s=", f->name);
    switch (f->type) {
    case GF_SF_REAL:
    case GF_SF_REAL_OPT: w += (size_t)snprintf(buf + w, w < cap ? cap - w : 0, "%g", *(const double *)v); break;
    case GF_SF_INT:
    case GF_SF_INT_OPT:
    case GF_SF_PROMPT_LEN:
    case GF_SF_PROFILE: w += (size_t)snprintf(buf + w, w < cap ? cap - w : 0, "%d", (int)*(const int32_t *)v); break;
    case GF_SF_SEED:
        w += (size_t)snprintf(buf + w, w < cap ? cap - w : 0, "%llu", (unsigned long long)*(const uint64_t *)v);
        break;
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: /* [a b,c:-1.5]: each entry's ids joined by spaces, its bias after ':' */
        for (int32_t i = 0; i < n && i < 6 && w < cap; i++) {
            const gf_token_seq *q = &(*(const gf_token_seq *const *)v)[i];
            w += (size_t)snprintf(buf + w, cap - w, "%s", i ? "," : "[");
            for (int32_t j = 0; j < q->n && j < 6 && w < cap; j++)
                w += (size_t)snprintf(buf + w, cap - w, "%s%d", j ? " " : "", (int)q->ids[j]);
            if (f->type == GF_SF_SEQ_BIAS && w < cap)
                w += (size_t)snprintf(buf + w, cap - w, ":%g", (double)q->bias);
        }
        if (w < cap)
            w += (size_t)snprintf(buf + w, cap - w, "%s]", n > 6 ? ",..." : "");
        break;
    case GF_SF_CHAIN:
    case GF_SF_IDS:
    case GF_SF_BIAS:
        for (int32_t i = 0; i < n && i < 6 && w < cap; i++) {
            const char *sep = i ? "," : "[";
            if (f->type == GF_SF_CHAIN)
                w += (size_t)snprintf(buf + w, cap - w, "%s%s", sep, gf_sampler_stage_name(e->chain[i]));
            else if (f->type == GF_SF_IDS)
                w += (size_t)snprintf(buf + w, cap - w, "%s%d", sep, (int)(*(const int32_t *const *)v)[i]);
            else
                w += (size_t)snprintf(buf + w, cap - w, "%s%d:%g", sep, (int)e->bias[i].token, (double)e->bias[i].bias);
        }
        if (w < cap)
            w += (size_t)snprintf(buf + w, cap - w, "%s]", n > 6 ? ",..." : "");
        break;
    }
    return w;
}

/* The entry's sampler: its profile, T, k, p, then every other field not at
 * its default, by the field table (entries that differ in min_p, typical_p,
 * penalties or chain are told apart by name, not only by line). */
static void label_of(const gf_sampler_params *p, char *buf, size_t cap)
{
    char k[32] = "off", tp[32] = "off";
    if (p->use_top_k)
        snprintf(k, sizeof k, "%d", p->top_k);
    if (p->use_top_p)
        snprintf(tp, sizeof tp, "%g", p->top_p);
    const int prof = gf_sampler_params_profile(p);
    size_t w =
        (size_t)snprintf(buf, cap, "%s%sT=%g k=%s p=%s", prof != GF_PROFILE_SEED ? gf_sampler_profile_name(prof) : "",
                         prof != GF_PROFILE_SEED ? " " : "", p->temperature, k, tp);
    for (int i = 0; p->ext && i < GF_SF_COUNT && w < cap; i++) {
        const gf_sampler_field *f = &gf_sampler_fields[i];
        if (!f->in_ext || f->type == GF_SF_PROFILE || gf_sf_is_default(f, p, p->ext))
            continue;
        w += label_field(f, p, buf + w, cap - w);
    }
}

static void run_entry(gf_krun *k, const probs_spec *s, const float *L, size_t e, probs_seen *seen, json_t *per)
{
    const probs_expect *x = &s->ex[e];
    const int32_t V = s->V;
    double *z = malloc((size_t)V * sizeof *z), *pr = malloc((size_t)V * sizeof *pr);
    int32_t *kept = malloc((size_t)V * sizeof *kept);
    char label[512], name[1024], a[512], b[512];
    snprintf(label, sizeof label, "line %d: ", x->line);
    label_of(&x->p, label + strlen(label), sizeof label - strlen(label));
    if (!z || !pr || !kept) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    gf_error_clear();
    gf_status st = gf_sampler_filter(L, V, &x->p, z);
    if (st == GF_OK)
        st = gf_sampler_probs(L, V, &x->p, pr);
    if (st != GF_OK) {
        int all_neg_inf = 1;
        for (int32_t i = 0; i < V; i++)
            all_neg_inf &= L[i] == -INFINITY;
        if (all_neg_inf)
            gf_k_error(k, "%s: the logits are all -inf (no token to keep): %s", label, gf_error_msg());
        else
            gf_k_error(k, "%s: the sampler refused the parameters: %s", label, gf_error_msg());
        goto done;
    }
    size_t n_kept = 0;
    double zmax = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (z[i] != -INFINITY) {
            kept[n_kept++] = i;
            if (z[i] > zmax)
                zmax = z[i];
        }
    /* the probabilities are the softmax of the filtered z: sum 1, zero off the kept set */
    double sum = 0, zsum = 0, renorm = 0, max_p = 0, min_p = INFINITY, H = 0;
    for (size_t j = 0; j < n_kept; j++)
        zsum += exp(z[kept[j]] - zmax);
    for (int32_t i = 0; i < V; i++) {
        sum += pr[i];
        double want = z[i] == -INFINITY ? 0.0 : exp(z[i] - zmax) / zsum;
        double d = fabs(pr[i] - want);
        if (!(d <= renorm))
            renorm = d;
    }
    for (size_t j = 0; j < n_kept; j++) {
        double q = pr[kept[j]];
        if (q > max_p)
            max_p = q;
        if (q < min_p)
            min_p = q;
        if (q > 0)
            H -= q * log(q);
    }
    seen->ok = 1;
    seen->n_kept = n_kept;
    seen->max_p = max_p;
    seen->min_p = min_p;
    seen->entropy = H;
    snprintf(name, sizeof name, "%s renormalised", label);
    /* nothing kept (vllm's all -inf row, as given or emptied by its masks): every probability 0, sum 0 */
    gf_k_check(k, fabs(sum - (n_kept ? 1.0 : 0.0)) <= x->atol && renorm <= x->atol, name,
               "sum %.9g, max |p - softmax(filtered z)| %.3g (atol %.3g)", sum, renorm, x->atol);
    if (x->keep) {
        int32_t *want = malloc((x->n_keep ? x->n_keep : 1) * sizeof *want);
        int eq = 0;
        if (want) {
            memcpy(want, x->keep, x->n_keep * sizeof *want);
            qsort(want, x->n_keep, sizeof *want, cmp_i32);
            eq = n_kept == x->n_keep && !memcmp(kept, want, n_kept * sizeof *kept);
        }
        snprintf(name, sizeof name, "%s kept set", label);
        gf_k_check(k, eq, name, "kept %s, expected %s", gf_k_ids_str(a, sizeof a, kept, n_kept),
                   gf_k_ids_str(b, sizeof b, x->keep, x->n_keep));
        free(want);
    }
    if (x->kept_max >= 0) {
        snprintf(name, sizeof name, "%s kept <= %lld", label, x->kept_max);
        gf_k_check(k, (long long)n_kept <= x->kept_max, name, "kept %zu", n_kept);
    }
    if (x->kept_min >= 0) {
        snprintf(name, sizeof name, "%s kept >= %lld", label, x->kept_min);
        gf_k_check(k, (long long)n_kept >= x->kept_min, name, "kept %zu", n_kept);
    }
    double err = 0;
    int32_t worst = -1;
    if (x->probs) {
        for (int32_t i = 0; i < V; i++) {
            double d = fabs(pr[i] - x->probs[i]);
            if (!(d <= err)) {
                err = d;
                worst = i;
            }
        }
        snprintf(name, sizeof name, "%s probabilities", label);
        gf_k_check(k, err <= x->atol, name, "max |p - expected| %.3g at token %d (p %.9g, expected %.9g; atol %.3g)",
                   err, worst, worst >= 0 ? pr[worst] : 0.0, worst >= 0 ? x->probs[worst] : 0.0, x->atol);
    }
    const struct {
        const char *what;
        const bound *b;
        double v;
    } bounds[] = {{"max kept probability", &x->max_prob, max_p}, {"min kept probability", &x->min_prob, min_p}};
    for (size_t i = 0; i < 2; i++) {
        if (!isnan(bounds[i].b->le)) {
            snprintf(name, sizeof name, "%s %s <= %g", label, bounds[i].what, bounds[i].b->le);
            gf_k_check(k, bounds[i].v <= bounds[i].b->le, name, "%.9g", bounds[i].v);
        }
        if (!isnan(bounds[i].b->ge)) {
            snprintf(name, sizeof name, "%s %s >= %g", label, bounds[i].what, bounds[i].b->ge);
            gf_k_check(k, bounds[i].v >= bounds[i].b->ge, name, "%.9g", bounds[i].v);
        }
    }
    /* draws stay in the kept set (seeds 0, 1); through the backend's slot too */
    for (uint64_t seed = 0; seed < 2; seed++) {
        gf_sampler_params p = x->p;
        p.seed = seed;
        gf_sample_result r;
        const uint64_t seq = 0;
        if (gf_sample(L, V, &p, seq, e, &r) != GF_OK) {
            gf_k_error(k, "%s: gf_sample refused what gf_sampler_probs took: %s", label, gf_error_msg());
            goto done;
        }
        int in = 0;
        for (size_t j = 0; j < n_kept && !in; j++)
            in = kept[j] == r.token;
        if (n_kept == 0) { /* only vllm keeps nothing and still answers: torch.argmax of the -inf row */
            snprintf(name, sizeof name, "%s seed %llu draw with nothing kept is token 0", label,
                     (unsigned long long)seed);
            in = r.token == 0 && r.kept == 0;
        } else {
            snprintf(name, sizeof name, "%s seed %llu draw in the kept set", label, (unsigned long long)seed);
        }
        gf_k_check(k, in, name, "token %d, kept %d", r.token, (int)r.kept);
        if (x->draw_in) {
            int hit = 0;
            for (size_t j = 0; j < x->n_draw_in && !hit; j++)
                hit = x->draw_in[j] == r.token;
            snprintf(name, sizeof name, "%s seed %llu draw in %s", label, (unsigned long long)seed,
                     gf_k_ids_str(a, sizeof a, x->draw_in, x->n_draw_in));
            gf_k_check(k, hit, name, "token %d", r.token);
        }
        gf_k_slot_rows(k, name, L, 1, V, &p, &seq, e, &r.token);
    }
    /* the kept ids and their probabilities (every other one is 0), at most GF_KEPT_SHOWN of them, the most
     * probable, with the full count and a hash of the full set (kept_list.h): a 128k-wide row that keeps
     * everything writes 32 numbers, not 128k */
    json_t *row = json_pack("{s:s, s:o}", "param", label, "sampler", gf_sampler_json(&x->p));
    if (gf_kept_json(row, kept, n_kept, pr, "probs") < 0) {
        json_decref(row);
        gf_k_fail(k, "out of memory");
        goto done;
    }
    gf_json_set_number(row, "max_prob", max_p, NULL);
    gf_json_set_number(row, "min_prob", min_p, NULL);
    gf_json_set_number(row, "entropy", H, NULL);
    gf_json_set_number(row, "renorm_error", renorm, NULL);
    if (x->probs)
        gf_json_set_number(row, "max_abs_error", err, NULL);
    json_array_append_new(per, row);
done:
    free(z);
    free(pr);
    free(kept);
}

static void run_probs(const gf_case *c, gf_krun *k)
{
    const probs_spec *s = c->spec;
    const int32_t V = s->V;
    gf_k_note_sampler(k);
    float *L = malloc((size_t)V * sizeof *L);
    double *nrm = s->random ? malloc((size_t)V * sizeof *nrm) : NULL;
    probs_seen *seen = calloc(s->n_ex, sizeof *seen);
    json_t *per = json_array();
    if (!L || (s->random && !nrm) || !seen) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    if (s->random) {
        gf_k_seed(k, "random", (uint64_t)s->r_seed);
        gf_k_normals((uint64_t)s->r_seed, (uint64_t)s->r_row, nrm, (size_t)V);
        long long finite = 0;
        for (int32_t i = 0; i < V; i++) {
            /* a -inf mask (a grammar's bitmask): its own Philox stream, seq "mask", step = row */
            int masked = s->r_mask > 0 && gf_rng_uniform((uint64_t)s->r_seed, 0x6d61736bULL, (uint64_t)s->r_row,
                                                         (uint32_t)i) < s->r_mask;
            L[i] = masked ? -INFINITY : (float)(s->r_scale * nrm[i]);
            finite += !masked;
        }
        gf_k_metric_int(k, "finite_logits", finite);
    } else {
        memcpy(L, s->logits, (size_t)V * sizeof *L);
    }
    for (size_t e = 0; e < s->n_ex; e++)
        run_entry(k, s, L, e, &seen[e], per);
    /* comparisons: flatter = lower max, higher min (both strict), entropy not lower; fewer kept */
    for (size_t e = 0; e < s->n_ex; e++) {
        const probs_expect *x = &s->ex[e];
        if (x->fewer_than >= 0 && seen[e].ok && seen[x->fewer_than].ok) {
            char name[1200], la[512], lb[512];
            label_of(&x->p, la, sizeof la);
            label_of(&s->ex[x->fewer_than].p, lb, sizeof lb);
            snprintf(name, sizeof name, "line %d: %s keeps fewer than line %d: %s", x->line, la,
                     s->ex[x->fewer_than].line, lb);
            gf_k_check(k, seen[e].n_kept < seen[x->fewer_than].n_kept, name, "kept %zu, line %d kept %zu",
                       seen[e].n_kept, s->ex[x->fewer_than].line, seen[x->fewer_than].n_kept);
        }
        for (int dir = 0; dir < 2; dir++) {
            long long o = dir == 0 ? x->flatter_than : x->sharper_than;
            if (o < 0 || !seen[e].ok || !seen[o].ok)
                continue;
            const probs_seen *f = dir == 0 ? &seen[e] : &seen[o], *sh = dir == 0 ? &seen[o] : &seen[e];
            char name[1200], la[512], lb[512];
            label_of(&x->p, la, sizeof la);
            label_of(&s->ex[o].p, lb, sizeof lb);
            snprintf(name, sizeof name, "line %d: %s %s than line %d: %s", x->line, la,
                     dir == 0 ? "flatter" : "sharper", s->ex[o].line, lb);
            gf_k_check(k, f->max_p < sh->max_p && f->min_p > sh->min_p && f->entropy >= sh->entropy, name,
                       "max / min / entropy: line %d %.9g / %.9g / %.6g, line %d %.9g / %.9g / %.6g (flatter: lower "
                       "max, higher min, entropy not lower)",
                       x->line, seen[e].max_p, seen[e].min_p, seen[e].entropy, s->ex[o].line, seen[o].max_p,
                       seen[o].min_p, seen[o].entropy);
        }
    }
    gf_k_metric_int(k, "vocab", V);
done:
    gf_k_metric_json(k, "expectations", per);
    free(L);
    free(nrm);
    free(seen);
}

const gf_kind_def gf_kind_sampler_probs = {
    .name = "sampler_probs",
    .summary = "the filtered, renormalised distribution: exact vectors at an atol, kept sets and counts, "
               "probability bounds, one temperature against another",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_SAMPLE,
    .parse = parse_probs,
    .free_spec = probs_free,
    .run = run_probs,
};
