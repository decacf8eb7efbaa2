/* The call log (genfence/engine.h): the engine's record of a case's cache and
 * forward calls, replayed traced on a backend and on ref to say where a
 * failing case first diverges (harness/kit/localize.c). */
#include "call_log.h"

#include <stdlib.h>
#include <string.h>

static gf_call_entry *push(gf_call_log *log)
{
    if (log->n == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 64;
        gf_call_entry *v = realloc(log->v, cap * sizeof *v);
        if (!v) {
            log->overflow = 1;
            return NULL;
        }
        log->v = v;
        log->cap = cap;
    }
    gf_call_entry *e = &log->v[log->n++];
    memset(e, 0, sizeof *e);
    return e;
}

static int32_t cache_index(const gf_call_log *log, const void *cache)
{
    for (int32_t i = log->n_caches - 1; cache && i >= 0; i--)
        if (log->caches[i] == cache)
            return i;
    return -1;
}

void gf_call_log_cache_create(gf_call_log *log, const void *cache, int32_t batch, int32_t max_len)
{
    const void **c = realloc(log->caches, (size_t)(log->n_caches + 1) * sizeof *c);
    gf_call_entry *e = c ? push(log) : NULL;
    if (!c || !e) {
        if (c)
            log->caches = c;
        log->overflow = 1;
        return;
    }
    log->caches = c;
    log->caches[log->n_caches] = cache;
    e->op = GF_CALL_CACHE_CREATE;
    e->cache = log->n_caches++;
    e->batch = batch;
    e->max_len = max_len;
}

void gf_call_log_cache_op(gf_call_log *log, gf_call_op op, const void *cache)
{
    int32_t i = cache_index(log, cache);
    if (i < 0)
        return; /* a cache made before the log was set: its forwards are not logged either */
    gf_call_entry *e = push(log);
    if (!e)
        return;
    e->op = op;
    e->cache = i;
    if (op == GF_CALL_CACHE_FREE)
        log->caches[i] = NULL;
}

void gf_call_log_forward(gf_call_log *log, const void *cache, int32_t cache_length, const gf_batch *in)
{
    int32_t ci = cache ? cache_index(log, cache) : -1;
    size_t nt = (size_t)in->B * (size_t)in->T, Tk = (size_t)(cache ? cache_length + in->T : in->T);
    if ((cache && ci < 0) || log->n_forward >= GF_CALL_LOG_MAX || log->n_tokens + nt > GF_CALL_LOG_MAX_TOKENS) {
        log->overflow = 1;
        return;
    }
    int32_t *tok = malloc(nt * sizeof *tok), *pos = malloc(nt * sizeof *pos);
    uint8_t *mask = in->key_mask ? malloc((size_t)in->B * Tk) : NULL;
    gf_call_entry *e = tok && pos && (mask || !in->key_mask) ? push(log) : NULL;
    if (!e) {
        free(tok);
        free(pos);
        free(mask);
        log->overflow = 1;
        return;
    }
    memcpy(tok, in->tokens, nt * sizeof *tok);
    memcpy(pos, in->position_ids, nt * sizeof *pos);
    if (mask)
        memcpy(mask, in->key_mask, (size_t)in->B * Tk);
    e->op = GF_CALL_FORWARD;
    e->cache = ci;
    e->cache_length = cache ? cache_length : 0;
    e->in = *in;
    e->in.tokens = tok;
    e->in.position_ids = pos;
    e->in.key_mask = mask;
    log->n_forward++;
    log->n_tokens += nt;
}

void gf_call_log_clear(gf_call_log *log)
{
    if (!log)
        return;
    for (size_t i = 0; i < log->n; i++) {
        free((void *)log->v[i].in.tokens);
        free((void *)log->v[i].in.position_ids);
        free((void *)log->v[i].in.key_mask);
    }
    free(log->v);
    free(log->caches);
    memset(log, 0, sizeof *log);
}
