/* Host-side pieces of the CUDA backend (see cuda_pack.h): options, checks,
 * the uploaded weight layout. No CUDA here. */
#include "cuda_pack.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_body.h"

/* ---- the option ---- */

static const char *const k_mode_names[] = {"fp32", "tf32", "bf16", "fp16"};

gf_status gfc_parse_config(const char *config, gfc_mode *mode_out)
{
    *mode_out = GFC_FP32;
    if (!config)
        return GF_OK;
    for (int i = 0; i < 4; i++)
        if (!strcmp(config, k_mode_names[i])) {
            *mode_out = (gfc_mode)i;
            return GF_OK;
        }
    return gf_error_set(GF_E_INVALID_ARG,
                        "cuda: unknown option '%s' (in 'cuda:%s'); the options are fp32 (the default), tf32, "
                        "bf16, fp16",
                        config, config);
}

const char *gfc_mode_name(gfc_mode mode) { return (unsigned)mode < 4 ? k_mode_names[mode] : "?"; }

gf_compute_dtype gfc_mode_dtype(gfc_mode mode)
{
    switch (mode) {
    case GFC_BF16: return GF_COMPUTE_BF16;
    case GFC_TF32: return GF_COMPUTE_TF32; /* 11 significant bits as half, fp32's range */
    case GFC_FP16: return GF_COMPUTE_F16;
    case GFC_FP32:
    default: return GF_COMPUTE_F32;
    }
}

size_t gfc_mode_gemm_bytes(gfc_mode mode) { return mode == GFC_BF16 || mode == GFC_FP16 ? 2 : 4; }

/* ---- the plan ---- */

static size_t take(size_t *count, size_t n)
{
    size_t at = (*count + 63) & ~(size_t)63;
    *count = at + n;
    return at;
}

static gfc_lin lin(size_t *gemm, size_t *f32, int32_t N, int32_t K, int bias)
{
    gfc_lin l = {.N = N, .K = K, .b = GFC_NONE};
    l.w = take(gemm, (size_t)N * K);
    if (bias)
        l.b = take(f32, (size_t)N);
    return l;
}

#define NEED(ptr, what)                                                                         \
    do {                                                                                        \
        if (!(ptr)) {                                                                           \
            st = gf_error_set(GF_E_INVALID_ARG, "cuda: the model description has no %s", what); \
            goto fail;                                                                          \
        }                                                                                       \
    } while (0)

gf_status gfc_plan_init(gfc_plan *p, const gf_model_desc *desc, gfc_mode mode)
{
    memset(p, 0, sizeof *p);
    gf_status st = GF_OK;
    if (!desc || desc->struct_size < offsetof(gf_model_desc, name))
        return gf_error_set(GF_E_INVALID_ARG, "cuda: model description missing or too small");
    const gf_model_config *c = &desc->config;
    const int llama = c->arch == GF_ARCH_LLAMA;
    if (c->arch != GF_ARCH_GPT2 && !llama)
        return gf_error_set(GF_E_UNSUPPORTED, "cuda: architecture %d not supported (GPT-2 and the Llama family)",
                            (int)c->arch);
    const int32_t H = c->n_head, Hkv = c->n_kv_head ? c->n_kv_head : c->n_head, dh = c->d_head;
    if (c->n_embd < 1 || H < 1 || Hkv < 1 || dh < 1 || c->n_layer < 1 || c->vocab_size < 1 || c->d_ff < 1 ||
        c->n_positions < 1 || H % Hkv != 0 || (!llama && (dh * H != c->n_embd || Hkv != H)) || (llama && dh % 2 != 0))
        return gf_error_set(GF_E_UNSUPPORTED,
                            "cuda: unsupported shape (D %d, H %d, kv heads %d, d_head %d, L %d, V %d, F %d)", c->n_embd,
                            H, c->n_kv_head, dh, c->n_layer, c->vocab_size, c->d_ff);
    if (!llama && c->activation != GF_ACT_GELU_TANH && c->activation != GF_ACT_GELU_ERF && c->activation != GF_ACT_RELU)
        return gf_error_set(GF_E_UNSUPPORTED, "cuda: GPT-2 activation %d not supported", (int)c->activation);
    if (llama && (c->activation != GF_ACT_SILU || c->norm != GF_NORM_RMSNORM || c->pos != GF_POS_ROPE))
        return gf_error_set(GF_E_UNSUPPORTED,
                            "cuda: a Llama-family model needs SiLU, RMSNorm and rotary positions "
                            "(got activation %d, norm %d, positions %d)",
                            (int)c->activation, (int)c->norm, (int)c->pos);
    p->cfg = *c;
    p->mode = mode;
    p->llama = llama;
    p->V = c->vocab_size, p->D = c->n_embd, p->F = c->d_ff, p->L = c->n_layer;
    p->H = H, p->Hkv = Hkv, p->dh = dh;
    p->cfg.n_kv_head = Hkv;
    p->q_dim = H * dh, p->kv_dim = Hkv * dh, p->qkv_dim = p->q_dim + 2 * p->kv_dim;
    p->up_dim = llama ? 2 * p->F : p->F;
    p->gemm_elem = gfc_mode_gemm_bytes(mode);
    const gf_model_weights *w = &desc->weights;
    const int32_t D = p->D, F = p->F, L = p->L;
    size_t f = 0, g = 0;
    NEED(w->wte, "wte");
    NEED(w->layers, "layers");
    NEED(w->lnf_w, "final norm weight");
    p->wte = take(&f, (size_t)p->V * D);
    p->wpe = GFC_NONE;
    p->lnf_b = p->rope = GFC_NONE;
    if (llama) {
        NEED(w->rope_inv_freq, "rope_inv_freq");
        p->rope = take(&f, (size_t)dh / 2);
    } else {
        NEED(w->wpe, "wpe");
        NEED(w->lnf_b, "final LayerNorm bias");
        p->wpe = take(&f, (size_t)c->n_positions * D);
        p->lnf_b = take(&f, (size_t)D);
    }
    p->lnf_w = take(&f, (size_t)D);
    p->layers = calloc((size_t)L, sizeof *p->layers);
    if (!p->layers) {
        st = gf_error_set(GF_E_NOMEM, "cuda: out of memory");
        goto fail;
    }
    for (int32_t l = 0; l < L; l++) {
        const gf_layer_weights *s = &w->layers[l];
        gfc_layer_plan *d = &p->layers[l];
        if (llama) {
            NEED(s->attn_norm_w && s->mlp_norm_w, "Llama layer norm weight");
            NEED(s->wq && s->wk && s->wv && s->wo, "Llama attention weight");
            NEED(s->w_gate && s->w_up && s->w_down, "Llama MLP weight");
            if (c->qkv_bias)
                NEED(s->bq && s->bk && s->bv, "q/k/v bias (config.qkv_bias)");
            d->norm1_w = take(&f, (size_t)D);
            d->norm2_w = take(&f, (size_t)D);
            d->norm1_b = d->norm2_b = GFC_NONE;
            d->qkv = lin(&g, &f, p->qkv_dim, D, c->qkv_bias);
            d->o = lin(&g, &f, D, p->q_dim, 0);
            d->up = lin(&g, &f, 2 * F, D, 0);
            d->down = lin(&g, &f, D, F, 0);
        } else {
            NEED(s->ln1_w && s->ln1_b && s->ln2_w && s->ln2_b, "GPT-2 LayerNorm weight");
            NEED(s->attn_qkv_w && s->attn_qkv_b && s->attn_proj_w && s->attn_proj_b, "GPT-2 attention weight");
            NEED(s->mlp_fc_w && s->mlp_fc_b && s->mlp_proj_w && s->mlp_proj_b, "GPT-2 MLP weight");
            d->norm1_w = take(&f, (size_t)D);
            d->norm1_b = take(&f, (size_t)D);
            d->norm2_w = take(&f, (size_t)D);
            d->norm2_b = take(&f, (size_t)D);
            d->qkv = lin(&g, &f, 3 * D, D, 1);
            d->o = lin(&g, &f, D, D, 1);
            d->up = lin(&g, &f, F, D, 1);
            d->down = lin(&g, &f, D, F, 1);
        }
    }
    NEED(c->tied_head || w->lm_head, "lm_head");
    p->head = lin(&g, &f, p->V, D, 0);
    p->f32_count = take(&f, 0);
    p->gemm_count = take(&g, 0);
    return GF_OK;
fail:
    gfc_plan_release(p);
    return st;
}

void gfc_plan_release(gfc_plan *p)
{
    if (!p)
        return;
    free(p->layers);
    memset(p, 0, sizeof *p);
}

/* ---- packing ---- */

static void put_f32(float *img, size_t at, const float *src, size_t n)
{
    if (at != GFC_NONE)
        memcpy(img + at, src, n * sizeof *src);
}

/* one GEMM element (row-major (N, K) index i) */
static void put_gemm(const gfc_plan *p, void *img, size_t at, float v)
{
    if (p->mode == GFC_BF16)
        ((uint16_t *)img)[at] = gfc_f32_to_bf16(v);
    else if (p->mode == GFC_FP16)
        ((uint16_t *)img)[at] = gfc_f32_to_f16(v);
    else
        ((float *)img)[at] = v;
}

/* rows [row0, row0 + n_rows) of the (N, K) matrix at lin.w from src:
 * [out, in] rows (n_rows, K) as they are, or [in, out] (K, n_rows) transposed */
static void put_rows(const gfc_plan *p, void *img, const gfc_lin *l, int32_t row0, const float *src, int32_t n_rows,
                     int in_out)
{
    const int32_t K = l->K;
    for (int32_t r = 0; r < n_rows; r++)
        for (int32_t k = 0; k < K; k++) {
            float v = in_out ? src[(size_t)k * n_rows + r] : src[(size_t)r * K + k];
            put_gemm(p, img, l->w + (size_t)(row0 + r) * K + k, v);
        }
}

void gfc_pack(const gfc_plan *p, const gf_model_desc *desc, float *f32_img, void *gemm_img)
{
    const gf_model_weights *w = &desc->weights;
    const int32_t D = p->D, F = p->F;
    memset(f32_img, 0, p->f32_count * sizeof(float));
    memset(gemm_img, 0, p->gemm_count * p->gemm_elem);
    put_f32(f32_img, p->wte, w->wte, (size_t)p->V * D);
    if (p->wpe != GFC_NONE)
        put_f32(f32_img, p->wpe, w->wpe, (size_t)p->cfg.n_positions * D);
    put_f32(f32_img, p->lnf_w, w->lnf_w, (size_t)D);
    if (p->lnf_b != GFC_NONE)
        put_f32(f32_img, p->lnf_b, w->lnf_b, (size_t)D);
    if (p->rope != GFC_NONE)
        put_f32(f32_img, p->rope, w->rope_inv_freq, (size_t)p->dh / 2);
    for (int32_t l = 0; l < p->L; l++) {
        const gf_layer_weights *s = &w->layers[l];
        const gfc_layer_plan *d = &p->layers[l];
        if (p->llama) {
            put_f32(f32_img, d->norm1_w, s->attn_norm_w, (size_t)D);
            put_f32(f32_img, d->norm2_w, s->mlp_norm_w, (size_t)D);
            put_rows(p, gemm_img, &d->qkv, 0, s->wq, p->q_dim, 0);
            put_rows(p, gemm_img, &d->qkv, p->q_dim, s->wk, p->kv_dim, 0);
            put_rows(p, gemm_img, &d->qkv, p->q_dim + p->kv_dim, s->wv, p->kv_dim, 0);
            if (d->qkv.b != GFC_NONE) {
                put_f32(f32_img, d->qkv.b, s->bq, (size_t)p->q_dim);
                put_f32(f32_img, d->qkv.b + p->q_dim, s->bk, (size_t)p->kv_dim);
                put_f32(f32_img, d->qkv.b + p->q_dim + p->kv_dim, s->bv, (size_t)p->kv_dim);
            }
            put_rows(p, gemm_img, &d->o, 0, s->wo, D, 0);
            put_rows(p, gemm_img, &d->up, 0, s->w_gate, F, 0);
            put_rows(p, gemm_img, &d->up, F, s->w_up, F, 0);
            put_rows(p, gemm_img, &d->down, 0, s->w_down, D, 0);
        } else {
            put_f32(f32_img, d->norm1_w, s->ln1_w, (size_t)D);
            put_f32(f32_img, d->norm1_b, s->ln1_b, (size_t)D);
            put_f32(f32_img, d->norm2_w, s->ln2_w, (size_t)D);
            put_f32(f32_img, d->norm2_b, s->ln2_b, (size_t)D);
            put_rows(p, gemm_img, &d->qkv, 0, s->attn_qkv_w, 3 * D, 1);
            put_f32(f32_img, d->qkv.b, s->attn_qkv_b, (size_t)3 * D);
            put_rows(p, gemm_img, &d->o, 0, s->attn_proj_w, D, 1);
            put_f32(f32_img, d->o.b, s->attn_proj_b, (size_t)D);
            put_rows(p, gemm_img, &d->up, 0, s->mlp_fc_w, F, 1);
            put_f32(f32_img, d->up.b, s->mlp_fc_b, (size_t)F);
            put_rows(p, gemm_img, &d->down, 0, s->mlp_proj_w, D, 1);
            put_f32(f32_img, d->down.b, s->mlp_proj_b, (size_t)D);
        }
    }
    const float *head = p->cfg.tied_head || !w->lm_head ? w->wte : w->lm_head;
    put_rows(p, gemm_img, &p->head, 0, head, p->V, 0);
}

/* ---- the GEMM ---- */

gfc_gemm_call gfc_gemm_map(int32_t N, int32_t K, int32_t M)
{
    /* row-major W (N, K) is column-major W^T (K x N), ld K: op T gives W (N x K);
     * row-major x (M, K) is column-major x^T (K x M), ld K; row-major y (M, N)
     * is column-major y^T (N x M), ld N: y^T = W x^T */
    gfc_gemm_call c = {.trans_a = 1, .trans_b = 0, .m = N, .n = M, .k = K, .lda = K, .ldb = K, .ldc = N};
    return c;
}

/* ---- checks ---- */

gf_status gfc_check_cache_args(const gf_model_config *cfg, int32_t batch, int32_t max_len)
{
    if (batch < 1 || max_len < 1 || max_len > cfg->n_positions)
        return gf_error_set(GF_E_INVALID_ARG, "cuda: cache batch %d, max_len %d (must be >= 1 and 1..%d)", batch,
                            max_len, cfg->n_positions);
    return GF_OK;
}

size_t gfc_kv_floats(const gfc_plan *p, int32_t batch, int32_t max_len)
{
    return (size_t)p->L * (size_t)batch * (size_t)p->Hkv * (size_t)max_len * (size_t)p->dh;
}

gf_status gfc_check_batch(const gf_model_config *cfg, int32_t cache_B, int32_t cache_length, int32_t cache_max_len,
                          const gf_batch *in)
{
    if (!in || in->B < 1 || in->T < 1 || !in->tokens || !in->position_ids)
        return gf_error_set(GF_E_INVALID_ARG, "cuda: batch needs B >= 1, T >= 1, tokens and position_ids");
    if (in->logits_mode != GF_LOGITS_ALL && in->logits_mode != GF_LOGITS_LAST)
        return gf_error_set(GF_E_INVALID_ARG, "cuda: unknown logits mode %d", (int)in->logits_mode);
    if (cache_B >= 0 && cache_B != in->B)
        return gf_error_set(GF_E_INVALID_ARG, "cuda: batch has %d rows, cache has %d", in->B, cache_B);
    if (cache_B >= 0 && (int64_t)cache_length + in->T > cache_max_len)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "cuda: cache holds %d of %d positions; %d more do not fit",
                            cache_length, cache_max_len, in->T);
    if (cache_B < 0 && in->T > cfg->n_positions)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "cuda: %d positions exceed n_positions %d", in->T, cfg->n_positions);
    for (int64_t i = 0; i < (int64_t)in->B * in->T; i++) {
        if (in->tokens[i] < 0 || in->tokens[i] >= cfg->vocab_size)
            return gf_error_set(GF_E_INVALID_ARG, "cuda: token %d at (%lld, %lld) outside [0, %d)", in->tokens[i],
                                (long long)(i / in->T), (long long)(i % in->T), cfg->vocab_size);
        if (in->position_ids[i] < 0 || in->position_ids[i] >= cfg->n_positions)
            return gf_error_set(GF_E_INVALID_ARG, "cuda: position %d at (%lld, %lld) outside [0, %d)",
                                in->position_ids[i], (long long)(i / in->T), (long long)(i % in->T), cfg->n_positions);
    }
    return GF_OK;
}
