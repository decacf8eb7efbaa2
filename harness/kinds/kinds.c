/* The table of case kinds, in documentation order. */
#include <string.h>

#include "kind.h"

extern const gf_kind_def gf_kind_top_p_fence, gf_kind_top_k_fence, gf_kind_temperature_limits,
    gf_kind_sampler_errors, gf_kind_sampling_distribution, gf_kind_seeded_reproducibility,
    gf_kind_cache_equals_recompute, gf_kind_left_padding_positions, gf_kind_batch_consistency,
    gf_kind_context_limit, gf_kind_eos, gf_kind_stream_decode, gf_kind_golden_generation;

static const gf_kind_def *const k_kinds[] = {
    &gf_kind_top_p_fence,
    &gf_kind_top_k_fence,
    &gf_kind_temperature_limits,
    &gf_kind_sampler_errors,
    &gf_kind_sampling_distribution,
    &gf_kind_seeded_reproducibility,
    &gf_kind_cache_equals_recompute,
    &gf_kind_left_padding_positions,
    &gf_kind_batch_consistency,
    &gf_kind_context_limit,
    &gf_kind_eos,
    &gf_kind_stream_decode,
    &gf_kind_golden_generation,
    NULL,
};

const gf_kind_def *const *gf_kinds(void) { return k_kinds; }

const gf_kind_def *gf_kind_find(const char *name)
{
    for (const gf_kind_def *const *k = k_kinds; *k; k++)
        if (!strcmp((*k)->name, name))
            return *k;
    return NULL;
}
