/* The key reach of a diverging cached call (localize.h, gf_key_reach):
 * whether the first divergent point's hidden state at one (row, new
 * position) depends on the token at one cache position. The calls on that
 * cache since it was created or last reset are replayed on a fresh cache with
 * that one token changed, then the diverging call with its trace; the state
 * is compared with the unchanged replay's. A backend that writes its keys
 * and values at the wrong cache positions, or masks the wrong keys, loses or
 * gains a dependency ref has: two bugs at the same sublayer, positions and
 * call then read differently. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "localize.h"

int gf_key_reach(gf_engine *e, const gf_call_log *log, size_t fail_i, int32_t point, int32_t b, int32_t t, int32_t j,
                 const float *base, double bound, int *depends, char *why, size_t cap)
{
    const gf_call_entry *c = &log->v[fail_i];
    const gf_model_config *g = gf_engine_config(e);
    const int32_t L = g->n_layer, D = g->n_embd, V = g->vocab_size, P = GF_TRACE_POINTS(L);
    size_t from = SIZE_MAX;
    int32_t batch = 0, max_len = 0;
    for (size_t i = 0; i < fail_i; i++) {
        const gf_call_entry *h = &log->v[i];
        if (h->cache != c->cache || h->op == GF_CALL_FORWARD)
            continue;
        if (h->op == GF_CALL_CACHE_CREATE) {
            batch = h->batch;
            max_len = h->max_len;
            from = i + 1;
        } else if (h->op == GF_CALL_CACHE_RESET) {
            from = i + 1;
        }
    }
    if (from == SIZE_MAX) {
        snprintf(why, cap, "the log holds no cache_create for the call's cache");
        return -1;
    }
    void *cache = NULL;
    float *logits = NULL, *out = NULL;  /* (B, rows, V); (P, B, T, D) */
    uint8_t *given = malloc((size_t)P); /* (P) */
    int32_t *tok = NULL;                /* (B, T) of one call */
    int hit = 0, rc = -1;
    gf_status st = given ? gf_engine_cache_create(e, batch, max_len, &cache) : GF_E_NOMEM;
    for (size_t i = from; i <= fail_i && st == GF_OK; i++) {
        const gf_call_entry *h = &log->v[i];
        if (h->op != GF_CALL_FORWARD || h->cache != c->cache || h->status != GF_OK)
            continue;
        gf_batch in = h->in;
        const size_t n = (size_t)in.B * in.T, rows = in.logits_mode == GF_LOGITS_LAST ? 1 : (size_t)in.T;
        int32_t *nt = realloc(tok, n * sizeof *nt);
        float *nl = realloc(logits, (size_t)in.B * rows * V * sizeof *nl);
        if (nt)
            tok = nt;
        if (nl)
            logits = nl;
        if (!nt || !nl) {
            st = GF_E_NOMEM;
            break;
        }
        memcpy(tok, in.tokens, n * sizeof *tok);
        if (i < fail_i && b < in.B && j >= h->cache_length && j < h->cache_length + in.T) {
            int32_t *x = &tok[(size_t)b * in.T + (j - h->cache_length)];
            *x = (*x + 1) % V; /* another token at cache position j of row b */
            hit = 1;
        }
        in.tokens = tok;
        if (i < fail_i) {
            st = gf_engine_forward(e, cache, &in, logits);
            continue;
        }
        out = calloc((size_t)P * in.B * in.T * D, sizeof *out);
        if (!out) {
            st = GF_E_NOMEM;
            break;
        }
        gf_trace_request req = {.struct_size = sizeof req,
                                .n_layer = L,
                                .n_embd = D,
                                .rows = in.B,
                                .positions = in.T,
                                .out = out,
                                .given = given};
        st = gf_engine_forward_trace(e, cache, &in, logits, &req);
        if (st == GF_OK && given[point]) {
            const float *x = out + (((size_t)point * in.B + b) * in.T + t) * D;
            double num = 0, den = 0;
            for (int32_t d = 0; d < D; d++) {
                double dd = (double)x[d] - (double)base[d];
                num += isfinite(dd) ? dd * dd : INFINITY;
                den += (double)base[d] * (double)base[d];
            }
            double nmse = den > 0 ? num / den : num;
            *depends = !(nmse <= bound);
            rc = hit ? 0 : -1;
            if (!hit)
                snprintf(why, cap, "no logged call wrote cache position %d of row %d", j, b);
        } else if (st == GF_OK) {
            snprintf(why, cap, "the replay's trace did not give the point");
        }
    }
    if (st != GF_OK)
        snprintf(why, cap, "the replay failed: %s", st == GF_E_NOMEM ? "out of memory" : gf_error_msg());
    if (cache)
        gf_engine_cache_free(e, cache);
    free(given);
    free(tok);
    free(logits);
    free(out);
    return rc;
}
