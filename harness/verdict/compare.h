/* The margin gate and per-step comparison metrics (docs/harness.md).
 *
 * A comparison pits a test side against a reference side, step by step. At
 * each step it takes the largest |delta| over the vocabulary, both sides'
 * chosen tokens, and the reference's top-1 minus top-2 margin. A step whose
 * token differs from the reference's is excused only where the reference
 * margin is below the gate threshold
 *
 *     threshold = max(gate.abs, gate.ulps * ulp(|reference top-1|, dtype))
 *
 * with dtype the test backend's declared compute dtype (fp32 by default).
 * Teacher-forced comparisons (both sides see the same prefix at every step)
 * gate every step; free-running ones gate the first divergence and compare
 * nothing after it. Sampled steps pass the margin of the raced scores, so one
 * gate serves greedy and sampled runs.
 *
 * Nothing here knows about YAML, backends or reports; a goldens comparison
 * reuses it unchanged. */
#ifndef GENFENCE_HARNESS_COMPARE_H
#define GENFENCE_HARNESS_COMPARE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "genfence/backend.h"
#include "genfence/engine.h"
#include "genfence/rows.h"
#include "json.h"
#include "verdict.h"

/* ---- the gate ---- */

/* The gate's numbers, named once: no other 1e-4 in the C sources. */
#define GF_GATE_ABS     1e-4 /* gate.abs default: a reference margin below it excuses a token mismatch */
#define GF_GATE_ULPS    4.0  /* gate.ulps default */
#define GF_ATOL_DEFAULT 1e-4 /* max |delta| a comparison allows unless the case sets atol (fp32's floor) */
/* Triangulation (harness/run/triangulate.h): a part whose max |delta| against
 * ref is at most this agrees with ref; above it the backend is named off. */
#define GF_TRIANGULATION_AGREE 1e-4

typedef struct gf_gate {
    double abs;  /* default GF_GATE_ABS */
    double ulps; /* default GF_GATE_ULPS */
} gf_gate;

gf_gate gf_gate_default(void);
const char *gf_dtype_str(gf_compute_dtype dt); /* "fp32", "fp16", "bf16", "fp64", "tf32" */
/* Spacing of the dtype's representable numbers at |x| (the distance to the
 * next one away from zero); NaN for a non-finite x. */
double gf_ulp_at(double x, gf_compute_dtype dt);
double gf_gate_threshold(const gf_gate *g, double ref_top1, gf_compute_dtype dt);
/* A case's atol is a floor for fp32 scaled by the declared dtype's precision:
 * ULP(dtype) / ULP(fp32), at least 1 (fp32, fp64: 1; fp16, tf32: 8192; bf16:
 * 65536). gf_cmp_init applies it. */
double gf_dtype_atol_scale(gf_compute_dtype dt);

/* The argmax with its margin (gf_row_top) and max |delta| (gf_max_abs_delta)
 * of rows are the engine's, genfence/rows.h: one definition of each for the
 * sampler, verify_cache and this gate (equal infinities agree there). */

/* ---- step-by-step comparison ---- */

typedef enum gf_cmp_mode {
    GF_CMP_TEACHER_FORCED = 0, /* both sides see the same prefix every step */
    GF_CMP_FREE_RUNNING = 1,   /* each side feeds its own tokens back */
} gf_cmp_mode;

typedef struct gf_cmp {
    gf_gate gate;
    gf_compute_dtype dtype;
    gf_cmp_mode mode;
    double atol;      /* max |delta| allowed: atol_case x gf_dtype_atol_scale(dtype); NaN: not checked */
    double atol_case; /* the case's atol (a floor for fp32) */

    int32_t steps;          /* steps compared */
    int32_t ignored;        /* free-running: steps after the divergence */
    double max_delta;       /* over compared steps */
    int32_t max_delta_step; /* -1: none compared / all deltas 0 at step -1 */
    double min_margin;      /* smallest reference margin */
    int32_t min_margin_step;
    double min_margin_threshold; /* the gate threshold at that step */
    int32_t near_ties;           /* steps whose reference margin is below the gate */
    int32_t mismatches;          /* steps whose tokens differ */
    int32_t excused;             /* ... of which at a near tie */
    int32_t first_divergence;    /* -1 if none */
    double divergence_margin, divergence_threshold;
    int32_t first_unexcused; /* -1 if none */
    double unexcused_margin, unexcused_threshold;
    int32_t unexcused_ref_token, unexcused_test_token;
    int32_t first_over_atol; /* -1 if none */
    double over_atol_delta;
    int32_t first_nonfinite;  /* first step whose delta is not finite, -1 if none */
    int32_t first_neg_margin; /* first step whose reference margin is < 0 (top1 - top2 cannot be:
                                 the margin or the argmax is computed wrong), -1 if none */
    double neg_margin;
    int32_t first_failing; /* the step that decided a failure, -1 if none */
} gf_cmp;

void gf_cmp_init(gf_cmp *c, const gf_gate *g, gf_compute_dtype dt, gf_cmp_mode mode, double atol);

/* One step from summaries. delta: max |delta| (NaN if unknown); ref_top1: the
 * reference's top-1 score (for the ULP; NaN: use gate.abs alone). Returns 1 if
 * this step made the comparison fail (first time only), else 0. Free-running
 * steps after the first divergence are only counted as ignored. */
int gf_cmp_step(gf_cmp *c, int32_t step, double delta, int32_t ref_token, int32_t test_token, double ref_margin,
                double ref_top1);
/* One greedy step from both sides' full rows (tokens = argmaxes). */
int gf_cmp_logits(gf_cmp *c, int32_t step, const float *ref, const float *test, int32_t V);
/* Has the comparison stopped (free-running after a divergence)? */
int gf_cmp_stopped(const gf_cmp *c);

/* Every step of a cache verification (gf_verify_cache): the uncached side is
 * the reference. The one gate for cached-vs-recomputed, used by the
 * cache_equals_recompute kind and `generate --verify` alike. */
void gf_cmp_verify(gf_cmp *c, const gf_verify_result *r);

/* Fold b into a (several rows or modes into one case's numbers). Steps keep
 * their own numbering; the label says which part a step came from. */
void gf_cmp_merge(gf_cmp *a, const gf_cmp *b);

/* pass, pass-near-tie or fail, with the reason (why may be NULL). */
gf_verdict gf_cmp_verdict(const gf_cmp *c, char *why, size_t why_len);
/* smallest margin / largest delta (+inf when the delta is 0). */
double gf_cmp_safety_factor(const gf_cmp *c);

/* The metrics as a JSON object (non-finite numbers as null + a reason). */
json_t *gf_cmp_json(const gf_cmp *c);

#endif
