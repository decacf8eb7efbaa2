/* ref behind a wrapper that keeps pointers into the model description
 * model_load was given, instead of copying what it needs (issue 32 item 2;
 * the ABI: docs/architecture.md "Lifetimes"). Without genfence's poisoning
 * (engine/desc_copy.h) each computes exactly ref's numbers, because the
 * caller keeps the description alive and unchanged; with it, the first read
 * through the kept pointer faults in forward and the crash reason says it
 * was a read of the model description (harness/run/pool.c).
 *   170 ref-keeps-desc:    keeps `desc` itself and reads its config in every
 *                          forward (the vocabulary, to size the logits)
 *   171 ref-keeps-weights: copies the desc struct but keeps its weight
 *                          pointers, and reads the output head in forward
 *                          (a zero-copy tied head)
 * GF_FAULT: the number in tests/backends/CMakeLists.txt. */
#include <stdint.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault"
#endif
#ifndef GF_FAULT_NAME
#error "GF_FAULT_NAME names the backend"
#endif

static gf_backend_ops g_ops;
#if GF_FAULT == 170
static const gf_model_desc *g_kept; /* the caller's desc, kept */
#else
static const float *g_head;        /* (V, D) the caller's output head, kept */
#endif

static gf_status kd_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    gf_status st = gf_backend_ref()->model_load(desc, opts, model_out);
#if GF_FAULT == 170
    g_kept = desc; /* the fault: a pointer, not a copy of the config */
#else
    gf_model_desc copy = *desc;    /* the struct copied ... */
    g_head = copy.weights.lm_head; /* ... the fault: its pointers still the caller's */
#endif
    return st;
}

static gf_status kd_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    gf_status st = gf_backend_ref()->forward(model, cache, in, logits_out);
    if (st != GF_OK)
        return st;
#if GF_FAULT == 170
    volatile int32_t V = g_kept->config.vocab_size; /* a read through the kept desc */
    if (V <= 0)
        return GF_E_BACKEND;
#else
    volatile float h = g_head[0];  /* a read of the kept weights; 0 x h adds nothing */
    logits_out[0] += 0.0f * (h == h ? 0.0f : 1.0f);
#endif
    return GF_OK;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref keeping pointers into the model description (tests/backends/faulty_desc.c)";
        g_ops.model_load = kd_model_load;
        g_ops.forward = kd_forward;
    }
    return &g_ops;
}
