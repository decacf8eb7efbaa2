/* CUDA backend: cuBLAS for the dense products, the kernels of cuda_body.h for
 * the rest, the KV cache in device memory (see README.md beside this file).
 *
 * This file is the module: the ops table, probe / info, the option (the
 * compute type) and the device executor behind cuda_forward.c. A run-time
 * module like openblas: it links cudart and cuBLAS (shared), never libcuda;
 * genfence dlopens it, so genfence itself starts on a machine without CUDA. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_forward.h"
#include "cuda_kernels.h"

#define GF_EXPORT __attribute__((visibility("default")))

#ifndef GFC_CUDA_ARCHS
#define GFC_CUDA_ARCHS "?"
#endif

/* "" or why an address-space cap (genfence run --memory-limit) may be the
 * cause: the CUDA driver reserves virtual memory beyond the GPU's size */
static const char *rlimit_hint(void)
{
    static char hint[200];
    struct rlimit rl;
    hint[0] = '\0';
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(hint, sizeof hint,
                 "; an address-space limit of %.1f GiB is set (RLIMIT_AS, genfence run --memory-limit) and CUDA "
                 "reserves more than that: run with --memory-limit 0",
                 (double)rl.rlim_cur / (1024.0 * 1024.0 * 1024.0));
    return hint;
}

/* ---- the device executor ---- */

typedef struct cu_exec {
    gfc_exec base;       /* first */
    cudaStream_t stream; /* 0: the legacy default stream */
    cublasHandle_t blas; /* NULL for a sampler-only executor */
    cublasComputeType_t compute;
    uint16_t *xh; /* 16-bit modes: the GEMM's activations */
    size_t xh_bytes;
} cu_exec;

static gf_status cuda_fail(cudaError_t e, const char *what)
{
    return gf_error_set(e == cudaErrorMemoryAllocation ? GF_E_NOMEM : GF_E_BACKEND, "cuda: %s: %s (%s)", what,
                        cudaGetErrorString(e), cudaGetErrorName(e));
}

static gf_status x_alloc(gfc_exec *ex, void **p, size_t bytes)
{
    (void)ex;
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        char what[64];
        snprintf(what, sizeof what, "cudaMalloc of %zu bytes", bytes);
        return cuda_fail(e, what);
    }
    return GF_OK;
}

static void x_release(gfc_exec *ex, void *p)
{
    if (!p)
        return;
    /* work queued on the stream (after a failed call, or GEMMs reading a
     * scratch being regrown) may still read p */
    cudaStreamSynchronize(((cu_exec *)ex)->stream);
    cudaFree(p);
}

static gf_status x_upload(gfc_exec *ex, void *dst, const void *src, size_t bytes)
{
    /* from pageable memory: returns once src has been read */
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ((cu_exec *)ex)->stream);
    return e == cudaSuccess ? GF_OK : cuda_fail(e, "copy to the device");
}

static gf_status x_download(gfc_exec *ex, void *dst, const void *src, size_t bytes)
{
    cu_exec *x = (cu_exec *)ex;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, x->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(x->stream); /* also reports a failed kernel */
    return e == cudaSuccess ? GF_OK : cuda_fail(e, "copy from the device (or a kernel before it)");
}

static const char *kind_name(gfc_kind k)
{
    static const char *const names[] = {"embed", "norm",     "bias_act",  "residual", "swiglu",
                                        "rope",  "kv_write", "attention", "to_half",  "sample"};
    return (unsigned)k < GFC_K_COUNT ? names[k] : "?";
}

static gf_status x_run(gfc_exec *ex, gfc_kind kind, size_t n, const void *args)
{
    cudaError_t e = gfc_cuda_launch(((cu_exec *)ex)->stream, kind, n, args);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "launching the %s kernel", kind_name(kind));
        return cuda_fail(e, what);
    }
    return GF_OK;
}

static gf_status x_gemm(gfc_exec *ex, const void *w, int32_t N, int32_t K, const float *x, float *y, int32_t M)
{
    cu_exec *c = (cu_exec *)ex;
    const int half = ex->mode == GFC_BF16 || ex->mode == GFC_FP16;
    cudaDataType_t t = ex->mode == GFC_BF16 ? CUDA_R_16BF : ex->mode == GFC_FP16 ? CUDA_R_16F : CUDA_R_32F;
    const void *xb = x;
    if (half) { /* round the activations to the GEMM dtype, as autocast does */
        size_t bytes = (size_t)M * K * sizeof(uint16_t);
        if (bytes > c->xh_bytes) {
            x_release(ex, c->xh);
            c->xh = NULL;
            c->xh_bytes = 0;
            gf_status st = x_alloc(ex, (void **)&c->xh, bytes);
            if (st != GF_OK)
                return st;
            c->xh_bytes = bytes;
        }
        gfc_half_args ha = {.dst = c->xh, .src = x, .bf16 = ex->mode == GFC_BF16};
        gf_status st = x_run(ex, GFC_K_TO_HALF, (size_t)M * K, &ha);
        if (st != GF_OK)
            return st;
        xb = c->xh;
    }
    const gfc_gemm_call g = gfc_gemm_map(N, K, M); /* checked by the unit test's twin */
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasGemmEx(c->blas, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &one, w, t, g.lda, xb, t,
                                    g.ldb, &zero, y, CUDA_R_32F, g.ldc, c->compute, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return gf_error_set(GF_E_BACKEND, "cuda: cublasGemmEx (%d x %d x %d, %s): %s", M, N, K, gfc_mode_name(ex->mode),
                            cublasGetStatusString(s));
    return GF_OK;
}

static void exec_init(cu_exec *x, gfc_mode mode)
{
    memset(x, 0, sizeof *x);
    x->base.mode = mode;
    x->base.max_keys = 0;
    x->base.alloc = x_alloc;
    x->base.release = x_release;
    x->base.upload = x_upload;
    x->base.download = x_download;
    x->base.gemm = x_gemm;
    x->base.run = x_run;
    x->compute = mode == GFC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

static void exec_release(cu_exec *x)
{
    x_release(&x->base, x->xh);
    if (x->blas)
        cublasDestroy(x->blas);
    if (x->stream)
        cudaStreamDestroy(x->stream);
    x->xh = NULL;
    x->blas = NULL;
    x->stream = 0;
}

/* stream, cuBLAS handle, attention shared memory for a model of d_head dh */
static gf_status exec_open(cu_exec *x, int32_t dh)
{
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return gf_error_set(GF_E_BACKEND, "cuda: creating a stream on device 0: %s (%s)%s", cudaGetErrorString(e),
                            cudaGetErrorName(e), rlimit_hint());
    int optin = 0;
    e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    if (e != cudaSuccess)
        return cuda_fail(e, "reading the shared memory per block");
    if ((e = gfc_cuda_attention_setup((size_t)optin)) != cudaSuccess)
        return cuda_fail(e, "raising the attention kernel's shared memory");
    size_t floats = (size_t)optin / sizeof(float);
    x->base.max_keys = floats > GFC_ATTN_SMEM(dh, 0) ? floats - GFC_ATTN_SMEM(dh, 0) : 0;
    cublasStatus_t s = cublasCreate(&x->blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        x->blas = NULL;
        return gf_error_set(GF_E_BACKEND, "cuda: cublasCreate: %s", cublasGetStatusString(s));
    }
    if ((s = cublasSetStream(x->blas, x->stream)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetMathMode(x->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
        return gf_error_set(GF_E_BACKEND, "cuda: configuring cuBLAS: %s", cublasGetStatusString(s));
    return GF_OK;
}

/* ---- probe, info ---- */

static gf_status cu_probe(char *why, size_t why_len)
{
    char buf[512] = "";
    int n = 0, major = 0, minor = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* cudart loads the driver (libcuda.so.1) itself: say whether it found one */
        const char *hint = rlimit_hint();
        if (e == cudaErrorInsufficientDriver) {
            void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
            hint = drv ? "; the NVIDIA driver (libcuda.so.1) is older than this runtime needs"
                       : "; no NVIDIA driver (libcuda.so.1) could be loaded";
            if (drv)
                dlclose(drv);
        }
        snprintf(buf, sizeof buf, "cuda: %s (cudaGetDeviceCount: %s%s)", cudaGetErrorString(e), cudaGetErrorName(e),
                 hint);
    } else if (n < 1) {
        snprintf(buf, sizeof buf, "cuda: no CUDA device (cudaGetDeviceCount found 0)");
    } else if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0)) != cudaSuccess ||
               (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0)) != cudaSuccess) {
        snprintf(buf, sizeof buf, "cuda: device 0: %s%s", cudaGetErrorString(e), rlimit_hint());
    } else if ((e = gfc_cuda_check_image()) != cudaSuccess) {
        snprintf(buf, sizeof buf, "cuda: device 0 is sm_%d%d and this build has code for sm %s only (%s)", major, minor,
                 GFC_CUDA_ARCHS, cudaGetErrorString(e));
    }
    if (why && why_len)
        snprintf(why, why_len, "%s", buf);
    return buf[0] ? GF_E_UNAVAILABLE : GF_OK;
}

static const char *mode_detail(gfc_mode mode)
{
    switch (mode) {
    case GFC_TF32: return "tf32: cublasGemmEx CUBLAS_COMPUTE_32F_FAST_TF32 on F32 data (declared tf32)";
    case GFC_BF16: return "bf16: cublasGemmEx on bfloat16 weights and activations, CUBLAS_COMPUTE_32F, F32 out";
    case GFC_FP16: return "fp16: cublasGemmEx on half weights and activations, CUBLAS_COMPUTE_32F, F32 out";
    case GFC_FP32:
    default: return "fp32: cublasGemmEx CUBLAS_COMPUTE_32F, default math (no TF32)";
    }
}

static gf_status cu_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info mine, *info = &mine; /* a whole struct of this header; info_out gets at most its size */
    static char library[160], detail[512];
    gfc_mode mode;
    gf_status st = gfc_parse_config(opts ? opts->config : NULL, &mode);
    if (st != GF_OK)
        return st;
    int rt = 0, bmaj = 0, bmin = 0, bpatch = 0;
    cudaRuntimeGetVersion(&rt);
    cublasGetProperty(MAJOR_VERSION, &bmaj);
    cublasGetProperty(MINOR_VERSION, &bmin);
    cublasGetProperty(PATCH_LEVEL, &bpatch);
    snprintf(library, sizeof library, "CUDA runtime %d.%d, cuBLAS %d.%d.%d", rt / 1000, (rt % 1000) / 10, bmaj, bmin,
             bpatch);
    struct cudaDeviceProp prop;
    char dev[320];
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        snprintf(dev, sizeof dev, "%.200s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                 (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    else
        snprintf(dev, sizeof dev, "no device");
    snprintf(detail, sizeof detail, "%s; %s; kernels F32, KV cache F32; code for sm %s", dev, mode_detail(mode),
             GFC_CUDA_ARCHS);
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->dtype = gfc_mode_dtype(mode);
    info->threads = 1;
    info->library = library;
    info->detail = detail;
    /* every mechanism of cases/probes/ runs on this module's own kernels (README.md: GPT-2 and the Llama
     * family, GQA, head_dim != D/H, the four activations); yarn's attention factor is not a model feature
     * it declares, so those probes skip */
    info->probes = "all";
    return gf_backend_info_put(info_out, info);
}

/* ---- model, cache, forward ---- */

typedef struct cu_model {
    cu_exec ex;
    gfc_model *g;
} cu_model;

static void cu_model_free(void *handle)
{
    cu_model *m = handle;
    if (!m)
        return;
    gfc_model_destroy(m->g);
    exec_release(&m->ex);
    free(m);
}

static gf_status cu_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    gf_error_clear();
    gfc_mode mode;
    gf_status st = gfc_parse_config(opts ? opts->config : NULL, &mode);
    if (st != GF_OK)
        return st;
    if (!desc)
        return gf_error_set(GF_E_INVALID_ARG, "cuda: no model description");
    char why[512];
    if (cu_probe(why, sizeof why) != GF_OK)
        return gf_error_set(GF_E_UNAVAILABLE, "%s", why);
    cu_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "cuda: out of memory");
    exec_init(&m->ex, mode);
    st = exec_open(&m->ex, desc->config.d_head > 0 ? desc->config.d_head : 1);
    if (st == GF_OK)
        st = gfc_model_create(desc, &m->ex.base, &m->g);
    if (st != GF_OK) {
        cu_model_free(m);
        return st;
    }
    *model_out = m;
    return GF_OK;
}

static gf_status cu_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out)
{
    gfc_cache *c = NULL;
    gf_status st = gfc_cache_create(((cu_model *)model)->g, batch, max_len, &c);
    *cache_out = c;
    return st;
}

static gf_status cu_cache_reset(void *cache)
{
    ((gfc_cache *)cache)->length = 0;
    return GF_OK;
}

static void cu_cache_free(void *cache) { gfc_cache_destroy(cache); }
static int32_t cu_cache_length(const void *cache) { return ((const gfc_cache *)cache)->length; }
static size_t cu_cache_bytes(const void *cache) { return gfc_cache_bytes(cache); }

static gf_status cu_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    gf_error_clear();
    return gfc_forward(((cu_model *)model)->g, cache, in, logits_out);
}

static gf_status cu_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req)
{
    gf_error_clear();
    return gfc_forward_trace(((cu_model *)model)->g, cache, in, logits_out, req);
}

/* The sampler on the device: the model's stream when given one, else the
 * default stream of device 0 (sampler-only use keeps no state). */
static gf_status cu_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                           const gf_rng_draws *draws, int32_t *ids_out)
{
    gf_error_clear();
    if (!logits || !params || !draws || !draws->u || !ids_out || B < 1 || draws->V < 1)
        return gf_error_set(GF_E_INVALID_ARG,
                            "cuda sample: B %d and V %d must be >= 1; logits, params, draws, "
                            "draws->u and ids_out non-NULL",
                            B, draws ? draws->V : 0);
    if (draws->V > (1 << 28))
        return gf_error_set(GF_E_UNSUPPORTED, "cuda sample: V %d exceeds 2^28", draws->V);
    if (model)
        return gfc_sample(&((cu_model *)model)->ex.base, logits, B, draws->V, params, draws->u, ids_out);
    char why[512];
    if (cu_probe(why, sizeof why) != GF_OK)
        return gf_error_set(GF_E_UNAVAILABLE, "%s", why);
    cu_exec x;
    exec_init(&x, GFC_FP32);
    cudaError_t e = cudaSetDevice(0);
    if (e != cudaSuccess)
        return cuda_fail(e, "selecting device 0");
    gf_status st = gfc_sample(&x.base, logits, B, draws->V, params, draws->u, ids_out);
    exec_release(&x);
    return st;
}

static const char *cu_last_error(void *model)
{
    (void)model;
    return gf_error_msg();
}

static const gf_backend_ops k_cuda_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = "cuda",
    .description = "CUDA: cuBLAS GEMMs (cuda, cuda:tf32, cuda:bf16, cuda:fp16), F32 kernels, KV cache on the device",
    .probe = cu_probe,
    .info = cu_info,
    .model_load = cu_model_load,
    .model_free = cu_model_free,
    .cache_create = cu_cache_create,
    .cache_reset = cu_cache_reset,
    .cache_free = cu_cache_free,
    .cache_length = cu_cache_length,
    .cache_bytes = cu_cache_bytes,
    .forward = cu_forward,
    .sample = cu_sample,
    .last_error = cu_last_error,
    .forward_trace = cu_forward_trace,
};

GF_EXPORT const gf_backend_ops *genfence_backend_entry(void) { return &k_cuda_ops; }
