/* The table of case kinds, built from GF_KIND_LIST. */
#include "kinds.h"

#include <stddef.h>

static const gf_kind_def *const k_kinds[] = {
#define GF_KIND_ENTRY(name) &gf_kind_##name,
    GF_KIND_LIST(GF_KIND_ENTRY)
#undef GF_KIND_ENTRY
        NULL,
};

const gf_kind_def *const *gf_kinds(void) { return k_kinds; }

const gf_kind_def *gf_kind_find(const char *name) { return gf_kind_lookup(k_kinds, name); }

gf_kind_reach gf_kind_reaches(const gf_kind_def *k)
{
    if (k->uses_backend)
        return GF_KIND_REACHES_MODEL;
    /* the kinds that call gf_k_slot_rows when the backend has a sample slot */
    static const gf_kind_def *const sample_kinds[] = {&gf_kind_top_p_fence, &gf_kind_top_k_fence, &gf_kind_sampler_probs,
                                                      &gf_kind_temperature_limits, &gf_kind_sampler_errors,
                                                      &gf_kind_sampling_distribution};
    for (size_t i = 0; i < sizeof sample_kinds / sizeof *sample_kinds; i++)
        if (sample_kinds[i] == k)
            return GF_KIND_REACHES_SAMPLE;
    return GF_KIND_REACHES_NONE;
}
