/* Shared by the four sampler files, in their order: sampler_profile.c
 * (names, the field table, the extension and its rules) <- sampler_bans.c
 * (the bans over the history) <- sampler_chain.c
 * (a profile's chain) <- sampler.c (gf_sample and the other entry points). */
#ifndef GENFENCE_ENGINE_SAMPLER_INTERNAL_H
#define GENFENCE_ENGINE_SAMPLER_INTERNAL_H

#include "genfence/sampler.h"

/* A (value, index) pair: qsort has no context argument, so rows are sorted
 * as pairs. gf_zi_cmp_desc: descending z, equal z by ascending index (the
 * tie rule of every profile's sort; sampler_chain.c). */
typedef struct gf_zi {
    double z;
    int32_t i;
} gf_zi;
int gf_zi_cmp_desc(const void *a, const void *b);

/* sampler_profile.c: p->ext into *out, fields past its struct_size at their
 * defaults (ext NULL: the defaults); the plain test of gf_sampler_params_plain. */
gf_status gf_sampler_ext_load(const gf_sampler_params *p, gf_sampler_ext *out);
int gf_sampler_ext_is_plain(const gf_sampler_ext *e);

/* sampler_bans.c: the bans and biases over the history that come before
 * every profile's chain (vllm's masks and bad words, logit bias, the EOS
 * bans, hf's sequence_bias, n-gram ban, bad words, forced BOS / EOS), on z
 * (V) in place; pn the profile's name for messages. */
gf_status gf_sampler_bans_run(const gf_sampler_ext *e, int32_t V, double *z, const char *pn);

/* sampler_chain.c: the chain for a params with an extension (already validated): z (V) the
 * final filtered, scaled logits (-inf where dropped). *greedy is set when
 * the choice is the argmax (then res holds it, z is one-hot at its value);
 * *poisoned when a vllm row had NaN/+inf/all -inf (res->token the valid id
 * vLLM returns, z one-hot at 0). */
gf_status gf_sampler_chain_run(const float *logits, int32_t V, const gf_sampler_params *p, const gf_sampler_ext *e,
                               double *z, int *greedy, int *poisoned, gf_sample_result *res);

/* sampler.c: gf_sampler_filter and gf_sample_row for params the caller has
 * already passed through gf_sampler_validate once (gf_backend_sample,
 * gf_generate): the same work without reading the rules again for every
 * row and step. The logits are checked as always. */
gf_status gf_sampler_filter_valid(const float *logits, int32_t V, const gf_sampler_params *p, double *z_out);
gf_status gf_sample_row_valid(const float *logits, int32_t V, const gf_sampler_params *p, const int32_t *tokens,
                              int32_t n_tokens, int32_t n_prompt, int32_t eos_id, uint64_t seq_id, uint64_t step,
                              gf_sample_result *out);

#endif
