/* OpenBLAS backend: the shared F32 forward (backends/host_forward) with every dense
 * product done by Debian's OpenBLAS.
 *
 * Single rows (decode, and the LM head of GF_LOGITS_LAST with B = 1) use
 * sgemv: OpenBLAS 0.3.21's sgemm with m = 1 is several times slower than its
 * sgemv here. Several rows (prefill, batched decode, GF_LOGITS_ALL) use
 * sgemm. Weights stay in the layouts backends/host_forward keeps: GPT-2's Conv1D
 * (K, N) [in, out] (transposed sgemv, plain sgemm) and, for the Llama family,
 * nn.Linear (N, K) [out, in] (plain sgemv, sgemm with B transposed) for the
 * fused q|k|v, o, fused gate|up, down and the LM head. The bias is copied
 * into y first and the product accumulated onto it (beta = 1).
 *
 * Threads: openblas_set_num_threads(options->threads) before each forward
 * (the setting is process-wide; OpenBLAS itself keeps small products on one
 * thread). Built as a module loaded at run time: genfence itself never links
 * OpenBLAS. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gfv.h"

#define GF_EXPORT __attribute__((visibility("default")))

typedef struct ob_model {
    gfv_model base; /* first: the common slots take this pointer */
    int threads;
} ob_model;

static int clamp_threads(const gf_backend_options *opts)
{
    int t = opts && opts->threads > 0 ? opts->threads : 1;
    return t;
}

static gf_status ob_probe(char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    const char *cfg = openblas_get_config();
    if (!cfg || !cfg[0]) {
        if (why && why_len)
            snprintf(why, why_len, "OpenBLAS did not initialise (openblas_get_config() returned nothing)");
        return GF_E_UNAVAILABLE;
    }
    if (openblas_get_num_procs() < 1) {
        if (why && why_len)
            snprintf(why, why_len, "OpenBLAS reports no usable processors");
        return GF_E_UNAVAILABLE;
    }
    return GF_OK;
}

static gf_status ob_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info mine, *info = &mine; /* a whole struct of this header; info_out gets at most its size */
    static char library[256], detail[256];
    const char *cfg = openblas_get_config();
    const char *core = openblas_get_corename();
    /* openblas_get_config() reads e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64" */
    snprintf(library, sizeof library, "%s", cfg ? cfg : "OpenBLAS (unknown configuration)");
    snprintf(detail, sizeof detail, "core %s, %d cpus; sgemv for single rows, sgemm for several",
             core ? core : "?", openblas_get_num_procs());
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->dtype = GF_COMPUTE_F32;
    info->threads = clamp_threads(opts);
    info->library = library;
    info->detail = detail;
    return gf_backend_info_put(info_out, info);
}

/* y (M, N) = x (M, K) W + b */
static gf_status ob_linear(gfv_model *base, int32_t id, const float *x, float *y, int32_t M)
{
    const gfv_lin *L = &base->lin[id];
    const int32_t K = L->K, N = L->N;
    float beta = 0.0f;
    if (L->b) {
        for (int32_t i = 0; i < M; i++)
            memcpy(y + (size_t)i * N, L->b, (size_t)N * sizeof(float));
        beta = 1.0f;
    }
    if (M == 1) {
        if (L->trans_w) /* W (N, K): y = W x */
            cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, L->w, K, x, 1, beta, y, 1);
        else            /* W (K, N): y = W^T x */
            cblas_sgemv(CblasRowMajor, CblasTrans, K, N, 1.0f, L->w, N, x, 1, beta, y, 1);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, L->trans_w ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                    x, K, L->w, L->trans_w ? K : N, beta, y, N);
    }
    return GF_OK;
}

static void ob_model_free(void *handle)
{
    ob_model *m = handle;
    if (!m)
        return;
    gfv_model_release(&m->base);
    free(m);
}

static gf_status ob_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    gf_error_clear();
    if (opts && opts->config)
        return gf_error_set(GF_E_INVALID_ARG, "openblas takes no options (got 'openblas:%s')",
                            opts->config);
    ob_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "openblas: out of memory");
    gf_status st = gfv_model_init(&m->base, desc, "openblas", ob_linear);
    if (st != GF_OK) {
        free(m);
        return st;
    }
    m->threads = clamp_threads(opts);
    *model_out = m;
    return GF_OK;
}

static gf_status ob_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    ob_model *m = model;
    if (openblas_get_num_threads() != m->threads)
        openblas_set_num_threads(m->threads);
    return gfv_forward(&m->base, cache, in, logits_out);
}

static const gf_backend_ops k_openblas_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = "openblas",
    .description = "OpenBLAS sgemv/sgemm for the dense products, F32 host loops for the rest",
    .probe = ob_probe,
    .info = ob_info,
    .model_load = ob_model_load,
    .model_free = ob_model_free,
    .cache_create = gfv_cache_create,
    .cache_reset = gfv_cache_reset,
    .cache_free = gfv_cache_free,
    .cache_length = gfv_cache_length,
    .cache_bytes = gfv_cache_bytes,
    .forward = ob_forward,
    .sample = NULL,
    .last_error = gfv_last_error,
};

GF_EXPORT const gf_backend_ops *genfence_backend_entry(void) { return &k_openblas_ops; }
