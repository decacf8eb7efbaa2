/* The host twin of the CUDA executor: the kernel bodies of cuda_body.h run
 * on the CPU (element bodies in a loop; block bodies one block at a time with
 * a single thread, where the block reductions are the identity), memory is
 * malloc'd, the GEMM is a plain loop over the same packed weight image (16-bit
 * modes round the activations first, as the device executor does).
 *
 * Not part of the module: tests/unit/test_cuda_host.c compiles it to check
 * the forward, the cache and the sampler of cuda_forward.c, the packing and
 * the kernel bodies on a machine without a GPU. */
#include "cuda_exec_host.h"

#include <stdlib.h>
#include <string.h>

static gf_status h_alloc(gfc_exec *ex, void **p, size_t bytes)
{
    gfc_host_exec *h = (gfc_host_exec *)ex;
    *p = NULL;
    if (h->fail_alloc_after >= 0 && h->allocs >= h->fail_alloc_after)
        return gf_error_set(GF_E_NOMEM, "host exec: allocation %d refused (test)", h->allocs);
    *p = calloc(1, bytes ? bytes : 1);
    if (!*p)
        return gf_error_set(GF_E_NOMEM, "host exec: out of memory (%zu bytes)", bytes);
    h->allocs++;
    h->live++;
    return GF_OK;
}

static void h_release(gfc_exec *ex, void *p)
{
    if (!p)
        return;
    ((gfc_host_exec *)ex)->live--;
    free(p);
}

static gf_status h_copy(gfc_exec *ex, void *dst, const void *src, size_t bytes)
{
    (void)ex;
    memcpy(dst, src, bytes);
    return GF_OK;
}

static float gemm_w(gfc_mode mode, const void *w, size_t i)
{
    if (mode == GFC_BF16)
        return gfc_bf16_to_f32(((const uint16_t *)w)[i]);
    if (mode == GFC_FP16)
        return gfc_f16_to_f32(((const uint16_t *)w)[i]);
    return ((const float *)w)[i];
}

static float gemm_x(gfc_mode mode, float x)
{
    if (mode == GFC_BF16)
        return gfc_bf16_to_f32(gfc_f32_to_bf16(x));
    if (mode == GFC_FP16)
        return gfc_f16_to_f32(gfc_f32_to_f16(x));
    return x;
}

/* the device's call (gfc_gemm_map), run as a column-major reference GEMM:
 * C (m x n) = op(A) (m x k) op(B) (k x n), A = W, B = x, C = y */
static gf_status h_gemm(gfc_exec *ex, const void *w, int32_t N, int32_t K, const float *x, float *y, int32_t M)
{
    ((gfc_host_exec *)ex)->gemms++;
    const gfc_gemm_call g = gfc_gemm_map(N, K, M);
    for (int32_t j = 0; j < g.n; j++)
        for (int32_t i = 0; i < g.m; i++) {
            double acc = 0.0;
            for (int32_t l = 0; l < g.k; l++) {
                size_t ia = g.trans_a ? (size_t)l + (size_t)i * g.lda : (size_t)i + (size_t)l * g.lda;
                size_t ib = g.trans_b ? (size_t)j + (size_t)l * g.ldb : (size_t)l + (size_t)j * g.ldb;
                acc += (double)gemm_w(ex->mode, w, ia) * gemm_x(ex->mode, x[ib]);
            }
            y[(size_t)i + (size_t)j * g.ldc] = (float)acc;
        }
    return GF_OK;
}

static gf_status h_run(gfc_exec *ex, gfc_kind kind, size_t n, const void *args)
{
    gfc_host_exec *h = (gfc_host_exec *)ex;
    if ((unsigned)kind < GFC_K_COUNT)
        h->runs[kind]++;
    switch (kind) {
    case GFC_K_EMBED:
        for (size_t i = 0; i < n; i++)
            gfc_embed_body(i, args);
        return GF_OK;
    case GFC_K_BIAS_ACT:
        for (size_t i = 0; i < n; i++)
            gfc_bias_act_body(i, args);
        return GF_OK;
    case GFC_K_RESIDUAL:
        for (size_t i = 0; i < n; i++)
            gfc_residual_body(i, args);
        return GF_OK;
    case GFC_K_SWIGLU:
        for (size_t i = 0; i < n; i++)
            gfc_swiglu_body(i, args);
        return GF_OK;
    case GFC_K_ROPE:
        for (size_t i = 0; i < n; i++)
            gfc_rope_body(i, args);
        return GF_OK;
    case GFC_K_KV_WRITE:
        for (size_t i = 0; i < n; i++)
            gfc_kv_write_body(i, args);
        return GF_OK;
    case GFC_K_TO_HALF:
        for (size_t i = 0; i < n; i++)
            gfc_to_half_body(i, args);
        return GF_OK;
    case GFC_K_NORM: {
        float red[GFC_NORM_SMEM];
        for (size_t b = 0; b < n; b++)
            gfc_norm_body((int32_t)b, 0, 1, args, red);
        return GF_OK;
    }
    case GFC_K_ATTENTION: {
        const gfc_attn_args *a = args;
        float *smem = malloc(GFC_ATTN_SMEM(a->dh, a->start + a->T) * sizeof(float));
        if (!smem)
            return gf_error_set(GF_E_NOMEM, "host exec: attention scratch");
        for (size_t b = 0; b < n; b++)
            gfc_attention_body((int32_t)b, 0, 1, a, smem);
        free(smem);
        return GF_OK;
    }
    case GFC_K_SAMPLE: {
        gfc_sample_shared sh;
        for (size_t b = 0; b < n; b++)
            gfc_sample_body((int32_t)b, 0, 1, args, &sh);
        return GF_OK;
    }
    case GFC_K_COUNT: break;
    }
    return gf_error_set(GF_E_INTERNAL, "host exec: unknown kernel %d", (int)kind);
}

void gfc_host_exec_init(gfc_host_exec *h, gfc_mode mode)
{
    memset(h, 0, sizeof *h);
    h->base.mode = mode;
    h->base.max_keys = (size_t)1 << 30;
    h->base.alloc = h_alloc;
    h->base.release = h_release;
    h->base.upload = h_copy;
    h->base.download = h_copy;
    h->base.gemm = h_gemm;
    h->base.run = h_run;
    h->fail_alloc_after = -1;
}
