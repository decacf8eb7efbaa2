/* The statistical tier's thresholds (stat_thresholds.h): the defaults per
 * weight type, a case's `thresholds:` over them, the weight type a backend is
 * judged as. distribution_match judges with them; its judges_weights (the
 * plan's deferral, harness/run/plan.c) asks them whether a case judges a
 * backend's weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "kv_cache.h"
#include "localize.h"
#include "json.h"
#include "stat_thresholds.h"

/* The defaults (fixed bounds, for every figure, only where no calibration
 * covers the case and type, docs/calibration.md), measured in
 * docs/cases.md ("distribution_match: calibration") on holmes-gpt and
 * holmes-llama (576 positions each): each KL
 * bound is about 10x the worst figure measured for that type (x30 for f32,
 * whose figures are fp32 rounding noise, so that a reordered sum on another
 * CPU still passes), |delta p| about 3x (KL grows with the square of a logit
 * error, |delta p| linearly), top-1 about 2x the disagreement rate. Weight
 * types nobody measured (bf16, q4_0 ...) have no default: the case must give
 * them. Order: kld_mean, kld_p99, kld_max, top1_min, dp_max. */
static const gf_stat_thr_entry k_defaults[] = {
    {"f32", {5e-11, 5e-10, 1e-9, 1.0, 1.5e-5}},
    {"f16", {1e-5, 6e-5, 2.5e-4, 0.99, 1e-2}},
    {"q8_0", {6e-3, 5e-2, 1.3e-1, 0.95, 0.2}},
};

static const char *const k_thr_keys[] = {"kld_mean", "kld_p99", "kld_max", "top1_min", "dp_max", NULL};

static double *thr_field(gf_stat_thr *t, int i)
{
    double *f[] = {&t->kld_mean, &t->kld_p99, &t->kld_max, &t->top1_min, &t->dp_max};
    return f[i];
}

static double thr_get(const gf_stat_thr *t, int i)
{
    const double f[] = {t->kld_mean, t->kld_p99, t->kld_max, t->top1_min, t->dp_max};
    return f[i];
}

int gf_stat_thr_parse(gf_cctx *ctx, const gf_ynode *m, gf_stat_thr_entry **thr, size_t *n_thr)
{
    const gf_ynode *t = gf_y_get(ctx, m, "thresholds", GF_Y_OPTIONAL);
    if (!t || (t->type == GF_YN_SCALAR && gf_yscalar_resolve(t).type == GF_YS_NULL))
        return 0;
    if (!gf_y_node_is_map(ctx, t, "'thresholds'"))
        return -1;
    *thr = calloc(t->n ? t->n : 1, sizeof **thr);
    *n_thr = 0;
    if (!*thr)
        return -1;
    int bad = 0;
    for (size_t i = 0; i < t->n; i++) {
        const gf_ynode *key = t->items[2 * i], *val = t->items[2 * i + 1];
        t->used[i] = 1;
        gf_stat_thr_entry *e = &(*thr)[(*n_thr)++];
        snprintf(e->weights, sizeof e->weights, "%s", key->value ? key->value : "");
        if (!key->value || !key->value[0] || strlen(key->value) >= sizeof e->weights) {
            gf_y_error(ctx, key, "a 'thresholds' key is a weight type (f32, f16, bf16, q8_0 ...)");
            bad = 1;
            continue;
        }
        if (!gf_y_node_is_map(ctx, val, "a 'thresholds' entry")) {
            bad = 1;
            continue;
        }
        for (int f = 0; k_thr_keys[f]; f++) {
            double *d = thr_field(&e->t, f);
            *d = NAN;
            int r = gf_y_double(ctx, val, k_thr_keys[f], 0, d);
            if (r < 0)
                bad = 1;
            else if (r > 0 && (!(*d >= 0) || !isfinite(*d) || (f == 3 && *d > 1))) {
                gf_y_error(ctx, gf_y_get(ctx, val, k_thr_keys[f], 0), "'%s' must be a finite number >= 0%s",
                           k_thr_keys[f], f == 3 ? " and <= 1" : "");
                bad = 1;
            }
        }
        gf_y_check_unknown(ctx, val, "in a 'thresholds' entry (known: kld_mean, kld_p99, kld_max, top1_min, dp_max)");
    }
    return bad ? -1 : 0;
}

/* The thresholds for weight type w: the defaults, with the case's fields over
 * them. 0 when neither has an entry for w. */
int gf_stat_thr_for(const gf_stat_thr_entry *thr, size_t n_thr, const char *w, gf_stat_thr *out, int *from_case)
{
    int found = 0;
    *from_case = 0;
    for (size_t i = 0; i < sizeof k_defaults / sizeof *k_defaults; i++)
        if (!strcmp(k_defaults[i].weights, w)) {
            *out = k_defaults[i].t;
            found = 1;
        }
    for (size_t i = 0; i < n_thr; i++)
        if (!strcmp(thr[i].weights, w)) {
            if (!found)
                *out = (gf_stat_thr){NAN, NAN, NAN, NAN, NAN};
            for (int f = 0; k_thr_keys[f]; f++)
                if (!isnan(thr_get(&thr[i].t, f)))
                    *thr_field(out, f) = thr_get(&thr[i].t, f);
            found = 1;
            *from_case = 1;
        }
    return found;
}

/* ---- the backend's types ---- */

static const char *dtype_storage(gf_compute_dtype dt)
{
    switch (dt) {
    case GF_COMPUTE_F16: return "f16";
    case GF_COMPUTE_BF16: return "bf16";
    case GF_COMPUTE_TF32: return "tf32";
    case GF_COMPUTE_F64: return "f64";
    default: return "f32";
    }
}

void gf_stat_backend_types(const gf_krun *k, char *weights, size_t wcap, char *kv, size_t kvcap)
{
    gf_backend_info info;
    gf_backend_options o = gf_registry_options(&k->session->backend, k->threads);
    if (gf_backend_describe(gf_engine_ops(k->session->engine), &o, &info) != GF_OK)
        info.weights = info.kv_cache = NULL;
    snprintf(weights, wcap, "%s", info.weights ? info.weights : dtype_storage(k->dtype));
    snprintf(kv, kvcap, "%s", info.kv_cache ? info.kv_cache : dtype_storage(k->dtype));
}

/* The thresholds' key: the weight type, or the KV cache's type when the
 * weights are f32 and the cache is narrower (f32 weights, kv f16 -> "f16").
 * A K and V cache of different types ("k=q8_0,v=f16") is judged by the
 * coarser one's thresholds: an upper bound, the finer half can only lower
 * the error. */
const char *gf_stat_thr_key(const char *w, const char *kv)
{
    static char coarser[32];
    char kt[32], vt[32];
    gf_kv_split(kv, kt, sizeof kt, vt, sizeof vt);
    if (strcmp(kt, vt)) {
        double uk = gf_trace_unit(GF_COMPUTE_F32, NULL, kt), uv = gf_trace_unit(GF_COMPUTE_F32, NULL, vt);
        snprintf(coarser, sizeof coarser, "%s", uk >= uv ? kt : vt);
        kv = coarser;
    }
    return !strcmp(w, "f32") && strcmp(kv, "f32") ? kv : w;
}

json_t *gf_stat_thr_json(const gf_stat_thr *t, int from_case)
{
    json_t *jt = json_object();
    for (int f = 0; k_thr_keys[f]; f++)
        gf_json_set_number(jt, k_thr_keys[f], thr_get(t, f), "not judged");
    json_object_set_new(jt, "from", json_string(from_case ? "case" : "defaults"));
    return jt;
}
