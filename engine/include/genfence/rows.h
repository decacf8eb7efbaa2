/* Two numbers of a logit row that every greedy choice and every comparison
 * is built from, defined once here (engine/rows.c) for the engine's sampler,
 * verify_cache, the sliding-window measurement and the harness's margin gate
 * (harness/verdict/compare.h), which all include this header:
 *
 *   the argmax and its margin: the first index of the maximum (lowest index
 *     on ties), the runner-up (the first index of the maximum over the rest,
 *     so a tie at the top has margin 0) and top-1 minus top-2;
 *   max |delta| of two rows.
 *
 * The rules for what is not a finite number:
 *   - argmax: an entry counts only if it is a number above -inf (NaN and
 *     -inf never win nor run up); no entry counts: token -1, top1 NaN; no
 *     runner-up: margin +inf; +inf and a +inf runner-up: margin NaN.
 *   - max |delta|: entries that are the same infinity agree (delta 0), as do
 *     two NaNs; a NaN against anything else, or opposite infinities, is a
 *     delta of +inf. (Before this header verify_cache and the sliding window
 *     computed |inf - inf| = NaN -> +inf for equal infinities while the gate
 *     said 0; they never met one, since gf_engine_forward refuses non-finite
 *     logits, so the one rule changed no result.) */
#ifndef GENFENCE_ROWS_H
#define GENFENCE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The two best scores seen so far. */
typedef struct gf_top2 {
    int32_t token;     /* first index of the maximum; -1: none yet */
    int32_t runner_up; /* first index of the maximum over the rest; -1: none */
    double top1, top2; /* their scores (-inf while absent) */
} gf_top2;

void gf_top2_init(gf_top2 *t);
/* Offer score of entry i (indices offered in increasing order, so the
 * earlier index wins on equal scores). The caller decides what counts. */
void gf_top2_push(gf_top2 *t, int32_t i, double score);
/* top1 - top2; +inf without a runner-up (and without a token). */
double gf_top2_margin(const gf_top2 *t);

/* A whole row of V scores (the counting rule above): floats or doubles. */
void gf_row_top2(const float *x, int32_t V, gf_top2 *out);
void gf_row_top2_d(const double *x, int32_t V, gf_top2 *out);

/* The argmax of x (V) (-1 when no entry counts) with its score (NaN then)
 * and margin; top1 and margin may be NULL. */
int32_t gf_row_top(const float *x, int32_t V, double *top1, double *margin);

/* max |a - b| over n entries (the rule above); *where (may be NULL): the
 * first index of the maximum (0 when every delta is 0). */
double gf_max_abs_delta(const float *a, const float *b, size_t n, size_t *where);
/* log-softmax of x (V) in double into out (V): x_i - (max + log sum exp(x_j - max)). */
void gf_row_log_softmax(const float *x, int32_t V, double *out);

#ifdef __cplusplus
}
#endif
#endif
