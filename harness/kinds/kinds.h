/* The case kinds genfence has (docs/cases.md). A kind is one file here,
 * named after it, defining `const gf_kind_def gf_kind_<name>` (what it needs,
 * which backend slots it reaches: case.h), and one line in GF_KIND_LIST
 * (documentation order). Its keys are the ones its parse asks for
 * (gf_kind_keys). */
#ifndef GENFENCE_HARNESS_KINDS_H
#define GENFENCE_HARNESS_KINDS_H

#include "case.h"

#define GF_KIND_LIST(X)       \
    X(top_p_fence)            \
    X(top_k_fence)            \
    X(sampler_probs)          \
    X(temperature_limits)     \
    X(sampler_errors)         \
    X(logprobs)               \
    X(sampling_distribution)  \
    X(seeded_reproducibility) \
    X(multi_sample)           \
    X(cache_equals_recompute) \
    X(speculative)            \
    X(speculative_sampling)   \
    X(left_padding_positions) \
    X(toy_attention_cache)    \
    X(batch_consistency)      \
    X(invariance)             \
    X(context_limit)          \
    X(sliding_window)         \
    X(eos)                    \
    X(stream_decode)          \
    X(stop_strings)           \
    X(golden_generation)      \
    X(beam_search)            \
    X(prompt_logprobs)        \
    X(distribution_match)     \
    X(precision)              \
    X(probe)

#define GF_KIND_DECLARE(name) extern const gf_kind_def gf_kind_##name;
GF_KIND_LIST(GF_KIND_DECLARE)
#undef GF_KIND_DECLARE

/* Every kind, NULL-terminated, in documentation order. */
const gf_kind_def *const *gf_kinds(void);
/* The kind called name, or NULL. */
const gf_kind_def *gf_kind_find(const char *name);

#endif
