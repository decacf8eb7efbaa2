/* Host-side pieces of the CUDA backend that need no CUDA: the backend option
 * (compute type), the checks ref makes on a model, a cache and a batch, and
 * the layout of the weights the backend uploads. Pure C11, so the unit test
 * (tests/unit/test_cuda_host.c) links it on a machine without CUDA.
 *
 * The device holds two weight images, each one allocation:
 *   - the F32 image: embeddings, norm weights and biases, every bias, the
 *     rotary inverse frequencies;
 *   - the GEMM image: every matrix of a dense product, row-major [out, in]
 *     (N, K), in the GEMM input dtype of the mode (F32 for fp32 / tf32,
 *     bfloat16 or IEEE half for bf16 / fp16, rounded to nearest even).
 * GPT-2's Conv1D weights ([in, out]) are transposed to [out, in]; the Llama
 * family's q, k, v rows are stacked into one (q_dim + 2 kv_dim, D) matrix and
 * gate, up into one (2F, D), so each block is one product. Offsets are in
 * elements of their image, each tensor starting on a 64-element boundary. */
#ifndef GENFENCE_CUDA_PACK_H
#define GENFENCE_CUDA_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The compute type chosen by the backend option (`cuda:OPTION`). */
typedef enum gfc_mode {
    GFC_FP32 = 0, /* `cuda`, `cuda:fp32`: F32 GEMMs, CUBLAS_COMPUTE_32F, no TF32 */
    GFC_TF32 = 1, /* `cuda:tf32`: F32 storage, CUBLAS_COMPUTE_32F_FAST_TF32 */
    GFC_BF16 = 2, /* `cuda:bf16`: bfloat16 GEMM inputs, F32 accumulation and output */
    GFC_FP16 = 3, /* `cuda:fp16`: IEEE half GEMM inputs, F32 accumulation and output */
} gfc_mode;

/* config NULL or "fp32" -> GFC_FP32; "tf32", "bf16", "fp16"; anything else
 * GF_E_INVALID_ARG naming it and the accepted options. */
gf_status gfc_parse_config(const char *config, gfc_mode *mode_out);
const char *gfc_mode_name(gfc_mode mode); /* "fp32", "tf32", ... */
/* The dtype the gate scales its ULP by (tf32: GF_COMPUTE_TF32). */
gf_compute_dtype gfc_mode_dtype(gfc_mode mode);
size_t gfc_mode_gemm_bytes(gfc_mode mode); /* 4, or 2 for bf16 / fp16 */

#define GFC_NONE SIZE_MAX /* offset of an absent tensor */

/* y (M, N) = x (M, K) W^T (+ b): W at gemm offset w, (N, K) row-major. */
typedef struct gfc_lin {
    size_t w;
    int32_t N, K;
    size_t b; /* f32 offset of (N) or GFC_NONE */
} gfc_lin;

typedef struct gfc_layer_plan {
    size_t norm1_w, norm1_b; /* (D); b GFC_NONE for RMSNorm */
    size_t norm2_w, norm2_b;
    gfc_lin qkv;  /* (q_dim + 2 kv_dim, D): rows q | k | v, heads contiguous */
    gfc_lin o;    /* (D, q_dim) */
    gfc_lin up;   /* GPT-2: fc (F, D); Llama: gate | up (2F, D) */
    gfc_lin down; /* (D, F) */
} gfc_layer_plan;

typedef struct gfc_plan {
    gf_model_config cfg;
    gfc_mode mode;
    int32_t llama; /* 1: RMSNorm, rotary, SwiGLU, GQA */
    int32_t V, D, F, L, H, Hkv, dh;
    int32_t q_dim, kv_dim, qkv_dim; /* H dh, H_kv dh, q_dim + 2 kv_dim */
    int32_t up_dim;                 /* rows of the up product: F (GPT-2) or 2F (Llama) */
    size_t wte, wpe;                /* f32: (V, D), (n_positions, D) or GFC_NONE */
    size_t lnf_w, lnf_b;            /* f32: (D); b GFC_NONE for RMSNorm */
    size_t rope;                    /* f32: (dh / 2) or GFC_NONE */
    gfc_lin head;                   /* gemm: (V, D) */
    gfc_layer_plan *layers;         /* (L) */
    size_t f32_count;               /* elements of the F32 image */
    size_t gemm_count;              /* elements of the GEMM image */
    size_t gemm_elem;               /* bytes per GEMM element */
} gfc_plan;

/* Check desc (GPT-2, or the Llama family) and lay out its weights. On error
 * *p is zeroed and the message says what is wrong (GF_E_UNSUPPORTED for a
 * model this backend does not run, GF_E_INVALID_ARG for a missing weight). */
gf_status gfc_plan_init(gfc_plan *p, const gf_model_desc *desc, gfc_mode mode);
void gfc_plan_release(gfc_plan *p); /* NULL-safe */

/* Fill the two host images (f32: f32_count floats; gemm: gemm_count *
 * gemm_elem bytes) from desc, which must be the one the plan was made from.
 * Padding between tensors is zero. */
void gfc_pack(const gfc_plan *p, const gf_model_desc *desc, float *f32_img, void *gemm_img);

/* The column-major (cuBLAS) call computing row-major y (M, N) = x (M, K) W^T
 * for W (N, K) row-major: C = op(A) op(B) with A = W, B = x, C = y. The
 * device executor passes it to cublasGemmEx; the host twin runs a
 * column-major reference GEMM on the same numbers, so the unit test checks
 * the mapping. */
typedef struct gfc_gemm_call {
    int32_t trans_a, trans_b; /* 1: CUBLAS_OP_T */
    int32_t m, n, k, lda, ldb, ldc;
} gfc_gemm_call;
gfc_gemm_call gfc_gemm_map(int32_t N, int32_t K, int32_t M);

/* KV cache arguments: batch >= 1, 1 <= max_len <= n_positions. */
gf_status gfc_check_cache_args(const gf_model_config *cfg, int32_t batch, int32_t max_len);
/* Floats of one of k, v: (L, B, H_kv, max_len, d_head). */
size_t gfc_kv_floats(const gfc_plan *p, int32_t batch, int32_t max_len);

/* The batch checks ref makes (same statuses): cache_B < 0 means uncached. */
gf_status gfc_check_batch(const gf_model_config *cfg, int32_t cache_B, int32_t cache_length, int32_t cache_max_len,
                          const gf_batch *in);

#ifdef __cplusplus
}
#endif
#endif
