/* The statistical tier's thresholds (distribution_match, docs/cases.md):
 * the bounds a backend's next-token distributions are judged by, per weight
 * type, and the weight type a backend is judged as (stat_thresholds.c). */
#ifndef GENFENCE_HARNESS_STAT_THRESHOLDS_H
#define GENFENCE_HARNESS_STAT_THRESHOLDS_H

#include <jansson.h>
#include <stddef.h>

#include "keys.h"

typedef struct gf_stat_thr {
    double kld_mean, kld_p99, kld_max, top1_min, dp_max; /* NaN: not judged */
} gf_stat_thr;

typedef struct gf_stat_thr_entry {
    char weights[32];
    gf_stat_thr t;
} gf_stat_thr_entry;

/* A case's `thresholds:` ({weight type: {kld_mean, kld_p99, kld_max,
 * top1_min, dp_max}}, fields left out NaN) into malloc'd *thr (n_thr of them;
 * free it either way). 0 read or absent, -1 an error recorded at the node. */
int gf_stat_thr_parse(gf_cctx *ctx, const gf_ynode *m, gf_stat_thr_entry **thr, size_t *n_thr);
/* The thresholds for weight type w: the defaults (calibrated for f32, f16,
 * q8_0), with the fields of the case's entry for w over them. 0 when neither
 * has an entry for w; *from_case: the case has one. */
int gf_stat_thr_for(const gf_stat_thr_entry *thr, size_t n_thr, const char *w, gf_stat_thr *out, int *from_case);
/* The thresholds' key: the weight type, or the KV cache's type when the
 * weights are f32 and the cache is narrower (f32 weights, kv f16 -> "f16"). */
const char *gf_stat_thr_key(const char *w, const char *kv);
/* {kld_mean, ..., dp_max ("not judged" for NaN), from: "case" | "defaults"}. */
json_t *gf_stat_thr_json(const gf_stat_thr *t, int from_case);

/* The weight type the thresholds are keyed on: the backend's info.weights
 * ("q8_0", "f16", ...), else its declared compute dtype as a storage name
 * (fp32 -> "f32", fp16 -> "f16", bf16 -> "bf16", tf32 -> "tf32"); and its KV
 * cache type (info.kv_cache, else the same). Needs k->session. */
void gf_stat_backend_types(const gf_krun *k, char *weights, size_t wcap, char *kv, size_t kvcap);

/* (The deferral of token-equality kinds on lower-precision weights to this
 * tier is the plan's: harness/run/plan.c, gf_kind_def.judges_weights.) */

#endif
