/* Shared host-side forward pass of the vendor backends (see gfv.h). */
#include "gfv.h"
#include "gfv_act.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the model ---- */

static float *dup_f32(const float *src, size_t n)
{
    if (!src)
        return NULL;
    float *dst = malloc(n * sizeof *dst);
    if (dst)
        memcpy(dst, src, n * sizeof *dst);
    return dst;
}

/* A weight as the model keeps it: the desc's own pointer where the engine
 * keeps the weights until model_free (no copy), else a copy. */
static const float *take_f32(const gfv_model *m, const float *src, size_t n)
{
    return m->owns_weights ? dup_f32(src, n) : src;
}

static void release(const float *p, int owned)
{
    if (owned)
        free((void *)p);
}

static void scratch_release(gfv_model *m)
{
    free(m->x);
    free(m->h);
    free(m->qkv);
    free(m->att);
    free(m->tmp);
    free(m->ff);
    free(m->part);
    free(m->p);
    free(m->cs);
    free(m->kv_tmp);
    m->x = m->h = m->qkv = m->att = m->tmp = m->ff = m->part = m->p = m->cs = m->kv_tmp = NULL;
    m->scratch_rows = 0;
    m->kv_tmp_floats = 0;
}

void gfv_model_release(gfv_model *m)
{
    if (!m)
        return;
    const int own = m->owns_weights;
    for (int32_t l = 0; m->layers && l < m->cfg.n_layer; l++) {
        gfv_layer *ly = &m->layers[l];
        const float *all[] = {ly->ln1_w,  ly->ln1_b,  ly->ln2_w, ly->ln2_b, ly->qkv_w,   ly->qkv_b,
                              ly->proj_w, ly->proj_b, ly->fc_w,  ly->fc_b,  ly->mproj_w, ly->mproj_b,
                              ly->wq,     ly->wk,     ly->wv,    ly->bq,    ly->bk,      ly->bv,
                              ly->wo,     ly->w_gate, ly->w_up,  ly->w_down};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            release(all[i], own);
    }
    free(m->layers);
    if (m->lm_head != m->wte)
        release(m->lm_head, own);
    release(m->wte, own);
    release(m->wpe, own);
    release(m->lnf_w, own);
    release(m->lnf_b, own);
    free(m->rope_inv_freq);
    free(m->layer_window);
    m->layer_window = NULL;
    free(m->lin);
    scratch_release(m);
    m->layers = NULL;
    m->lin = NULL;
    m->wte = m->wpe = m->lnf_w = m->lnf_b = m->lm_head = NULL;
    m->rope_inv_freq = NULL;
}

/* The Llama family (Qwen2 = with q/k/v biases): every weight as HF stores it
 * ([out, in]), q | k | v and gate | up side by side in the result (not fused
 * copies: gfv_forward's linear_cat), so a decode step reads each weight once. */
static gf_status init_llama(gfv_model *m, const gf_model_desc *desc)
{
    const char *be = m->backend;
    const gf_model_config *c = &desc->config;
    if (c->norm != GF_NORM_RMSNORM || c->pos != GF_POS_ROPE)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: Llama family needs RMSNorm and rotary positions (norm %d, pos %d)",
                            be, (int)c->norm, (int)c->pos);
    if (c->activation != GF_ACT_SILU && c->activation != GF_ACT_GELU_TANH && c->activation != GF_ACT_GELU_ERF &&
        c->activation != GF_ACT_RELU)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: activation %d not supported", be, (int)c->activation);
    if (c->n_embd < 1 || c->n_head < 1 || c->n_kv_head < 1 || c->n_head % c->n_kv_head || c->d_head < 2 ||
        c->d_head % 2 || c->n_layer < 1 || c->vocab_size < 1 || c->d_ff < 1 || c->n_positions < 1)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: unsupported shape (D %d, H %d, kv heads %d, d_head %d, L %d, V %d, F %d)", be,
                            c->n_embd, c->n_head, c->n_kv_head, c->d_head, c->n_layer, c->vocab_size, c->d_ff);
    const gf_model_weights *w = &desc->weights;
    if (!w->rope_inv_freq || !w->layers)
        return gf_error_set(GF_E_INVALID_ARG, "%s: Llama model description without %s", be,
                            w->layers ? "rope_inv_freq" : "layers");
    m->cfg = *c;
    m->owns_weights = !gf_model_desc_weights_persist(desc);
    const int32_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, L = c->n_layer;
    const size_t Q = (size_t)c->n_head * c->d_head, KV = (size_t)c->n_kv_head * c->d_head;
    m->q_dim = (int32_t)Q;
    m->kv_dim = (int32_t)KV;
    m->wte = take_f32(m, w->wte, (size_t)V * D);
    m->lnf_w = take_f32(m, w->lnf_w, D);
    m->lm_head = (c->tied_head || w->lm_head == w->wte) ? m->wte : take_f32(m, w->lm_head, (size_t)V * D);
    m->rope_inv_freq = dup_f32(w->rope_inv_freq, (size_t)c->d_head / 2);
    m->rope_mscale =
        gf_model_desc_has(desc, rope_attn_factor) && desc->rope_attn_factor > 0.0f ? desc->rope_attn_factor : 1.0f;
    if (gf_model_desc_has(desc, layer_window) && desc->layer_window) {
        if (!(m->layer_window = malloc((size_t)L * sizeof *m->layer_window)))
            return gf_error_set(GF_E_NOMEM, "%s: out of memory", be);
        memcpy(m->layer_window, desc->layer_window, (size_t)L * sizeof *m->layer_window);
    }
    m->layers = calloc((size_t)L, sizeof *m->layers);
    m->n_lin = L * GFV_PER_LAYER + 1;
    m->lin = calloc((size_t)m->n_lin, sizeof *m->lin);
    int ok = m->wte && m->lnf_w && m->lm_head && m->rope_inv_freq && m->layers && m->lin;
    for (int32_t l = 0; ok && l < L; l++) {
        const gf_layer_weights *s = &w->layers[l];
        gfv_layer *d = &m->layers[l];
        d->ln1_w = take_f32(m, s->attn_norm_w, D);
        d->ln2_w = take_f32(m, s->mlp_norm_w, D);
        d->wq = take_f32(m, s->wq, Q * D);
        d->wk = take_f32(m, s->wk, KV * D);
        d->wv = take_f32(m, s->wv, KV * D);
        if (c->qkv_bias) {
            d->bq = take_f32(m, s->bq, Q);
            d->bk = take_f32(m, s->bk, KV);
            d->bv = take_f32(m, s->bv, KV);
        }
        d->wo = take_f32(m, s->wo, (size_t)D * Q);
        d->w_gate = take_f32(m, s->w_gate, (size_t)F * D);
        d->w_up = take_f32(m, s->w_up, (size_t)F * D);
        d->w_down = take_f32(m, s->w_down, (size_t)D * F);
        ok = d->ln1_w && d->ln2_w && d->wq && d->wk && d->wv && (!c->qkv_bias || (d->bq && d->bk && d->bv)) && d->wo &&
             d->w_gate && d->w_up && d->w_down;
        if (!ok)
            break;
        m->lin[GFV_LIN_ID(l, GFV_QKV)] = (gfv_lin){D, (int32_t)Q, d->wq, 1, d->bq};
        m->lin[GFV_LIN_ID(l, GFV_K)] = (gfv_lin){D, (int32_t)KV, d->wk, 1, d->bk};
        m->lin[GFV_LIN_ID(l, GFV_V)] = (gfv_lin){D, (int32_t)KV, d->wv, 1, d->bv};
        m->lin[GFV_LIN_ID(l, GFV_PROJ)] = (gfv_lin){(int32_t)Q, D, d->wo, 1, NULL};
        m->lin[GFV_LIN_ID(l, GFV_FC)] = (gfv_lin){D, F, d->w_gate, 1, NULL};
        m->lin[GFV_LIN_ID(l, GFV_UP)] = (gfv_lin){D, F, d->w_up, 1, NULL};
        m->lin[GFV_LIN_ID(l, GFV_MPROJ)] = (gfv_lin){F, D, d->w_down, 1, NULL};
    }
    if (!ok) {
        gfv_model_release(m);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory (or a NULL weight) loading the model", be);
    }
    /* the LM head (V, D) [out, in] in place: no transposed copy of a large head */
    m->lin[GFV_LIN_HEAD(m)] = (gfv_lin){D, V, m->lm_head, 1, NULL};
    return GF_OK;
}

gf_status gfv_model_init(gfv_model *m, const gf_model_desc *desc, const char *backend, gfv_linear_fn linear)
{
    m->backend = backend;
    m->linear = linear;
    if (!desc || desc->struct_size < offsetof(gf_model_desc, name))
        return gf_error_set(GF_E_INVALID_ARG, "%s: model description missing or too small", backend);
    const gf_model_config *c = &desc->config;
    if (c->arch == GF_ARCH_LLAMA)
        return init_llama(m, desc);
    if (c->arch != GF_ARCH_GPT2)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: architecture %d not supported (GPT-2, Llama)", backend,
                            (int)c->arch);
    if (c->activation != GF_ACT_GELU_TANH && c->activation != GF_ACT_GELU_ERF && c->activation != GF_ACT_RELU)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: activation %d not supported", backend, (int)c->activation);
    if (c->n_embd < 1 || c->n_head < 1 || c->n_layer < 1 || c->vocab_size < 1 || c->d_ff < 1 || c->n_positions < 1 ||
        c->d_head * c->n_head != c->n_embd || (c->n_kv_head && c->n_kv_head != c->n_head))
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: unsupported shape (D %d, H %d, kv heads %d, d_head %d, L %d, V %d, F %d)", backend,
                            c->n_embd, c->n_head, c->n_kv_head, c->d_head, c->n_layer, c->vocab_size, c->d_ff);
    m->cfg = *c;
    m->cfg.n_kv_head = c->n_head;
    m->owns_weights = !gf_model_desc_weights_persist(desc);
    m->q_dim = m->kv_dim = c->n_embd;
    const int32_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, L = c->n_layer;
    const gf_model_weights *w = &desc->weights;
    m->wte = take_f32(m, w->wte, (size_t)V * D);
    m->wpe = take_f32(m, w->wpe, (size_t)c->n_positions * D);
    m->lnf_w = take_f32(m, w->lnf_w, D);
    m->lnf_b = take_f32(m, w->lnf_b, D);
    m->lm_head = (c->tied_head || w->lm_head == w->wte) ? m->wte : take_f32(m, w->lm_head, (size_t)V * D);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    m->n_lin = L * GFV_PER_LAYER + 1;
    m->lin = calloc((size_t)m->n_lin, sizeof *m->lin);
    int ok = m->wte && m->wpe && m->lnf_w && m->lnf_b && m->lm_head && m->layers && m->lin;
    for (int32_t l = 0; ok && l < L; l++) {
        const gf_layer_weights *s = &w->layers[l];
        gfv_layer *d = &m->layers[l];
        d->ln1_w = take_f32(m, s->ln1_w, D);
        d->ln1_b = take_f32(m, s->ln1_b, D);
        d->ln2_w = take_f32(m, s->ln2_w, D);
        d->ln2_b = take_f32(m, s->ln2_b, D);
        d->qkv_w = take_f32(m, s->attn_qkv_w, (size_t)D * 3 * D);
        d->qkv_b = take_f32(m, s->attn_qkv_b, (size_t)3 * D);
        d->proj_w = take_f32(m, s->attn_proj_w, (size_t)D * D);
        d->proj_b = take_f32(m, s->attn_proj_b, D);
        d->fc_w = take_f32(m, s->mlp_fc_w, (size_t)D * F);
        d->fc_b = take_f32(m, s->mlp_fc_b, F);
        d->mproj_w = take_f32(m, s->mlp_proj_w, (size_t)F * D);
        d->mproj_b = take_f32(m, s->mlp_proj_b, D);
        ok = d->ln1_w && d->ln1_b && d->ln2_w && d->ln2_b && d->qkv_w && d->qkv_b && d->proj_w && d->proj_b &&
             d->fc_w && d->fc_b && d->mproj_w && d->mproj_b;
        if (!ok)
            break;
        m->lin[GFV_LIN_ID(l, GFV_QKV)] = (gfv_lin){D, 3 * D, d->qkv_w, 0, d->qkv_b};
        m->lin[GFV_LIN_ID(l, GFV_PROJ)] = (gfv_lin){D, D, d->proj_w, 0, d->proj_b};
        m->lin[GFV_LIN_ID(l, GFV_FC)] = (gfv_lin){D, F, d->fc_w, 0, d->fc_b};
        m->lin[GFV_LIN_ID(l, GFV_MPROJ)] = (gfv_lin){F, D, d->mproj_w, 0, d->mproj_b};
    }
    if (!ok) {
        gfv_model_release(m);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory (or a NULL weight) loading the model", backend);
    }
    /* the LM head (V, D) [out, in] as it is (the embedding when tied): no
     * transposed copy of the largest matrix */
    m->lin[GFV_LIN_HEAD(m)] = (gfv_lin){D, V, m->lm_head, 1, NULL};
    return GF_OK;
}

/* Grow the activations to `rows` positions (and p to n_positions). */
static gf_status scratch_reserve(gfv_model *m, size_t rows)
{
    if (rows <= m->scratch_rows)
        return GF_OK;
    const int llama = m->cfg.arch == GF_ARCH_LLAMA;
    const size_t D = (size_t)m->cfg.n_embd, F = (size_t)m->cfg.d_ff * (llama ? 2 : 1);
    const size_t Q = (size_t)m->q_dim, KV = (size_t)m->kv_dim;
    scratch_release(m);
    m->x = malloc(rows * D * sizeof(float));
    m->h = malloc(rows * D * sizeof(float));
    m->qkv = malloc(rows * (Q + 2 * KV) * sizeof(float));
    m->att = malloc(rows * Q * sizeof(float));
    m->tmp = malloc(rows * D * sizeof(float));
    m->ff = malloc(rows * F * sizeof(float));
    m->part = llama ? malloc(rows * (Q > F / 2 ? Q : F / 2) * sizeof(float)) : NULL;
    m->p = malloc((size_t)m->cfg.n_positions * sizeof(float));
    m->cs = llama ? malloc(rows * (size_t)m->cfg.d_head * sizeof(float)) : NULL;
    if (!m->x || !m->h || !m->qkv || !m->att || !m->tmp || !m->ff || !m->p || (llama && (!m->cs || !m->part))) {
        scratch_release(m);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory for activations of %zu positions", m->backend, rows);
    }
    m->scratch_rows = rows;
    return GF_OK;
}

/* ---- the cache ---- */

gf_status gfv_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out)
{
    const gfv_model *m = model;
    *cache_out = NULL;
    gf_error_clear();
    if (batch < 1 || max_len < 1 || max_len > m->cfg.n_positions)
        return gf_error_set(GF_E_INVALID_ARG, "%s: cache batch %d, max_len %d (must be 1..%d)", m->backend, batch,
                            max_len, m->cfg.n_positions);
    gfv_cache *c = calloc(1, sizeof *c);
    if (!c)
        return gf_error_set(GF_E_NOMEM, "%s: out of memory", m->backend);
    size_t n = (size_t)m->cfg.n_layer * batch * m->cfg.n_kv_head * max_len * m->cfg.d_head;
    c->m = m;
    c->B = batch;
    c->max_len = max_len;
    c->k = calloc(n, sizeof *c->k);
    c->v = calloc(n, sizeof *c->v);
    if (!c->k || !c->v) {
        free(c->k);
        free(c->v);
        free(c);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory for a %zu-byte cache", m->backend, 2 * n * sizeof(float));
    }
    *cache_out = c;
    return GF_OK;
}

gf_status gfv_cache_reset(void *cache)
{
    ((gfv_cache *)cache)->length = 0;
    return GF_OK;
}

void gfv_cache_free(void *cache)
{
    gfv_cache *c = cache;
    if (!c)
        return;
    free(c->k);
    free(c->v);
    free(c);
}

int32_t gfv_cache_length(const void *cache) { return ((const gfv_cache *)cache)->length; }

size_t gfv_cache_bytes(const void *cache)
{
    const gfv_cache *c = cache;
    const gf_model_config *g = &c->m->cfg;
    return 2 * (size_t)g->n_layer * c->B * g->n_kv_head * c->max_len * g->d_head * sizeof(float);
}

/* ---- F32 building blocks ---- */

/* One clone of the elementwise and attention loops per x86-64 ISA (GCC),
 * picked at load: the same source, so the same float operations in the same
 * order (ISO C: no contraction into FMA, no reassociation), only wider. The
 * helpers they call are inlined into each clone (GFV_INLINE): one left out of
 * line would be compiled for the baseline ISA only. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#define GFV_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GFV_CLONES
#endif
#if defined(__GNUC__)
#define GFV_INLINE inline __attribute__((always_inline))
#else
#define GFV_INLINE inline
#endif

GFV_CLONES static void layernorm_f32(float *restrict y, const float *restrict x, const float *w, const float *b,
                                     int32_t D, float eps)
{
    float mean = 0.0f, var = 0.0f;
    for (int32_t i = 0; i < D; i++)
        mean += x[i];
    mean /= (float)D;
    for (int32_t i = 0; i < D; i++) {
        float d = x[i] - mean;
        var += d * d;
    }
    var /= (float)D;
    const float inv = 1.0f / sqrtf(var + eps);
    for (int32_t i = 0; i < D; i++)
        y[i] = (x[i] - mean) * inv * w[i] + b[i];
}

/* HF's LlamaRMSNorm in float32: w * (x * rsqrt(mean(x^2) + eps)) */
GFV_CLONES static void rmsnorm_f32(float *restrict y, const float *restrict x, const float *w, int32_t D, float eps)
{
    float ss = 0.0f;
    for (int32_t i = 0; i < D; i++)
        ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(ss / (float)D + eps);
    for (int32_t i = 0; i < D; i++)
        y[i] = w[i] * (x[i] * inv);
}

/* the family's norm over `rows` rows of D */
static void norm_rows(const gfv_model *m, float *y, const float *x, const float *w, const float *b, size_t rows)
{
    const int32_t D = m->cfg.n_embd;
    for (size_t i = 0; i < rows; i++) {
        if (m->cfg.norm == GF_NORM_RMSNORM)
            rmsnorm_f32(y + i * D, x + i * D, w, D, m->cfg.norm_eps);
        else
            layernorm_f32(y + i * D, x + i * D, w, b, D, m->cfg.norm_eps);
    }
}

/* cs (d_head) = cos | sin of pos * inv_freq, each times the attention
 * factor (YaRN, longrope; 1 otherwise), in float32 as HF computes them */
static void rope_table(float *cs, const float *inv_freq, float attn_factor, int32_t pos, int32_t half)
{
    for (int32_t i = 0; i < half; i++) {
        const float ang = (float)pos * inv_freq[i];
        cs[i] = cosf(ang) * attn_factor;
        cs[half + i] = sinf(ang) * attn_factor;
    }
}

/* HF's rotate-half: x = x cos + rotate_half(x) sin, rotate_half(x) = (-x2, x1) */
static void rope_apply(float *x, const float *cs, int32_t half)
{
    const float *c = cs, *sn = cs + half;
    for (int32_t i = 0; i < half; i++) {
        const float x1 = x[i], x2 = x[half + i];
        x[i] = x1 * c[i] - x2 * sn[i];
        x[half + i] = x2 * c[i] + x1 * sn[i];
    }
}

GFV_CLONES static void activation_f32(gf_activation act, float *x, size_t n)
{
    switch (act) {
    case GF_ACT_GELU_TANH:
        for (size_t i = 0; i < n; i++) /* vectorised: gfv_act.h, its error bound */
            x[i] = gfv_gelu_tanh(x[i]);
        break;
    case GF_ACT_GELU_ERF:
        for (size_t i = 0; i < n; i++)
            x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
        break;
    case GF_ACT_RELU:
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case GF_ACT_SILU:
        for (size_t i = 0; i < n; i++)
            x[i] = gfv_silu(x[i]);
        break;
    default: break;
    }
}

static GFV_INLINE float dot_f32(const float *restrict a, const float *restrict b, int32_t n)
{
    /* four partial sums: vectorisable without -ffast-math, and a little
     * more accurate than one running sum */
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* dot_f32(a_k, b, n) for four a_k at once, each exactly dot_f32's float
 * operations in its order (lane l of c_k is its s_l; the tail goes to lane
 * 0): four independent chains of adds where one dot waits on its own (a head
 * dimension's dot is that latency and little else). GCC 12 does not
 * vectorise four interleaved scalar dots, so the lanes are GNU C vectors
 * (element-wise IEEE float operations); elsewhere dot_f32 four times. */
#if defined(__GNUC__)
typedef float gfv_v4f __attribute__((vector_size(16)));
static GFV_INLINE void dot4_f32(float out[4], const float *a0, const float *a1, const float *a2, const float *a3,
                                const float *restrict b, int32_t n)
{
    gfv_v4f c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0}, x, bv;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        memcpy(&bv, b + i, sizeof bv);
        memcpy(&x, a0 + i, sizeof x);
        c0 += x * bv;
        memcpy(&x, a1 + i, sizeof x);
        c1 += x * bv;
        memcpy(&x, a2 + i, sizeof x);
        c2 += x * bv;
        memcpy(&x, a3 + i, sizeof x);
        c3 += x * bv;
    }
    for (; i < n; i++) {
        c0[0] += a0[i] * b[i];
        c1[0] += a1[i] * b[i];
        c2[0] += a2[i] * b[i];
        c3[0] += a3[i] * b[i];
    }
    out[0] = (c0[0] + c0[1]) + (c0[2] + c0[3]);
    out[1] = (c1[0] + c1[1]) + (c1[2] + c1[3]);
    out[2] = (c2[0] + c2[1]) + (c2[2] + c2[3]);
    out[3] = (c3[0] + c3[1]) + (c3[2] + c3[3]);
}
#else
static GFV_INLINE void dot4_f32(float out[4], const float *a0, const float *a1, const float *a2, const float *a3,
                                const float *restrict b, int32_t n)
{
    out[0] = dot_f32(a0, b, n);
    out[1] = dot_f32(a1, b, n);
    out[2] = dot_f32(a2, b, n);
    out[3] = dot_f32(a3, b, n);
}
#endif

static gf_status check_batch(const gfv_model *m, const gfv_cache *c, const gf_batch *in)
{
    const char *be = m->backend;
    if (!in || in->B < 1 || in->T < 1 || !in->tokens || !in->position_ids)
        return gf_error_set(GF_E_INVALID_ARG, "%s: batch needs B >= 1, T >= 1, tokens and position_ids", be);
    if (in->logits_mode != GF_LOGITS_ALL && in->logits_mode != GF_LOGITS_LAST)
        return gf_error_set(GF_E_INVALID_ARG, "%s: unknown logits mode %d", be, (int)in->logits_mode);
    if (c && c->B != in->B)
        return gf_error_set(GF_E_INVALID_ARG, "%s: batch has %d rows, cache has %d", be, in->B, c->B);
    if (c && c->length + in->T > c->max_len)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "%s: cache holds %d of %d positions; %d more do not fit", be, c->length,
                            c->max_len, in->T);
    if (!c && in->T > m->cfg.n_positions)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "%s: %d positions exceed n_positions %d", be, in->T,
                            m->cfg.n_positions);
    for (int64_t i = 0; i < (int64_t)in->B * in->T; i++) {
        if (in->tokens[i] < 0 || in->tokens[i] >= m->cfg.vocab_size)
            return gf_error_set(GF_E_INVALID_ARG, "%s: token %d at (%lld, %lld) outside [0, %d)", be, in->tokens[i],
                                (long long)(i / in->T), (long long)(i % in->T), m->cfg.vocab_size);
        if (in->position_ids[i] < 0 || in->position_ids[i] >= m->cfg.n_positions)
            return gf_error_set(GF_E_INVALID_ARG, "%s: position %d at (%lld, %lld) outside [0, %d)", be,
                                in->position_ids[i], (long long)(i / in->T), (long long)(i % in->T),
                                m->cfg.n_positions);
    }
    return GF_OK;
}

/* ---- the forward pass ---- */

/* One layer's attention over the cache: queries from qkv (row stride
 * Q + 2 KV), keys and values of layer l in c, output att (BT, Q). Query head
 * hh reads key/value head hh / (H / H_kv). */
GFV_CLONES static void attention(const gfv_model *m, const gfv_cache *c, int32_t l, const gf_batch *in, int32_t start)
{
    const gf_model_config *g = &m->cfg;
    const int32_t B = in->B, T = in->T, H = g->n_head, Hkv = g->n_kv_head, dh = g->d_head;
    const int32_t S = c->max_len, Tk = start + T, rep = H / Hkv, Q = m->q_dim;
    const size_t row_w = (size_t)Q + 2 * (size_t)m->kv_dim;
    const float *K = c->k + (size_t)l * B * Hkv * S * dh; /* (B, H_kv, S, dh) of layer l */
    const float *Vc = c->v + (size_t)l * B * Hkv * S * dh;
    const float scale = (float)(1.0 / sqrt((double)dh));
    float *p = m->p;
    /* a sliding window w: keys j > start + t - w only (j0 below) */
    const int32_t w = m->layer_window ? m->layer_window[l] : 0;
    /* query at absolute position start + t: keys j <= start + t that the key
     * mask allows (and the window, if any), and always its own */
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++)
            for (int32_t hh = 0; hh < H; hh++) {
                const float *q = m->qkv + ((size_t)b * T + t) * row_w + (size_t)hh * dh;
                const float *Kh = K + ((size_t)b * Hkv + hh / rep) * S * dh;
                const float *Vh = Vc + ((size_t)b * Hkv + hh / rep) * S * dh;
                const uint8_t *km = in->key_mask ? in->key_mask + (size_t)b * Tk : NULL;
                const int32_t qpos = start + t, j0 = w > 0 && qpos - w + 1 > 0 ? qpos - w + 1 : 0;
                float mx = -INFINITY;
                int32_t j = j0; /* keys before j0 are outside the window (the own key qpos >= j0 always) */
                for (int32_t i = 0; i < j0; i++)
                    p[i] = -INFINITY;
                for (; j + 4 <= qpos + 1; j += 4) { /* four keys' scores at once, each dot_f32's */
                    const float *k0 = Kh + (size_t)j * dh;
                    dot4_f32(p + j, k0, k0 + dh, k0 + 2 * (size_t)dh, k0 + 3 * (size_t)dh, q, dh);
                }
                for (; j <= qpos; j++)
                    p[j] = dot_f32(Kh + (size_t)j * dh, q, dh);
                for (j = j0; j <= qpos; j++) {
                    int allowed = j == qpos || !km || km[j];
                    p[j] = allowed ? p[j] * scale : -INFINITY;
                    if (p[j] > mx)
                        mx = p[j];
                }
                /* exponentials vectorised (gfv_act.h; a masked -inf gives 0),
                 * then summed in key order as before */
                for (int32_t j = 0; j <= qpos; j++)
                    p[j] = gfv_expf(p[j] - mx);
                float sum = 0.0f;
                for (int32_t j = 0; j <= qpos; j++)
                    sum += p[j];
                float *o = m->att + ((size_t)b * T + t) * Q + (size_t)hh * dh;
                memset(o, 0, dh * sizeof(float));
                int32_t d0 = 0;
#if defined(__GNUC__)
                /* 32 channels at a time held in registers across the keys
                 * (o may alias nothing, but the compiler cannot know): each
                 * o[d] the same float adds in key order as below */
                for (; d0 + 32 <= dh; d0 += 32) {
                    gfv_v4f acc[8] = {{0}}, x;
                    for (int32_t j = 0; j <= qpos; j++) {
                        const float pj = p[j];
                        if (pj == 0.0f)
                            continue;
                        const gfv_v4f pv = {pj, pj, pj, pj};
                        const float *vj = Vh + (size_t)j * dh + d0;
                        for (int k = 0; k < 8; k++) {
                            memcpy(&x, vj + 4 * k, sizeof x);
                            acc[k] += pv * x;
                        }
                    }
                    memcpy(o + d0, acc, sizeof acc);
                }
#endif
                for (int32_t j = 0; j <= qpos && d0 < dh; j++) {
                    const float pj = p[j];
                    if (pj == 0.0f)
                        continue;
                    const float *vj = Vh + (size_t)j * dh;
                    for (int32_t d = d0; d < dh; d++)
                        o[d] += pj * vj[d];
                }
                const float inv = 1.0f / sum;
                for (int32_t d = 0; d < dh; d++)
                    o[d] *= inv;
            }
}

gf_status gfv_forward(gfv_model *m, gfv_cache *cache, const gf_batch *in, float *logits_out)
{
    return gfv_forward_trace(m, cache, in, logits_out, NULL);
}

/* y (M, N_0 + .. + N_{n-1}) = the n linears ids[] of x side by side (one
 * linear: straight into y). A single row's parts are contiguous in y; with
 * several rows each part goes through m->part (M, N_i) and is copied into its
 * columns. */
static gf_status linear_cat(gfv_model *m, const int32_t *ids, int n, const float *x, float *y, int32_t M)
{
    if (n == 1)
        return m->linear(m, ids[0], x, y, M);
    size_t N = 0, off = 0;
    for (int i = 0; i < n; i++)
        N += (size_t)m->lin[ids[i]].N;
    for (int i = 0; i < n; i++) {
        const size_t Ni = (size_t)m->lin[ids[i]].N;
        gf_status st = m->linear(m, ids[i], x, M == 1 ? y + off : m->part, M);
        if (st != GF_OK)
            return st;
        if (M > 1)
            for (size_t r = 0; r < (size_t)M; r++)
                memcpy(y + r * N + off, m->part + r * Ni, Ni * sizeof(float));
        off += Ni;
    }
    return GF_OK;
}

gf_status gfv_forward_trace(gfv_model *m, gfv_cache *cache, const gf_batch *in, float *logits_out,
                            const gf_trace_request *tr)
{
    gf_error_clear();
    const gf_model_config *g = &m->cfg;
    gf_status st = check_batch(m, cache, in);
    if (st != GF_OK)
        return st;
    if (!logits_out)
        return gf_error_set(GF_E_INVALID_ARG, "%s: logits_out is NULL", m->backend);
    const int llama = g->arch == GF_ARCH_LLAMA;
    const int32_t B = in->B, T = in->T, D = g->n_embd, Hkv = g->n_kv_head, dh = g->d_head, F = g->d_ff;
    const int32_t H = g->n_head, Q = m->q_dim, KVd = m->kv_dim, half = dh / 2;
    const size_t BT = (size_t)B * T, row_w = (size_t)Q + 2 * (size_t)KVd;
    st = scratch_reserve(m, BT);
    if (st != GF_OK)
        return st;

    /* uncached: a throwaway cache of exactly T positions, reused across calls */
    gfv_cache local = {0}, *c = cache;
    if (!c) {
        size_t n = (size_t)g->n_layer * B * Hkv * T * dh;
        if (2 * n > m->kv_tmp_floats) {
            free(m->kv_tmp);
            m->kv_tmp_floats = 0;
            m->kv_tmp = malloc(2 * n * sizeof(float));
            if (!m->kv_tmp)
                return gf_error_set(GF_E_NOMEM, "%s: out of memory for a %zu-byte scratch cache", m->backend,
                                    2 * n * sizeof(float));
            m->kv_tmp_floats = 2 * n;
        }
        local = (gfv_cache){.m = m, .B = B, .max_len = T, .length = 0, .k = m->kv_tmp, .v = m->kv_tmp + n};
        c = &local;
    }
    const int32_t start = c->length, Tk = start + T, S = c->max_len;
    float *x = m->x, *h = m->h, *qkv = m->qkv, *tmp = m->tmp, *ff = m->ff;

    if (llama) { /* x = wte[token]; cos | sin of every position, shared by all layers */
        for (size_t i = 0; i < BT; i++) {
            memcpy(x + i * D, m->wte + (size_t)in->tokens[i] * D, (size_t)D * sizeof(float));
            rope_table(m->cs + i * dh, m->rope_inv_freq, m->rope_mscale, in->position_ids[i], half);
        }
    } else { /* x = wte[token] + wpe[position] */
        for (size_t i = 0; i < BT; i++) {
            const float *te = m->wte + (size_t)in->tokens[i] * D;
            const float *pe = m->wpe + (size_t)in->position_ids[i] * D;
            for (int32_t d = 0; d < D; d++)
                x[i * D + d] = te[d] + pe[d];
        }
    }
    gf_trace_put(tr, 0, x, B, T);

    for (int32_t l = 0; l < g->n_layer; l++) {
        const gfv_layer *ly = &m->layers[l];
        float *K = c->k + (size_t)l * B * Hkv * S * dh; /* (B, H_kv, S, dh) of layer l */
        float *Vc = c->v + (size_t)l * B * Hkv * S * dh;

        norm_rows(m, h, x, ly->ln1_w, ly->ln1_b, BT);
        const int32_t qkv_ids[3] = {GFV_LIN_ID(l, GFV_QKV), GFV_LIN_ID(l, GFV_K), GFV_LIN_ID(l, GFV_V)};
        if ((st = linear_cat(m, qkv_ids, llama ? 3 : 1, h, qkv, (int32_t)BT)) != GF_OK)
            return st;
        if (llama) /* rotate every query head and key head by its position */
            for (size_t i = 0; i < BT; i++)
                for (int32_t hh = 0; hh < H + Hkv; hh++)
                    rope_apply(qkv + i * row_w + (size_t)hh * dh, m->cs + i * dh, half);
        /* this chunk's keys and values at [start, start + T) */
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < T; t++)
                for (int32_t hh = 0; hh < Hkv; hh++) {
                    const float *row = qkv + ((size_t)b * T + t) * row_w;
                    size_t off = (((size_t)b * Hkv + hh) * S + start + t) * dh;
                    memcpy(K + off, row + Q + hh * dh, dh * sizeof(float));
                    memcpy(Vc + off, row + Q + KVd + hh * dh, dh * sizeof(float));
                }
        gf_trace_put_kv(tr, l, K, Vc, B, Hkv, S, dh); /* the keys and values attention reads */
        attention(m, c, l, in, start);
        /* x += att W_o (+ b) */
        if ((st = m->linear(m, GFV_LIN_ID(l, GFV_PROJ), m->att, tmp, (int32_t)BT)) != GF_OK)
            return st;
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_ATTN_OUT, l), tmp, B, T);
        for (size_t i = 0; i < BT * D; i++)
            x[i] += tmp[i];
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_ATTN_RESID, l), x, B, T);
        /* GPT-2: x += act(LN2(x) W_fc + b) W_proj + b;
         * Llama: x += (act(n W_gate) * (n W_up)) W_down, n = RMSNorm(x) */
        norm_rows(m, h, x, ly->ln2_w, ly->ln2_b, BT);
        const int32_t fc_ids[2] = {GFV_LIN_ID(l, GFV_FC), GFV_LIN_ID(l, GFV_UP)};
        if ((st = linear_cat(m, fc_ids, llama ? 2 : 1, h, ff, (int32_t)BT)) != GF_OK)
            return st;
        if (llama) {
            /* ff (BT, 2F) gate | up -> (BT, F) in place: row i is written to
             * [iF, iF + F) after rows <= i were read from [2jF, 2jF + 2F) */
            for (size_t i = 0; i < BT; i++) {
                float *gu = ff + i * 2 * F, *o = ff + i * F;
                activation_f32(g->activation, gu, (size_t)F);
                for (int32_t f = 0; f < F; f++)
                    o[f] = gu[f] * gu[F + f];
            }
        } else {
            activation_f32(g->activation, ff, BT * F);
        }
        if ((st = m->linear(m, GFV_LIN_ID(l, GFV_MPROJ), ff, tmp, (int32_t)BT)) != GF_OK)
            return st;
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_MLP_OUT, l), tmp, B, T);
        for (size_t i = 0; i < BT * D; i++)
            x[i] += tmp[i];
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_MLP_RESID, l), x, B, T);
    }
    c->length = Tk; /* once, after the last layer */
    if (tr) {       /* the final norm at every position, whatever logits_mode says */
        norm_rows(m, tmp, x, m->lnf_w, m->lnf_b, BT);
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_FINAL_NORM, 0), tmp, B, T);
    }

    /* logits = norm_f(x) lm_head^T: every position, or each row's last */
    if (in->logits_mode == GF_LOGITS_LAST) {
        for (int32_t b = 0; b < B; b++)
            norm_rows(m, h + (size_t)b * D, x + ((size_t)b * T + T - 1) * D, m->lnf_w, m->lnf_b, 1);
        return m->linear(m, GFV_LIN_HEAD(m), h, logits_out, B);
    }
    norm_rows(m, h, x, m->lnf_w, m->lnf_b, BT);
    return m->linear(m, GFV_LIN_HEAD(m), h, logits_out, (int32_t)BT);
}

const char *gfv_last_error(void *model)
{
    (void)model;
    return gf_error_msg();
}

int gfv_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
