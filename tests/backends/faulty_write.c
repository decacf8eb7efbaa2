/* The ref backend behind a wrapper that writes where it must not, for the
 * buffer guards (issue 12, item 4: engine/guard.c, cases/detect/guards.yaml,
 * tests/cli/guards.sh). Like tests/backends/faulty.c the fault sits in the
 * table around ref, which stays untouched. GF_FAULT: the fault's number in
 * the one table of test faults (tests/backends/CMakeLists.txt, 61-69), which
 * says what each breaks.
 *
 * A stray write flips every bit of the element it hits (so it changes all
 * four bytes, whatever they held); the tokens fault adds one. Output: libgenfence_test_faulty_<stem>.so
 * (tests/backends/CMakeLists.txt). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/backend.h"
#include "genfence/sampler.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault"
#endif
#ifndef GF_FAULT_NAME
#error "GF_FAULT_NAME names the backend"
#endif

static gf_backend_ops g_ops;
static long long g_forward_calls;
static size_t g_vocab; /* V of the loaded model */

static gf_status wf_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    g_vocab = (size_t)desc->config.vocab_size;
    gf_status st = gf_backend_ref()->model_load(desc, opts, model_out);
#if GF_FAULT == 68
    if (st == GF_OK) { /* the fault: const cast away, one weight "fixed up" in place */
        volatile float *w = (volatile float *)(uintptr_t)(desc->weights.wte + desc->config.n_embd + 3);
        *w = *w + 1.0f;
    }
#endif
    return st;
}

#if GF_FAULT == 69
static gf_status wf_probe(char *why, size_t why_len)
{
    gf_status st = gf_backend_ref()->probe(why, why_len);
    char msg[521];
    for (size_t i = 0; i < 520; i++)
        msg[i] = "probe detail "[i % 13];
    msg[520] = '\0';
    strcpy(why, msg); /* the fault: why_len ignored */
    return st;
}
#endif

/* volatile: the compiler must not drop or move a store it can prove is out of bounds */
__attribute__((unused)) static void poke_float(float *p)
{
    volatile uint32_t *v = (volatile uint32_t *)(void *)p;
    *v = ~*v;
}

static gf_status wf_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    long long call = ++g_forward_calls;
    gf_status st = gf_backend_ref()->forward(model, cache, in, logits_out);
    size_t n = (size_t)in->B * (size_t)(in->logits_mode == GF_LOGITS_LAST ? 1 : in->T) * g_vocab; /* floats */
    (void)n;
    if (st != GF_OK || call != 2)
        return st;
#if GF_FAULT == 61
    poke_float(logits_out + n);
#elif GF_FAULT == 62
    poke_float(logits_out - 1);
#elif GF_FAULT == 63
    poke_float(logits_out + n + 4096 / sizeof(float));
#elif GF_FAULT == 64
    volatile int32_t *t = (volatile int32_t *)(uintptr_t)in->tokens; /* the fault: const cast away */
    *t = *t + 1;
#endif
    return st;
}

#if GF_FAULT == 66
static void *volatile g_leak_last; /* the escape keeps the compiler from eliding malloc + memset */

static gf_status wf_forward_leak(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    char *p = malloc(1u << 20); /* a per-call work buffer it forgets to free */
    if (!p)
        return GF_E_NOMEM;
    memset(p, 1, 1u << 20); /* touched: resident, not just reserved */
    g_leak_last = p;        /* the previous block is lost: a leak */
    return wf_forward(model, cache, in, logits_out);
}
#endif

#if GF_FAULT == 65 || GF_FAULT == 67
/* The sampler of docs/sampler.md over the engine's uniforms: exactly gf_sample. */
static gf_status wf_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                           const gf_rng_draws *draws, int32_t *ids_out)
{
    static long long g_sample_calls;
    (void)model;
    long long call = ++g_sample_calls;
    int32_t V = draws->V;
    double *z = malloc((size_t)V * sizeof *z);
    if (!z)
        return GF_E_NOMEM;
    gf_status st = GF_OK;
    for (int32_t b = 0; b < B && st == GF_OK; b++) {
        gf_sample_result r;
        st = gf_sampler_filter(logits + (size_t)b * V, V, params, z);
        if (st == GF_OK)
            gf_sampler_race(z, draws->u + (size_t)b * V, V, &r);
        if (st == GF_OK) /* greedy: z keeps only the argmax, so the race returns it */
            ids_out[b] = r.token;
    }
    free(z);
#if GF_FAULT == 65
    if (st == GF_OK && call == 2) {
        volatile uint32_t *past = (volatile uint32_t *)(ids_out + B);
        *past = ~*past;
    }
#else
    if (st == GF_OK && call == 2 && params->ext && params->ext->history && params->ext->n_history > 0) {
        volatile int32_t *h = (volatile int32_t *)(uintptr_t)params->ext->history; /* the fault: const cast away */
        *h = *h + 1;
    }
#endif
    return st;
}
#endif

#if GF_FAULT == 67
static uint32_t wf_sample_profiles(void)
{
    return GF_PROFILE_BIT(GF_PROFILE_SEED) | GF_PROFILE_BIT(GF_PROFILE_HF) | GF_PROFILE_BIT(GF_PROFILE_LLAMACPP) |
           GF_PROFILE_BIT(GF_PROFILE_VLLM);
}
#endif

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref that writes out of bounds (tests/backends/faulty_write.c)";
        g_ops.model_load = wf_model_load;
        g_ops.forward = wf_forward;
#if GF_FAULT == 65
        g_ops.sample = wf_sample;
#endif
#if GF_FAULT == 67
        g_ops.sample_profiles = wf_sample_profiles;
        g_ops.sample_ex = wf_sample;
        g_ops.sample = wf_sample; /* plain params (ext NULL) come here; the fault needs a history */
#endif
#if GF_FAULT == 66
        g_ops.forward = wf_forward_leak;
#endif
#if GF_FAULT == 69
        g_ops.probe = wf_probe;
#endif
    }
    return &g_ops;
}
