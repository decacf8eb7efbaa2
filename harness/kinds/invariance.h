/* The invariance kind's measurements (invariance_axes.c) and their judging
 * (invariance.c): one axis swept against the same reference call. Private to
 * the kind. */
#ifndef GENFENCE_HARNESS_KINDS_INVARIANCE_H
#define GENFENCE_HARNESS_KINDS_INVARIANCE_H

#include <stdint.h>

#include "compare.h"
#include "invariance_decl.h"
#include "keys.h"
#include "session.h"

typedef struct inv_spec {
    int axis;             /* gf_inv_axis */
    gf_prompt_spec probe; /* the probe row's prompt */
    gf_prompt_spec *others;
    size_t n_others;     /* mixed: co-resident prompts of other lengths (none: derived from the probe) */
    int32_t *sweep;      /* the values swept: B (batch), rows (position), threads, chunk sizes (split) */
    size_t n_sweep;      /* 0: the axis's default sweep */
    long long batch;     /* position: the batch size (8) */
    long long steps;     /* greedy decode steps after the prefill (8) */
    long long repeats;   /* repeat: calls in this process (20) */
    long long processes; /* repeat: other processes (2; 0: none) */
    long long prefix;    /* prefix: the probe's first tokens that the rows share (0: half) */
    double atol;
    gf_gate gate;
    char *control; /* the faulty test backend that must fail this case (its registered name) */
} inv_spec;

/* What one backend is measured on. */
typedef struct inv_target {
    const char *spec;     /* backend spec, for more sessions and other processes */
    const char *model;    /* the model directory */
    int32_t threads;      /* the run's thread count (session's) */
    gf_session *session;  /* open at threads */
    const int32_t *probe; /* (n_probe) the probe row's tokens */
    int32_t n_probe;
    int32_t *const *others; /* mixed: (n_others) co-resident prompts of other lengths */
    const int32_t *other_lens;
    int32_t n_others;
    int until_differs; /* 1: stop at the first variant whose logits differ (a negative control's run) */
} inv_target;

/* One call's probe row: a logit row (V) per step and the token of each step. */
typedef struct inv_trace {
    int32_t n; /* steps (decode) or positions (teacher-forced) */
    int32_t V;
    float *logits;   /* (n, V) */
    int32_t *tokens; /* (n): the greedy token of each step / the argmax of each position */
} inv_trace;

/* One variant of the call against its reference, judged. */
typedef struct inv_variant {
    char label[80];     /* "B=4", "row 3 of 8", "threads 2", "chunks of 7", "repeat 5", "process 2" ... */
    int ref;            /* which reference trace */
    int teacher_forced; /* positions of one input (both sides fed the same tokens) vs free-running decode */
    inv_trace tr;
    /* judged (inv_judge) */
    int bitwise;
    int32_t first_diff; /* first step whose row differs in any bit (-1: none) */
    double max_delta;
    gf_cmp cmp;
    gf_inv_level level;
} inv_variant;

enum { INV_MAX_REFS = 4 };

typedef struct inv_result {
    inv_trace refs[INV_MAX_REFS];
    char ref_label[INV_MAX_REFS][80];
    int n_refs;
    inv_variant *v;
    int n, cap;
    char skipped[512]; /* a part of the axis that did not run, and why ("" none) */
    char what[160];    /* what the reference call was */
} inv_result;

/* Measure spec's axis on target into *r (cleared first). GF_OK, or the
 * failed call's status with the error set (r holds what ran). */
gf_status inv_measure(const inv_spec *spec, const inv_target *target, inv_result *r);
void inv_result_clear(inv_result *r);

/* Judge every variant of r against its reference under the gate; the
 * axis's measured level (the weakest variant's), distinct completions. */
gf_inv_level inv_judge(inv_result *r, const gf_gate *gate, gf_compute_dtype dtype, double atol, int *distinct);

#endif
