/* Reference backend (GPT-2 and the Llama family): forward passes readable top
 * to bottom. This file holds the model and its KV cache (loading, lifetimes,
 * the ops table); the forward passes are in ref_forward.c.
 *
 * Activations are F32 between operations, as in PyTorch's fp32 path; every dot
 * product, LayerNorm statistic and softmax is accumulated in double, so this
 * backend is at least as accurate as any fp32 implementation it judges.
 *
 * Threads: opts->threads (a pool per model, ref_pool.h), work split by output
 * element (a row of W, a query head) or, for GPT-2's one-row [in, out]
 * products, by a dot product's partial-sum lanes (each lane's adds in order
 * on one thread, the lanes then added in the fixed order), so the result is
 * bit-identical for any thread count. Every dot product keeps 8 interleaved
 * double partial sums added in a fixed order: plain C loops the compiler
 * vectorizes, and where GCC does not (four outputs' dots at once, over
 * operands converted to double once: ref_forward.c, dot4d), GNU C vectors
 * whose lane j is that partial sum j (one clone per ISA on x86-64 GCC, each
 * doing the same IEEE double operations, so the result does not depend on
 * the CPU either). */
#include "ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gf_status ref_probe(char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    return GF_OK;
}

static int ref_threads(const gf_backend_options *opts)
{
    int n = opts && opts->threads > 0 ? opts->threads : 1;
    return n > REF_MAX_THREADS ? REF_MAX_THREADS : n;
}

static gf_status ref_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info mine, *info = &mine; /* a whole struct of this header; info_out gets at most its size */
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->dtype = GF_COMPUTE_F32;
    info->threads = ref_threads(opts);
    info->library = "plain C (double accumulation)";
    info->detail = "the oracle; threads split outputs or a sum's lanes, never a lane (bit-identical for any count)";
    info->model_features = GF_MODEL_NEEDS_SLIDING_WINDOW | GF_MODEL_NEEDS_ROPE_ATTN_FACTOR;
    info->probes = "all"; /* the oracle the probes compare against (cases/probes/) */
    /* measured (cases/invariance.yaml): every sum runs in one order whatever the
     * batch, row, thread count or chunk, so each row is the same bytes */
    info->invariance = "all=bitwise";
    return gf_backend_info_put(info_out, info);
}

static void release(const float *p, int owned)
{
    if (owned)
        free((void *)p);
}

static void ref_model_free(void *handle)
{
    ref_model *m = handle;
    if (!m)
        return;
    const int own = m->owns_weights;
    for (int32_t l = 0; m->layers && l < m->cfg.n_layer; l++) {
        ref_layer *ly = &m->layers[l];
        const float *all[] = {ly->ln1_w,     ly->ln1_b,    ly->qkv_w, ly->qkv_b,  ly->proj_w,  ly->proj_b,
                              ly->ln2_w,     ly->ln2_b,    ly->fc_w,  ly->fc_b,   ly->mproj_w, ly->mproj_b,
                              ly->attn_norm, ly->mlp_norm, ly->wq,    ly->wk,     ly->wv,      ly->bq,
                              ly->bk,        ly->bv,       ly->wo,    ly->w_gate, ly->w_up,    ly->w_down};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            release(all[i], own);
    }
    ref_pool_free(m->pool);
    free(m->kn_acc);
    free(m->dscratch);
    free(m->inv_freq);
    free(m->window);
    free(m->layers);
    if (m->lm_head != m->wte)
        release(m->lm_head, own);
    release(m->wte, own);
    release(m->wpe, own);
    release(m->lnf_w, own);
    release(m->lnf_b, own);
    free(m);
}

static float *dup_f32(const float *src, size_t n)
{
    if (!src)
        return NULL;
    float *dst = malloc(n * sizeof *dst);
    if (dst)
        memcpy(dst, src, n * sizeof *dst);
    return dst;
}

/* A weight as ref keeps it: the desc's own pointer where the engine keeps the
 * weights until model_free (no copy), else ref's copy. */
static const float *take_f32(const ref_model *m, const float *src, size_t n)
{
    return m->owns_weights ? dup_f32(src, n) : src;
}

/* Llama / Qwen2: weights are already [out, in]; kept as they are. */
static gf_status ref_llama_load(const gf_model_desc *desc, void **model_out)
{
    const gf_model_config *c = &desc->config;
    if (c->activation != GF_ACT_SILU || c->norm != GF_NORM_RMSNORM || c->pos != GF_POS_ROPE || c->d_head < 2 ||
        c->d_head % 2 || c->n_kv_head < 1 || c->n_head % c->n_kv_head)
        return gf_error_set(GF_E_UNSUPPORTED, "ref: a Llama-family model needs SiLU, RMSNorm, "
                                              "rotary positions, an even head size and H %% H_kv == 0");
    const gf_model_weights *w = &desc->weights;
    if (!w->rope_inv_freq)
        return gf_error_set(GF_E_INVALID_ARG, "ref: the model description has no rope_inv_freq");
    ref_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "ref: out of memory");
    m->cfg = *c;
    m->owns_weights = !gf_model_desc_weights_persist(desc);
    const int32_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, L = c->n_layer;
    const size_t Q = (size_t)c->n_head * c->d_head, KV = (size_t)c->n_kv_head * c->d_head;
    m->wte = take_f32(m, w->wte, (size_t)V * D);
    m->inv_freq = dup_f32(w->rope_inv_freq, (size_t)c->d_head / 2);
    m->rope_mscale =
        gf_model_desc_has(desc, rope_attn_factor) && desc->rope_attn_factor > 0.0f ? desc->rope_attn_factor : 1.0f;
    if (gf_model_desc_has(desc, layer_window) && desc->layer_window) {
        if ((m->window = malloc((size_t)L * sizeof *m->window)))
            memcpy(m->window, desc->layer_window, (size_t)L * sizeof *m->window);
        else {
            free(m->inv_freq);
            m->inv_freq = NULL; /* reported below as out of memory */
        }
    }
    m->lnf_w = take_f32(m, w->lnf_w, D);
    m->lm_head = (c->tied_head || w->lm_head == w->wte) ? m->wte : take_f32(m, w->lm_head, (size_t)V * D);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    int ok = m->wte && m->inv_freq && m->lnf_w && m->lm_head && m->layers;
    for (int32_t l = 0; ok && l < L; l++) {
        const gf_layer_weights *s = &w->layers[l];
        ref_layer *d = &m->layers[l];
        d->attn_norm = take_f32(m, s->attn_norm_w, D);
        d->wq = take_f32(m, s->wq, Q * D);
        d->wk = take_f32(m, s->wk, KV * D);
        d->wv = take_f32(m, s->wv, KV * D);
        d->wo = take_f32(m, s->wo, (size_t)D * Q);
        d->mlp_norm = take_f32(m, s->mlp_norm_w, D);
        d->w_gate = take_f32(m, s->w_gate, (size_t)F * D);
        d->w_up = take_f32(m, s->w_up, (size_t)F * D);
        d->w_down = take_f32(m, s->w_down, (size_t)D * F);
        ok = d->attn_norm && d->wq && d->wk && d->wv && d->wo && d->mlp_norm && d->w_gate && d->w_up && d->w_down;
        if (ok && c->qkv_bias) {
            d->bq = take_f32(m, s->bq, Q);
            d->bk = take_f32(m, s->bk, KV);
            d->bv = take_f32(m, s->bv, KV);
            ok = d->bq && d->bk && d->bv;
        }
    }
    if (!ok) {
        ref_model_free(m);
        return gf_error_set(GF_E_NOMEM, "ref: out of memory (or a NULL weight) loading the model");
    }
    *model_out = m;
    return GF_OK;
}

static gf_status ref_gpt2_load(const gf_model_desc *desc, void **model_out);

static gf_status ref_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    if (opts && opts->config)
        return gf_error_set(GF_E_INVALID_ARG, "ref takes no options (got 'ref:%s')", opts->config);
    const gf_model_config *c = &desc->config;
    gf_status st;
    if (c->arch == GF_ARCH_LLAMA)
        st = ref_llama_load(desc, model_out);
    else
        st = ref_gpt2_load(desc, model_out);
    if (st != GF_OK)
        return st;
    ref_model *m = *model_out;
    const int threads = ref_threads(opts);
    m->pool = ref_pool_create(threads);
    if (!m->pool) {
        ref_model_free(m);
        *model_out = NULL;
        return gf_error_set(GF_E_NOMEM, "ref: out of memory for the thread pool");
    }
    { /* the products' double operands (ref_model.h): K is D, F or H d_head */
        int32_t kmax = c->n_embd > c->d_ff ? c->n_embd : c->d_ff;
        if (c->n_head * c->d_head > kmax)
            kmax = c->n_head * c->d_head;
        m->d_kpad = (kmax + 7) & ~7;
        const size_t bytes = (size_t)threads * (REF_RB + REF_KN_TILE) * m->d_kpad * sizeof(double);
        m->dscratch = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    }
    if (c->arch == GF_ARCH_GPT2) { /* the [in, out] products' partial sums (ref_model.h) */
        const int32_t D = c->n_embd, F = c->d_ff;
        m->kn_nmax = 3 * D > F ? 3 * D : F;
        m->kn_kmax = D > F ? D : F;
        m->kn_cols = (m->pool->n + 7) / 8;
        m->kn_acc = malloc((size_t)8 * m->kn_nmax * sizeof *m->kn_acc);
    }
    if (!m->dscratch || (c->arch == GF_ARCH_GPT2 && !m->kn_acc)) {
        ref_model_free(m);
        *model_out = NULL;
        return gf_error_set(GF_E_NOMEM, "ref: out of memory for the product scratch");
    }
    return GF_OK;
}

/* GPT-2: Conv1D weights kept [in, out], as the file holds them (the forward's
 * linear reads them so; no transposed copy). */
static gf_status ref_gpt2_load(const gf_model_desc *desc, void **model_out)
{
    const gf_model_config *c = &desc->config;
    if (c->arch != GF_ARCH_GPT2)
        return gf_error_set(GF_E_UNSUPPORTED, "ref: architecture %d not supported", (int)c->arch);
    if (c->activation != GF_ACT_GELU_TANH && c->activation != GF_ACT_GELU_ERF && c->activation != GF_ACT_RELU)
        return gf_error_set(GF_E_UNSUPPORTED, "ref: activation %d not supported", (int)c->activation);
    ref_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "ref: out of memory");
    m->cfg = *c;
    m->owns_weights = !gf_model_desc_weights_persist(desc);
    const int32_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, L = c->n_layer;
    const gf_model_weights *w = &desc->weights;
    int ok = 1;
    m->wte = take_f32(m, w->wte, (size_t)V * D);
    m->wpe = take_f32(m, w->wpe, (size_t)c->n_positions * D);
    m->lnf_w = take_f32(m, w->lnf_w, D);
    m->lnf_b = take_f32(m, w->lnf_b, D);
    m->lm_head = (c->tied_head || w->lm_head == w->wte) ? m->wte : take_f32(m, w->lm_head, (size_t)V * D);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    ok = m->wte && m->wpe && m->lnf_w && m->lnf_b && m->lm_head && m->layers;
    for (int32_t l = 0; ok && l < L; l++) {
        const gf_layer_weights *s = &w->layers[l];
        ref_layer *d = &m->layers[l];
        d->ln1_w = take_f32(m, s->ln1_w, D);
        d->ln1_b = take_f32(m, s->ln1_b, D);
        d->qkv_w = take_f32(m, s->attn_qkv_w, (size_t)D * 3 * D);
        d->qkv_b = take_f32(m, s->attn_qkv_b, (size_t)3 * D);
        d->proj_w = take_f32(m, s->attn_proj_w, (size_t)D * D);
        d->proj_b = take_f32(m, s->attn_proj_b, D);
        d->ln2_w = take_f32(m, s->ln2_w, D);
        d->ln2_b = take_f32(m, s->ln2_b, D);
        d->fc_w = take_f32(m, s->mlp_fc_w, (size_t)D * F);
        d->fc_b = take_f32(m, s->mlp_fc_b, F);
        d->mproj_w = take_f32(m, s->mlp_proj_w, (size_t)F * D);
        d->mproj_b = take_f32(m, s->mlp_proj_b, D);
        ok = d->ln1_w && d->ln1_b && d->qkv_w && d->qkv_b && d->proj_w && d->proj_b && d->ln2_w && d->ln2_b &&
             d->fc_w && d->fc_b && d->mproj_w && d->mproj_b;
    }
    if (!ok) {
        ref_model_free(m);
        return gf_error_set(GF_E_NOMEM, "ref: out of memory (or a NULL weight) loading the model");
    }
    *model_out = m;
    return GF_OK;
}

gf_status gf_ref_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out)
{
    const ref_model *m = model;
    *cache_out = NULL;
    if (batch < 1 || max_len < 1 || max_len > m->cfg.n_positions)
        return gf_error_set(GF_E_INVALID_ARG, "ref: cache batch %d, max_len %d (must be 1..%d)", batch, max_len,
                            m->cfg.n_positions);
    ref_cache *c = calloc(1, sizeof *c);
    if (!c)
        return gf_error_set(GF_E_NOMEM, "ref: out of memory");
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
        return gf_error_set(GF_E_NOMEM, "ref: out of memory for a %zu-byte cache", 2 * n * sizeof(float));
    }
    *cache_out = c;
    return GF_OK;
}

static gf_status ref_cache_reset(void *cache)
{
    ((ref_cache *)cache)->length = 0;
    return GF_OK;
}

static void ref_cache_free(void *cache)
{
    ref_cache *c = cache;
    if (!c)
        return;
    free(c->k);
    free(c->v);
    free(c);
}

static int32_t ref_cache_length(const void *cache) { return ((const ref_cache *)cache)->length; }

static size_t ref_cache_bytes(const void *cache)
{
    const ref_cache *c = cache;
    const gf_model_config *g = &c->m->cfg;
    return 2 * (size_t)g->n_layer * c->B * g->n_kv_head * c->max_len * g->d_head * sizeof(float);
}

static const gf_backend_ops k_ref_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = "ref",
    .description = "plain-C reference (the oracle): F32 activations, double accumulation",
    .probe = ref_probe,
    .info = ref_info,
    .model_load = ref_model_load,
    .model_free = ref_model_free,
    .cache_create = gf_ref_cache_create,
    .cache_reset = ref_cache_reset,
    .cache_free = ref_cache_free,
    .cache_length = ref_cache_length,
    .cache_bytes = ref_cache_bytes,
    .forward = gf_ref_forward,
    .sample = NULL,
    .last_error = NULL,
    .forward_trace = gf_ref_forward_trace,
};

const gf_backend_ops *gf_backend_ref(void) { return &k_ref_ops; }
