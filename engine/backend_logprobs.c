/* gf_backend_logprobs: the one way genfence calls a backend's own
 * `logprobs` slot (genfence/engine.h): what gf_sampler_logprobs validates,
 * validated first; the slot gets guarded copies; what it wrote is checked
 * for NaN where the engine's own row has none. */
#include "genfence/engine.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "engine_trace.h"
#include "guard.h"

int gf_backend_has_logprobs(const gf_backend_ops *ops) { return ops && GF_OPS_HAS(ops, logprobs); }

gf_status gf_backend_logprobs(const gf_backend_ops *ops, void *model, const float *logits, int32_t B, int32_t V,
                              const gf_sampler_params *p, int mode, double *out)
{
    if (!ops)
        return gf_error_set(GF_E_INVALID_ARG, "backend table is NULL");
    const char *name = ops->name ? ops->name : "(unnamed)";
    if (!gf_backend_has_logprobs(ops))
        return gf_error_set(GF_E_UNSUPPORTED, "backend '%s' has no logprobs slot", name);
    if (!logits || !p || !out || B < 1 || V < 1)
        return gf_error_set(GF_E_INVALID_ARG,
                            "backend '%s' logprobs: B %d, V %d (must be >= 1), logits, params and out non-NULL", name,
                            B, V);
    const size_t n = (size_t)B * (size_t)V;
    double *ref = malloc(n * sizeof *ref); /* (B, V) the engine's values, for the NaN check */
    if (!ref)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    gf_status st = GF_OK;
    for (int32_t b = 0; b < B && st == GF_OK; b++) /* validates p, mode and the row as the engine's own call does */
        if ((st = gf_sampler_logprobs(logits + (size_t)b * V, V, p, mode, ref + (size_t)b * V)) != GF_OK)
            gf_error_prefix(st, "backend '%s' logprobs, row %d", name, b);
    if (st == GF_OK) {
        for (size_t i = 0; i < n; i++)
            out[i] = NAN; /* what the slot leaves unwritten reads as NaN below */
        gf_error_clear();
        long long call = gf_trace_enter("logprobs", B, 1, -1);
        st = gf_guard_logprobs(ops->logprobs, model, logits, B, V, p, mode, out, call);
        gf_trace_leave();
        if (st != GF_OK) {
            const char *vendor = gf_backend_last_error(ops, model);
            if (vendor[0])
                gf_error_prefix(st, "backend '%s' logprobs slot (%s)", name, vendor);
            else
                gf_error_prefix(st, "backend '%s' logprobs slot", name);
        }
        for (size_t i = 0; i < n && st == GF_OK; i++)
            if (isnan(out[i]) && !isnan(ref[i]))
                st = gf_error_set(GF_E_BACKEND,
                                  "backend '%s' logprobs slot left row %zu, token %zu NaN (unwritten or not a "
                                  "number; the engine's value %.9g)",
                                  name, i / (size_t)V, i % (size_t)V, ref[i]);
    }
    free(ref);
    return st;
}
