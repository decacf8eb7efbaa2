/* The CUDA backend's forward pass, KV cache and sampler, written against an
 * executor: a small table of memory, GEMM and kernel-launch functions. The
 * module's executor (cuda_backend.c) is CUDA + cuBLAS on the device; the
 * unit test's (cuda_exec_host.c) runs the same kernel bodies (cuda_body.h)
 * on the CPU. Pure C: nothing here includes a CUDA header.
 *
 * Semantics are ref's (backends/ref/ref.c): the offset causal mask, the key
 * mask ANDed with it and the own key always seen, the cache (L, B, H_kv,
 * max_len, d_head) whose length advances once after the last layer,
 * GF_LOGITS_ALL / GF_LOGITS_LAST. */
#ifndef GENFENCE_CUDA_FORWARD_H
#define GENFENCE_CUDA_FORWARD_H

#include "cuda_body.h"
#include "cuda_pack.h"
#include "genfence/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gfc_exec gfc_exec;
struct gfc_exec {
    gfc_mode mode;
    /* most keys one attention block can hold in shared memory */
    size_t max_keys;
    /* executor memory; alloc sets *p NULL on failure; release NULL-safe */
    gf_status (*alloc)(gfc_exec *ex, void **p, size_t bytes);
    void (*release)(gfc_exec *ex, void *p);
    gf_status (*upload)(gfc_exec *ex, void *dst, const void *src, size_t bytes);
    /* waits for the work queued before it */
    gf_status (*download)(gfc_exec *ex, void *dst, const void *src, size_t bytes);
    /* y (M, N) = x (M, K) W^T, W (N, K) row-major in the mode's GEMM dtype */
    gf_status (*gemm)(gfc_exec *ex, const void *w, int32_t N, int32_t K, const float *x, float *y, int32_t M);
    /* kernel `kind` over n elements (element bodies) or n blocks (block
     * bodies); args points to the kind's gfc_*_args */
    gf_status (*run)(gfc_exec *ex, gfc_kind kind, size_t n, const void *args);
};

typedef struct gfc_model {
    gfc_exec *ex; /* not owned */
    gfc_plan plan;
    float *f32; /* executor memory: the F32 image */
    void *gemm; /* executor memory: the GEMM image */
    /* scratch in executor memory, for up to rows_cap rows (grown on demand) */
    size_t rows_cap, mask_cap, kv_tmp_cap;
    float *x, *h, *tmp; /* (R, D) */
    float *qkv;         /* (R, qkv_dim) */
    float *att;         /* (R, q_dim) */
    float *ff;          /* (R, up_dim) */
    float *act;         /* (R, F), Llama's SwiGLU output */
    float *logits;      /* (R, V) */
    int32_t *tok, *pos; /* (R) */
    uint8_t *mask;      /* (mask_cap) */
    float *kv_tmp;      /* uncached forward's throwaway k | v */
} gfc_model;

typedef struct gfc_cache {
    gfc_model *m;
    int32_t B, max_len, length;
    float *k, *v; /* (L, B, H_kv, max_len, d_head) each, executor memory */
} gfc_cache;

/* Lay out, pack and upload desc's weights; *m_out NULL on failure. */
gf_status gfc_model_create(const gf_model_desc *desc, gfc_exec *ex, gfc_model **m_out);
void gfc_model_destroy(gfc_model *m); /* NULL-safe; does not free ex */

gf_status gfc_cache_create(gfc_model *m, int32_t batch, int32_t max_len, gfc_cache **c_out);
void gfc_cache_destroy(gfc_cache *c); /* NULL-safe */
size_t gfc_cache_bytes(const gfc_cache *c);

/* The forward slot (checks the batch as ref does). */
gf_status gfc_forward(gfc_model *m, gfc_cache *c, const gf_batch *in, float *logits_out);
/* forward plus the hidden states at the sublayer boundaries (the trace slot,
 * backend.h; tr NULL: none), downloaded from the executor point by point */
gf_status gfc_forward_trace(gfc_model *m, gfc_cache *c, const gf_batch *in, float *logits_out,
                            const gf_trace_request *tr);

/* The sample slot's body: logits (B, V), u (B, V), params validated. */
gf_status gfc_sample(gfc_exec *ex, const float *logits, int32_t B, int32_t V, const gf_sampler_params *p,
                     const double *u, int32_t *ids_out);

#ifdef __cplusplus
}
#endif
#endif
