/* The golden_generation kind's keys, and the helpers bless and list share
 * with it (docs/goldens.md). */
#ifndef GENFENCE_HARNESS_GOLDEN_GENERATION_H
#define GENFENCE_HARNESS_GOLDEN_GENERATION_H

#include <stddef.h>

#include "golden.h"
#include "keys.h"

/* The golden_generation kind's keys (golden_generation.c). */
/* The tolerance rule's factor (docs/goldens.md "The tolerance rule"): a
 * golden's atol is max(the case's atol, GF_GOLDEN_SPREAD_K x the golden's
 * fp32_spread). */
#define GF_GOLDEN_SPREAD_K 8.0

/* A sampled step whose tokens differ, judged on the golden's logits with the
 * case's sampler (seed profile): 1 when adding the first token a top-k or
 * top-p boundary drops, or dropping the last it keeps, makes the seeded race
 * pick test_token, and that boundary lies within thr (z = logit / T units,
 * the race margin's) of moving; *margin_out = its distance. 0 otherwise, and
 * for greedy or a profile sampler (golden_boundary.c). */
int gf_golden_boundary_excuse(const float *logits, int32_t V, const gf_sampler_params *sp, uint64_t seq_id,
                              uint64_t step, int32_t test_token, double thr, double *margin_out);

typedef struct gf_golden_spec {
    gf_prompt_spec *prompts;
    size_t n_prompts;
    long long max_new;
    gf_sampler_params sampler;
    double atol;
    gf_gate gate;
    char *golden_arg; /* `golden:` as written, NULL if absent */
    char *golden;     /* the resolved path: golden_arg under the root, else
                                  <root>/golden/<id>.safetensors */
} gf_golden_spec;

/* The golden a case is checked against: dir/<id>.safetensors when dir is
 * given (genfence run --golden-dir), else the case's own path. malloc'd. */
char *gf_golden_path_for(const gf_case *c, const char *dir);
/* The case hash (gf_case_hash over c->tree). */
gf_status gf_case_hash_of(const gf_case *c, char hex[65]);
/* The tools/reference/golden.py and genfence bless commands that make the golden of c
 * (into dir when given, as for run --golden-dir), into buf. */
void gf_golden_make_hint(const gf_case *c, const char *dir, char *buf, size_t cap);

/* What gf_golden_record wrote. */
typedef struct gf_golden_recorded {
    int32_t rows, steps;
    double min_margin; /* the smallest margin of any step's choice */
    char backend[128]; /* the name the backend reports */
} gf_golden_recorded;

/* Record the golden of golden_generation case c on `backend` into path
 * (genfence bless): each prompt alone, free-running, cached decode, with the
 * provenance (backend, machine, genfence commit, hashes) in the metadata.
 * GF_OK with *out filled, else the error (its message names what failed). */
gf_status gf_golden_record(const gf_case *c, const char *backend, int32_t threads, const char *path,
                           gf_golden_recorded *out);

#endif
