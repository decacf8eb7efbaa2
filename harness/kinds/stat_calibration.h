/* The statistical tier's calibration table (stat_calibration.c): per type,
 * the declared alpha, beta and theta a case inherits (`policy`), and per
 * (model, weights, KV cache) the calibrated null of the per-position
 * statistics under honest backends (`nulls`), with the provenance of the
 * measurement. Written by tools/calibrate/calibrate.py (docs/calibration.md),
 * read through the case loader's YAML layer: a bad key or value is refused
 * at FILE:LINE:COL. */
#ifndef GENFENCE_HARNESS_STAT_CALIBRATION_H
#define GENFENCE_HARNESS_STAT_CALIBRATION_H

#include <jansson.h>
#include <stddef.h>

#include "keys.h"

/* The repository's table, under the cases' root (a case's `calibration` names another). */
#define GF_STAT_TABLE_DEFAULT "calibration/distribution_match.yaml"

/* What a case declares (or inherits) per type; NaN: not given. */
typedef struct gf_stat_policy {
    double alpha;      /* the false-alarm rate, (0, 1) */
    double beta;       /* the miss rate, (0, 1) */
    double theta_kld;  /* the KL mean's minimum detectable rise, nats, > 0 */
    double theta_top1; /* the top-1 agreement's minimum detectable drop, (0, 1) */
    double theta_p99;  /* the tails: the minimum detectable rise of the share of positions past */
    double theta_max;  /* the null's p99 level (theta_p99) and past its maximum (theta_max, kld and dp), (0, 1) */
} gf_stat_policy;

typedef struct gf_stat_policy_entry {
    char type[32]; /* the policy's key (gf_stat_policy_key): f32, f16, q8_0, kv_q8_0 ... */
    gf_stat_policy p;
    int line; /* where it was declared */
} gf_stat_policy_entry;

/* The null of one case's statistics on one (weights, kv): honest backends
 * over the case's reseeds (its prompts redrawn from the corpus). */
typedef struct gf_stat_null {
    char case_id[128];   /* the case calibrated (a reseeded twin names it: `calibration_case`) */
    char model[256];     /* the case's `model` as written (models/holmes-gpt) */
    char model_hash[65]; /* gf_model_hash of it when measured */
    char weights[32], kv[32];
    char backends[256];     /* the honest backends measured ("openblas onednn") */
    long long windows;      /* reseeds x backends pooled */
    long long positions;    /* positions pooled */
    double kld_mean;        /* mu0: the per-position KL's mean */
    double kld_sigma;       /* sigma used: max(per-position sd, sd of the reseeds' means x sqrt(their positions)) */
    double top1_disagree;   /* p0: the disagreement rate */
    double top1_dispersion; /* phi >= 1: Pearson's dispersion of the reseeds' disagreements (absent: 1) */
    double kld_p99;         /* the tails' levels: the largest per-reseed 99th percentile of the KL, */
    double kld_max;         /* the largest KL of the pooled positions, */
    double dp_max;          /* the largest |delta p| (NaN: not measured; sqrt(kld_max / 2) by Pinsker then) */
    int line;
} gf_stat_null;

typedef struct gf_stat_table {
    char *path;
    json_t *provenance; /* {key: string}: date, machine, versions, command ... */
    gf_stat_policy_entry *policy;
    size_t n_policy;
    gf_stat_null *null;
    size_t n_null;
} gf_stat_table;

/* The table at path, read once per process (NULL: errors recorded in ctx at
 * the table's own FILE:LINE:COL; or, when !required and the file does not
 * exist, NULL with no error: no calibration). */
const gf_stat_table *gf_stat_table_load(gf_cctx *ctx, const char *path, int required);
/* A case's `hypothesis:` ({TYPE: {alpha, beta, theta_kld, theta_top1, theta_p99, theta_max}},
 * fields left out NaN) into malloc'd *out; 0 read or absent, -1 an error. */
int gf_stat_hypothesis_parse(gf_cctx *ctx, const gf_ynode *m, gf_stat_policy_entry **out, size_t *n_out);
/* The policy for type: the table's, the case's "*" entry's fields over it,
 * its entry for the type's over those. Returns 1
 * when all six fields are set; *from_case: the case's line for the type
 * when the case gives one (else 0). */
int gf_stat_policy_for(const gf_stat_table *t, const gf_stat_policy_entry *c, size_t n_c, const char *type,
                       gf_stat_policy *out, int *from_case);
/* The policy's key for a backend's types: its weights type when not f32,
 * else "kv_" and its KV cache's type when that is not f32 ("kv_q8_0"; a K
 * and V of different types: "kv_K_V"), else "f32". */
const char *gf_stat_policy_key(const char *weights, const char *kv, char *buf, size_t cap);
/* The null for (case id, model hash, weights, kv), or NULL. */
const gf_stat_null *gf_stat_null_for(const gf_stat_table *t, const char *case_id, const char *model_hash,
                                     const char *weights, const char *kv);
/* Whether the table holds a null for the case id, weights and kv: the
 * plan's question, asked without hashing the model. */
int gf_stat_table_has(const gf_stat_table *t, const char *case_id, const char *weights, const char *kv);

#endif
