/* logprobs: what a sampler reports as log-probabilities (or logits) of a
 * row, per profile and mode (gf_sampler_logprobs, docs/sampler.md
 * "Logprobs"): raw log-softmax, the raw logits, after temperature alone,
 * after the profile's filters (-inf where dropped), the filtered logits;
 * checked against the case's vectors at an atol, the top-n ids in order,
 * normalisation, and that a drawn token's processed logprob is finite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/sampler.h"
#include "keys.h"
#include "slot.h"

typedef struct lp_expect {
    gf_sampler_params p;
    int mode;
    double *want; /* (V) or NULL */
    size_t n_want;
    int32_t *top; /* (n_top) expected top ids, descending */
    size_t n_top;
    double atol;
    int line;
} lp_expect;

typedef struct lp_spec {
    float *logits; /* (V) */
    int32_t V;
    double atol;
    double slot_atol; /* a backend's logprobs slot against the engine's values */
    lp_expect *ex;
    size_t n_ex;
} lp_spec;

static const char *k_modes[GF_LOGPROBS_COUNT + 1];

static void lp_free(void *p)
{
    lp_spec *s = p;
    if (s) {
        free(s->logits);
        for (size_t i = 0; i < s->n_ex; i++) {
            free(s->ex[i].want);
            free(s->ex[i].top);
        }
        free(s->ex);
    }
    free(s);
}

static int parse_lp(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    for (int i = 0; i < GF_LOGPROBS_COUNT; i++)
        k_modes[i] = gf_logprob_mode_name(i);
    lp_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->atol = 1e-6;
    s->slot_atol = 1e-5;
    int from_probs = 0;
    int bad = gf_y_probs_or_logits(ctx, m, GF_Y_ANY_LOGITS, &s->logits, &s->V, &from_probs) < 0;
    if (!bad && !s->logits) {
        gf_y_error(ctx, m, "missing required key 'probs' or 'logits'");
        bad = 1;
    }
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_double(ctx, m, "slot_atol", 0, &s->slot_atol) < 0;
    if (!bad && !(s->slot_atol >= 0 && s->slot_atol < 1)) {
        gf_y_error(ctx, gf_y_get(ctx, m, "slot_atol", 0), "'slot_atol' %g must be in [0, 1)", s->slot_atol);
        bad = 1;
    }
    const gf_ynode *ex = gf_y_get(ctx, m, "expect", bad ? 0 : GF_Y_REQUIRED);
    if (bad || !ex || !gf_y_node_is_seq(ctx, ex, "'expect'"))
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
        lp_expect *x = &s->ex[i];
        if (!gf_y_node_is_map(ctx, e, "an 'expect' entry")) {
            bad = 1;
            continue;
        }
        x->line = e->line;
        x->atol = s->atol;
        x->p = gf_sampler_greedy();
        x->p.temperature = 1.0;
        bad |= gf_y_sampler(ctx, e, &x->p) < 0;
        bad |= gf_y_enum(ctx, e, "mode", GF_Y_REQUIRED, k_modes, &x->mode) < 0;
        int rw = gf_y_doubles(ctx, e, "expect_values", 0, 1, &x->want, &x->n_want);
        if (rw < 0) {
            bad = 1;
        } else if (rw > 0 && (int32_t)x->n_want != s->V) {
            gf_y_error(ctx, gf_y_get(ctx, e, "expect_values", 0), "'expect_values' has %zu entries; the row has %d",
                       x->n_want, s->V);
            bad = 1;
        }
        bad |= gf_y_ints(ctx, e, "expect_top", 0, 0, s->V - 1, 1, &x->top, &x->n_top) < 0;
        bad |= gf_y_double(ctx, e, "atol", 0, &x->atol) < 0;
        if (!x->want && !x->top) {
            gf_y_error(ctx, e, "an 'expect' entry needs 'expect_values' or 'expect_top'");
            bad = 1;
        }
        gf_y_check_unknown(ctx, e,
                           "in an 'expect' entry (known: the sampler parameters, mode, expect_values, expect_top, "
                           "atol)");
    }
    return bad ? -1 : 0;
}

/* descending value, equal values by ascending id (-inf last) */
static const double *g_sort_v;
static int cmp_desc(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g_sort_v[x] != g_sort_v[y])
        return g_sort_v[x] > g_sort_v[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* The backend's own logprobs slot on two rows, the case's row and the same
 * row reversed (a row stride or a row mixed up shows), against the engine's
 * values for each: -inf exactly where the engine has it, else within
 * slot_atol. A declined call (GF_E_UNSUPPORTED: a mode or profile the
 * backend does not report) is said, not failed. */
static void slot_entry(gf_krun *k, const lp_spec *s, const float *L, const lp_expect *x, const char *label,
                       const double *v, json_t *row)
{
    const int32_t V = s->V;
    float *rows = malloc(2 * (size_t)V * sizeof *rows); /* (2, V) the row, then reversed */
    double *got = malloc(2 * (size_t)V * sizeof *got);  /* (2, V) the slot's values */
    double *want = malloc((size_t)V * sizeof *want);    /* (V) the engine's for the reversed row */
    char name[512];
    snprintf(name, sizeof name, "%s backend logprobs slot equals the engine's", label);
    if (!rows || !got || !want) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < V; i++) {
        rows[i] = L[i];
        rows[V + i] = L[V - 1 - i];
    }
    gf_error_clear();
    if (gf_sampler_logprobs(rows + V, V, &x->p, x->mode, want) != GF_OK) {
        gf_k_error(k, "%s: the reversed row: %s", label, gf_error_msg());
        goto done;
    }
    gf_error_clear();
    gf_status st = gf_backend_logprobs(k->lp_ops, NULL, rows, 2, V, &x->p, x->mode, got);
    if (st == GF_E_UNSUPPORTED) {
        k->slot_unsupported++;
        if (!k->slot_declined[0])
            snprintf(k->slot_declined, sizeof k->slot_declined, "%.120s: %.120s", label, gf_error_msg());
        json_object_set_new(row, "slot", json_string("declined"));
        goto done;
    }
    k->slot_calls++;
    k->slot_rows += 2;
    if (st != GF_OK) {
        k->slot_errors++;
        gf_k_check(k, 0, name, "%s", gf_error_msg());
        json_object_set_new(row, "slot", json_string("error"));
        goto done;
    }
    double err = 0;
    int32_t wb = -1, wi = -1;
    for (int32_t b = 0; b < 2; b++)
        for (int32_t i = 0; i < V; i++) {
            const double e = b ? want[i] : v[i], g = got[(size_t)b * V + i];
            const double d = isinf(e) || isinf(g) ? (e == g ? 0.0 : INFINITY) : fabs(g - e);
            if (!(d <= err)) {
                err = d;
                wb = b;
                wi = i;
            }
        }
    if (!(err <= s->slot_atol))
        k->slot_mismatches++;
    char at[160] = "";
    if (wb >= 0)
        snprintf(at, sizeof at, "; at %s token %d: slot %.9g, engine %.9g", wb ? "the reversed row's" : "the row's", wi,
                 got[(size_t)wb * V + wi], wb ? want[wi] : v[wi]);
    gf_k_check(k, err <= s->slot_atol, name, "max |slot - engine| %.3g (slot_atol %.3g)%s", err, s->slot_atol, at);
    json_object_set_new(row, "slot", json_string(err <= s->slot_atol ? "equal" : "differs"));
    json_object_set_new(row, "slot_max_abs_diff", json_real(isfinite(err) ? err : -1));
done:
    free(rows);
    free(got);
    free(want);
}

static void run_entry(gf_krun *k, const lp_spec *s, const float *L, size_t e, double *v, int32_t *order, json_t *per)
{
    const lp_expect *x = &s->ex[e];
    const int32_t V = s->V;
    const char *mn = gf_logprob_mode_name(x->mode);
    const int prof = gf_sampler_params_profile(&x->p);
    char label[256], name[512], a[512], b[512];
    snprintf(label, sizeof label, "line %d: %s%smode=%s T=%g", x->line, prof ? gf_sampler_profile_name(prof) : "",
             prof ? " " : "", mn, x->p.temperature);
    gf_error_clear();
    if (gf_sampler_logprobs(L, V, &x->p, x->mode, v) != GF_OK) {
        gf_k_error(k, "%s: %s", label, gf_error_msg());
        return;
    }
    if (x->want) {
        double err = 0;
        int32_t worst = -1;
        for (int32_t i = 0; i < V; i++) {
            double d =
                isinf(v[i]) || isinf(x->want[i]) ? (v[i] == x->want[i] ? 0.0 : INFINITY) : fabs(v[i] - x->want[i]);
            if (!(d <= err)) {
                err = d;
                worst = i;
            }
        }
        snprintf(name, sizeof name, "%s values", label);
        gf_k_check(k, err <= x->atol, name, "max |v - expected| %.3g at token %d (%.9g, expected %.9g; atol %.3g)", err,
                   worst, worst >= 0 ? v[worst] : 0.0, worst >= 0 ? x->want[worst] : 0.0, x->atol);
    }
    for (int32_t i = 0; i < V; i++)
        order[i] = i;
    g_sort_v = v;
    qsort(order, (size_t)V, sizeof *order, cmp_desc);
    if (x->top) {
        snprintf(name, sizeof name, "%s top %zu", label, x->n_top);
        gf_k_check(k, x->n_top <= (size_t)V && !memcmp(order, x->top, x->n_top * sizeof *order), name,
                   "top %s, expected %s", gf_k_ids_str(a, sizeof a, order, x->n_top < (size_t)V ? x->n_top : (size_t)V),
                   gf_k_ids_str(b, sizeof b, x->top, x->n_top));
    }
    const int is_lp = x->mode == GF_LOGPROBS_RAW || x->mode == GF_LOGPROBS_SCALED || x->mode == GF_LOGPROBS_PROCESSED;
    if (is_lp) { /* a distribution: exp sums to 1 (0 when vllm's row keeps nothing) */
        double sum = 0;
        int any = 0;
        for (int32_t i = 0; i < V; i++)
            if (v[i] != -INFINITY) {
                sum += exp(v[i]);
                any = 1;
            }
        snprintf(name, sizeof name, "%s normalised", label);
        gf_k_check(k, fabs(sum - (any ? 1.0 : 0.0)) <= x->atol, name, "sum of exp %.12g", sum);
    }
    if (x->mode == GF_LOGPROBS_PROCESSED || x->mode == GF_LOGPROBS_PROCESSED_LOGITS)
        for (uint64_t seed = 0; seed < 2; seed++) { /* what is drawn was kept: its processed value is finite */
            gf_sampler_params p = x->p;
            p.seed = seed;
            gf_sample_result r;
            if (gf_sample(L, V, &p, 0, e, &r) != GF_OK) {
                gf_k_error(k, "%s: gf_sample refused what gf_sampler_logprobs took: %s", label, gf_error_msg());
                return;
            }
            snprintf(name, sizeof name, "%s seed %llu draw's value is finite", label, (unsigned long long)seed);
            gf_k_check(k, r.kept == 0 || (r.token >= 0 && isfinite(v[r.token])), name, "token %d: %.9g", r.token,
                       r.token >= 0 ? v[r.token] : NAN);
        }
    json_t *row = json_pack("{s:s, s:s, s:o}", "param", label, "mode", mn, "sampler", gf_sampler_json(&x->p));
    json_t *top = json_array(), *vals = json_array();
    for (int32_t j = 0; j < V && j < 8; j++) {
        json_array_append_new(top, json_integer(order[j]));
        json_t *o = json_object();
        gf_json_set_number(o, "v", v[order[j]], NULL);
        json_array_append(vals, json_object_get(o, "v"));
        json_decref(o);
    }
    json_object_set_new(row, "top_ids", top);
    json_object_set_new(row, "top_values", vals);
    if (k->lp_ops)
        slot_entry(k, s, L, x, label, v, row);
    json_array_append_new(per, row);
}

static void run_lp(const gf_case *c, gf_krun *k)
{
    const lp_spec *s = c->spec;
    double *v = malloc((size_t)s->V * sizeof *v);          /* (V) the reported values */
    int32_t *order = malloc((size_t)s->V * sizeof *order); /* (V) ids by value, descending */
    json_t *per = json_array();
    if (!v || !order) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    gf_k_metric_json(k, "logprobs_source",
                     json_string(k->lp_ops ? "engine + backend logprobs slot, row for row"
                                           : "engine (the backend has no logprobs slot: the engine's values are "
                                             "judged)"));
    for (size_t e = 0; e < s->n_ex; e++)
        run_entry(k, s, s->logits, e, v, order, per);
    gf_k_metric_int(k, "vocab", s->V);
    if (k->lp_ops) {
        gf_k_metric_int(k, "slot_calls", k->slot_calls);
        gf_k_metric_int(k, "slot_declined", k->slot_unsupported);
        if (k->slot_declined[0])
            gf_k_metric_json(k, "slot_first_declined", json_string(k->slot_declined));
        if (!k->slot_calls && k->slot_unsupported)
            gf_k_skip(k, "the backend's logprobs slot declined every entry (%s)", k->slot_declined);
    }
done:
    gf_k_metric_json(k, "expectations", per);
    free(v);
    free(order);
}

const gf_kind_def gf_kind_logprobs = {
    .name = "logprobs",
    .summary = "what a profile reports as log-probabilities: raw, raw_logits, scaled (after temperature), processed "
               "(after the filters), processed_logits; vectors at an atol and top-n ids",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_LOGPROBS,
    .parse = parse_lp,
    .free_spec = lp_free,
    .run = run_lp,
};
