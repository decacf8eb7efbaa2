/* ref behind a wrapper that dies the way llama.cpp's q8_0 path dies on an
 * Intel AMX CPU (issue 24; docs/llamacpp.md, "The AMX crash"): ggml routes a
 * quantized matrix product to its AMX kernels (ggml_backend_amx_mul_mat) when
 * the weight's in- and out-features are multiples of 32, and there it reads
 * out of bounds (SIGSEGV) on the first forward of a prompt. The development
 * machine has no AMX, so the project's tests see that failure through this
 * backend, never through the engine on whatever CPU runs them:
 *
 *   ref-amx-crash  declares q8_0 weights (info.weights, so the statistical
 *                  tier keys it as it keys llamacpp:q8_0) and computes ref's
 *                  logits, except that a forward with more than one new row
 *                  (B x T > 1: the tile path, not the M == 1 VNNI path) on a
 *                  model whose n_embd is a multiple of 32 dereferences a wild
 *                  pointer in emulated_amx_mul_mat (a real SIGSEGV, not
 *                  raise()): the crash of `genfence forward --backend
 *                  llamacpp:q8_0` on holmes-gpt (B 1, T 5, cache length 0).
 *
 * Options (--backend PATH:CONFIG): "repack=off" routes around the emulated
 * AMX path as llamacpp:...,repack=off turns ggml's extra buffer types off:
 * ref's logits, no crash. Anything else is refused naming it. The
 * environment switch GENFENCE_TEST_AMX_FIXED=1 is the engine "fixed": no
 * crash (a baseline's known finding then reads fixed). Every other slot is
 * ref's. Output: libgenfence_test_faulty_ref_amx_crash.so. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/backend.h"
#include "genfence/status.h"
#include "ref/ref.h"

static gf_backend_ops g_ops;
static int32_t g_n_embd; /* K and N of the emulated weights */
static int g_repack_off; /* the config of the loaded model */
static char g_err[200];  /* the refusal's text, through last_error */

static gf_status refuse(const char *config)
{
    snprintf(g_err, sizeof g_err, "ref-amx-crash: unknown option '%s' (takes only repack=off)", config);
    return gf_error_set(GF_E_INVALID_ARG, "%s", g_err);
}

static const char *amx_last_error(void *model)
{
    const char *(*ref_last)(void *) = gf_backend_ref()->last_error;
    if (g_err[0])
        return g_err;
    return ref_last ? ref_last(model) : NULL;
}

static int config_repack_off(const char *config, int *off)
{
    *off = 0;
    if (!config)
        return 1;
    if (strcmp(config, "repack=off") == 0) {
        *off = 1;
        return 1;
    }
    return 0;
}

static gf_status amx_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    int off;
    if (!config_repack_off(opts ? opts->config : NULL, &off))
        return refuse(opts->config);
    g_repack_off = off;
    g_n_embd = desc->config.n_embd;
    gf_backend_options plain = {.struct_size = sizeof plain, .threads = opts ? opts->threads : 1, .config = NULL};
    return gf_backend_ref()->model_load(desc, &plain, model_out);
}

static gf_status amx_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    int off;
    if (!config_repack_off(opts ? opts->config : NULL, &off))
        return refuse(opts->config);
    gf_backend_options plain = {.struct_size = sizeof plain, .threads = opts ? opts->threads : 1, .config = NULL};
    const gf_backend_ops *r = gf_backend_ref();
    gf_status st = r->info ? r->info(&plain, info_out) : GF_E_UNSUPPORTED;
    if (st == GF_OK && info_out->struct_size >= offsetof(gf_backend_info, kv_cache) + sizeof info_out->kv_cache)
        info_out->weights = "q8_0";
    return st;
}

/* The emulated kernel: an out-of-bounds read through a pointer no mapping
 * covers, from a function of its own so a backtrace names it. */
__attribute__((noinline)) static float emulated_amx_mul_mat(int32_t rows)
{
    volatile const float *packed = (volatile const float *)(uintptr_t)(0x10u + (uint32_t)rows * 64u);
    return packed[0];
}

static gf_status amx_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    int32_t rows = in->B * in->T;
    const char *fixed = getenv("GENFENCE_TEST_AMX_FIXED");
    if (!g_repack_off && rows > 1 && g_n_embd % 32 == 0 && !(fixed && strcmp(fixed, "1") == 0))
        logits_out[0] = emulated_amx_mul_mat(rows);
    return gf_backend_ref()->forward(model, cache, in, logits_out);
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = "ref-amx-crash";
        g_ops.description = "ref that segfaults in forward like ggml's AMX q8_0 path (tests/backends/faulty_amx.c)";
        g_ops.model_load = amx_model_load;
        g_ops.info = amx_info;
        g_ops.forward = amx_forward;
        g_ops.last_error = amx_last_error;
    }
    return &g_ops;
}
