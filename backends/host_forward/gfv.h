/* Shared host-side pieces of the vendor backends (openblas, onednn): the
 * forward pass of both families (GPT-2; Llama / Qwen2) with every matrix
 * product handed to the backend, and the KV cache. Not used by ref, which
 * stays an independent oracle.
 *
 * Everything here is F32: LayerNorm (two-pass mean / centred variance),
 * RMSNorm (HF's x * rsqrt(mean(x^2) + eps), then * w), GELU / SiLU, the
 * rotary embedding (HF's float32 path: angle = (float)pos * inv_freq, then
 * q cos + rotate_half(q) sin), the attention scores, softmax and the weighted
 * sum of values are computed and accumulated in float. The backends supply
 * the dense products (q/k/v, attention output projection, MLP, LM head),
 * which is where nearly all of the arithmetic is.
 *
 * Semantics are ref's (backends/ref/ref.c): offset causal mask (a query at
 * absolute position start + t sees keys j <= start + t), the key mask ANDed
 * with it and a query always seeing its own key, cache (L, B, H_kv, max_len,
 * d_head) holding the key/value heads only (keys after the rotation),
 * query head h reading key/value head h / (H / H_kv), length advancing once
 * after the last layer, GF_LOGITS_LAST.
 *
 * Compiled into each module with hidden visibility, together with a private
 * copy of engine/status.c: gf_error_set() in a module writes that module's
 * thread-local buffer, which the module hands back through last_error. */
#ifndef GENFENCE_GFV_H
#define GENFENCE_GFV_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One dense product y (M, N) = x (M, K) W + b. The weight is stored either
 * [in, out] = (K, N) row-major (trans_w = 0: GPT-2's Conv1D, and GPT-2's LM
 * head, which gfv_model_init transposes once) or [out, in] = (N, K) row-major
 * (trans_w = 1: the Llama family's nn.Linear weights and LM head, used as
 * Hugging Face stores them). */
typedef struct gfv_lin {
    int32_t K, N;
    const float *w;
    int32_t trans_w;
    const float *b; /* (N) or NULL */
} gfv_lin;

/* Linear ids: 4 per layer, then the LM head. For the Llama family GFV_QKV is
 * q | k | v fused into one product (rows wq, wk, wv), GFV_PROJ is o_proj,
 * GFV_FC is gate | up fused, GFV_MPROJ is down_proj. */
enum { GFV_QKV = 0, GFV_PROJ = 1, GFV_FC = 2, GFV_MPROJ = 3, GFV_PER_LAYER = 4 };
#define GFV_LIN_ID(layer, kind) ((layer)*GFV_PER_LAYER + (kind))
#define GFV_LIN_HEAD(m)         ((m)->cfg.n_layer * GFV_PER_LAYER)

/* GPT-2 uses every field ([in, out] weights). The Llama family: ln1_w is the
 * attention RMSNorm weight, ln2_w the MLP's (no ln*_b); qkv_w (Q + 2 KV, D)
 * with Q = H d_head, KV = H_kv d_head, qkv_b (Q + 2 KV) for Qwen2 else NULL;
 * proj_w (D, Q); fc_w (2F, D) gate rows then up rows; mproj_w (D, F); no
 * proj_b / fc_b / mproj_b. */
typedef struct gfv_layer {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b; /* (D) */
    float *qkv_w, *qkv_b;                 /* (D, 3D), (3D) */
    float *proj_w, *proj_b;               /* (D, D), (D) */
    float *fc_w, *fc_b;                   /* (D, F), (F) */
    float *mproj_w, *mproj_b;             /* (F, D), (D) */
} gfv_layer;

struct gfv_model;

/* The backend's dense product: y (M, lin.N) = x (M, lin.K) W + b for linear
 * `id` of the model. Returns GF_OK or an error recorded with gf_error_set. */
typedef gf_status (*gfv_linear_fn)(struct gfv_model *m, int32_t id, const float *x, float *y, int32_t M);

typedef struct gfv_model {
    const char *backend;   /* "openblas", for messages */
    gf_model_config cfg;   /* n_kv_head set (== n_head for GPT-2) */
    int32_t q_dim, kv_dim; /* H d_head, H_kv d_head */
    float *wte, *wpe;      /* (V, D), (n_positions, D); wpe NULL for rotary */
    float *lnf_w, *lnf_b;  /* (D); lnf_b NULL for RMSNorm */
    float *lm_head;        /* (V, D); aliases wte when tied */
    float *lm_head_kn;     /* GPT-2: (D, V), the LM head transposed, what lin[head] uses */
    float *rope_inv_freq;  /* (d_head / 2); rotary only */
    float rope_mscale;     /* cos, sin times it (YaRN, longrope); 1 */
    int32_t *layer_window; /* (L) sliding window per layer, 0 = full; NULL = none */
    gfv_layer *layers;     /* (L) */
    gfv_lin *lin;          /* (4 L + 1), see GFV_LIN_ID */
    int32_t n_lin;
    gfv_linear_fn linear;
    /* scratch, grown on demand (calls on one model are serialised) */
    size_t scratch_rows;
    float *x, *h, *qkv, *att, *tmp, *ff; /* (rows, D | Q + 2 KV | Q | D | F or 2F) */
    float *cs;                           /* (rows, d_head): cos | sin of each position; rotary only */
    float *p;                            /* (n_positions) */
    float *kv_tmp;                       /* uncached forward's throwaway cache */
    size_t kv_tmp_floats;
} gfv_model;

/* The GF_MODEL_NEEDS_* bits the host forward implements (gf_backend_info.model_features) */
#define GFV_MODEL_FEATURES (GF_MODEL_NEEDS_SLIDING_WINDOW | GF_MODEL_NEEDS_ROPE_ATTN_FACTOR)

typedef struct gfv_cache {
    const gfv_model *m;
    int32_t B, max_len, length;
    float *k, *v; /* (L, B, H_kv, max_len, d_head) each */
} gfv_cache;

/* Copy desc into m (GPT-2 or the Llama family; F32, HF layouts) and fill
 * m->lin. m must be zeroed; backend is the name used in messages. */
gf_status gfv_model_init(gfv_model *m, const gf_model_desc *desc, const char *backend, gfv_linear_fn linear);
void gfv_model_release(gfv_model *m); /* frees what gfv_model_init allocated */

/* KV cache slots, usable directly in gf_backend_ops (model is a pointer to a
 * struct whose first member is a gfv_model). */
gf_status gfv_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out);
gf_status gfv_cache_reset(void *cache);
void gfv_cache_free(void *cache);
int32_t gfv_cache_length(const void *cache);
size_t gfv_cache_bytes(const void *cache);

/* The forward slot's body: checks the batch as ref does, then runs the model
 * with m->linear for every dense product. */
gf_status gfv_forward(gfv_model *m, gfv_cache *cache, const gf_batch *in, float *logits_out);

/* The module's own last message (its private copy of status.c). */
const char *gfv_last_error(void *model);

/* Number of online CPUs (>= 1). */
int gfv_online_cpus(void);

#ifdef __cplusplus
}
#endif
#endif
