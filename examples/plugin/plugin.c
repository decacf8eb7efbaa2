/* An out-of-tree genfence backend: a small forward pass in F32 for both
 * model families genfence knows (GPT-2; Llama and Qwen2), built only against
 * the installed headers (pkg-config genfence) and loaded with
 *
 *     genfence generate --backend path/to/libgenfence_example.so ...
 *
 * It links nothing of genfence: errors go to its own thread-local buffer,
 * which genfence reads through the last_error slot.
 *
 * Families (the model description in genfence/model_desc.h):
 *   - GPT-2: learned positions, LayerNorm, GELU MLP, fused Conv1D q|k|v;
 *   - Llama (GF_ARCH_LLAMA): RMSNorm (x * rsqrt(mean(x^2) + eps), then * w),
 *     rotary positions in Hugging Face's rotate-half layout (pair (x[i],
 *     x[i + d_head/2]) turned by (float)pos * rope_inv_freq[i], in float as
 *     HF does), SwiGLU MLP (down(silu(gate x) * up x)), grouped-query
 *     attention (query head h reads key/value head h / (H / H_kv)); Qwen2 is
 *     the same with q/k/v biases (config.qkv_bias).
 *
 * Semantics (the ABI contract in genfence/backend.h, docs/backends.md):
 *   - cache (L, B, H_kv, max_len, d_head): key/value heads only (for GPT-2
 *     H_kv = H), keys stored after the rotation; the T new positions go to
 *     [length, length + T) of every layer, length advances once at the end;
 *   - a query at absolute position start + t sees keys j <= start + t that
 *     the key mask allows, and always its own key;
 *   - GF_LOGITS_LAST writes (B, 1, V): each row's position T - 1;
 *   - sample: its own sampler (docs/sampler.md) over genfence's uniforms,
 *     usable with model NULL; equal, token for token, to gf_sample.
 * Numerics: F32 storage and F32 accumulation throughout. */
#include <stddef.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <genfence/backend.h>
#include <genfence/sampler.h> /* gf_sampler_params (the struct only; nothing linked) */

#define EXPORT __attribute__((visibility("default")))

#ifdef GF_PLUGIN_BAD_SAMPLE
#define EX_NAME "example-bad-sample"
#elif defined(GF_PLUGIN_NAME) /* a test build with one of plugin_sampler.h's GF_PLUGIN_BUG_* */
#define EX_NAME GF_PLUGIN_NAME
#elif defined(GF_PX_MUTANT) && defined(GF_FAULT_NAME) /* a sampler mutant of tests/backends (plugin_sampler.h) */
#define EX_NAME GF_FAULT_NAME
#else
#define EX_NAME "example"
#endif

/* ---- errors: our own buffer, handed to genfence through last_error ---- */

static _Thread_local char g_err[1024];

static gf_status fail(gf_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static gf_status fail(gf_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return st;
}

static const char *ex_last_error(void *model)
{
    (void)model;
    return g_err;
}

/* ---- the model: weights as [out, in] rows, so every output is one dot ---- */

/* Q = H d_head, KV = H_kv d_head (GPT-2: Q = KV = D). Llama: ln1_w / ln2_w
 * are the RMSNorm weights (no ln*_b), fc_w is gate_proj, up_w up_proj, no
 * proj_b / fc_b / mproj_b; qkv_b only for Qwen2. */
typedef struct ex_layer {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    float *qkv_w, *qkv_b;     /* (Q + 2 KV, D), (Q + 2 KV): rows q, k, v */
    float *proj_w, *proj_b;   /* (D, Q), (D) */
    float *fc_w, *fc_b;       /* (F, D), (F) */
    float *up_w;              /* (F, D); Llama only */
    float *mproj_w, *mproj_b; /* (D, F), (D) */
} ex_layer;

typedef struct ex_model {
    gf_model_config cfg;                        /* n_kv_head filled in (== n_head for GPT-2) */
    int32_t llama;                              /* GF_ARCH_LLAMA */
    float *wte, *wpe, *lnf_w, *lnf_b, *lm_head; /* lm_head aliases wte when tied; wpe, lnf_b GPT-2 only */
    float *inv_freq;                            /* (d_head / 2); Llama only */
    int32_t *window; /* (n_layer) desc->layer_window, copied: 0 full attention, w >= 1 the last w keys; NULL: none */
    ex_layer *layers;
} ex_model;

typedef struct ex_cache {
    const ex_model *m;
    int32_t B, max_len, length;
    float *k, *v; /* (L, B, H_kv, max_len, d_head) */
} ex_cache;

static gf_status ex_probe(char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    return GF_OK;
}

static gf_status ex_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info mine, *info = &mine; /* a whole struct of this header; info_out gets at most its size */
    (void)opts;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->dtype = GF_COMPUTE_F32;
    info->threads = 1;
    info->library = "example plugin (plain C, F32 accumulation; GPT-2, Llama, Qwen2)";
    info->detail = "out-of-tree, built against the installed headers";
    info->probes = "all"; /* every mechanism probe of cases/probes/ runs on this forward */
    /* one thread, and every row's sums in one order whatever the batch or
     * chunk: measured bitwise on every axis of the invariance kind */
    info->invariance = "all=bitwise";
    /* sliding-window attention (Mistral, Qwen2's use_sliding_window): the window of each layer */
    info->model_features = GF_MODEL_NEEDS_SLIDING_WINDOW;
    return gf_backend_info_put(info_out, info);
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

static float *transpose_f32(const float *src, int32_t in, int32_t out)
{
    if (!src)
        return NULL;
    float *dst = malloc((size_t)in * out * sizeof *dst);
    if (!dst)
        return NULL;
    for (int32_t i = 0; i < in; i++)
        for (int32_t o = 0; o < out; o++)
            dst[(size_t)o * in + i] = src[(size_t)i * out + o];
    return dst;
}

static void ex_model_free(void *handle)
{
    ex_model *m = handle;
    if (!m)
        return;
    free(m->window);
    for (int32_t l = 0; m->layers && l < m->cfg.n_layer; l++) {
        ex_layer *y = &m->layers[l];
        free(y->ln1_w);
        free(y->ln1_b);
        free(y->ln2_w);
        free(y->ln2_b);
        free(y->qkv_w);
        free(y->qkv_b);
        free(y->proj_w);
        free(y->proj_b);
        free(y->fc_w);
        free(y->fc_b);
        free(y->up_w);
        free(y->mproj_w);
        free(y->mproj_b);
    }
    free(m->layers);
    if (m->lm_head != m->wte)
        free(m->lm_head);
    free(m->wte);
    free(m->wpe);
    free(m->lnf_w);
    free(m->lnf_b);
    free(m->inv_freq);
    free(m);
}

/* n_a floats of a, then n_b of b, then n_c of c: one fused [out, in] matrix */
static float *concat3(const float *a, size_t n_a, const float *b, size_t n_b, const float *c, size_t n_c)
{
    if (!a || !b || !c)
        return NULL;
    float *dst = malloc((n_a + n_b + n_c) * sizeof *dst);
    if (!dst)
        return NULL;
    memcpy(dst, a, n_a * sizeof *dst);
    memcpy(dst + n_a, b, n_b * sizeof *dst);
    memcpy(dst + n_a + n_b, c, n_c * sizeof *dst);
    return dst;
}

/* The Llama family: weights are nn.Linear [out, in] already, so copied. */
static gf_status ex_load_llama(ex_model *m, const gf_model_desc *desc)
{
    const gf_model_config *c = &desc->config;
    const gf_model_weights *w = &desc->weights;
    if (c->norm != GF_NORM_RMSNORM || c->pos != GF_POS_ROPE || c->activation != GF_ACT_SILU)
        return fail(GF_E_UNSUPPORTED, "example plugin: Llama needs RMSNorm, rotary positions and SiLU");
    if (c->n_kv_head < 1 || c->n_head % c->n_kv_head || c->d_head < 2 || c->d_head % 2)
        return fail(GF_E_UNSUPPORTED, "example plugin: unsupported heads (H %d, H_kv %d, d_head %d)", c->n_head,
                    c->n_kv_head, c->d_head);
    if (!w->rope_inv_freq || !w->layers)
        return fail(GF_E_INVALID_ARG, "example plugin: Llama description without rope_inv_freq or layers");
    const int32_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, L = c->n_layer;
    const size_t Q = (size_t)c->n_head * c->d_head, KV = (size_t)c->n_kv_head * c->d_head;
    m->llama = 1;
    m->wte = dup_f32(w->wte, (size_t)V * D);
    m->lnf_w = dup_f32(w->lnf_w, D);
    m->lm_head = (c->tied_head || w->lm_head == w->wte) ? m->wte : dup_f32(w->lm_head, (size_t)V * D);
    m->inv_freq = dup_f32(w->rope_inv_freq, (size_t)c->d_head / 2);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    int ok = m->wte && m->lnf_w && m->lm_head && m->inv_freq && m->layers;
    for (int32_t l = 0; ok && l < L; l++) {
        const gf_layer_weights *s = &w->layers[l];
        ex_layer *y = &m->layers[l];
        y->ln1_w = dup_f32(s->attn_norm_w, D);
        y->ln2_w = dup_f32(s->mlp_norm_w, D);
        y->qkv_w = concat3(s->wq, Q * D, s->wk, KV * D, s->wv, KV * D);
        y->qkv_b = c->qkv_bias ? concat3(s->bq, Q, s->bk, KV, s->bv, KV) : NULL;
        y->proj_w = dup_f32(s->wo, (size_t)D * Q);
        y->fc_w = dup_f32(s->w_gate, (size_t)F * D);
        y->up_w = dup_f32(s->w_up, (size_t)F * D);
        y->mproj_w = dup_f32(s->w_down, (size_t)D * F);
        ok = y->ln1_w && y->ln2_w && y->qkv_w && (y->qkv_b || !c->qkv_bias) && y->proj_w && y->fc_w && y->up_w &&
             y->mproj_w;
    }
    return ok ? GF_OK : fail(GF_E_NOMEM, "example plugin: out of memory (or a NULL weight)");
}

static gf_status ex_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **out)
{
    *out = NULL;
    g_err[0] = '\0';
    /* opts->config exists from ABI v2 on; struct_size says whether the caller filled it */
    if (opts && opts->struct_size >= offsetof(gf_backend_options, config) + sizeof opts->config && opts->config)
        return fail(GF_E_INVALID_ARG, "example plugin takes no options (got ':%s')", opts->config);
    const gf_model_config *c = &desc->config;
    if (c->arch != GF_ARCH_GPT2 && c->arch != GF_ARCH_LLAMA)
        return fail(GF_E_UNSUPPORTED, "example plugin: GPT-2 or Llama only (architecture %d)", (int)c->arch);
    if (c->arch == GF_ARCH_GPT2 && c->activation != GF_ACT_GELU_TANH && c->activation != GF_ACT_GELU_ERF &&
        c->activation != GF_ACT_RELU)
        return fail(GF_E_UNSUPPORTED, "example plugin: activation %d not supported", (int)c->activation);
    ex_model *m = calloc(1, sizeof *m);
    if (!m)
        return fail(GF_E_NOMEM, "example plugin: out of memory");
    m->cfg = *c;
    if (gf_model_desc_has(desc, layer_window) && (desc->needs & GF_MODEL_NEEDS_SLIDING_WINDOW) && desc->layer_window) {
        m->window = malloc((size_t)c->n_layer * sizeof *m->window); /* a copy: desc is not ours after the call */
        if (!m->window) {
            ex_model_free(m);
            return fail(GF_E_NOMEM, "example plugin: out of memory");
        }
        memcpy(m->window, desc->layer_window, (size_t)c->n_layer * sizeof *m->window);
    }
    if (c->arch == GF_ARCH_LLAMA) {
        gf_status st = ex_load_llama(m, desc);
        if (st != GF_OK) {
            ex_model_free(m);
            return st;
        }
        *out = m;
        return GF_OK;
    }
    m->cfg.n_kv_head = c->n_head;
    const int32_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, L = c->n_layer;
    const gf_model_weights *w = &desc->weights;
    m->wte = dup_f32(w->wte, (size_t)V * D);
    m->wpe = dup_f32(w->wpe, (size_t)c->n_positions * D);
    m->lnf_w = dup_f32(w->lnf_w, D);
    m->lnf_b = dup_f32(w->lnf_b, D);
    m->lm_head = (c->tied_head || w->lm_head == w->wte) ? m->wte : dup_f32(w->lm_head, (size_t)V * D);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    int ok = m->wte && m->wpe && m->lnf_w && m->lnf_b && m->lm_head && m->layers;
    for (int32_t l = 0; ok && l < L; l++) {
        const gf_layer_weights *s = &w->layers[l];
        ex_layer *y = &m->layers[l];
        y->ln1_w = dup_f32(s->ln1_w, D);
        y->ln1_b = dup_f32(s->ln1_b, D);
        y->ln2_w = dup_f32(s->ln2_w, D);
        y->ln2_b = dup_f32(s->ln2_b, D);
        y->qkv_w = transpose_f32(s->attn_qkv_w, D, 3 * D);
        y->qkv_b = dup_f32(s->attn_qkv_b, (size_t)3 * D);
        y->proj_w = transpose_f32(s->attn_proj_w, D, D);
        y->proj_b = dup_f32(s->attn_proj_b, D);
        y->fc_w = transpose_f32(s->mlp_fc_w, D, F);
        y->fc_b = dup_f32(s->mlp_fc_b, F);
        y->mproj_w = transpose_f32(s->mlp_proj_w, F, D);
        y->mproj_b = dup_f32(s->mlp_proj_b, D);
        ok = y->ln1_w && y->ln1_b && y->ln2_w && y->ln2_b && y->qkv_w && y->qkv_b && y->proj_w && y->proj_b &&
             y->fc_w && y->fc_b && y->mproj_w && y->mproj_b;
    }
    if (!ok) {
        ex_model_free(m);
        return fail(GF_E_NOMEM, "example plugin: out of memory (or a NULL weight)");
    }
    *out = m;
    return GF_OK;
}

/* ---- the cache ---- */

static gf_status ex_cache_create(void *model, int32_t batch, int32_t max_len, void **out)
{
    const ex_model *m = model;
    *out = NULL;
    if (batch < 1 || max_len < 1 || max_len > m->cfg.n_positions)
        return fail(GF_E_INVALID_ARG, "example plugin: cache batch %d, max_len %d (must be 1..%d)", batch, max_len,
                    m->cfg.n_positions);
    ex_cache *c = calloc(1, sizeof *c);
    size_t n = (size_t)m->cfg.n_layer * batch * m->cfg.n_kv_head * max_len * m->cfg.d_head;
    if (c) {
        c->k = calloc(n, sizeof(float));
        c->v = calloc(n, sizeof(float));
    }
    if (!c || !c->k || !c->v) {
        if (c) {
            free(c->k);
            free(c->v);
        }
        free(c);
        return fail(GF_E_NOMEM, "example plugin: out of memory for the cache");
    }
    c->m = m;
    c->B = batch;
    c->max_len = max_len;
    *out = c;
    return GF_OK;
}

static gf_status ex_cache_reset(void *cache)
{
    ((ex_cache *)cache)->length = 0;
    return GF_OK;
}

static void ex_cache_free(void *cache)
{
    ex_cache *c = cache;
    if (!c)
        return;
    free(c->k);
    free(c->v);
    free(c);
}

static int32_t ex_cache_length(const void *cache) { return ((const ex_cache *)cache)->length; }

static size_t ex_cache_bytes(const void *cache)
{
    const ex_cache *c = cache;
    const gf_model_config *g = &c->m->cfg;
    return 2 * (size_t)g->n_layer * c->B * g->n_kv_head * c->max_len * g->d_head * sizeof(float);
}

/* ---- F32 building blocks ---- */

static float dot(const float *a, const float *b, int32_t n)
{
    float s = 0.0f;
    for (int32_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void linear(float *y, const float *x, const float *W, const float *b, int32_t N, int32_t K)
{
    for (int32_t o = 0; o < N; o++)
        y[o] = dot(W + (size_t)o * K, x, K) + (b ? b[o] : 0.0f);
}

static void layernorm(float *y, const float *x, const float *w, const float *b, int32_t D, float eps)
{
    float mean = 0.0f, var = 0.0f;
    for (int32_t i = 0; i < D; i++)
        mean += x[i];
    mean /= (float)D;
    for (int32_t i = 0; i < D; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= (float)D;
    float inv = 1.0f / sqrtf(var + eps);
    for (int32_t i = 0; i < D; i++)
        y[i] = (x[i] - mean) * inv * w[i] + b[i];
}

/* HF's LlamaRMSNorm in float32 */
static void rmsnorm(float *y, const float *x, const float *w, int32_t D, float eps)
{
    float ss = 0.0f;
    for (int32_t i = 0; i < D; i++)
        ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)D + eps);
    for (int32_t i = 0; i < D; i++)
        y[i] = w[i] * (x[i] * inv);
}

static void norm(const ex_model *m, float *y, const float *x, const float *w, const float *b)
{
    if (m->llama)
        rmsnorm(y, x, w, m->cfg.n_embd, m->cfg.norm_eps);
    else
        layernorm(y, x, w, b, m->cfg.n_embd, m->cfg.norm_eps);
}

/* rotate-half: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), pair i turned
 * by (float)pos * inv_freq[i] */
static void rope(float *x, int32_t pos, const float *inv_freq, int32_t dh)
{
    const int32_t half = dh / 2;
    for (int32_t i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i], cs = cosf(ang), sn = sinf(ang);
        float x1 = x[i], x2 = x[half + i];
        x[i] = x1 * cs - x2 * sn;
        x[half + i] = x2 * cs + x1 * sn;
    }
}

static float act(gf_activation a, float x)
{
    switch (a) {
    case GF_ACT_SILU: return x / (1.0f + expf(-x));
    case GF_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    case GF_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.7071067812f));
    case GF_ACT_RELU: return x > 0.0f ? x : 0.0f;
    default: return x;
    }
}

/* ---- the forward pass ---- */

/* forward; with tr, also the hidden states at the sublayer boundaries (the
 * trace slot: gf_trace_put_row, backend.h) */
static gf_status ex_forward_traced(void *model, void *cache, const gf_batch *in, float *logits,
                                   const gf_trace_request *tr)
{
    const ex_model *m = model;
    const gf_model_config *g = &m->cfg;
    ex_cache *c = cache, *own = NULL;
    g_err[0] = '\0';
    if (!in || in->B < 1 || in->T < 1 || !in->tokens || !in->position_ids || !logits)
        return fail(GF_E_INVALID_ARG, "example plugin: bad batch");
    if (c && c->B != in->B)
        return fail(GF_E_INVALID_ARG, "example plugin: batch has %d rows, cache has %d", in->B, c->B);
    if (c && c->length + in->T > c->max_len)
        return fail(GF_E_CONTEXT_LIMIT, "example plugin: cache holds %d of %d positions; %d more do not fit", c->length,
                    c->max_len, in->T);
    for (int64_t i = 0; i < (int64_t)in->B * in->T; i++)
        if (in->tokens[i] < 0 || in->tokens[i] >= g->vocab_size || in->position_ids[i] < 0 ||
            in->position_ids[i] >= g->n_positions)
            return fail(GF_E_INVALID_ARG, "example plugin: token %d / position %d out of range", in->tokens[i],
                        in->position_ids[i]);
    if (!c) { /* uncached: a throwaway cache of exactly T positions */
        void *tmp;
        gf_status st = ex_cache_create(model, in->B, in->T, &tmp);
        if (st != GF_OK)
            return st;
        c = own = tmp;
    }
    const int32_t B = in->B, T = in->T, D = g->n_embd, H = g->n_head, Hkv = g->n_kv_head, dh = g->d_head;
    const int32_t F = g->d_ff, V = g->vocab_size, start = c->length, Tk = start + T, S = c->max_len;
    const int32_t Q = H * dh, KV = Hkv * dh, W = Q + 2 * KV, rep = H / Hkv; /* GPT-2: W = 3D */
    const size_t BT = (size_t)B * T;
    float *x = malloc(BT * D * sizeof(float)), *h = malloc(BT * D * sizeof(float));
    float *qkv = malloc(BT * W * sizeof(float)), *att = malloc(BT * Q * sizeof(float));
    float *tmp = malloc((size_t)D * sizeof(float)), *ff = malloc((size_t)F * sizeof(float));
    float *up = malloc((size_t)F * sizeof(float)), *p = malloc((size_t)Tk * sizeof(float));
    gf_status st = GF_OK;
    if (!x || !h || !qkv || !att || !tmp || !ff || !up || !p) {
        st = fail(GF_E_NOMEM, "example plugin: out of memory for activations");
        goto done;
    }
    for (size_t i = 0; i < BT; i++)
        for (int32_t d = 0; d < D; d++)
            x[i * D + d] =
                m->wte[(size_t)in->tokens[i] * D + d] + (m->llama ? 0.0f : m->wpe[(size_t)in->position_ids[i] * D + d]);
    for (size_t i = 0; tr && i < BT; i++)
        gf_trace_put_row(tr, 0, (int32_t)(i / T), (int32_t)(i % T), x + i * D);
    const int32_t L = g->n_layer;
    const float scale = 1.0f / sqrtf((float)dh);
    for (int32_t l = 0; l < g->n_layer; l++) {
        const ex_layer *y = &m->layers[l];
        float *K = c->k + (size_t)l * B * Hkv * S * dh, *Vc = c->v + (size_t)l * B * Hkv * S * dh;
        for (size_t i = 0; i < BT; i++) {
            norm(m, h + i * D, x + i * D, y->ln1_w, y->ln1_b);
            linear(qkv + i * W, h + i * D, y->qkv_w, y->qkv_b, W, D);
            if (m->llama) /* every query and key head turned by its position */
                for (int32_t hh = 0; hh < H + Hkv; hh++)
                    rope(qkv + i * W + (size_t)hh * dh, in->position_ids[i], m->inv_freq, dh);
        }
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < T; t++)
                for (int32_t hh = 0; hh < Hkv; hh++) {
                    const float *row = qkv + ((size_t)b * T + t) * W;
#ifdef GF_PLUGIN_BUG_KV_AT_ZERO /* a test build: issue 28's bug 1, K/V written at [0, T) */
                    size_t off = (((size_t)b * Hkv + hh) * S + t) * dh;
#else
                    size_t off = (((size_t)b * Hkv + hh) * S + start + t) * dh;
#endif
                    memcpy(K + off, row + Q + hh * dh, dh * sizeof(float));
                    memcpy(Vc + off, row + Q + KV + hh * dh, dh * sizeof(float));
                }
        gf_trace_put_kv(tr, l, K, Vc, B, Hkv, S, dh); /* the trace slot: the keys and values attention reads */
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < T; t++)
                for (int32_t hh = 0; hh < H; hh++) {
                    const float *q = qkv + ((size_t)b * T + t) * W + hh * dh;
                    const size_t kvh = (size_t)b * Hkv + hh / rep; /* this query head's key/value head */
                    const float *Kh = K + kvh * S * dh, *Vh = Vc + kvh * S * dh;
#ifdef GF_PLUGIN_BUG_MASK_NO_OFFSET /* a test build: issue 28's bug 2, the mask not offset by the cache */
                    const int32_t qpos = t;
#else
                    const int32_t qpos = start + t;
#endif
                    float mx = -INFINITY, sum = 0.0f;
                    const int32_t win = m->window ? m->window[l] : 0; /* keys j with qpos - win < j <= qpos */
                    for (int32_t j = 0; j <= qpos; j++) {
                        int ok = j == qpos ||
                                 ((!in->key_mask || in->key_mask[(size_t)b * Tk + j]) && (win <= 0 || j > qpos - win));
                        p[j] = ok ? dot(q, Kh + (size_t)j * dh, dh) * scale : -INFINITY;
                        mx = p[j] > mx ? p[j] : mx;
                    }
                    for (int32_t j = 0; j <= qpos; j++) {
                        p[j] = p[j] == -INFINITY ? 0.0f : expf(p[j] - mx);
                        sum += p[j];
                    }
                    float *o = att + ((size_t)b * T + t) * Q + hh * dh;
                    for (int32_t d = 0; d < dh; d++) {
                        float acc = 0.0f;
                        for (int32_t j = 0; j <= qpos; j++)
                            acc += p[j] * Vh[(size_t)j * dh + d];
                        o[d] = acc / sum;
                    }
                }
        for (size_t i = 0; i < BT; i++) {
            linear(tmp, att + i * Q, y->proj_w, y->proj_b, D, Q);
            gf_trace_put_row(tr, gf_trace_index(L, GF_TRACE_ATTN_OUT, l), (int32_t)(i / T), (int32_t)(i % T), tmp);
            for (int32_t d = 0; d < D; d++)
                x[i * D + d] += tmp[d];
            gf_trace_put_row(tr, gf_trace_index(L, GF_TRACE_ATTN_RESID, l), (int32_t)(i / T), (int32_t)(i % T),
                             x + i * D);
        }
        for (size_t i = 0; i < BT; i++) {
            norm(m, h + i * D, x + i * D, y->ln2_w, y->ln2_b);
            linear(ff, h + i * D, y->fc_w, y->fc_b, F, D);
            if (m->llama) /* SwiGLU: silu(gate) * up */
                linear(up, h + i * D, y->up_w, NULL, F, D);
            for (int32_t f = 0; f < F; f++)
                ff[f] = m->llama ? act(g->activation, ff[f]) * up[f] : act(g->activation, ff[f]);
            linear(tmp, ff, y->mproj_w, y->mproj_b, D, F);
            gf_trace_put_row(tr, gf_trace_index(L, GF_TRACE_MLP_OUT, l), (int32_t)(i / T), (int32_t)(i % T), tmp);
            for (int32_t d = 0; d < D; d++)
                x[i * D + d] += tmp[d];
            gf_trace_put_row(tr, gf_trace_index(L, GF_TRACE_MLP_RESID, l), (int32_t)(i / T), (int32_t)(i % T),
                             x + i * D);
        }
    }
    c->length = Tk; /* once, after the last layer */
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++) {
            if (tr) { /* the final norm at every position, whatever logits_mode says */
                norm(m, h, x + ((size_t)b * T + t) * D, m->lnf_w, m->lnf_b);
                gf_trace_put_row(tr, gf_trace_index(L, GF_TRACE_FINAL_NORM, 0), b, t, h);
            }
            if (in->logits_mode == GF_LOGITS_LAST && t != T - 1)
                continue;
            size_t i = (size_t)b * T + t, orow = in->logits_mode == GF_LOGITS_LAST ? (size_t)b : i;
            norm(m, h, x + i * D, m->lnf_w, m->lnf_b);
            linear(logits + orow * V, h, m->lm_head, NULL, V, D);
        }
done:
    free(x);
    free(h);
    free(qkv);
    free(att);
    free(tmp);
    free(ff);
    free(up);
    free(p);
    ex_cache_free(own);
    return st;
}

/* ---- the sampler slot: our own code, docs/sampler.md step by step ----
 * temperature -> top-k -> top-p -> race over the uniforms genfence hands us
 * (draws->u, the engine sampler's own numbers), in double. It never touches
 * the model, so genfence may call it with model NULL (sampler-only kinds).
 * Built with -DGF_PLUGIN_BAD_SAMPLE it returns the race's runner-up instead of
 * its winner (a deliberately wrong sampler for the harness's detection test). */

static int ex_cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

typedef struct ex_zi {
    double z;
    int32_t i;
} ex_zi;

static int ex_cmp_zi(const void *a, const void *b) /* z descending, then index ascending */
{
    const ex_zi *x = a, *y = b;
    if (x->z != y->z)
        return x->z > y->z ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Steps 1-3 of one row into z (V): temperature, top-k, top-p, -inf where
 * dropped. Greedy (temperature 0) returns the argmax (lowest index on ties)
 * and leaves z alone; otherwise -1. Scratch: sorted (V), pairs (V). */
static int32_t ex_filter_row(const float *logits, int32_t V, const gf_sampler_params *p, double *z, double *sorted,
                             ex_zi *pairs)
{
    if (p->temperature == 0.0) { /* greedy: argmax, lowest index on ties */
        int32_t best = 0;
        for (int32_t i = 1; i < V; i++)
            if (logits[i] > logits[best])
                best = i;
        return best;
    }
    for (int32_t i = 0; i < V; i++)
        z[i] = (double)logits[i] / p->temperature;
    if (p->use_top_k && p->top_k < V) { /* keep z >= the k-th largest (ties kept) */
        memcpy(sorted, z, (size_t)V * sizeof *z);
        qsort(sorted, (size_t)V, sizeof *sorted, ex_cmp_desc);
        double kth = sorted[p->top_k - 1];
        for (int32_t i = 0; i < V; i++)
            if (z[i] < kth)
                z[i] = -INFINITY;
    }
    if (p->use_top_p) { /* smallest prefix (by z, then index) whose mass reaches p */
        int32_t n = 0;
        for (int32_t i = 0; i < V; i++)
            if (z[i] != -INFINITY)
                pairs[n++] = (ex_zi){z[i], i};
        qsort(pairs, (size_t)n, sizeof *pairs, ex_cmp_zi);
        double total = 0.0, before = 0.0;
        for (int32_t j = 0; j < n; j++)
            total += exp(pairs[j].z - pairs[0].z);
        for (int32_t j = 0; j < n; j++) {
            if (j > 0 && before >= p->top_p)
                z[pairs[j].i] = -INFINITY;
            before += exp(pairs[j].z - pairs[0].z) / total;
        }
    }
    return -1;
}

/* One row; scratch: z (V), sorted (V), pairs (V). Returns the token. */
static int32_t ex_sample_row(const float *logits, int32_t V, const gf_sampler_params *p, const double *u, double *z,
                             double *sorted, ex_zi *pairs)
{
    const int32_t greedy = ex_filter_row(logits, V, p, z, sorted, pairs);
    if (greedy >= 0)
        return greedy;
    /* the race: argmax z_i - log(-log(u_i)) over kept tokens, lowest index on ties */
    int32_t best = -1, second = -1;
    double bs = -INFINITY, ss = -INFINITY;
    for (int32_t i = 0; i < V; i++) {
        if (z[i] == -INFINITY)
            continue;
        double score = z[i] - log(-log(u[i]));
        if (best < 0 || score > bs) {
            second = best;
            ss = bs;
            best = i;
            bs = score;
        } else if (second < 0 || score > ss) {
            second = i;
            ss = score;
        }
    }
#ifdef GF_PLUGIN_BAD_SAMPLE
    if (second >= 0)
        return second;
#endif
    (void)ss;
    return best;
}

static gf_status ex_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                           const gf_rng_draws *draws, int32_t *ids_out)
{
    (void)model; /* not needed: sampler-only calls pass NULL */
    g_err[0] = '\0';
    if (!logits || !params || !draws || !draws->u || !ids_out || B < 1 || draws->V < 1)
        return fail(GF_E_INVALID_ARG, "example plugin: sample: bad arguments (B %d, V %d)", B, draws ? draws->V : -1);
    const int32_t V = draws->V;
    double *z = malloc((size_t)V * sizeof *z), *sorted = malloc((size_t)V * sizeof *sorted);
    ex_zi *pairs = malloc((size_t)V * sizeof *pairs);
    if (!z || !sorted || !pairs) {
        free(z);
        free(sorted);
        free(pairs);
        return fail(GF_E_NOMEM, "example plugin: sample: out of memory for %d logits", V);
    }
    for (int32_t b = 0; b < B; b++)
        ids_out[b] = ex_sample_row(logits + (size_t)b * V, V, params, draws->u + (size_t)b * V, z, sorted, pairs);
    free(z);
    free(sorted);
    free(pairs);
    return GF_OK;
}

/* ---- the speculate slot: our own rejection sampler (backend.h,
 * gf_spec_request; docs/speculative.md) ----
 * p_i is our own filter's kept set, softmax in double; every draw the inverse
 * CDF of one uniform in index order. Rules: seed / hf accept x when
 * u q(x) <= p(x) (q(x) 0: when p(x) > 0), vllm the same with q(x) 0
 * rejecting, llamacpp draws y from p_i and accepts when y == x. A rejection
 * draws from max(0, p - q) (from p if that has no mass); K accepted draws
 * the bonus from p_K. Built with -DGF_PLUGIN_BUG_SPEC_BONUS it draws the
 * bonus from row K - 1 (a deliberately wrong sampler, tests/cli). */

static void ex_probs_row(const float *logits, int32_t V, const gf_sampler_params *p, double *w, double *sorted,
                         ex_zi *pairs)
{
    const int32_t greedy = ex_filter_row(logits, V, p, w, sorted, pairs);
    if (greedy >= 0) {
        for (int32_t i = 0; i < V; i++)
            w[i] = i == greedy ? 1.0 : 0.0;
        return;
    }
    double top = -INFINITY, total = 0.0;
    for (int32_t i = 0; i < V; i++)
        top = w[i] > top ? w[i] : top;
    for (int32_t i = 0; i < V; i++) {
        w[i] = w[i] == -INFINITY ? 0.0 : exp(w[i] - top);
        total += w[i];
    }
    for (int32_t i = 0; i < V; i++)
        w[i] = total > 0 ? w[i] / total : 0.0;
}

static int32_t ex_inverse_cdf(const double *w, int32_t V, double u)
{
    double total = 0.0, run = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < V; i++)
        total += w[i] > 0 ? w[i] : 0.0;
    for (int32_t i = 0; i < V; i++) {
        if (!(w[i] > 0))
            continue;
        last = i;
        run += w[i];
        if (run > u * total)
            break;
    }
    return last;
}

static gf_status ex_speculate(void *model, const gf_spec_request *rq, int32_t *accepted_out, int32_t *next_out)
{
    (void)model;
    g_err[0] = '\0';
    if (!rq || rq->struct_size < sizeof *rq || !accepted_out || !next_out || rq->K < 1 || rq->V < 1)
        return fail(GF_E_INVALID_ARG, "example plugin: speculate: bad arguments");
    const int32_t K = rq->K, V = rq->V;
    double *w = malloc((size_t)V * sizeof *w), *sorted = malloc((size_t)V * sizeof *sorted);
    ex_zi *pairs = malloc((size_t)V * sizeof *pairs);
    if (!w || !sorted || !pairs) {
        free(w);
        free(sorted);
        free(pairs);
        return fail(GF_E_NOMEM, "example plugin: speculate: out of memory for %d logits", V);
    }
    int32_t i = 0, next = -1;
    for (; i < K; i++) {
        ex_probs_row(rq->target_logits + (size_t)i * V, V, rq->params, w, sorted, pairs);
        const int32_t x = rq->draft[i];
        if (rq->rule == GF_PROFILE_LLAMACPP) { /* the target's own draw, kept while it equals the draft */
            const int32_t y = ex_inverse_cdf(w, V, rq->u_draw[i]);
            if (y != x) {
                next = y;
                break;
            }
            continue;
        }
        const double *q = rq->draft_probs ? rq->draft_probs + (size_t)i * V : NULL;
        const double qx = q ? q[x] : 1.0;
        int take;
        if (qx > 0)
            take = rq->u_accept[i] * qx <= w[x];
        else
            take = rq->rule != GF_PROFILE_VLLM && w[x] > 0;
        if (take)
            continue;
        double mass = 0.0;
        for (int32_t j = 0; j < V; j++) {
            const double d = w[j] - (q ? q[j] : (double)(j == x));
            mass += d > 0 ? d : 0.0;
        }
        if (mass > 0)
            for (int32_t j = 0; j < V; j++) {
                const double d = w[j] - (q ? q[j] : (double)(j == x));
                w[j] = d > 0 ? d : 0.0;
            }
        next = ex_inverse_cdf(w, V, rq->u_draw[i]);
        break;
    }
    if (next < 0) { /* all K accepted: the bonus token */
#ifdef GF_PLUGIN_BUG_SPEC_BONUS
        ex_probs_row(rq->target_logits + (size_t)(K - 1) * V, V, rq->params, w, sorted, pairs);
#else
        ex_probs_row(rq->target_logits + (size_t)K * V, V, rq->params, w, sorted, pairs);
#endif
        next = ex_inverse_cdf(w, V, rq->u_draw[K]);
    }
    free(w);
    free(sorted);
    free(pairs);
    if (next < 0)
        return fail(GF_E_INVALID_ARG, "example plugin: speculate: no token has mass");
    *accepted_out = i;
    *next_out = next;
    return GF_OK;
}

#include "plugin_sampler.h" /* every profile and filter, for sample_ex */

static uint32_t ex_sample_profiles(void)
{
    return GF_PROFILE_BIT(GF_PROFILE_SEED) | GF_PROFILE_BIT(GF_PROFILE_HF) | GF_PROFILE_BIT(GF_PROFILE_LLAMACPP) |
           GF_PROFILE_BIT(GF_PROFILE_VLLM);
}

/* sample_ex: params of any profile (params->ext may be set, shared by the rows). */
static gf_status ex_sample_ex(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                              const gf_rng_draws *draws, int32_t *ids_out)
{
    if (!params || !params->ext)
        return ex_sample(model, logits, B, params, draws, ids_out);
    g_err[0] = '\0';
    if (!logits || !draws || !draws->u || !ids_out || B < 1 || draws->V < 1)
        return fail(GF_E_INVALID_ARG, "example plugin: sample_ex: bad arguments (B %d, V %d)", B,
                    draws ? draws->V : -1);
    gf_sampler_ext e;
    if (!px_ext_load(params->ext, &e))
        return fail(GF_E_INVALID_ARG, "example plugin: sample_ex: extension struct_size %u", params->ext->struct_size);
    const int32_t V = draws->V;
    px_row r = {.p = params, .e = &e, .V = V};
    r.z = malloc((size_t)V * sizeof *r.z);
    r.pr = malloc((size_t)V * sizeof *r.pr);
    r.s = malloc((size_t)V * sizeof *r.s);
    r.t = malloc((size_t)V * sizeof *r.t);
    r.cnt = malloc(2 * (size_t)V * sizeof *r.cnt);
    gf_status st = GF_OK;
    if (!r.z || !r.pr || !r.s || !r.t || !r.cnt)
        st = fail(GF_E_NOMEM, "example plugin: sample_ex: out of memory for %d logits", V);
    for (int32_t b = 0; b < B && st == GF_OK; b++) {
        ids_out[b] = px_sample_row(&r, logits + (size_t)b * V, draws->u + (size_t)b * V);
        if (ids_out[b] < 0)
            st = fail(GF_E_INVALID_ARG, "example plugin: sample_ex: row %d: every token filtered out", b);
    }
    free(r.z);
    free(r.pr);
    free(r.s);
    free(r.t);
    free(r.cnt);
    return st;
}

/* ---- the logprobs slot: what we report (backend.h; docs/sampler.md,
 * "Logprobs"), in double: raw the log-softmax of the logits, raw_logits
 * them, scaled the log-softmax of logits / T (hf at T 1 applies no warper),
 * processed the log-softmax of our own filter's z (-inf where dropped),
 * processed_logits that z. Built with -DGF_PLUGIN_BUG_LP_BEFORE_T,
 * processed is taken before temperature (a deliberately wrong report,
 * tests/backends: the logprobs cases must fail it). ---- */

static void ex_log_softmax(double *x, int32_t V)
{
    double m = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < V; i++)
        if (x[i] > m)
            m = x[i];
    if (m == -INFINITY)
        return; /* nothing kept: every value stays -inf */
    for (int32_t i = 0; i < V; i++)
        if (x[i] != -INFINITY)
            sum += exp(x[i] - m);
    const double lse = m + log(sum);
    for (int32_t i = 0; i < V; i++)
        if (x[i] != -INFINITY)
            x[i] -= lse;
}

/* One row's processed z (V) into r->z: our filter for plain params or the
 * profile's chain; 1 when the row is greedy, -2 on a refused rule. */
static int ex_processed_row(px_row *r, const float *logits, double *sorted, ex_zi *pairs)
{
    if (!r->e)
        return ex_filter_row(logits, r->V, r->p, r->z, sorted, pairs) >= 0;
    return px_filter_row(r, logits);
}

static gf_status ex_logprobs(void *model, const float *logits, int32_t B, int32_t V, const gf_sampler_params *params,
                             int32_t mode, double *out)
{
    (void)model; /* not needed: sampler-only calls pass NULL */
    g_err[0] = '\0';
    if (!logits || !params || !out || B < 1 || V < 1 || mode < 0 || mode > 4)
        return fail(GF_E_INVALID_ARG, "example plugin: logprobs: bad arguments (B %d, V %d, mode %d)", B, V, mode);
    gf_sampler_ext e;
    if (params->ext && !px_ext_load(params->ext, &e))
        return fail(GF_E_INVALID_ARG, "example plugin: logprobs: extension struct_size %u", params->ext->struct_size);
    px_row r = {.p = params, .e = params->ext ? &e : NULL, .V = V};
    r.z = malloc((size_t)V * sizeof *r.z);
    r.pr = malloc((size_t)V * sizeof *r.pr);
    r.s = malloc((size_t)V * sizeof *r.s);
    r.t = malloc((size_t)V * sizeof *r.t);
    r.cnt = malloc(2 * (size_t)V * sizeof *r.cnt);
    double *sorted = malloc((size_t)V * sizeof *sorted);
    ex_zi *pairs = malloc((size_t)V * sizeof *pairs);
    gf_status st = GF_OK;
    if (!r.z || !r.pr || !r.s || !r.t || !r.cnt || !sorted || !pairs)
        st = fail(GF_E_NOMEM, "example plugin: logprobs: out of memory for %d logits", V);
    const int hf = r.e && r.e->profile == GF_PROFILE_HF;
    for (int32_t b = 0; b < B && st == GF_OK; b++) {
        const float *L = logits + (size_t)b * V;
        double *o = out + (size_t)b * V;
        if (mode == 0 || mode == 1 || mode == 2) { /* raw, raw_logits, scaled */
            const double T = mode == 2 && !(hf && params->temperature == 1.0) ? params->temperature : 1.0;
            for (int32_t i = 0; i < V; i++)
                o[i] = (double)L[i] / T;
            if (mode != 1)
                ex_log_softmax(o, V);
            continue;
        }
#ifdef GF_PLUGIN_BUG_LP_BEFORE_T
        gf_sampler_params one = *params; /* the bug: the filters' z at temperature 1 */
        one.temperature = 1.0;
        r.p = &one;
#endif
        const int g = ex_processed_row(&r, L, sorted, pairs);
        if (g != 0) {
            st = fail(GF_E_INVALID_ARG, "example plugin: logprobs: row %d is %s", b,
                      g > 0 ? "greedy (no processed values)" : "refused by a token rule");
            break;
        }
        memcpy(o, r.z, (size_t)V * sizeof *o);
        if (mode == 3)
            ex_log_softmax(o, V);
    }
    free(r.z);
    free(r.pr);
    free(r.s);
    free(r.t);
    free(r.cnt);
    free(sorted);
    free(pairs);
    return st;
}

static gf_status ex_forward(void *model, void *cache, const gf_batch *in, float *logits)
{
    return ex_forward_traced(model, cache, in, logits, NULL);
}

static const gf_backend_ops k_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = EX_NAME,
    .description = "out-of-tree example plugin: a small F32 forward (GPT-2, Llama, Qwen2, Mistral's sliding window)",
    .probe = ex_probe,
    .info = ex_info,
    .model_load = ex_model_load,
    .model_free = ex_model_free,
    .cache_create = ex_cache_create,
    .cache_reset = ex_cache_reset,
    .cache_free = ex_cache_free,
    .cache_length = ex_cache_length,
    .cache_bytes = ex_cache_bytes,
    .forward = ex_forward,
    .sample = ex_sample,
    .last_error = ex_last_error,
    .sample_profiles = ex_sample_profiles,
    .sample_ex = ex_sample_ex,
    .forward_trace = ex_forward_traced,
    .speculate = ex_speculate,
    .logprobs = ex_logprobs,
};

EXPORT const gf_backend_ops *genfence_backend_entry(void) { return &k_ops; }
