/* The host-side description of a model: architecture family, hyperparameters
 * and F32 weights. Produced by the engine's loader (engine/model.c) from a
 * Hugging Face directory; consumed by backends through gf_backend_ops.model_load.
 *
 * Layouts are Hugging Face's, row-major F32, as stored on disk after dtype
 * conversion. GPT-2's Conv1D weights are stored [in, out]: y = x @ W + b.
 * Fields a family does not use are NULL / 0. The struct only ever grows at its
 * end; `struct_size` says how much of it the producer filled. */
#ifndef GENFENCE_MODEL_DESC_H
#define GENFENCE_MODEL_DESC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_arch {
    GF_ARCH_GPT2 = 1,  /* learned positions, LayerNorm, GELU MLP, fused qkv */
    GF_ARCH_LLAMA = 2, /* rotary positions, RMSNorm, SwiGLU, grouped-query attention;
                        * Qwen2 is this family with q/k/v biases (config.qkv_bias) */
} gf_arch;

typedef enum gf_activation {
    GF_ACT_GELU_TANH = 1, /* "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    GF_ACT_GELU_ERF = 2,  /* "gelu": 0.5 x (1 + erf(x / sqrt 2)) */
    GF_ACT_RELU = 3,
    GF_ACT_SILU = 4, /* SwiGLU gate (Llama) */
} gf_activation;

typedef enum gf_norm_kind { GF_NORM_LAYERNORM = 1, GF_NORM_RMSNORM = 2 } gf_norm_kind;
typedef enum gf_pos_kind { GF_POS_LEARNED = 1, GF_POS_ROPE = 2 } gf_pos_kind;

/* Hugging Face's rope_scaling.rope_type; the scaling is already folded into
 * gf_model_weights.rope_inv_freq, so a backend never needs to read these. */
typedef enum gf_rope_scaling {
    GF_ROPE_SCALING_NONE = 0,
    GF_ROPE_SCALING_LINEAR = 1, /* inv_freq / factor */
    GF_ROPE_SCALING_LLAMA3 = 2, /* per-frequency blend, see engine/config.c */
    /* added within ABI 2: these two also scale cos and sin by
     * gf_model_desc.rope_attn_factor (GF_MODEL_NEEDS_ROPE_ATTN_FACTOR) */
    GF_ROPE_SCALING_YARN = 3,     /* NTK-by-parts ramp between interpolation and extrapolation */
    GF_ROPE_SCALING_LONGROPE = 4, /* per-frequency factors (short or long, fixed at load) */
    GF_ROPE_SCALING_DYNAMIC = 5,  /* NTK past max_position_embeddings only: within the context the default */
} gf_rope_scaling;

/* What a model needs from a backend beyond plain causal attention and
 * rotate-half RoPE: gf_model_desc.needs. A backend says which it implements
 * in gf_backend_info.model_features; genfence refuses to load a model onto a
 * backend that does not declare every bit the model needs (a backend built
 * before these existed declares none), so nothing is silently ignored. */
typedef enum gf_model_need {
    GF_MODEL_NEEDS_SLIDING_WINDOW = 1u << 0,   /* gf_model_desc.layer_window */
    GF_MODEL_NEEDS_ROPE_ATTN_FACTOR = 1u << 1, /* gf_model_desc.rope_attn_factor */
} gf_model_need;
#define GF_MODEL_NEEDS_KNOWN (GF_MODEL_NEEDS_SLIDING_WINDOW | GF_MODEL_NEEDS_ROPE_ATTN_FACTOR)

typedef struct gf_model_config {
    gf_arch arch;
    gf_activation activation;
    gf_norm_kind norm;
    gf_pos_kind pos;
    int32_t vocab_size;  /* V */
    int32_t n_positions; /* context length: max cache length, rows of wpe */
    int32_t n_embd;      /* D */
    int32_t n_layer;     /* L */
    int32_t n_head;      /* H (query heads) */
    int32_t n_kv_head;   /* H_kv key/value heads; == H without GQA; H % H_kv == 0 */
    int32_t d_head;      /* head_dim when config.json gives it, else D / H */
    int32_t d_ff;        /* MLP inner width (4 D for GPT-2) */
    float norm_eps;      /* layer_norm_epsilon / rms_norm_eps */
    float rope_theta;    /* GF_POS_ROPE only */
    int32_t bos_id;      /* -1 if none */
    int32_t eos_id;      /* -1 if none */
    int32_t tied_head;   /* 1: lm_head == wte */
    /* ABI v2 */
    int32_t qkv_bias;             /* 1: q/k/v projections have biases (Qwen2) */
    gf_rope_scaling rope_scaling; /* informational; folded into rope_inv_freq */
    float rope_factor;            /* rope_scaling.factor (linear, llama3); 0 if none */
} gf_model_config;

typedef struct gf_layer_weights {
    /* GPT-2 (GF_ARCH_GPT2) */
    const float *ln1_w, *ln1_b; /* (D), (D) */
    const float *attn_qkv_w;    /* (D, 3D) [in, out]; columns q | k | v, heads contiguous */
    const float *attn_qkv_b;    /* (3D) */
    const float *attn_proj_w;   /* (D, D) [in, out] */
    const float *attn_proj_b;   /* (D) */
    const float *ln2_w, *ln2_b; /* (D), (D) */
    const float *mlp_fc_w;      /* (D, F) [in, out] */
    const float *mlp_fc_b;      /* (F) */
    const float *mlp_proj_w;    /* (F, D) [in, out] */
    const float *mlp_proj_b;    /* (D) */
    /* Llama family (GF_ARCH_LLAMA), nn.Linear layout [out, in]; NULL for GPT-2 */
    const float *attn_norm_w;   /* (D) */
    const float *wq;            /* (H d_head, D) */
    const float *wk, *wv;       /* (H_kv d_head, D) */
    const float *wo;            /* (D, H d_head) */
    const float *mlp_norm_w;    /* (D) */
    const float *w_gate, *w_up; /* (F, D) */
    const float *w_down;        /* (D, F) */
    /* ABI v2: Qwen2's attention biases; NULL unless config.qkv_bias */
    const float *bq;      /* (H d_head) */
    const float *bk, *bv; /* (H_kv d_head) */
} gf_layer_weights;

typedef struct gf_model_weights {
    const float *wte;               /* (V, D) token embeddings */
    const float *wpe;               /* (n_positions, D) learned positions; NULL for rotary */
    const gf_layer_weights *layers; /* (L) */
    const float *lnf_w, *lnf_b;     /* (D), (D); lnf_b NULL for RMSNorm */
    const float *lm_head;           /* (V, D); == wte when tied */
    /* ABI v2, rotary only (NULL for learned positions): the inverse
     * frequencies with rope_scaling applied, as Hugging Face computes them
     * (float32). Rotate-half layout: for pair i in [0, d_head/2), angle =
     * pos * rope_inv_freq[i] (computed in float32 as HF does:
     * (float)pos * inv_freq), and (x[i], x[i + d_head/2]) is rotated by it. */
    const float *rope_inv_freq; /* (d_head / 2) */
} gf_model_weights;

typedef struct gf_model_desc {
    uint32_t struct_size; /* sizeof(gf_model_desc) as the producer knew it */
    gf_model_config config;
    gf_model_weights weights;
    const char *name; /* e.g. the model directory; informational */
    /* Added within ABI 2 at the end: read only when struct_size covers them
     * (gf_model_desc_has); a shorter desc needs nothing (0 / NULL / 1). */
    uint32_t needs; /* GF_MODEL_NEEDS_* bits */
    /* (L) per layer: 0 = full causal attention; w >= 1 = sliding window: the
     * query at cache index p sees only keys j with p - w < j <= p (w keys, its
     * own included), as transformers' eager / sdpa mask for Mistral and
     * Qwen2 (`j <= p - sliding_window` masked). NULL unless
     * GF_MODEL_NEEDS_SLIDING_WINDOW. */
    const int32_t *layer_window;
    /* The factor transformers multiplies cos and sin by (float32,
     * `attention_scaling`: YaRN's mscale 0.1 ln(factor) + 1 or its
     * attention_factor, longrope's sqrt(1 + ln(factor) / ln(original))), so
     * q and k are each scaled by it after rotation. 1 unless
     * GF_MODEL_NEEDS_ROPE_ATTN_FACTOR. */
    float rope_attn_factor;
    /* 1: every tensor the pointers of `weights` point to stays valid and
     * unchanged until the backend's model_free returns, so a backend may keep
     * those pointers instead of copying (genfence's loader: views into the
     * mapped safetensors, issue 27 item 3). 0 (or a shorter desc): the
     * weights are the caller's only during model_load; copy what you keep.
     * Nothing else of the desc is covered: not the desc itself, its `layers`
     * array, layer_window or name (genfence poisons them after model_load). */
    int32_t weights_persist;
} gf_model_desc;

/* May a backend keep pointers into desc->weights (weights_persist)? */
#define gf_model_desc_weights_persist(desc) (gf_model_desc_has(desc, weights_persist) && (desc)->weights_persist == 1)

/* Does desc carry `field` (struct_size covers it)? */
#define gf_model_desc_has(desc, field) ((desc)->struct_size >= offsetof(gf_model_desc, field) + sizeof((desc)->field))

#ifdef __cplusplus
}
#endif
#endif
