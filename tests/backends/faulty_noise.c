/* ref behind a wrapper that adds seeded noise to every logit it returns, for
 * the statistical tier's must-fail cases (cases/detect/statistical.yaml):
 *
 *   GF_NOISE_AMP      the noise: uniform in [-amp, amp), from a hash of the
 *                     forward call's index and the logit's index (the same
 *                     run gives the same noise)
 *   GF_NOISE_WEIGHTS  what info declares as its weight type ("q8_0"), or
 *                     undefined: ref's info (fp32, weights as given)
 *
 *   ref-noise       amp 2e-3, declares fp32: about llama.cpp f32's error on
 *                   holmes-gpt, which the f32 thresholds must refuse
 *   ref-noise-q8_0  amp 1.0, declares q8_0 weights: a broken quantizer (KL
 *                   ~0.1, 20x q8_0's bound), which the q8_0 thresholds must
 *                   refuse, and whose golden cases are skipped for the tier
 *   ref-q4_0        amp 0, declares q4_0 weights, which no thresholds cover:
 *                   the tier skips it and its golden cases run (and pass)
 *   ref-noise-1.5e-3  amp 1.5e-3, declares fp32: 10x onednn's honest error on
 *                   SmolLM2-135M, which the goldens' tolerance rule must
 *                   refuse (make real-model, docs/real_model.md)
 *
 *   ref-spike       amp 2e-5, declares fp32, on every GF_NOISE_EVERY-th (97th)
 *                   forward call only: a few positions far past fp32's honest
 *                   largest KL, the rest exact, so the KL mean stays inside
 *                   its test and only the tails' exceedance tests can fail
 *                   (detect.statistical.tail_spikes)
 *
 *   ref-noise-env   GF_NOISE_FROM_ENV: the amplitude from $GENFENCE_TEST_NOISE_AMP
 *                   (unset: 0), the declared weights and KV cache from
 *                   $GENFENCE_TEST_NOISE_WEIGHTS / $GENFENCE_TEST_NOISE_KV
 *                   (unset: ref's): the faulty backend whose KL shift or
 *                   top-1 drop tools/calibrate/error_rates.py sets to exactly
 *                   theta, to measure the tier's power there; with
 *                   $GENFENCE_TEST_NOISE_EVERY=N, noise on every N-th forward
 *                   call only (a share 1/N of the positions: the tails'
 *                   exceedance tests at their theta)
 *
 * Every other slot is ref's. Output: libgenfence_test_faulty_<stem>.so. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_NOISE_AMP
#error "GF_NOISE_AMP sets the noise amplitude"
#endif
#ifndef GF_NOISE_NAME
#error "GF_NOISE_NAME names the backend"
#endif

static gf_backend_ops g_ops;
static uint64_t g_calls;
static size_t g_vocab; /* V of the loaded model */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double noise_amp(void)
{
#ifdef GF_NOISE_FROM_ENV
    const char *e = getenv("GENFENCE_TEST_NOISE_AMP");
    return e ? strtod(e, NULL) : 0.0;
#else
    return GF_NOISE_AMP;
#endif
}

static gf_status noise_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    g_vocab = (size_t)desc->config.vocab_size;
    return gf_backend_ref()->model_load(desc, opts, model_out);
}

static gf_status noise_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    const gf_backend_ops *r = gf_backend_ref();
    gf_status st = r->info ? r->info(opts, info_out) : GF_E_UNSUPPORTED;
#ifdef GF_NOISE_WEIGHTS
    if (st == GF_OK && info_out->struct_size >= offsetof(gf_backend_info, kv_cache) + sizeof info_out->kv_cache)
        info_out->weights = GF_NOISE_WEIGHTS;
#endif
#ifdef GF_NOISE_FROM_ENV
    if (st == GF_OK && info_out->struct_size >= offsetof(gf_backend_info, kv_cache) + sizeof info_out->kv_cache) {
        const char *w = getenv("GENFENCE_TEST_NOISE_WEIGHTS"), *kv = getenv("GENFENCE_TEST_NOISE_KV");
        if (w && *w)
            info_out->weights = w;
        if (kv && *kv)
            info_out->kv_cache = kv;
    }
#endif
    return st;
}

static gf_status noise_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    uint64_t call = ++g_calls;
#ifdef GF_NOISE_EVERY
    const double amp = call % GF_NOISE_EVERY ? 0.0 : noise_amp();
#elif defined GF_NOISE_FROM_ENV
    const char *ev = getenv("GENFENCE_TEST_NOISE_EVERY");
    const unsigned long long every = ev && strtoull(ev, NULL, 10) > 0 ? strtoull(ev, NULL, 10) : 1;
    const double amp = call % every ? 0.0 : noise_amp();
#else
    const double amp = noise_amp();
#endif
    gf_status st = gf_backend_ref()->forward(model, cache, in, logits_out);
    if (st != GF_OK)
        return st;
    size_t n = (size_t)in->B * (size_t)(in->logits_mode == GF_LOGITS_LAST ? 1 : in->T) * g_vocab;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(call << 32 ^ (uint64_t)i) >> 11) * 0x1.0p-53; /* [0, 1) */
        logits_out[i] += (float)(amp * (2 * u - 1));
    }
    return GF_OK;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_NOISE_NAME;
        g_ops.description = "ref with seeded noise on its logits (tests/backends/faulty_noise.c)";
        g_ops.model_load = noise_model_load;
        g_ops.info = noise_info;
        g_ops.forward = noise_forward;
    }
    return &g_ops;
}
