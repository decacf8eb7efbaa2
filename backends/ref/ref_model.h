/* ref's internal shapes, shared by its two files: ref.c (the model and its
 * KV cache: loading, lifetimes, the ops table) and ref_forward.c (the forward
 * passes). Not part of any interface: ref.h is. */
#ifndef GENFENCE_REF_MODEL_H
#define GENFENCE_REF_MODEL_H

#include "ref.h"
#include "ref_pool.h"

/* ---- lifetime 1: the model ----
 * Weights in the layouts the desc gives (GPT-2's Conv1D [in, out], the Llama
 * family's nn.Linear [out, in]): views into the desc's weights when the
 * engine keeps them until model_free (gf_model_desc_weights_persist: the
 * mapped safetensors, no second copy), else copies ref owns (owns_weights). */

typedef struct ref_layer {
    const float *ln1_w, *ln1_b; /* (D) */
    const float *qkv_w;         /* (D, 3D) [in, out] */
    const float *qkv_b;         /* (3D) */
    const float *proj_w;        /* (D, D) [in, out] */
    const float *proj_b;        /* (D) */
    const float *ln2_w, *ln2_b; /* (D) */
    const float *fc_w;          /* (D, F) [in, out] */
    const float *fc_b;          /* (F) */
    const float *mproj_w;       /* (F, D) [in, out] */
    const float *mproj_b;       /* (D) */
    /* Llama family ([out, in] as stored); Qwen2's q/k/v biases or NULL */
    const float *attn_norm, *mlp_norm; /* (D) */
    const float *wq;                   /* (H dh, D) */
    const float *wk, *wv;              /* (H_kv dh, D) */
    const float *bq;                   /* (H dh) */
    const float *bk, *bv;              /* (H_kv dh) */
    const float *wo;                   /* (D, H dh) */
    const float *w_gate, *w_up;        /* (F, D) */
    const float *w_down;               /* (D, F) */
} ref_layer;

typedef struct ref_model {
    gf_model_config cfg;
    int owns_weights;           /* 1: the weight pointers below are ref's copies (freed by model_free) */
    const float *wte;           /* (V, D) */
    const float *wpe;           /* (n_positions, D); NULL for rotary */
    float *inv_freq;            /* (dh / 2) rotary inverse frequencies (always ref's copy); NULL for GPT-2 */
    float rope_mscale;          /* cos, sin times it (YaRN, longrope); 1 */
    int32_t *window;            /* (L) per-layer sliding window, 0 = full; NULL = none */
    ref_layer *layers;          /* (L) */
    const float *lnf_w, *lnf_b; /* (D) */
    const float *lm_head;       /* (V, D) [out, in]; aliases wte when tied */
    ref_pool *pool;             /* opts->threads workers, the caller included */
    /* GPT-2's [in, out] products of one row (ref_forward.c, linear_kn1_chunk);
     * calls on one model are serialised, so one set per model */
    int32_t kn_nmax, kn_kmax; /* the largest N and K of a layer product */
    int32_t kn_cols;          /* column chunks per lane: 1 up to 8 threads, then ceil(threads / 8) */
    double *kn_acc;           /* (8, kn_nmax) the row's partial sums, lane-major */
    /* every product's operands in double (ref_forward.c, linear_chunk and
     * linear_kn_chunk), per pool thread, 64-byte aligned: REF_RB rows of x,
     * then four rows of W or a tile of REF_KN_TILE columns of W, each row
     * d_kpad = max K rounded up to 8 doubles */
    int32_t d_kpad;
    double *dscratch; /* (threads, REF_RB + REF_KN_TILE, d_kpad) */
} ref_model;

#define REF_KN_TILE 16 /* outputs gathered per tile (several rows) */
#define REF_RB      16 /* rows of x per block */

static inline double *ref_dscratch(const ref_model *m, int thread)
{
    return m->dscratch + (size_t)thread * (REF_RB + REF_KN_TILE) * m->d_kpad;
}

/* ---- lifetime 2: the KV cache ---- */

typedef struct ref_cache {
    const ref_model *m;
    int32_t B, max_len, length;
    float *k, *v; /* (L, B, H_kv, max_len, d_head) each; H_kv = H for GPT-2 */
} ref_cache;

/* ref_forward.c: the ops table's forward slot */
gf_status gf_ref_forward(void *model, void *cache, const gf_batch *in, float *logits_out);
/* forward plus the hidden states at the sublayer boundaries (the trace slot; tr NULL: none) */
gf_status gf_ref_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                               const gf_trace_request *tr);

/* ref.c: the ops table's cache_create slot (an uncached forward makes a
 * throwaway cache of exactly T positions with it) */
gf_status gf_ref_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out);

#endif
