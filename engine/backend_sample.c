/* gf_backend_sample: the one way genfence calls a backend's own `sample`
 * slot (genfence/engine.h): it validates what gf_sample validates, builds the
 * engine's uniforms for each row and checks the ids the slot returns. */
#include "genfence/engine.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_trace.h"
#include "guard.h"
#include "sampler_internal.h"

gf_status gf_backend_sample(const gf_backend_ops *ops, void *model, const float *logits, int32_t B, int32_t V,
                            const gf_sampler_params *p, const uint64_t *seq_ids, uint64_t step, int32_t *ids_out)
{
    if (!ops)
        return gf_error_set(GF_E_INVALID_ARG, "backend table is NULL");
    const char *name = ops->name ? ops->name : "(unnamed)";
    if (!gf_backend_has_sample(ops) && !GF_OPS_HAS(ops, sample_ex))
        return gf_error_set(GF_E_UNSUPPORTED, "backend '%s' has no sample slot", name);
    if (!logits || !p || !ids_out || B < 1 || V < 1)
        return gf_error_set(GF_E_INVALID_ARG,
                            "backend '%s' sample: B %d, V %d (must be >= 1), logits, params "
                            "and ids_out non-NULL",
                            name, B, V);
    gf_status st = gf_sampler_validate(p);
    if (st != GF_OK)
        return gf_error_prefix(st, "backend '%s' sample", name);
    /* Which slot: plain params (ext NULL, or seed with nothing further) go
     * to the old `sample` slot with ext NULL, exactly what it was built for;
     * anything else to sample_ex, and only for a profile it declares. */
    const int plain = gf_sampler_params_plain(p);
    const int profile = gf_sampler_params_profile(p);
    const uint32_t declared = gf_backend_sample_profiles(ops);
    const int use_ex =
        GF_OPS_HAS(ops, sample_ex) && (declared & GF_PROFILE_BIT(profile)) && (!plain || !gf_backend_has_sample(ops));
    if (!use_ex && (!plain || !gf_backend_has_sample(ops)))
        return gf_error_set(GF_E_UNSUPPORTED, "backend '%s' sample slot does not implement profile '%s'%s", name,
                            gf_sampler_profile_name(profile),
                            plain ? "" : " with its filters (it needs sample_ex and sample_profiles declaring it)");
    gf_sampler_params old_p = *p;
    if (!use_ex)
        old_p.ext = NULL;
    /* the guard calls the chosen slot's own pointer (both read under GF_OPS_HAS above) */
    const gf_sample_slot_fn slot = use_ex ? ops->sample_ex : ops->sample;
    size_t n = (size_t)B * (size_t)V;
    double *u = malloc(n * sizeof *u), *z = malloc((size_t)V * sizeof *z);
    if (!u || !z) {
        free(u);
        free(z);
        return gf_error_set(GF_E_NOMEM, "out of memory");
    }
    /* the slot gets only what gf_sample accepts: the filter checks the
     * logits (NaN, +inf, all -inf, temperature overflow) exactly as it does
     * (the params were validated once, above) */
    for (int32_t b = 0; b < B && st == GF_OK; b++) {
        st = gf_sampler_filter_valid(logits + (size_t)b * V, V, p, z);
        if (st != GF_OK)
            gf_error_prefix(st, "backend '%s' sample, row %d", name, b);
        gf_rng_uniforms(p->seed, seq_ids ? seq_ids[b] : (uint64_t)b, step, V, u + (size_t)b * V);
    }
    if (st == GF_OK) {
        gf_rng_draws d = {.u = u, .V = V};
        for (int32_t b = 0; b < B; b++)
            ids_out[b] = -1;
        gf_error_clear();
        long long call = gf_trace_enter("sample", B, 1, -1);
        st = gf_guard_sample(slot, model, logits, B, &old_p, &d, ids_out, call); /* guarded copies (guard.h) */
        gf_trace_leave();
        const char *vendor = gf_backend_last_error(ops, model);
        if (st != GF_OK) {
            if (vendor[0])
                gf_error_prefix(st, "backend '%s' sample slot (%s)", name, vendor);
            else
                gf_error_prefix(st, "backend '%s' sample slot", name);
        }
        for (int32_t b = 0; b < B && st == GF_OK; b++)
            if (ids_out[b] < 0 || ids_out[b] >= V)
                st = gf_error_set(GF_E_BACKEND, "backend '%s' sample slot returned token %d for row %d (V %d)", name,
                                  ids_out[b], b, V);
    }
    free(u);
    free(z);
    return st;
}
