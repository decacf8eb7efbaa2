/* Sampler-profile case keys (harness/krun/keys.c, docs/sampler.md). Besides
 * temperature / top_k / top_p / seed, gf_y_sampler and gf_y_sampler_raw read
 *   profile (a name or a list: the first is the params' profile), chain,
 *   min_p, typical_p (null = off), repetition_penalty, frequency_penalty,
 *   presence_penalty, penalty_last_n, min_tokens_to_keep, logit_bias
 *   ({token: bias}), history, history_prompt, min_new_tokens, eos_id,
 *   stop_token_ids, xtc_probability, xtc_threshold, xtc_min_keep
 * into params->ext (process lifetime); a case with none of them keeps ext
 * NULL and runs under the seed profile exactly as before. */
#ifndef GENFENCE_HARNESS_SAMPLER_KEYS_H
#define GENFENCE_HARNESS_SAMPLER_KEYS_H

#include <stdint.h>

#include "case.h"

/* `profile:` of map as a mask of GF_PROFILE_BIT(p) and the first named
 * (seed when absent). 1 read, 0 absent, -1 error (recorded at the node). */
int gf_y_profiles(gf_cctx *ctx, const gf_ynode *map, uint32_t *mask, int *first);

/* The keys above past temperature / top_k / top_p / seed, NULL-terminated
 * (genfence list --kinds names those a kind takes). */
const char *const *gf_sampler_ext_keys(void);

#endif
