/* A golden_generation case's golden (docs/goldens.md): the case's keys (the
 * kind, harness/kinds/golden_generation.c, parses them; bless records from
 * them), where its golden lives, its case hash and the hint that makes it
 * (golden_case.c). */
#ifndef GENFENCE_HARNESS_GOLDEN_CASE_H
#define GENFENCE_HARNESS_GOLDEN_CASE_H

#include <stddef.h>

#include <jansson.h>

#include "golden.h"
#include "keys.h"

/* The tolerance rule's factor (docs/goldens.md "The tolerance rule"): a
 * golden's atol is max(the case's atol, GF_GOLDEN_SPREAD_K x the golden's
 * fp32_spread). */
#define GF_GOLDEN_SPREAD_K 8.0

/* The tolerance rule (docs/goldens.md): the case's atol is a floor; a golden
 * that records its generator's own float32 rounding error on the model
 * (fp32_spread: max |float32 - float64| logits of the same transformers
 * class through the golden's tokens, tools/reference/golden.py) raises it to
 * GF_GOLDEN_SPREAD_K times that spread. The result is the fp32 atol; the
 * declared dtype scales it as every atol (gf_cmp_init). A golden without
 * fp32_spread (made before the rule) keeps the case's atol. *rule_out (when
 * rule_out is not NULL): the rule's figures and words as a JSON object. */
double gf_golden_atol(const gf_golden *g, double case_atol, json_t **rule_out);

/* A sampled step whose tokens differ, judged on the golden's logits with the
 * case's sampler (seed profile): 1 when adding the first token a top-k or
 * top-p boundary drops, or dropping the last it keeps, makes the seeded race
 * pick test_token, and that boundary lies within thr (z = logit / T units,
 * the race margin's) of moving; *margin_out = its distance. 0 otherwise, and
 * for greedy or a profile sampler (harness/kinds/golden_boundary.c, the kind's). */
int gf_golden_boundary_excuse(const float *logits, int32_t V, const gf_sampler_params *sp, uint64_t seq_id,
                              uint64_t step, int32_t test_token, double thr, double *margin_out);

/* Where a case's golden lives: `golden:` as written (arg) when absolute, else
 * under the case's root (ctx: its file's root), and without one
 * <root>/<dir>/<id>.safetensors (dir "golden", "golden/beam"). Malloc'd;
 * NULL when there is no root or no memory. */
char *gf_golden_path_resolve(const gf_cctx *ctx, const char *arg, const char *dir, const char *id);

/* The golden_generation kind's keys (parsed in harness/kinds/golden_generation.c). */
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

#endif
