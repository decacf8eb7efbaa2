/* The ref backend behind a wrapper with one fault, for the honest-verdict
 * tests (tests/cli/honest_backends.sh, cases/detect/). Unlike the
 * GF_REF_FAULT builds of backends/ref/ref.c, the fault sits in the table
 * around ref, so ref itself stays untouched:
 *
 *   GF_FAULT=1  "probe-crash":    probe raises SIGSEGV
 *   GF_FAULT=2  "probe-hang":     probe never returns
 *   GF_FAULT=3  "ref-nan":        the 2nd forward call writes NaN into one logit
 *   GF_FAULT=4  "ref-bad-length": cache_length says one more than the cache holds
 *   GF_FAULT=5  "ref-oom":        the 2nd forward call fails with GF_E_NOMEM
 *                                 and a vendor text ("out of device memory")
 *   GF_FAULT=6  "ref-bf16":       every logit rounded to bfloat16, and says so
 *                                 (info: GF_COMPUTE_BF16): an honest bf16 backend
 *   GF_FAULT=7  "ref-bf16-as-fp32": the same rounding, declaring fp32 (ref's info)
 *   GF_FAULT=8  "ref-unavailable": probe says unavailable (a device that is
 *                                 not there): its cases are skips
 *   GF_FAULT=9  "ref-noop-reset": cache_reset returns GF_OK and does nothing
 *   GF_FAULT=10 "ref-bad-bytes":  cache_bytes says 64 bytes
 *   GF_FAULT=11 "ref-no-own-key": a row whose key mask is all padding comes
 *                                 back NaN (a softmax over masked keys only:
 *                                 the own-key rule broken)
 *
 * Every other slot is ref's. Output: libgenfence_test_faulty_<stem>.so. */
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault"
#endif
#ifndef GF_FAULT_NAME
#error "GF_FAULT_NAME names the backend"
#endif

static gf_backend_ops g_ops;

static gf_status faulty_probe(char *why, size_t why_len)
{
#if GF_FAULT == 1
    (void)why, (void)why_len;
    raise(SIGSEGV);
    return GF_OK;
#elif GF_FAULT == 2
    (void)why, (void)why_len;
    for (;;)
        pause();
    return GF_E_UNAVAILABLE; /* not reached */
#elif GF_FAULT == 8
    if (why && why_len)
        snprintf(why, why_len, "no test device here (tests/backends/faulty.c)");
    return GF_E_UNAVAILABLE;
#else
    return gf_backend_ref()->probe(why, why_len);
#endif
}

static long long g_forward_calls;
static size_t g_vocab; /* V of the loaded model */

static gf_status faulty_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    g_vocab = (size_t)desc->config.vocab_size;
    return gf_backend_ref()->model_load(desc, opts, model_out);
}

static gf_status faulty_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    const gf_backend_ops *r = gf_backend_ref();
    gf_status st = r->info ? r->info(opts, info_out) : GF_E_UNSUPPORTED;
#if GF_FAULT == 6
    if (st == GF_OK)
        info_out->dtype = GF_COMPUTE_BF16;
#endif
    return st;
}

static gf_status faulty_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    long long call = ++g_forward_calls;
#if GF_FAULT == 5
    if (call == 2)
        return GF_E_NOMEM; /* the text comes through last_error */
#endif
    gf_status st = gf_backend_ref()->forward(model, cache, in, logits_out);
#if GF_FAULT == 3
    if (st == GF_OK && call == 2)
        logits_out[7] = NAN; /* row 0, token 7 */
#endif
#if GF_FAULT == 11
    if (st == GF_OK && in->key_mask) {
        int32_t Tk = cache ? gf_backend_ref()->cache_length(cache) : in->T; /* length + T after the call */
        size_t per = (size_t)(in->logits_mode == GF_LOGITS_LAST ? 1 : in->T) * g_vocab;
        for (int32_t b = 0; b < in->B; b++) {
            int any = 0;
            for (int32_t j = 0; j < Tk; j++)
                any |= in->key_mask[(size_t)b * Tk + j];
            for (size_t i = 0; !any && i < per; i++)
                logits_out[(size_t)b * per + i] = NAN;
        }
    }
#endif
#if GF_FAULT == 6 || GF_FAULT == 7
    if (st == GF_OK) { /* round to nearest even bfloat16: keep the top 16 bits */
        size_t n = (size_t)in->B * (size_t)(in->logits_mode == GF_LOGITS_LAST ? 1 : in->T) * g_vocab;
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &logits_out[i], sizeof u);
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
            memcpy(&logits_out[i], &u, sizeof u);
        }
    }
#endif
    (void)call;
    return st;
}

static int32_t faulty_cache_length(const void *cache)
{
    int32_t n = gf_backend_ref()->cache_length(cache);
#if GF_FAULT == 4
    if (n > 0)
        n++;
#endif
    return n;
}

static gf_status faulty_cache_reset(void *cache)
{
#if GF_FAULT == 9
    (void)cache;
    return GF_OK;
#else
    return gf_backend_ref()->cache_reset(cache);
#endif
}

static size_t faulty_cache_bytes(const void *cache)
{
#if GF_FAULT == 10
    (void)cache;
    return 64;
#else
    return gf_backend_ref()->cache_bytes(cache);
#endif
}

static const char *faulty_last_error(void *model)
{
#if GF_FAULT == 5
    (void)model;
    return g_forward_calls == 2 ? "out of device memory (injected by tests/backends/faulty.c)" : NULL;
#else
    const gf_backend_ops *r = gf_backend_ref();
    return GF_OPS_HAS(r, last_error) && r->last_error ? r->last_error(model) : NULL;
#endif
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref with a fault (tests/backends/faulty.c)";
        g_ops.probe = faulty_probe;
        g_ops.forward = faulty_forward;
        g_ops.model_load = faulty_model_load;
        g_ops.info = faulty_info;
        g_ops.cache_length = faulty_cache_length;
        g_ops.cache_reset = faulty_cache_reset;
        g_ops.cache_bytes = faulty_cache_bytes;
        g_ops.last_error = faulty_last_error;
    }
    return &g_ops;
}
