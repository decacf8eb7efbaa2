/* ref's internal shapes, shared by its two files: ref.c (the model and its
 * KV cache: loading, lifetimes, the ops table) and ref_forward.c (the forward
 * passes). Not part of any interface: ref.h is. */
#ifndef GENFENCE_REF_MODEL_H
#define GENFENCE_REF_MODEL_H

#include "ref.h"
#include "ref_pool.h"

/* ---- lifetime 1: the model (weights transposed to [out, in] rows) ---- */

typedef struct ref_layer {
    float *ln1_w, *ln1_b; /* (D) */
    float *qkv_w;         /* (3D, D) */
    float *qkv_b;         /* (3D) */
    float *proj_w;        /* (D, D) */
    float *proj_b;        /* (D) */
    float *ln2_w, *ln2_b; /* (D) */
    float *fc_w;          /* (F, D) */
    float *fc_b;          /* (F) */
    float *mproj_w;       /* (D, F) */
    float *mproj_b;       /* (D) */
    /* Llama family ([out, in] as stored); Qwen2's q/k/v biases or NULL */
    float *attn_norm, *mlp_norm; /* (D) */
    float *wq;                   /* (H dh, D) */
    float *wk, *wv;              /* (H_kv dh, D) */
    float *bq;                   /* (H dh) */
    float *bk, *bv;              /* (H_kv dh) */
    float *wo;                   /* (D, H dh) */
    float *w_gate, *w_up;        /* (F, D) */
    float *w_down;               /* (D, F) */
} ref_layer;

typedef struct ref_model {
    gf_model_config cfg;
    float *wte;           /* (V, D) */
    float *wpe;           /* (n_positions, D); NULL for rotary */
    float *inv_freq;      /* (dh / 2) rotary inverse frequencies; NULL for GPT-2 */
    float rope_mscale;    /* cos, sin times it (YaRN, longrope); 1 */
    int32_t *window;      /* (L) per-layer sliding window, 0 = full; NULL = none */
    ref_layer *layers;    /* (L) */
    float *lnf_w, *lnf_b; /* (D) */
    float *lm_head;       /* (V, D); aliases wte when tied */
    ref_pool *pool;       /* opts->threads workers, the caller included */
} ref_model;

/* ---- lifetime 2: the KV cache ---- */

typedef struct ref_cache {
    const ref_model *m;
    int32_t B, max_len, length;
    float *k, *v; /* (L, B, H_kv, max_len, d_head) each; H_kv = H for GPT-2 */
} ref_cache;

/* ref_forward.c: the ops table's forward slot */
gf_status gf_ref_forward(void *model, void *cache, const gf_batch *in, float *logits_out);

/* ref.c: the ops table's cache_create slot (an uncached forward makes a
 * throwaway cache of exactly T positions with it) */
gf_status gf_ref_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out);

#endif
