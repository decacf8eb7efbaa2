/* ref behind a wrapper for the speculative kind's verify pass (issue 30;
 * cases/detect/speculative.yaml, tests/cli/speculative.sh). Both declare
 * info.invariance "split=gated", so the kind judges them at the case's atol:
 *   150 ref-spec-late-drift  a cached forward of several new tokens on a cache
 *                            already holding >= 16 positions adds 2e-3 to one
 *                            logit per row (a verify-pass kernel that goes
 *                            wrong past a cache length): fails exactly the
 *                            cache lengths >= 16, naming the first
 *   152 ref-spec-top-down    past the same cache length, every row's top logit
 *                            lowered by 1: the verify pass picks other
 *                            tokens than sequential decode (a quantized
 *                            target's divergence): the scripted loop's output
 *                            and its accepted counts go wrong
 *   151 ref-spec-ulp-gated   the same rows one float ulp off at any cache
 *                            length, declared gated: within the gate, a pass
 *                            (the bitwise twin is fault 133, ref-inv-split) */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "genfence/backend.h"
#include "ref/ref.h"

static gf_backend_ops g_ops;

static gf_status spec_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_status st = gf_backend_ref()->info(opts, info_out);
    if (st == GF_OK && info_out->struct_size >= offsetof(gf_backend_info, invariance) + sizeof info_out->invariance)
        info_out->invariance = "split=gated";
    return st;
}

/* the vocabulary of the model last loaded (a test backend runs one model at a
 * time per process) */
static int32_t g_vocab;

static gf_status spec_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    g_vocab = desc->config.vocab_size;
    return gf_backend_ref()->model_load(desc, opts, model_out);
}

static gf_status spec_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    const int32_t before = cache ? gf_backend_ref()->cache_length(cache) : 0;
    gf_status st = gf_backend_ref()->forward(model, cache, in, logits_out);
    if (st != GF_OK || !cache || in->T < 2 || g_vocab < 1)
        return st;
    const int32_t V = g_vocab, P = in->logits_mode == GF_LOGITS_LAST ? 1 : in->T;
    for (int32_t r = 0; r < in->B * P; r++) {
        float *row = logits_out + (size_t)r * V;
        const int32_t at = (int32_t)(((uint32_t)r * 7u + 3u) % (uint32_t)V); /* the logit a fault moves */
        (void)at;
#if GF_FAULT == 150
        if (before >= 16)
            row[at] += 2e-3f;
#elif GF_FAULT == 152
        if (before >= 16) {
            int32_t top = 0;
            for (int32_t i = 1; i < V; i++)
                top = row[i] > row[top] ? i : top;
            row[top] -= 1.0f;
        }
#elif GF_FAULT == 151
        (void)before;
        row[at] = nextafterf(row[at], INFINITY);
#endif
    }
    return st;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref behind the speculative kind's wrapper (tests/backends/faulty_spec.c)";
        g_ops.info = spec_info;
        g_ops.model_load = spec_model_load;
        g_ops.forward = spec_forward;
        g_ops.forward_trace = NULL; /* its logits are ref's, unwrapped */
    }
    return &g_ops;
}
