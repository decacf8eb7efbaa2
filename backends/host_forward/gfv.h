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

/* Linear ids: GFV_PER_LAYER per layer, then the LM head. GPT-2 uses GFV_QKV
 * (its fused c_attn, as the file holds it), GFV_PROJ, GFV_FC and GFV_MPROJ.
 * The Llama family keeps each of its weights as the file holds it (no fused
 * copy, issue 27 item 3): GFV_QKV is q_proj, GFV_K k_proj, GFV_V v_proj (their
 * outputs side by side: one (rows, Q + 2 KV) result, gfv_forward's
 * linear_cat), GFV_PROJ o_proj, GFV_FC gate_proj and GFV_UP up_proj (one
 * (rows, 2F) gate | up result), GFV_MPROJ down_proj. A linear a family does
 * not use has w NULL and N 0: a backend skips it. */
enum { GFV_QKV = 0, GFV_PROJ = 1, GFV_FC = 2, GFV_MPROJ = 3, GFV_K = 4, GFV_V = 5, GFV_UP = 6, GFV_PER_LAYER = 7 };
#define GFV_LIN_ID(layer, kind) ((layer)*GFV_PER_LAYER + (kind))
#define GFV_LIN_HEAD(m)         ((m)->cfg.n_layer * GFV_PER_LAYER)

/* GPT-2 uses every field ([in, out] weights). The Llama family: ln1_w is the
 * attention RMSNorm weight, ln2_w the MLP's (no ln*_b); its projections are
 * in m->lin only. The pointers are views into the desc's weights when the
 * engine keeps them until model_free (gf_model_desc_weights_persist), else
 * copies the model owns (gfv_model.owns_weights). */
typedef struct gfv_layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b; /* (D) */
    const float *qkv_w, *qkv_b;                 /* (D, 3D), (3D) */
    const float *proj_w, *proj_b;               /* (D, D), (D) */
    const float *fc_w, *fc_b;                   /* (D, F), (F) */
    const float *mproj_w, *mproj_b;             /* (F, D), (D) */
    /* the Llama family ([out, in]); Qwen2's biases or NULL */
    const float *wq, *wk, *wv, *bq, *bk, *bv; /* (Q, D), (KV, D) x2, (Q), (KV) x2 */
    const float *wo;                          /* (D, Q) */
    const float *w_gate, *w_up, *w_down;      /* (F, D) x2, (D, F) */
} gfv_layer;

struct gfv_model;

/* The backend's dense product: y (M, lin.N) = x (M, lin.K) W + b for linear
 * `id` of the model. Returns GF_OK or an error recorded with gf_error_set. */
typedef gf_status (*gfv_linear_fn)(struct gfv_model *m, int32_t id, const float *x, float *y, int32_t M);

typedef struct gfv_model {
    const char *backend;        /* "openblas", for messages */
    gf_model_config cfg;        /* n_kv_head set (== n_head for GPT-2) */
    int32_t q_dim, kv_dim;      /* H d_head, H_kv d_head */
    int owns_weights;           /* 1: the weight pointers are copies this model frees */
    const float *wte, *wpe;     /* (V, D), (n_positions, D); wpe NULL for rotary */
    const float *lnf_w, *lnf_b; /* (D); lnf_b NULL for RMSNorm */
    const float *lm_head;       /* (V, D) [out, in]; aliases wte when tied; lin[head] uses it as is */
    float *rope_inv_freq;       /* (d_head / 2); rotary only (always a copy) */
    float rope_mscale;          /* cos, sin times it (YaRN, longrope); 1 */
    int32_t *layer_window;      /* (L) sliding window per layer, 0 = full; NULL = none */
    gfv_layer *layers;          /* (L) */
    gfv_lin *lin;               /* (4 L + 1), see GFV_LIN_ID */
    int32_t n_lin;
    gfv_linear_fn linear;
    /* scratch, grown on demand (calls on one model are serialised) */
    size_t scratch_rows;
    float *x, *h, *qkv, *att, *tmp, *ff; /* (rows, D | Q + 2 KV | Q | D | F or 2F) */
    float *part;                         /* (rows, max(Q, F)): one part of a side-by-side product; Llama only */
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

/* desc into m (GPT-2 or the Llama family; F32, HF layouts: views where the
 * desc's weights persist, else copies) and fill m->lin. m must be zeroed;
 * backend is the name used in messages. */
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
/* forward plus the hidden states at the sublayer boundaries (the trace slot, backend.h; tr NULL: none) */
gf_status gfv_forward_trace(gfv_model *m, gfv_cache *cache, const gf_batch *in, float *logits_out,
                            const gf_trace_request *tr);

/* The module's own last message (its private copy of status.c). */
const char *gfv_last_error(void *model);

/* Number of online CPUs (>= 1). */
int gfv_online_cpus(void);

#ifdef __cplusplus
}
#endif
#endif
