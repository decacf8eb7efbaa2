/* top_p_fence and top_k_fence (one implementation, two kinds): the kept set
 * of a fixed distribution, and its renormalised probabilities. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/sampler.h"
#include "kept_list.h"
#include "keys.h"
#include "slot.h"

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

typedef struct fence_expect {
    double p;
    long long k;
    int has_p, has_k; /* the fence's own parameter, and optionally the other one (combined top-k + top-p) */
    int32_t *keep;
    size_t n_keep;
} fence_expect;

typedef struct fence_spec {
    int is_k;
    float *logits;
    int32_t V;
    int from_probs;
    fence_expect *ex;
    size_t n_ex;
    int32_t *perm;
    size_t n_perm;
    double atol, temperature;
    gf_sampler_params base; /* temperature, and the case's profile and truncation filters (ext) */
} fence_spec;

static void fence_free(void *p)
{
    fence_spec *s = p;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_ex; i++)
        free(s->ex[i].keep);
    free(s->ex);
    free(s->logits);
    free(s->perm);
    free(s);
}

/* Case keys gf_y_sampler_raw reads that a fence does not take: the fence's
 * own parameters are k and p per entry, and it judges a truncation of a fixed
 * distribution (every kept token at its softmax(logits / T) share), which a
 * penalty, a bias or an EOS ban would move (sampler_probs takes those). */
/* one row per group (clang-format 14 puts 18 names one a line) */
/* clang-format off */
static const char *const k_fence_not_keys[] = {
    "top_k", "top_p", "seed",
    "repetition_penalty", "frequency_penalty", "presence_penalty", "penalty_last_n",
    "logit_bias", "history", "history_prompt", "min_new_tokens", "eos_id", "stop_token_ids",
    "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers",
    "no_repeat_ngram_size", "bad_words_ids", "sequence_bias", "min_length", "forced_bos_token_id",
    "forced_eos_token_id", "max_length", "exponential_decay_start", "exponential_decay_factor", NULL};
/* clang-format on */

/* temperature, profile and the truncation filters (chain, min_p, typical_p, xtc_*,
 * top_n_sigma, min_tokens_to_keep, epsilon / eta cutoffs, allowed ids and a
 * given mask; DRY, a penalty over the history, and the history's bans and
 * biases are not) at the case level, every entry's base. */
static int fence_sampler(gf_cctx *ctx, const gf_ynode *m, fence_spec *s)
{
    int bad = 0;
    for (size_t j = 0; k_fence_not_keys[j]; j++) {
        const char *key = k_fence_not_keys[j];
        const gf_ynode *kn = gf_y_refuse(ctx, m, key); /* reported here, not again as an unknown key */
        if (!kn)
            continue;
        if (!strcmp(key, "top_k") || !strcmp(key, "top_p"))
            gf_y_error(ctx, kn, "'%s' is not a fence key: give 'k' / 'p' in each 'expect' entry", key);
        else
            gf_y_error(ctx, kn,
                       "'%s' is not a fence key: a fence judges a truncation of a fixed distribution "
                       "(sampler_probs takes penalties, DRY, n-gram and bad-word bans, biases, history, EOS bans "
                       "and forced tokens)",
                       key);
        bad = 1;
    }
    if (bad)
        return -1;
    s->base = gf_sampler_greedy();
    s->base.temperature = 1.0;
    if (gf_y_sampler_raw(ctx, m, &s->base) < 0)
        return -1;
    s->temperature = s->base.temperature;
    return 0;
}

/* The sampler parameters of one entry: the case's base, its k and/or p. */
static void fence_params(const fence_spec *s, const fence_expect *x, gf_sampler_params *p)
{
    *p = s->base;
    p->temperature = s->temperature;
    if (x->has_k) {
        p->use_top_k = 1;
        p->top_k = (int32_t)x->k;
    }
    if (x->has_p) {
        p->use_top_p = 1;
        p->top_p = x->p;
    }
}

static int fence_parse(gf_cctx *ctx, const gf_ynode *m, gf_case *c, int is_k)
{
    fence_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->is_k = is_k;
    s->atol = 1e-6;
    s->temperature = 1.0;
    int bad = gf_y_probs_or_logits(ctx, m, GF_Y_REQUIRED, &s->logits, &s->V, &s->from_probs) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    int sampler_ok = fence_sampler(ctx, m, s) == 0;
    bad |= !sampler_ok;
    if (!bad && !(s->temperature > 0 && isfinite(s->temperature))) {
        gf_y_error(ctx, gf_y_get(ctx, m, "temperature", 0), "'temperature' must be > 0 for a fence");
        bad = 1;
        sampler_ok = 0;
    }
    if (gf_y_ints(ctx, m, "permutation", 0, 0, 2147483647LL, 1, &s->perm, &s->n_perm) < 0) {
        bad = 1;
    } else if (s->perm && !bad) {
        const gf_ynode *pn = gf_y_get(ctx, m, "permutation", 0);
        if ((int32_t)s->n_perm != s->V) {
            gf_y_error(ctx, pn, "'permutation' has %zu entries; the distribution has %d", s->n_perm, s->V);
            bad = 1;
        } else {
            unsigned char *seen = calloc((size_t)s->V, 1);
            for (size_t i = 0; seen && i < s->n_perm; i++) {
                if (s->perm[i] >= s->V || seen[s->perm[i]]) {
                    gf_y_error(ctx, pn, "'permutation' must hold each index 0..%d once", s->V - 1);
                    bad = 1;
                    break;
                }
                seen[s->perm[i]] = 1;
            }
            free(seen);
        }
    }
    const gf_ynode *ex = gf_y_get(ctx, m, "expect", GF_Y_REQUIRED);
    if (!ex || !gf_y_node_is_seq(ctx, ex, "'expect'"))
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
        if (!gf_y_node_is_map(ctx, e, "an 'expect' entry")) {
            bad = 1;
            continue;
        }
        /* the kind's own parameter is required; the other one is optional (both: the chain
         * temperature -> top-k -> top-p, docs/sampler.md) */
        int rk = gf_y_int(ctx, e, "k", is_k ? GF_Y_REQUIRED : 0, -2147483647LL, 2147483647LL, &s->ex[i].k);
        bad |= rk < 0;
        s->ex[i].has_k = rk > 0;
        int rc = gf_y_double(ctx, e, "p", is_k ? 0 : GF_Y_REQUIRED, &s->ex[i].p);
        const int seed_profile = gf_sampler_params_profile(&s->base) == GF_PROFILE_SEED;
        if (rc > 0 && seed_profile && !(s->ex[i].p > 0.0 && s->ex[i].p <= 1.0)) { /* checked at load, not at run */
            gf_y_error(ctx, gf_y_get(ctx, e, "p", 0), "'p' must lie in (0, 1], got %s",
                       gf_y_get(ctx, e, "p", 0)->value);
            rc = -1;
        }
        bad |= rc < 0;
        s->ex[i].has_p = rc > 0;
        if (sampler_ok && rk >= 0 && rc >= 0) { /* the entry's parameters under the case's profile, at load */
            gf_sampler_params p;
            fence_params(s, &s->ex[i], &p);
            if (gf_sampler_validate(&p) != GF_OK) {
                gf_y_error(ctx, e, "invalid sampler: %s", gf_error_msg());
                bad = 1;
            }
        }
        if (gf_y_ints(ctx, e, "keep", GF_Y_REQUIRED, 0, s->V > 0 ? s->V - 1 : 0, 0, &s->ex[i].keep, &s->ex[i].n_keep) <
            0)
            bad = 1;
        gf_y_check_unknown(ctx, e, "in an 'expect' entry (known: k, p, keep)");
    }
    return bad ? -1 : 0;
}

static int parse_top_p(gf_cctx *ctx, const gf_ynode *m, gf_case *c) { return fence_parse(ctx, m, c, 0); }
static int parse_top_k(gf_cctx *ctx, const gf_ynode *m, gf_case *c) { return fence_parse(ctx, m, c, 1); }

/* Kept set of the filter on `logits` (sorted indices, malloc'd). */
static gf_status kept_set(const float *logits, int32_t V, const gf_sampler_params *p, int32_t **kept, size_t *n)
{
    double *z = malloc((size_t)V * sizeof *z);
    *kept = malloc((size_t)V * sizeof **kept);
    if (!z || !*kept) {
        free(z);
        free(*kept);
        *kept = NULL;
        return gf_error_set(GF_E_NOMEM, "out of memory");
    }
    gf_status st = gf_sampler_filter(logits, V, p, z);
    *n = 0;
    for (int32_t i = 0; st == GF_OK && i < V; i++)
        if (z[i] != -INFINITY)
            (*kept)[(*n)++] = i;
    free(z);
    return st;
}

static int same_set(const int32_t *a, size_t na, int32_t *b_unsorted, size_t nb)
{
    if (na != nb)
        return 0;
    int32_t *b = malloc((nb ? nb : 1) * sizeof *b);
    if (!b)
        return 0;
    memcpy(b, b_unsorted, nb * sizeof *b);
    qsort(b, nb, sizeof *b, cmp_i32);
    int eq = !memcmp(a, b, na * sizeof *a);
    free(b);
    return eq;
}

/* Distance of p from the nearest prefix mass of the sorted distribution: the
 * mass before each token that has mass (a token of zero mass -- a -inf logit,
 * or one whose probability underflows -- is never kept by top-p, so the mass
 * before it is no boundary). +inf when no token after the first has mass. */
static double boundary_distance(const double *q, int32_t V, double p)
{
    double *s = malloc((size_t)V * sizeof *s);
    if (!s)
        return NAN;
    memcpy(s, q, (size_t)V * sizeof *s);
    for (int32_t i = 1; i < V; i++) { /* insertion sort, descending */
        double x = s[i];
        int32_t j = i - 1;
        while (j >= 0 && s[j] < x) {
            s[j + 1] = s[j];
            j--;
        }
        s[j + 1] = x;
    }
    double prefix = 0, best = INFINITY;
    for (int32_t i = 0; i + 1 < V; i++) { /* the masses before tokens 1..V-1 */
        prefix += s[i];
        if (s[i + 1] > 0 && fabs(prefix - p) < best)
            best = fabs(prefix - p);
    }
    free(s);
    return best;
}

/* With a backend sample slot: greedy and sampled draws of p on the case's
 * logits (4 rows, seq ids 0..3; seeds 0..2, steps 0..1), the slot's tokens
 * against the engine's (gf_k_slot_rows). */
static void fence_slot(gf_krun *k, const char *label, const float *logits, int32_t V, const gf_sampler_params *p0)
{
    enum { ROWS = 4 };
    if (!k->sample_ops)
        return;
    float *L = malloc((size_t)ROWS * V * sizeof *L);
    if (!L) {
        gf_k_fail(k, "out of memory");
        return;
    }
    const uint64_t seq[ROWS] = {0, 1, 2, 3};
    for (int32_t b = 0; b < ROWS; b++)
        memcpy(L + (size_t)b * V, logits, (size_t)V * sizeof *L);
    for (int pass = 0; pass < 7; pass++) { /* 0: greedy; 1..6: seed (pass-1)/2, step (pass-1)%2 */
        gf_sampler_params p = *p0;
        uint64_t step = 0;
        char what[128];
        if (pass == 0) {
            p.temperature = 0;
            if (gf_sampler_validate(&p) != GF_OK) /* a profile without greedy (hf: temperature 0 is an error) */
                continue;
            snprintf(what, sizeof what, "%s greedy", label);
        } else {
            p.seed = (uint64_t)(pass - 1) / 2;
            step = (uint64_t)(pass - 1) % 2;
            snprintf(what, sizeof what, "%s seed %llu", label, (unsigned long long)p.seed);
        }
        int32_t eng[ROWS];
        for (int32_t b = 0; b < ROWS; b++) {
            gf_sample_result r;
            if (gf_sample(logits, V, &p, seq[b], step, &r) != GF_OK) {
                gf_k_error(k, "%s: the engine's sampler failed: %s", what, gf_error_msg());
                free(L);
                return;
            }
            eng[b] = r.token;
        }
        gf_k_slot_rows(k, what, L, ROWS, V, &p, seq, step, eng);
    }
    free(L);
}

static void run_fence(const gf_case *c, gf_krun *k)
{
    const fence_spec *s = c->spec;
    const int32_t V = s->V;
    gf_k_note_sampler(k);
    double *q = malloc((size_t)V * sizeof *q), *probs = malloc((size_t)V * sizeof *probs);
    float *shuffled = malloc((size_t)V * sizeof *shuffled);
    if (!q || !probs || !shuffled) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    /* the unfiltered softmax(logits / T) in double */
    double mx = -INFINITY, tot = 0;
    for (int32_t i = 0; i < V; i++)
        if (s->logits[i] / s->temperature > mx)
            mx = s->logits[i] / s->temperature;
    for (int32_t i = 0; i < V; i++)
        tot += q[i] = s->logits[i] == -INFINITY ? 0.0 : exp(s->logits[i] / s->temperature - mx);
    for (int32_t i = 0; i < V; i++)
        q[i] = tot > 0 ? q[i] / tot : 0.0;
    int all_neg_inf = 1;
    for (int32_t i = 0; i < V; i++)
        all_neg_inf &= s->logits[i] == -INFINITY;
    json_t *per = json_array();
    double worst_renorm = 0, min_boundary = INFINITY;
    for (size_t e = 0; e < s->n_ex; e++) {
        const fence_expect *x = &s->ex[e];
        gf_sampler_params p;
        fence_params(s, x, &p);
        char label[96], a[512], b[512];
        const int prof = gf_sampler_params_profile(&p);
        /* check names carry the profile when it is not the seed's */
        int n = snprintf(label, sizeof label, "%s%s", prof != GF_PROFILE_SEED ? gf_sampler_profile_name(prof) : "",
                         prof != GF_PROFILE_SEED ? " " : "");
        if (x->has_k && x->has_p)
            snprintf(label + n, sizeof label - n, "k=%lld p=%g", x->k, x->p);
        else if (x->has_k)
            snprintf(label + n, sizeof label - n, "k=%lld", x->k);
        else
            snprintf(label + n, sizeof label - n, "p=%g", x->p);
        if (!gf_sampler_params_plain(&p) && prof == GF_PROFILE_SEED)
            snprintf(label + strlen(label), sizeof label - strlen(label), " +filters");
        int32_t *kept = NULL;
        size_t n_kept = 0;
        gf_status st = kept_set(s->logits, V, &p, &kept, &n_kept);
        if (st != GF_OK) {
            if (all_neg_inf)
                gf_k_error(k, "%s: the logits are all -inf (no token to keep): %s", label, gf_error_msg());
            else
                gf_k_error(k, "%s: the sampler refused the parameters: %s", label, gf_error_msg());
            free(kept);
            continue;
        }
        char name[128];
        snprintf(name, sizeof name, "%s kept set", label);
        gf_k_check(k, same_set(kept, n_kept, x->keep, x->n_keep), name, "kept %s, expected %s",
                   gf_k_ids_str(a, sizeof a, kept, n_kept), gf_k_ids_str(b, sizeof b, x->keep, x->n_keep));
        /* at most GF_KEPT_SHOWN ids, ranked by the unfiltered softmax q (kept_list.h) */
        json_t *row = json_pack("{s:s}", "param", label);
        if (gf_kept_json(row, kept, n_kept, q, NULL) < 0) {
            json_decref(row);
            free(kept);
            gf_k_fail(k, "out of memory");
            break;
        }
        if (x->has_p) {
            double bd = boundary_distance(q, V, x->p);
            gf_json_set_number(row, "boundary_distance", bd, NULL);
            if (bd < min_boundary)
                min_boundary = bd;
        }
        /* kept probabilities renormalise */
        if (gf_sampler_probs(s->logits, V, &p, probs) == GF_OK) {
            double sum = 0, keep_mass = 0, err = 0;
            for (int32_t i = 0; i < V; i++)
                sum += probs[i];
            for (size_t j = 0; j < n_kept; j++)
                keep_mass += q[kept[j]];
            gf_json_set_number(row, "kept_mass", keep_mass, NULL);
            for (size_t j = 0; j < n_kept; j++) {
                double want = q[kept[j]] / keep_mass, d = fabs(probs[kept[j]] - want);
                if (d > err)
                    err = d;
            }
            /* nothing kept (vllm's all -inf row): every probability 0, sum 0 */
            const double want_sum = n_kept ? 1.0 : 0.0;
            double total_err = fabs(sum - want_sum) > err ? fabs(sum - want_sum) : err;
            if (total_err > worst_renorm)
                worst_renorm = total_err;
            snprintf(name, sizeof name, "%s renormalised", label);
            gf_k_check(k, fabs(sum - want_sum) <= s->atol && err <= s->atol, name,
                       "sum %.9g, max |p_kept - p/sum(kept)| %.3g (atol %.3g)", sum, err, s->atol);
            gf_json_set_number(row, "renorm_error", total_err, NULL);
        }
        /* the kept set follows the tokens under a permutation */
        if (s->perm) {
            for (int32_t j = 0; j < V; j++)
                shuffled[j] = s->logits[s->perm[j]];
            int32_t *want = malloc((size_t)V * sizeof *want), *pk = NULL;
            size_t n_want = 0, n_pk = 0;
            for (int32_t j = 0; want && j < V; j++)
                for (size_t t = 0; t < x->n_keep; t++)
                    if (s->perm[j] == x->keep[t]) {
                        want[n_want++] = j;
                        break;
                    }
            if (want && kept_set(shuffled, V, &p, &pk, &n_pk) == GF_OK) {
                snprintf(name, sizeof name, "%s permuted kept set", label);
                gf_k_check(k, same_set(pk, n_pk, want, n_want), name, "kept %s, expected %s",
                           gf_k_ids_str(a, sizeof a, pk, n_pk), gf_k_ids_str(b, sizeof b, want, n_want));
            }
            free(want);
            free(pk);
        }
        fence_slot(k, label, s->logits, V, &p);
        json_array_append_new(per, row);
        free(kept);
    }
    gf_k_metric_json(k, "expectations", per);
    gf_k_metric(k, "max_renorm_error", worst_renorm);
    if (isfinite(min_boundary))
        gf_k_metric(k, "min_boundary_distance", min_boundary);
    gf_k_metric_int(k, "vocab", V);
done:
    free(q);
    free(probs);
    free(shuffled);
}

const gf_kind_def gf_kind_top_p_fence = {
    .name = "top_p_fence",
    .summary = "top-p kept sets (and their renormalised probabilities) on a fixed distribution; with k, top-k first",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_SAMPLE,
    .parse = parse_top_p,
    .free_spec = fence_free,
    .run = run_fence,
};
const gf_kind_def gf_kind_top_k_fence = {
    .name = "top_k_fence",
    .summary = "top-k kept sets on a fixed distribution; with p, top-p after",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_SAMPLE,
    .parse = parse_top_k,
    .free_spec = fence_free,
    .run = run_fence,
};
