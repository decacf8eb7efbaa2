/* Guarded buffers (guard.h): a pattern around the data, PROT_NONE pages
 * beyond, checked after every backend call. */
#include "guard.h"

#include "genfence/sampler.h"

#include <fcntl.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { PAT_LEN = 4096 }; /* the pattern's period; a page is a multiple of it */
#define ALIGN ((size_t)alignof(max_align_t))

/* per thread (no locking); every thread computes the same bytes */
static _Thread_local unsigned char g_pat[PAT_LEN];
static _Thread_local int g_pat_ready;

static void pat_init(void)
{
    if (g_pat_ready)
        return;
    g_pat_ready = 1;
    uint32_t x = 0x9e3779b9u; /* a fixed xorshift sequence */
    for (size_t i = 0; i < PAT_LEN; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        g_pat[i] = (unsigned char)(x >> 24);
    }
}

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 && (size_t)p % PAT_LEN == 0 ? (size_t)p : PAT_LEN;
}

/* Write the pattern over [a, b) (offsets from g->lo keep it position-fixed). */
static void pat_fill(const gf_guard *g, unsigned char *a, unsigned char *b)
{
    while (a < b) {
        size_t off = (size_t)(a - g->lo) % PAT_LEN, len = PAT_LEN - off;
        if (len > (size_t)(b - a))
            len = (size_t)(b - a);
        memcpy(a, g_pat + off, len);
        a += len;
    }
}

/* The first (forward) or last (!forward) byte of [a, b) that is not the
 * pattern, NULL if none. */
static unsigned char *pat_find(const gf_guard *g, unsigned char *a, unsigned char *b, int forward)
{
    unsigned char *hit = NULL;
    for (unsigned char *p = a; p < b;) {
        size_t off = (size_t)(p - g->lo) % PAT_LEN, len = PAT_LEN - off;
        if (len > (size_t)(b - p))
            len = (size_t)(b - p);
        if (memcmp(p, g_pat + off, len) != 0)
            for (size_t i = 0; i < len; i++)
                if (p[i] != g_pat[off + i]) {
                    hit = p + i;
                    if (forward)
                        return hit;
                }
        p += len;
    }
    return hit;
}

/* The pattern before the data: GF_GUARD_BEFORE bytes, or down to the leading
 * guard page when the buffer nearly fills the mapping. Bounded, so a small
 * buffer in a mapping a bigger one left costs no scan of the slack. */
static unsigned char *before_start(const gf_guard *g)
{
    return (size_t)(g->data - g->lo) > GF_GUARD_BEFORE ? g->data - GF_GUARD_BEFORE : g->lo;
}

void gf_guard_release(gf_guard *g)
{
    if (!g)
        return;
    if (g->map)
        munmap(g->map, g->map_len);
    memset(g, 0, sizeof *g);
}

void *gf_guard_place(gf_guard *g, size_t n, const void *src)
{
    pat_init();
    if (n < 1)
        n = 1;
    if (n > SIZE_MAX / 2) {
        gf_error_set(GF_E_NOMEM, "guard: a %zu-byte buffer is too large to guard", n);
        return NULL;
    }
    size_t need = n + 2 * (size_t)GF_GUARD_SENTINEL + ALIGN;
    if (!g->map || (size_t)(g->hi - g->lo) < need) {
        gf_guard_release(g);
        size_t page = page_size(), room = (need + page - 1) / page * page;
        void *m = mmap(NULL, room + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            gf_error_set(GF_E_NOMEM, "guard: cannot map %zu bytes for a %zu-byte buffer", room + 2 * page, n);
            return NULL;
        }
        g->map = m;
        g->map_len = room + 2 * page;
        g->lo = g->map + page;
        g->hi = g->lo + room;
        if (mprotect(g->map, page, PROT_NONE) != 0 || mprotect(g->hi, page, PROT_NONE) != 0) {
            gf_guard_release(g);
            gf_error_set(GF_E_NOMEM, "guard: mprotect of the guard pages failed");
            return NULL;
        }
    }
    /* the end against the trailing sentinel, the start at malloc's alignment */
    unsigned char *data = (unsigned char *)((uintptr_t)(g->hi - GF_GUARD_SENTINEL - n) & ~(uintptr_t)(ALIGN - 1));
    g->data = data;
    g->n = n;
    pat_fill(g, before_start(g), data);
    pat_fill(g, data + n, g->hi);
    if (src)
        memcpy(data, src, n);
    return data;
}

int gf_guard_check(gf_guard *g, size_t *before_out, size_t *past_out)
{
    pat_init();
    *before_out = *past_out = 0;
    if (!g->data)
        return 1;
    unsigned char *end = g->data + g->n, *lo = before_start(g);
    unsigned char *first = pat_find(g, lo, g->data, 1);
    unsigned char *last = pat_find(g, end, g->hi, 0);
    if (first) {
        *before_out = (size_t)(g->data - first);
        pat_fill(g, lo, g->data);
    }
    if (last) {
        *past_out = (size_t)(last - end) + 1;
        pat_fill(g, end, g->hi);
    }
    return !first && !last;
}

size_t gf_guard_first_diff(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    if (memcmp(x, y, n) == 0)
        return n;
    size_t i = 0;
    while (x[i] == y[i])
        i++;
    return i;
}

gf_status gf_guard_error(gf_status st, const char *where, const char *what, const char *shape, size_t elem,
                         const char *elem_name, size_t before, size_t past)
{
    /* in whole elements: a stray element whose bytes were partly the pattern
     * already changes only some of them */
    size_t eb = (before + elem - 1) / elem, ep = (past + elem - 1) / elem;
    char b[64], a[64];
    snprintf(b, sizeof b, "%zu bytes (%zu %s%s) before", eb * elem, eb, elem_name, eb == 1 ? "" : "s");
    snprintf(a, sizeof a, "%zu bytes (%zu %s%s) past", ep * elem, ep, elem_name, ep == 1 ? "" : "s");
    return gf_error_set(st, "%s: wrote %s%s%s %s %s", where, before ? b : "", before && past ? " and " : "",
                        past ? a : "", what, shape);
}

gf_status gf_guard_verdict(gf_guard *g, const char *where, const char *what, const char *shape, const void *orig,
                           size_t elem, const char *elem_name)
{
    size_t before, past;
    if (!gf_guard_check(g, &before, &past))
        return gf_guard_error(GF_E_BACKEND, where, what, shape, elem, elem_name, before, past);
    if (!orig)
        return GF_OK;
    size_t i = gf_guard_first_diff(g->data, orig, g->n) / elem;
    if (i * elem >= g->n)
        return GF_OK;
    long long was, now;
    if (elem == 4) {
        int32_t x, y;
        memcpy(&x, (const unsigned char *)orig + i * 4, 4);
        memcpy(&y, g->data + i * 4, 4);
        was = x, now = y;
    } else {
        was = ((const unsigned char *)orig)[i], now = g->data[i];
    }
    return gf_error_set(GF_E_BACKEND, "%s: changed %s %s, its read-only input: element %zu was %lld, is %lld", where,
                        what, shape, i, was, now);
}

/* the sample slot's buffers: no engine holds them (sampler-only calls have
 * no model), so one set per thread, kept for the process's life */
static _Thread_local gf_guard g_sample_logits, g_sample_ids, g_sample_ext, g_sample_hist, g_sample_stop, g_sample_bias;

/* A read-only array of the sampler extension in its guard (n elements of
 * size elem): the copy, or src itself when there is none (NULL, n < 1);
 * *ok = 0 when the guard cannot be mapped. */
static const void *place_input(gf_guard *g, const void *src, int32_t n, size_t elem, int *ok)
{
    if (!*ok || !src || n < 1)
        return src;
    const void *c = gf_guard_place(g, (size_t)n * elem, src);
    *ok = c != NULL;
    return c ? c : src;
}

/* params with its extension and the arrays it points to in their guards
 * (read-only inputs of the sampler slots): *gp the params to hand over, *gx
 * the caller's extension as it was. 0 when a guard cannot be mapped. */
static int place_params(const gf_sampler_params *p, gf_sampler_params *gp, gf_sampler_ext *gx)
{
    *gp = *p;
    const gf_sampler_ext *x = p->ext;
    int ok = 1;
    if (x) {
        *gx = *x;
        gx->history = place_input(&g_sample_hist, x->history, x->n_history, sizeof *x->history, &ok);
        gx->stop_ids = place_input(&g_sample_stop, x->stop_ids, x->n_stop_ids, sizeof *x->stop_ids, &ok);
        gx->bias = place_input(&g_sample_bias, x->bias, x->n_bias, sizeof *x->bias, &ok);
        if (ok)
            ok = (gp->ext = gf_guard_place(&g_sample_ext, sizeof *gx, gx)) != NULL;
    }
    return ok;
}

/* After the call: the extension and its arrays unchanged (place_params). */
static gf_status params_verdict(const gf_sampler_params *p, const gf_sampler_ext *gx, const char *where)
{
    const gf_sampler_ext *x = p->ext;
    if (!x)
        return GF_OK;
    char shape[96];
    snprintf(shape, sizeof shape, "(%zu bytes)", sizeof *gx);
    gf_status gs = gf_guard_verdict(&g_sample_ext, where, "params->ext", shape, gx, 1, "byte");
    snprintf(shape, sizeof shape, "((n_history) = (%d) int32)", x->n_history);
    if (gs == GF_OK && gx->history != x->history)
        gs = gf_guard_verdict(&g_sample_hist, where, "ext->history", shape, x->history, 4, "int32");
    snprintf(shape, sizeof shape, "((n_stop_ids) = (%d) int32)", x->n_stop_ids);
    if (gs == GF_OK && gx->stop_ids != x->stop_ids)
        gs = gf_guard_verdict(&g_sample_stop, where, "ext->stop_ids", shape, x->stop_ids, 4, "int32");
    snprintf(shape, sizeof shape, "((n_bias) = (%d) entries of %zu bytes)", x->n_bias, sizeof *x->bias);
    if (gs == GF_OK && gx->bias != x->bias)
        gs = gf_guard_verdict(&g_sample_bias, where, "ext->bias", shape, x->bias, 1, "byte");
    return gs;
}

gf_status gf_guard_sample(gf_sample_slot_fn slot, void *model, const float *logits, int32_t B,
                          const gf_sampler_params *p, const gf_rng_draws *d, int32_t *ids_out, long long call)
{
    size_t n = (size_t)B * (size_t)d->V;
    char where[96], shape[96];
    snprintf(where, sizeof where, "sample call #%lld (B %d, V %d)", call, B, d->V);
    const float *lg = gf_guard_place(&g_sample_logits, n * sizeof *logits, logits);
    int32_t *ids = lg ? gf_guard_place(&g_sample_ids, (size_t)B * sizeof *ids_out, ids_out) : NULL;
    gf_sampler_params gp;
    gf_sampler_ext gx;
    if (!ids || !place_params(p, &gp, &gx))
        return gf_error_prefix(GF_E_NOMEM, "%s", where);
    gf_status st = slot(model, lg, B, &gp, d, ids);
    snprintf(shape, sizeof shape, "((B, V) = (%d, %d) floats)", B, d->V);
    gf_status gs = gf_guard_verdict(&g_sample_logits, where, "logits", shape, logits, 4, "float");
    snprintf(shape, sizeof shape, "((B) = (%d) int32)", B);
    if (gs == GF_OK)
        gs = gf_guard_verdict(&g_sample_ids, where, "ids_out", shape, NULL, 4, "int32");
    if (gs == GF_OK)
        gs = params_verdict(p, &gx, where);
    if (gs != GF_OK)
        return gs;
    memcpy(ids_out, ids, (size_t)B * sizeof *ids_out);
    return st;
}

static _Thread_local gf_guard g_lp_out;

gf_status gf_guard_logprobs(gf_logprobs_slot_fn slot, void *model, const float *logits, int32_t B, int32_t V,
                            const gf_sampler_params *p, int32_t mode, double *out, long long call)
{
    size_t n = (size_t)B * (size_t)V;
    char where[96], shape[96];
    snprintf(where, sizeof where, "logprobs call #%lld (B %d, V %d)", call, B, V);
    const float *lg = gf_guard_place(&g_sample_logits, n * sizeof *logits, logits);
    double *o = lg ? gf_guard_place(&g_lp_out, n * sizeof *out, out) : NULL;
    gf_sampler_params gp;
    gf_sampler_ext gx;
    if (!o || !place_params(p, &gp, &gx))
        return gf_error_prefix(GF_E_NOMEM, "%s", where);
    gf_status st = slot(model, lg, B, V, &gp, mode, o);
    snprintf(shape, sizeof shape, "((B, V) = (%d, %d) floats)", B, V);
    gf_status gs = gf_guard_verdict(&g_sample_logits, where, "logits", shape, logits, 4, "float");
    snprintf(shape, sizeof shape, "((B, V) = (%d, %d) doubles)", B, V);
    if (gs == GF_OK)
        gs = gf_guard_verdict(&g_lp_out, where, "out", shape, NULL, 8, "double");
    if (gs == GF_OK)
        gs = params_verdict(p, &gx, where);
    if (gs != GF_OK)
        return gs;
    memcpy(out, o, n * sizeof *out);
    return st;
}

/* ---- model_load's descriptor ---- */

/* S and W (guard.h) of n words, in four interleaved lanes (s_j += x, w_j +=
 * s_j: no multiply, no chain longer than one add per lane), the last step
 * padded with zeros: W's coefficient of word i is n_pad - i, n_pad = n
 * rounded up to 4. */
static void block_sums(const float *p, size_t n, uint64_t out[2])
{
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, w0 = 0, w1 = 0, w2 = 0, w3 = 0;
    size_t i = 0;
    uint32_t x[4];
    for (; i + 4 <= n; i += 4) {
        memcpy(x, p + i, sizeof x);
        s0 += x[0], s1 += x[1], s2 += x[2], s3 += x[3];
        w0 += s0, w1 += s1, w2 += s2, w3 += s3;
    }
    if (i < n) {
        memset(x, 0, sizeof x);
        memcpy(x, p + i, (n - i) * sizeof *p);
        s0 += x[0], s1 += x[1], s2 += x[2], s3 += x[3];
        w0 += s0, w1 += s1, w2 += s2, w3 += s3;
    }
    out[0] = s0 + s1 + s2 + s3;
    out[1] = 4 * (w0 + w1 + w2 + w3) - (s1 + 2 * s2 + 3 * s3);
}

size_t gf_desc_tensors(const gf_model_desc *d, gf_desc_tensor *t, size_t cap, char *names, size_t names_cap)
{
    const gf_model_config *c = &d->config;
    const gf_model_weights *w = &d->weights;
    const size_t V = (size_t)(c->vocab_size > 0 ? c->vocab_size : 0), D = (size_t)(c->n_embd > 0 ? c->n_embd : 0);
    const size_t F = (size_t)(c->d_ff > 0 ? c->d_ff : 0), P = (size_t)(c->n_positions > 0 ? c->n_positions : 0);
    const size_t Q = (size_t)(c->n_head > 0 ? c->n_head : 0) * (size_t)(c->d_head > 0 ? c->d_head : 0);
    const size_t KV = (size_t)(c->n_kv_head > 0 ? c->n_kv_head : 0) * (size_t)(c->d_head > 0 ? c->d_head : 0);
    size_t k = 0, used = 0;
#define ADD(fmt, l, ptr, rows, ncols)                                        \
    do {                                                                     \
        if (ptr) {                                                           \
            if (k < cap) {                                                   \
                int len_ = snprintf(names + used, names_cap - used, fmt, l); \
                t[k].field = names + used;                                   \
                used += (size_t)len_ + 1;                                    \
                t[k].data = (ptr);                                           \
                size_t nc_ = (size_t)(ncols);                                \
                t[k].n = (size_t)(rows) * (nc_ ? nc_ : 1);                   \
                t[k].cols = nc_;                                             \
            }                                                                \
            k++;                                                             \
        }                                                                    \
    } while (0)
    ADD("weights.wte%.0d", 0, w->wte, V, D);
    ADD("weights.wpe%.0d", 0, w->wpe, P, D);
    for (int32_t l = 0; w->layers && l < c->n_layer; l++) {
        const gf_layer_weights *y = &w->layers[l];
        ADD("weights.layers[%d].ln1_w", l, y->ln1_w, D, 0);
        ADD("weights.layers[%d].ln1_b", l, y->ln1_b, D, 0);
        ADD("weights.layers[%d].attn_qkv_w", l, y->attn_qkv_w, D, 3 * D);
        ADD("weights.layers[%d].attn_qkv_b", l, y->attn_qkv_b, 3 * D, 0);
        ADD("weights.layers[%d].attn_proj_w", l, y->attn_proj_w, D, D);
        ADD("weights.layers[%d].attn_proj_b", l, y->attn_proj_b, D, 0);
        ADD("weights.layers[%d].ln2_w", l, y->ln2_w, D, 0);
        ADD("weights.layers[%d].ln2_b", l, y->ln2_b, D, 0);
        ADD("weights.layers[%d].mlp_fc_w", l, y->mlp_fc_w, D, F);
        ADD("weights.layers[%d].mlp_fc_b", l, y->mlp_fc_b, F, 0);
        ADD("weights.layers[%d].mlp_proj_w", l, y->mlp_proj_w, F, D);
        ADD("weights.layers[%d].mlp_proj_b", l, y->mlp_proj_b, D, 0);
        ADD("weights.layers[%d].attn_norm_w", l, y->attn_norm_w, D, 0);
        ADD("weights.layers[%d].wq", l, y->wq, Q, D);
        ADD("weights.layers[%d].wk", l, y->wk, KV, D);
        ADD("weights.layers[%d].wv", l, y->wv, KV, D);
        ADD("weights.layers[%d].wo", l, y->wo, D, Q);
        ADD("weights.layers[%d].mlp_norm_w", l, y->mlp_norm_w, D, 0);
        ADD("weights.layers[%d].w_gate", l, y->w_gate, F, D);
        ADD("weights.layers[%d].w_up", l, y->w_up, F, D);
        ADD("weights.layers[%d].w_down", l, y->w_down, D, F);
        ADD("weights.layers[%d].bq", l, y->bq, Q, 0);
        ADD("weights.layers[%d].bk", l, y->bk, KV, 0);
        ADD("weights.layers[%d].bv", l, y->bv, KV, 0);
    }
    ADD("weights.lnf_w%.0d", 0, w->lnf_w, D, 0);
    ADD("weights.lnf_b%.0d", 0, w->lnf_b, D, 0);
    if (w->lm_head != w->wte)
        ADD("weights.lm_head%.0d", 0, w->lm_head, V, D);
    ADD("weights.rope_inv_freq%.0d", 0, w->rope_inv_freq, (size_t)(c->d_head > 0 ? c->d_head : 0) / 2, 0);
#undef ADD
    return k;
}

void gf_desc_guard_release(gf_desc_guard *g)
{
    if (!g)
        return;
    free(g->layers);
    free(g->t);
    free(g->sums);
    free(g->names);
    memset(g, 0, sizeof *g);
}

gf_status gf_desc_guard_take(gf_desc_guard *g, const gf_model_desc *d)
{
    memset(g, 0, sizeof *g);
    memcpy(&g->desc, d, sizeof *d); /* padding too: the check compares the bytes */
    size_t L = d->weights.layers && d->config.n_layer > 0 ? (size_t)d->config.n_layer : 0;
    size_t n_t = gf_desc_tensors(d, NULL, 0, NULL, 0), names_cap = n_t * 40 + 1;
    g->layers = malloc((L ? L : 1) * sizeof *g->layers);
    g->t = calloc(n_t ? n_t : 1, sizeof *g->t);
    g->names = malloc(names_cap);
    if (!g->layers || !g->t || !g->names)
        goto nomem;
    if (L)
        memcpy(g->layers, d->weights.layers, L * sizeof *g->layers);
    g->n_t = gf_desc_tensors(d, g->t, n_t, g->names, names_cap);
    for (size_t i = 0; i < g->n_t; i++) {
        g->t[i].block0 = g->n_blocks;
        g->n_blocks += (g->t[i].n + GF_DESC_BLOCK - 1) / GF_DESC_BLOCK;
    }
    g->sums = malloc((g->n_blocks ? g->n_blocks : 1) * 2 * sizeof *g->sums);
    if (!g->sums)
        goto nomem;
    for (size_t i = 0; i < g->n_t; i++)
        for (size_t o = 0, b = g->t[i].block0; o < g->t[i].n; o += GF_DESC_BLOCK, b++) {
            size_t m = g->t[i].n - o < GF_DESC_BLOCK ? g->t[i].n - o : GF_DESC_BLOCK;
            block_sums(g->t[i].data + o, m, g->sums + 2 * b);
        }
    return GF_OK;
nomem:
    gf_desc_guard_release(g);
    return gf_error_set(GF_E_NOMEM, "model_load guard: out of memory");
}

/* The changed block b (m floats at p, sums then s0, now s1) of tensor t: one
 * element's change decoded (its index from W's difference, its old bits
 * from S's), else the block's range. */
static gf_status block_changed(const gf_desc_tensor *t, size_t o, size_t m, const uint64_t s0[2], const uint64_t s1[2],
                               const char *where)
{
    int64_t dS = (int64_t)(s1[0] - s0[0]), dW = (int64_t)(s1[1] - s0[1]);
    size_t n_pad = (m + 3) / 4 * 4;
    char shape[64];
    if (t->cols)
        snprintf(shape, sizeof shape, "(%zu, %zu) floats", t->n / t->cols, t->cols);
    else
        snprintf(shape, sizeof shape, "(%zu) floats", t->n);
    if (dS != 0 && dW % dS == 0 && dW / dS >= 1 && (size_t)(dW / dS) <= n_pad) {
        size_t i = n_pad - (size_t)(dW / dS);
        uint32_t now;
        memcpy(&now, t->data + o + i, sizeof now);
        int64_t old = (int64_t)now - dS;
        if (i < m && old >= 0 && old <= (int64_t)UINT32_MAX) {
            uint32_t ob = (uint32_t)old;
            float was, is;
            memcpy(&was, &ob, sizeof was);
            memcpy(&is, &now, sizeof is);
            char at[48] = "";
            if (t->cols)
                snprintf(at, sizeof at, " [%zu, %zu]", (o + i) / t->cols, (o + i) % t->cols);
            return gf_error_set(GF_E_BACKEND,
                                "%s: changed desc->%s (%s), the caller's read-only weights: element %zu%s was "
                                "%.9g, is %.9g",
                                where, t->field, shape, o + i, at, (double)was, (double)is);
        }
    }
    return gf_error_set(GF_E_BACKEND,
                        "%s: changed desc->%s (%s), the caller's read-only weights: more than one of elements %zu "
                        "to %zu (the first changed block)",
                        where, t->field, shape, o, o + m - 1);
}

/* The verdict reads every page of the weights again. A backend that copied
 * them (llamacpp: llama.cpp reads its own GGUF) may have handed the pages of
 * genfence's mapping back (MADV_PAGEOUT, lc_gguf.c); faulting them all in
 * again would hold the weights twice at the load's end. So the verdict
 * leaves each slice's pages as it found them: those not mapped in this
 * process before it read them (/proc/self/pagemap's present bit; mincore
 * would say page-cache residency, which the handed-back pages keep) are
 * handed back after (MADV_PAGEOUT: contents kept; clean file pages fault
 * back in if read, anonymous ones stay). A backend that reads the weights in
 * place (ref, openblas, onednn) finds them as it left them. Without pagemap
 * (another OS, a sandbox) nothing is handed back. */
#define GF_DESC_SLICE ((size_t)GF_DESC_BLOCK * 256) /* floats: 1 MiB, whole blocks */
typedef struct residency {
    uintptr_t lo;                                          /* first whole page of the slice */
    size_t pages;                                          /* whole pages from lo (0: nothing to restore) */
    uint64_t pm[GF_DESC_SLICE * sizeof(float) / 4096 + 2]; /* (pages) pagemap entries, bit 63: present */
} residency;

static void residency_take(residency *r, int pagemap, const void *p, size_t bytes)
{
    r->lo = 0;
    r->pages = 0;
#ifdef MADV_PAGEOUT
    if (pagemap < 0)
        return;
    uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (e <= a)
        return;
    size_t n = (e - a) / 4096, want = n * sizeof r->pm[0];
    if (n > sizeof r->pm / sizeof r->pm[0] ||
        pread(pagemap, r->pm, want, (off_t)(a / 4096 * sizeof r->pm[0])) != (ssize_t)want)
        return;
    r->lo = a;
    r->pages = n;
#else
    (void)pagemap;
    (void)p;
    (void)bytes;
#endif
}

static void residency_restore(const residency *r)
{
#ifdef MADV_PAGEOUT
    for (size_t k = 0; k < r->pages;) {
        if (r->pm[k] >> 63) {
            k++;
            continue;
        }
        size_t k1 = k;
        while (k1 < r->pages && !(r->pm[k1] >> 63))
            k1++;
        (void)madvise((void *)(r->lo + k * 4096), (k1 - k) * 4096, MADV_PAGEOUT);
        k = k1;
    }
#else
    (void)r;
#endif
}

/* One tensor's blocks against their sums, slice by slice, each slice's
 * pages left as they were found (residency_take / residency_restore). */
static gf_status tensor_verdict(const gf_desc_guard *g, const gf_desc_tensor *t, int pagemap, const char *where)
{
    for (size_t o0 = 0; o0 < t->n; o0 += GF_DESC_SLICE) {
        const size_t o1 = t->n - o0 < GF_DESC_SLICE ? t->n : o0 + GF_DESC_SLICE;
        residency r;
        residency_take(&r, pagemap, t->data + o0, (o1 - o0) * sizeof *t->data);
        for (size_t o = o0, b = t->block0 + o0 / GF_DESC_BLOCK; o < o1; o += GF_DESC_BLOCK, b++) {
            size_t m = t->n - o < GF_DESC_BLOCK ? t->n - o : GF_DESC_BLOCK;
            uint64_t s[2];
            block_sums(t->data + o, m, s);
            if (s[0] != g->sums[2 * b] || s[1] != g->sums[2 * b + 1])
                return block_changed(t, o, m, g->sums + 2 * b, s, where);
        }
        residency_restore(&r);
    }
    return GF_OK;
}

gf_status gf_desc_guard_verdict(const gf_desc_guard *g, const gf_model_desc *d, const char *where)
{
    /* the struct first: a changed pointer would send the sums elsewhere */
    if (memcmp(&g->desc.config, &d->config, sizeof d->config) != 0)
        return gf_error_set(GF_E_BACKEND, "%s: changed desc->config, a read-only input", where);
    const struct {
        const void *was, *is;
        const char *field;
    } ptrs[] = {
        {g->desc.weights.wte, d->weights.wte, "weights.wte"},
        {g->desc.weights.wpe, d->weights.wpe, "weights.wpe"},
        {g->desc.weights.layers, d->weights.layers, "weights.layers"},
        {g->desc.weights.lnf_w, d->weights.lnf_w, "weights.lnf_w"},
        {g->desc.weights.lnf_b, d->weights.lnf_b, "weights.lnf_b"},
        {g->desc.weights.lm_head, d->weights.lm_head, "weights.lm_head"},
        {g->desc.weights.rope_inv_freq, d->weights.rope_inv_freq, "weights.rope_inv_freq"},
        {g->desc.name, d->name, "name"},
    };
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i].was != ptrs[i].is)
            return gf_error_set(GF_E_BACKEND, "%s: changed the pointer desc->%s (was %p, is %p), a read-only input",
                                where, ptrs[i].field, ptrs[i].was, ptrs[i].is);
    if (memcmp(&g->desc, d, sizeof *d) != 0)
        return gf_error_set(GF_E_BACKEND, "%s: changed desc (struct_size or padding), a read-only input", where);
    size_t L = d->weights.layers && d->config.n_layer > 0 ? (size_t)d->config.n_layer : 0;
    for (size_t l = 0; l < L; l++)
        if (memcmp(&g->layers[l], &d->weights.layers[l], sizeof g->layers[l]) != 0) {
            const void *const *a = (const void *const *)(const void *)&g->layers[l];
            const void *const *b = (const void *const *)(const void *)&d->weights.layers[l];
            size_t k = 0;
            while (k + 1 < sizeof g->layers[l] / sizeof(void *) && a[k] == b[k])
                k++;
            return gf_error_set(GF_E_BACKEND,
                                "%s: changed the pointers of desc->weights.layers[%zu] (the layer's pointer #%zu "
                                "was %p, is %p), a read-only input",
                                where, l, k, a[k], b[k]);
        }
    const int pagemap = sysconf(_SC_PAGESIZE) == 4096 ? open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
    gf_status st = GF_OK;
    for (size_t i = 0; st == GF_OK && i < g->n_t; i++)
        st = tensor_verdict(g, &g->t[i], pagemap, where);
    if (pagemap >= 0)
        close(pagemap);
    return st;
}

/* ---- probe's why ---- */

gf_status gf_guard_probe(const gf_backend_ops *ops, char *why, size_t why_len, gf_status *probe_out)
{
    *probe_out = GF_E_UNAVAILABLE;
    gf_guard g = {0};
    char *buf = gf_guard_place(&g, why_len, NULL);
    if (!buf)
        return gf_error_prefix(GF_E_NOMEM, "probe");
    memset(buf, 0, why_len);
    *probe_out = ops->probe(buf, why_len);
    size_t before, past;
    gf_status st = GF_OK;
    char shape[64];
    snprintf(shape, sizeof shape, "(why_len = %zu bytes)", why_len);
    if (!gf_guard_check(&g, &before, &past))
        st = gf_guard_error(GF_E_BACKEND, "probe", "why", shape, 1, "char", before, past);
    else
        snprintf(why, why_len, "%.*s", (int)strnlen(buf, why_len - 1), buf);
    gf_guard_release(&g);
    return st;
}
