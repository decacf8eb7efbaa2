/* Guarded buffers (guard.h): a pattern around the data, PROT_NONE pages
 * beyond, checked after every backend call. */
#include "guard.h"

#include "genfence/sampler.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
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
    return gf_error_set(GF_E_BACKEND, "%s: changed %s %s, its read-only input: element %zu was %lld, is %lld",
                        where, what, shape, i, was, now);
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

gf_status gf_guard_sample(const gf_backend_ops *ops, void *model, const float *logits, int32_t B,
                          const gf_sampler_params *p, const gf_rng_draws *d, int32_t *ids_out, long long call)
{
    size_t n = (size_t)B * (size_t)d->V;
    char where[96], shape[96];
    snprintf(where, sizeof where, "sample call #%lld (B %d, V %d)", call, B, d->V);
    const float *lg = gf_guard_place(&g_sample_logits, n * sizeof *logits, logits);
    int32_t *ids = lg ? gf_guard_place(&g_sample_ids, (size_t)B * sizeof *ids_out, ids_out) : NULL;
    /* sample_ex's extension and the arrays it points to: read-only inputs too */
    gf_sampler_params gp = *p;
    const gf_sampler_ext *x = p->ext;
    gf_sampler_ext gx;
    int ok = ids != NULL;
    if (ok && x) {
        gx = *x;
        gx.history = place_input(&g_sample_hist, x->history, x->n_history, sizeof *x->history, &ok);
        gx.stop_ids = place_input(&g_sample_stop, x->stop_ids, x->n_stop_ids, sizeof *x->stop_ids, &ok);
        gx.bias = place_input(&g_sample_bias, x->bias, x->n_bias, sizeof *x->bias, &ok);
        if (ok)
            ok = (gp.ext = gf_guard_place(&g_sample_ext, sizeof gx, &gx)) != NULL;
    }
    if (!ok)
        return gf_error_prefix(GF_E_NOMEM, "%s", where);
    gf_status st = ops->sample(model, lg, B, &gp, d, ids);
    snprintf(shape, sizeof shape, "((B, V) = (%d, %d) floats)", B, d->V);
    gf_status gs = gf_guard_verdict(&g_sample_logits, where, "logits", shape, logits, 4, "float");
    snprintf(shape, sizeof shape, "((B) = (%d) int32)", B);
    if (gs == GF_OK)
        gs = gf_guard_verdict(&g_sample_ids, where, "ids_out", shape, NULL, 4, "int32");
    if (gs == GF_OK && x) {
        snprintf(shape, sizeof shape, "(%zu bytes)", sizeof gx);
        gs = gf_guard_verdict(&g_sample_ext, where, "params->ext", shape, &gx, 1, "byte");
        snprintf(shape, sizeof shape, "((n_history) = (%d) int32)", x->n_history);
        if (gs == GF_OK && gx.history != x->history)
            gs = gf_guard_verdict(&g_sample_hist, where, "ext->history", shape, x->history, 4, "int32");
        snprintf(shape, sizeof shape, "((n_stop_ids) = (%d) int32)", x->n_stop_ids);
        if (gs == GF_OK && gx.stop_ids != x->stop_ids)
            gs = gf_guard_verdict(&g_sample_stop, where, "ext->stop_ids", shape, x->stop_ids, 4, "int32");
        snprintf(shape, sizeof shape, "((n_bias) = (%d) entries of %zu bytes)", x->n_bias, sizeof *x->bias);
        if (gs == GF_OK && gx.bias != x->bias)
            gs = gf_guard_verdict(&g_sample_bias, where, "ext->bias", shape, x->bias, 1, "byte");
    }
    if (gs != GF_OK)
        return gs;
    memcpy(ids_out, ids, (size_t)B * sizeof *ids_out);
    return st;
}
