/* ref behind a wrapper, for the invariance kind (cases/invariance.yaml,
 * cases/detect/invariance.yaml, tests/cli/invariance.sh). Every one declares
 * ref's invariance (info.invariance "all=bitwise").
 *
 * The negative controls (GF_FAULT 130-136) each give the logits of a
 * reduction order that depends on one thing: some logits of the affected rows
 * moved by one ulp, the pattern seeded by that thing, as a sum taken in
 * another order rounds. Each must fail exactly its axis:
 *   130 ref-inv-batch     the batch size (rows of a forward of B > 1; seed B)
 *   131 ref-inv-position  the row's index in the batch (rows b > 0; seed b)
 *   132 ref-inv-threads   the thread count (threads > 1; seed threads)
 *   133 ref-inv-split     the chunk size of a prefill that continues a cache
 *                         (cache length > 0 and T > 1; seed T)
 *   134 ref-inv-mixed     left padding anywhere in the batch (a 0 in the key mask)
 *   135 ref-inv-process   the process (seed: its pid), the same within one
 *   136 ref-inv-prefix    a prefix shared with another row (rows whose first
 *                         tokens equal another row's and then differ; seed:
 *                         the other row's tokens after the shared prefix)
 *   137 ref-inv-bad-decl  ref's logits, but info.invariance "all=bitwise,batch=exact":
 *                         a declaration genfence cannot read fails every case, named
 *
 * The harmless variants (GF_FAULT 140-149) compute ref's logits another way
 * and must fail nothing:
 *   140-142 ref-inv-threads1 / 3 / 7   ref on 1, 3 or 7 threads whatever was asked
 *   143 ref-inv-reseed      libc's generators reseeded before every forward
 *   144 ref-inv-rows-apart  an uncached batch run one row at a time
 *   145 ref-inv-reverse-rows an uncached batch run in reverse row order
 *   146 ref-inv-twice       every uncached forward run twice, the second kept
 *   147 ref-inv-all-logits  a last-position request computed at every position
 *   148 ref-inv-unaligned   inputs and logits through buffers one element off
 *   149 ref-inv-fresh-reset cache_reset frees the cache and makes a new one
 *
 * Output: libgenfence_test_<stem>.so (tests/backends/CMakeLists.txt). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the variant"
#endif

typedef struct inv_model {
    void *ref;
    int32_t threads; /* what model_load was given (after a variant's override) */
    int32_t V;
} inv_model;

typedef struct inv_cache {
    void *ref;
    inv_model *m;
    int32_t B, max_len;
} inv_cache;

static gf_backend_ops g_ops;

static const gf_backend_ops *R(void) { return gf_backend_ref(); }

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* One quarter of the V logits of a row moved by one ulp, up or down, the
 * pattern seeded by seed: a reduction taken in another order. */
static void nudge(float *row, int32_t V, uint64_t seed)
{
    for (int32_t v = 0; v < V; v++) {
        uint64_t h = splitmix64(seed * 0x100000001b3ULL ^ (uint64_t)v);
        if ((h & 3) == 0)
            row[v] = nextafterf(row[v], (h & 4) ? INFINITY : -INFINITY);
    }
}

static int32_t threads_for(const gf_backend_options *opts)
{
#if GF_FAULT == 140
    (void)opts;
    return 1;
#elif GF_FAULT == 141
    (void)opts;
    return 3;
#elif GF_FAULT == 142
    (void)opts;
    return 7;
#else
    return opts && opts->threads > 0 ? opts->threads : 1;
#endif
}

static gf_status inv_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_options o = opts ? *opts : (gf_backend_options){.struct_size = sizeof o, .threads = 1};
    o.threads = threads_for(opts);
    gf_status st = R()->info(&o, info_out);
#if GF_FAULT == 137
    if (st == GF_OK && info_out->struct_size >= offsetof(gf_backend_info, invariance) + sizeof info_out->invariance)
        info_out->invariance = "all=bitwise,batch=exact";
#endif
    return st;
}

static gf_status inv_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    inv_model *m = calloc(1, sizeof *m);
    if (!m)
        return GF_E_NOMEM;
    gf_backend_options o = opts ? *opts : (gf_backend_options){.struct_size = sizeof o, .threads = 1};
    o.threads = m->threads = threads_for(opts);
    m->V = desc->config.vocab_size;
    gf_status st = R()->model_load(desc, &o, &m->ref);
    if (st != GF_OK) {
        free(m);
        return st;
    }
    *model_out = m;
    return GF_OK;
}

static void inv_model_free(void *model)
{
    inv_model *m = model;
    if (!m)
        return;
    R()->model_free(m->ref);
    free(m);
}

static gf_status inv_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out)
{
    *cache_out = NULL;
    inv_model *m = model;
    inv_cache *c = calloc(1, sizeof *c);
    if (!c)
        return GF_E_NOMEM;
    c->m = m;
    c->B = batch;
    c->max_len = max_len;
    gf_status st = R()->cache_create(m->ref, batch, max_len, &c->ref);
    if (st != GF_OK) {
        free(c);
        return st;
    }
    *cache_out = c;
    return GF_OK;
}

static gf_status inv_cache_reset(void *cache)
{
    inv_cache *c = cache;
#if GF_FAULT == 149
    void *fresh = NULL;
    gf_status st = R()->cache_create(c->m->ref, c->B, c->max_len, &fresh);
    if (st != GF_OK)
        return st;
    R()->cache_free(c->ref);
    c->ref = fresh;
    return GF_OK;
#else
    return R()->cache_reset(c->ref);
#endif
}

static void inv_cache_free(void *cache)
{
    inv_cache *c = cache;
    if (!c)
        return;
    R()->cache_free(c->ref);
    free(c);
}

static int32_t inv_cache_length(const void *cache) { return R()->cache_length(((const inv_cache *)cache)->ref); }
static size_t inv_cache_bytes(const void *cache) { return R()->cache_bytes(((const inv_cache *)cache)->ref); }

static const char *inv_last_error(void *model)
{
    return R()->last_error ? R()->last_error(model ? ((inv_model *)model)->ref : NULL) : NULL;
}

/* Positions of logits_out per row. */
static int32_t rows_of(const gf_batch *in) { return in->logits_mode == GF_LOGITS_LAST ? 1 : in->T; }

/* ref's forward, computed the harmless variant's way (140-149) or plainly. */
static gf_status compute(inv_model *m, void *cache, const gf_batch *in, float *out)
{
    const int32_t B = in->B, T = in->T, V = m->V, P = rows_of(in);
#if GF_FAULT == 143
    srand((unsigned)getpid());
    srandom((unsigned)rand());
    srand48(random());
#endif
#if GF_FAULT == 145
    if (!cache && B > 1) { /* the rows reversed in one batch, the logits put back */
        int32_t *tok = malloc((size_t)B * T * sizeof *tok), *pos = malloc((size_t)B * T * sizeof *pos); /* (B, T) */
        uint8_t *mask = in->key_mask ? malloc((size_t)B * T) : NULL;                                    /* (B, T) */
        float *rev = malloc((size_t)B * P * V * sizeof *rev);                                           /* (B, P, V) */
        gf_status st = tok && pos && rev && (mask || !in->key_mask) ? GF_OK : GF_E_NOMEM;
        for (int32_t b = 0; st == GF_OK && b < B; b++) {
            memcpy(tok + (size_t)(B - 1 - b) * T, in->tokens + (size_t)b * T, (size_t)T * sizeof *tok);
            memcpy(pos + (size_t)(B - 1 - b) * T, in->position_ids + (size_t)b * T, (size_t)T * sizeof *pos);
            if (mask)
                memcpy(mask + (size_t)(B - 1 - b) * T, in->key_mask + (size_t)b * T, (size_t)T);
        }
        gf_batch r = *in;
        r.tokens = tok;
        r.position_ids = pos;
        r.key_mask = mask;
        if (st == GF_OK)
            st = R()->forward(m->ref, NULL, &r, rev);
        for (int32_t b = 0; st == GF_OK && b < B; b++)
            memcpy(out + (size_t)b * P * V, rev + (size_t)(B - 1 - b) * P * V, (size_t)P * V * sizeof *out);
        free(tok);
        free(pos);
        free(mask);
        free(rev);
        return st;
    }
#endif
#if GF_FAULT == 144
    if (!cache && B > 1) { /* one row at a time */
        for (int32_t b = 0; b < B; b++) {
            gf_batch one = {.B = 1,
                            .T = T,
                            .tokens = in->tokens + (size_t)b * T,
                            .position_ids = in->position_ids + (size_t)b * T,
                            .key_mask = in->key_mask ? in->key_mask + (size_t)b * T : NULL,
                            .logits_mode = in->logits_mode};
            gf_status st = R()->forward(m->ref, NULL, &one, out + (size_t)b * P * V);
            if (st != GF_OK)
                return st;
        }
        return GF_OK;
    }
#endif
#if GF_FAULT == 146
    if (!cache) {
        gf_status st = R()->forward(m->ref, NULL, in, out);
        if (st != GF_OK)
            return st;
    }
#endif
#if GF_FAULT == 147
    if (in->logits_mode == GF_LOGITS_LAST) {
        float *all = malloc((size_t)B * T * V * sizeof *all); /* (B, T, V) */
        if (!all)
            return GF_E_NOMEM;
        gf_batch every = *in;
        every.logits_mode = GF_LOGITS_ALL;
        gf_status st = R()->forward(m->ref, cache, &every, all);
        for (int32_t b = 0; st == GF_OK && b < B; b++)
            memcpy(out + (size_t)b * V, all + ((size_t)b * T + (T - 1)) * V, (size_t)V * sizeof *out);
        free(all);
        return st;
    }
#endif
#if GF_FAULT == 148
    {
        const int32_t Tk = cache ? R()->cache_length(cache) + T : T;
        int32_t *tok = malloc(((size_t)B * T + 1) * sizeof *tok), *pos = malloc(((size_t)B * T + 1) * sizeof *pos);
        uint8_t *mask = in->key_mask ? malloc((size_t)B * Tk + 1) : NULL;
        float *lo = malloc(((size_t)B * P * V + 1) * sizeof *lo);
        gf_status st = tok && pos && lo && (mask || !in->key_mask) ? GF_OK : GF_E_NOMEM;
        if (st == GF_OK) {
            memcpy(tok + 1, in->tokens, (size_t)B * T * sizeof *tok);
            memcpy(pos + 1, in->position_ids, (size_t)B * T * sizeof *pos);
            if (mask)
                memcpy(mask + 1, in->key_mask, (size_t)B * Tk);
            gf_batch off = *in;
            off.tokens = tok + 1;
            off.position_ids = pos + 1;
            off.key_mask = mask ? mask + 1 : NULL;
            st = R()->forward(m->ref, cache, &off, lo + 1);
            if (st == GF_OK)
                memcpy(out, lo + 1, (size_t)B * P * V * sizeof *out);
        }
        free(tok);
        free(pos);
        free(mask);
        free(lo);
        return st;
    }
#endif
    (void)B;
    (void)T;
    (void)V;
    (void)P;
    return R()->forward(m->ref, cache, in, out);
}

#if GF_FAULT == 136
/* Row b's shared prefix with another row whose tokens then differ: the
 * other row's tokens after it, hashed (0: none). Rows with left padding
 * (a masked first key) share nothing. */
static uint64_t shared_prefix_seed(const gf_batch *in, int32_t Tk, int32_t b)
{
    const int32_t T = in->T;
    const int32_t *x = in->tokens + (size_t)b * T;
    if (in->key_mask && !in->key_mask[(size_t)b * Tk])
        return 0;
    for (int32_t r = 0; r < in->B; r++) {
        if (r == b || (in->key_mask && !in->key_mask[(size_t)r * Tk]))
            continue;
        const int32_t *y = in->tokens + (size_t)r * T;
        int32_t l = 0;
        while (l < T && x[l] == y[l])
            l++;
        if (l > 0 && l < T) {
            uint64_t h = 0x51a7ed;
            for (int32_t i = l; i < T; i++)
                h = splitmix64(h ^ (uint64_t)y[i]);
            return h | 1;
        }
    }
    return 0;
}
#endif

static gf_status inv_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    inv_model *m = model;
    void *rc = cache ? ((inv_cache *)cache)->ref : NULL;
    const int32_t length = rc ? R()->cache_length(rc) : 0;
    gf_status st = compute(m, rc, in, logits_out);
    if (st != GF_OK)
        return st;
    const int32_t B = in->B, V = m->V, P = rows_of(in);
    (void)length;
    for (int32_t b = 0; b < B; b++) {
        uint64_t seed = 0;
#if GF_FAULT == 130
        seed = B > 1 ? (uint64_t)B : 0;
#elif GF_FAULT == 131
        seed = (uint64_t)b;
#elif GF_FAULT == 132
        seed = m->threads > 1 ? (uint64_t)m->threads : 0;
#elif GF_FAULT == 133
        seed = rc && length > 0 && in->T > 1 ? (uint64_t)in->T : 0;
#elif GF_FAULT == 134
        const int32_t Tk = rc ? length + in->T : in->T;
        for (size_t i = 0; in->key_mask && !seed && i < (size_t)B * Tk; i++)
            seed = in->key_mask[i] == 0;
#elif GF_FAULT == 135
        seed = (uint64_t)getpid();
#elif GF_FAULT == 136
        seed = shared_prefix_seed(in, rc ? length + in->T : in->T, b);
#endif
        for (int32_t p = 0; seed && p < P; p++)
            nudge(logits_out + ((size_t)b * P + p) * V, V, seed);
    }
    return GF_OK;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *R();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref behind the invariance kind's wrapper (tests/backends/faulty_invariance.c)";
        g_ops.info = inv_info;
        g_ops.model_load = inv_model_load;
        g_ops.model_free = inv_model_free;
        g_ops.cache_create = inv_cache_create;
        g_ops.cache_reset = inv_cache_reset;
        g_ops.cache_free = inv_cache_free;
        g_ops.cache_length = inv_cache_length;
        g_ops.cache_bytes = inv_cache_bytes;
        g_ops.forward = inv_forward;
        g_ops.last_error = inv_last_error;
        g_ops.sample = NULL; /* ref's slots that take its own model handle, which this wrapper hides */
        g_ops.sample_profiles = NULL;
        g_ops.sample_ex = NULL;
        g_ops.forward_trace = NULL;
    }
    return &g_ops;
}
