/* Case keys several kinds share (keys.c): sampler parameters, `probs` or
 * `logits`, an expected stop, prompts; seeded normals.
 *
 * Sampler-profile keys (docs/sampler.md): besides
 * temperature / top_k / top_p / seed, gf_y_sampler and gf_y_sampler_raw read
 *   profile (a name or a list: the first is the params' profile), chain,
 *   min_p, typical_p (null = off), repetition_penalty, frequency_penalty,
 *   presence_penalty, penalty_last_n, min_tokens_to_keep, logit_bias
 *   ({token: bias}), history, history_prompt, min_new_tokens, eos_id,
 *   stop_token_ids, xtc_probability, xtc_threshold, xtc_min_keep
 * into params->ext (process lifetime); a case with none of them keeps ext
 * NULL and runs under the seed profile exactly as before. */
#ifndef GENFENCE_HARNESS_KIT_KEYS_H
#define GENFENCE_HARNESS_KIT_KEYS_H

#include <jansson.h>
#include <stdint.h>

#include "case.h"
#include "record.h"

/* `profile:` of map as a mask of GF_PROFILE_BIT(p) and the first named
 * (seed when absent). 1 read, 0 absent, -1 error (recorded at the node). */
int gf_y_profiles(gf_cctx *ctx, const gf_ynode *map, uint32_t *mask, int *first);

/* The keys above past temperature / top_k / top_p / seed, NULL-terminated
 * (genfence list --kinds names those a kind takes). */
const char *const *gf_sampler_ext_keys(void);

/* Sampler keys of a mapping: temperature, top_k, top_p (null = off), seed.
 * Defaults come from *p. Out-of-range values (gf_sampler_validate) are errors
 * at load time, at the mapping. */
int gf_y_sampler(gf_cctx *ctx, const gf_ynode *map, gf_sampler_params *p);
/* The same without the range checks of gf_sampler_validate (sampler_errors
 * feeds invalid parameters to the sampler on purpose). */
int gf_y_sampler_raw(gf_cctx *ctx, const gf_ynode *map, gf_sampler_params *p);
json_t *gf_sampler_json(const gf_sampler_params *p);

/* GENFENCE_SEED_SHIFT=N (an integer in [0, 2^31)): added to the seed of every
 * case whose seed no golden pins and whose verdict is a statistical test or a
 * seed property (sampling_distribution, speculative_sampling,
 * seeded_reproducibility), so a run can be repeated on other draws
 * (tests/mutants/run.sh runs the harmless variants over 10 shifts). Unset or
 * empty: 0. *shift gets it; -1 (recorded at map) when it is not such an
 * integer. */
int gf_y_seed_shift(gf_cctx *ctx, const gf_ynode *map, uint64_t *shift);

/* `probs` or `logits` (exactly one, unless optional): V float logits
 * (probabilities become their logs). Logits follow the sampler's rule (no
 * NaN, no +inf) unless flags has GF_Y_ANY_LOGITS (a
 * kind that feeds the sampler's refusals). Returns 1 read, 0 absent, -1 error. */
enum { GF_Y_ANY_LOGITS = 0x100 };
int gf_y_probs_or_logits(gf_cctx *ctx, const gf_ynode *map, int flags, float **logits, int32_t *V, int *from_probs);

/* An expected stop (context_limit, eos): stop_reason and/or total_tokens. */
typedef struct gf_stop_expect {
    int has_stop, has_total;
    int stop; /* index into gf_stop_words / gf_stop_values */
    long long total;
} gf_stop_expect;
extern const char *const gf_stop_words[];     /* "eos", "length", "context_limit", NULL */
extern const gf_stop_reason gf_stop_values[]; /* the gf_stop_reason of each word */

/* A prompt list: each item a string (text) or a sequence of token ids. */
typedef struct gf_prompt_spec {
    char *text; /* NULL when ids are given */
    int32_t *ids;
    size_t n_ids;
} gf_prompt_spec;
int gf_y_prompts(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, gf_prompt_spec **out, size_t *n_out);
void gf_prompts_free(gf_prompt_spec *p, size_t n);
/* One prompt from `prompt` (text) or `prompt_tokens` (ids), exactly one of
 * them (required): 0, or -1 with the error recorded. */
int gf_y_one_prompt(gf_cctx *ctx, const gf_ynode *m, gf_prompt_spec *p);
/* Tokens of a prompt (text via the session's tokenizer). malloc'd. */
gf_status gf_prompt_tokens(const gf_session *s, const gf_prompt_spec *p, int32_t **ids, int32_t *n);
/* Tokens of B prompts into malloc'd *prompts (B rows) and *lens (B); on
 * failure records the error in k and returns 0 (free with gf_k_free_tokens
 * either way). */
int gf_k_encode_prompts(gf_krun *k, const gf_prompt_spec *ps, int32_t B, int32_t ***prompts, int32_t **lens);
void gf_k_free_tokens(int32_t **p, int32_t B); /* NULL-safe */

/* Seeded N(0, 1) numbers from Philox (seed, stream). */
void gf_k_normals(uint64_t seed, uint64_t stream, double *out, size_t n);

#endif
