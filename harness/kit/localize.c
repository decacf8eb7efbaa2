/* Localization on failure (see localize.h). */
#include "localize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "sys.h"

double gf_trace_unit(gf_compute_dtype dtype, const char *weights, const char *kv_cache)
{
    char kt[32], vt[32]; /* a K and V cache of different types: the coarser */
    gf_kv_split(kv_cache, kt, sizeof kt, vt, sizeof vt);
    if (strcmp(kt, vt)) {
        double uk = gf_trace_unit(dtype, weights, kt), uv = gf_trace_unit(dtype, weights, vt);
        return uk > uv ? uk : uv;
    }
    double u = dtype == GF_COMPUTE_F64                               ? 0x1p-53
               : dtype == GF_COMPUTE_F16 || dtype == GF_COMPUTE_TF32 ? 0x1p-11
               : dtype == GF_COMPUTE_BF16                            ? 0x1p-8
                                                                     : 0x1p-24;
    const char *types[2] = {weights, kv_cache};
    for (int i = 0; i < 2; i++) {
        const char *w = types[i];
        if (!w || !w[0] || !strcmp(w, "f32"))
            continue;
        /* f16: 11 bits; bf16 and 8-bit quantization: 8; a k-bit quantization: k */
        double wu = !strcmp(w, "f16") ? 0x1p-11 : !strcmp(w, "bf16") ? 0x1p-8 : 0;
        if (wu == 0 && (w[0] == 'q' || w[0] == 'Q') && w[1] >= '2' && w[1] <= '8')
            wu = ldexp(1.0, -(w[1] - '0'));
        if (wu == 0)
            wu = 0x1p-4; /* a storage type not known here: judged as 4 bits */
        if (wu > u)
            u = wu;
    }
    return u;
}

static const char *const k_sub[] = {"attention output", "attention residual", "MLP output", "MLP residual"};

/* "embedding", "layer 2 MLP output", "final norm"; *layer -1 outside the blocks */
static void point_name(char *buf, size_t cap, int32_t L, int32_t p, int32_t *layer, const char **sub)
{
    if (p == 0) {
        *layer = -1;
        *sub = "embedding";
        snprintf(buf, cap, "embedding");
    } else if (p == GF_TRACE_POINTS(L) - 1) {
        *layer = -1;
        *sub = "final norm";
        snprintf(buf, cap, "final norm");
    } else {
        *layer = (p - 1) / 4;
        *sub = k_sub[(p - 1) % 4];
        snprintf(buf, cap, "layer %d %s", *layer, *sub);
    }
}

typedef struct side {
    gf_engine *e;
    void **caches; /* (n_caches) replay caches by log index */
    float *logits; /* (B, T, V) */
    float *out;    /* (P, B, T, D) */
    uint8_t *given;
    float *kv;         /* (L, 2, B, Tk, H_kv d_head): each block's keys and values; NULL when not asked */
    uint8_t *kv_given; /* (L) */
} side;

/* is (b, t) a real position (its own key not padding)? */
static int real_pos(const gf_call_entry *c, int32_t b, int32_t t)
{
    if (!c->in.key_mask)
        return 1;
    int32_t Tk = c->cache_length + c->in.T;
    return c->in.key_mask[(size_t)b * Tk + c->cache_length + t] != 0;
}

/* "positions >= 5", "all positions", "positions 3-7", "positions 2, 9, 11"
 * of the abs positions in S (n, ascending) of a call over [lo, hi] */
static void describe_positions(char *buf, size_t cap, const int32_t *S, int32_t n, int32_t lo, int32_t hi)
{
    int contiguous = 1;
    for (int32_t i = 1; i < n; i++)
        contiguous &= S[i] == S[i - 1] + 1;
    if (n == hi - lo + 1 && n > 1)
        snprintf(buf, cap, "all positions");
    else if (n == 1)
        snprintf(buf, cap, "position %d", S[0]);
    else if (contiguous && S[n - 1] == hi)
        snprintf(buf, cap, "positions >= %d", S[0]);
    else if (contiguous)
        snprintf(buf, cap, "positions %d-%d", S[0], S[n - 1]);
    else {
        size_t u = (size_t)snprintf(buf, cap, "positions");
        for (int32_t i = 0; i < n && i < 6 && u < cap; i++)
            u += (size_t)snprintf(buf + u, cap - u, "%s %d", i ? "," : "", S[i]);
        if (n > 6 && u < cap)
            snprintf(buf + u, cap - u, " (+%d)", n - 6);
    }
}

/* One point of one call to compare: n positions of B rows, each C floats
 * in `planes` planes of B n C (a plane per stream; the keys and values are
 * two), position i labelled label0 + i; a (row, position) counts when
 * real(c, b, i) says so. */
typedef struct cmp_point {
    const char *name, *sub, *pos_word; /* "layer 0 attention output", "attention output", "position" */
    int32_t layer, n, C, planes, label0;
    int32_t group; /* > 0: channels per head (the keys and values: d_head), the heads past the bound named */
    const float *xb, *xr;
    double bound;
    int (*real)(const gf_call_entry *c, int32_t b, int32_t i);
} cmp_point;

/* is cache position j of row b a real key after the call (not padding)? */
static int real_key(const gf_call_entry *c, int32_t b, int32_t j)
{
    if (!c->in.key_mask)
        return 1;
    return c->in.key_mask[(size_t)b * (c->cache_length + c->in.T) + j] != 0;
}

/* NMSE of one point into o; when it is past its bound, the first-divergence
 * object (rows and positions past it, the worst entry) into *first_out */
static double compare_point(const gf_call_entry *c, const cmp_point *q, double *pos_err, json_t *o, json_t **first_out)
{
    const int32_t B = c->in.B, n = q->n, C = q->C;
    const size_t plane = (size_t)B * n * C;
    double num = 0, den = 0, worst = -1;
    int32_t wb = 0, wt = 0, wc = 0, n_real = 0;
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < n; t++) {
            pos_err[(size_t)b * n + t] = -1;
            if (!q->real(c, b, t))
                continue;
            n_real++;
            double pn = 0;
            for (int32_t k = 0; k < q->planes; k++)
                for (int32_t d = 0; d < C; d++) {
                    size_t i = k * plane + ((size_t)b * n + t) * C + d;
                    double dd = (double)q->xb[i] - (double)q->xr[i];
                    if (!isfinite(dd))
                        dd = INFINITY;
                    pn += dd * dd;
                    den += (double)q->xr[i] * (double)q->xr[i];
                    if (fabs(dd) > worst) {
                        worst = fabs(dd);
                        wb = b, wt = t, wc = k * C + d;
                    }
                }
            pos_err[(size_t)b * n + t] = pn;
            num += pn;
        }
    double nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0);
    json_object_set_new(o, "nmse", isfinite(nmse) ? json_real(nmse) : json_string("inf"));
    if (!first_out || !(nmse > q->bound))
        return nmse;
    /* past its bound: which (row, position) are past it, each judged by its
     * share: its squared error over the mean energy */
    double mean_den = n_real ? den / n_real : 0;
    int32_t *S = malloc((size_t)n * sizeof *S), nS = 0;
    json_t *rows = json_array();
    for (int32_t b = 0; b < B; b++) {
        int row_hit = 0;
        for (int32_t t = 0; t < n; t++) {
            double e = pos_err[(size_t)b * n + t];
            row_hit |= e >= 0 && (mean_den > 0 ? e / mean_den : e) > q->bound;
        }
        if (row_hit)
            json_array_append_new(rows, json_integer(b));
    }
    for (int32_t t = 0; S && t < n; t++) {
        int hit = 0;
        for (int32_t b = 0; b < B; b++) {
            double e = pos_err[(size_t)b * n + t];
            hit |= e >= 0 && (mean_den > 0 ? e / mean_den : e) > q->bound;
        }
        if (hit)
            S[nS++] = q->label0 + t;
    }
    char where[160] = "", rw[96] = "";
    if (nS) {
        char pos[120];
        describe_positions(pos, sizeof pos, S, nS, q->label0, q->label0 + n - 1);
        if (q->pos_word[0] == 'p')
            snprintf(where, sizeof where, "%s", pos);
        else if (!strncmp(pos, "all ", 4)) /* "all cache positions", "cache positions 0, 5" */
            snprintf(where, sizeof where, "all cache %s", pos + 4);
        else
            snprintf(where, sizeof where, "cache %s", pos);
    }
    if (q->group > 0 && C % q->group == 0 && C / q->group > 1) { /* the heads past the bound, by their share */
        const int32_t nh = C / q->group;
        double *he = calloc((size_t)nh, sizeof *he); /* (heads) squared error over rows, positions, planes */
        int32_t *HS = malloc((size_t)nh * sizeof *HS), nH = 0;
        for (int32_t b = 0; he && HS && b < B; b++)
            for (int32_t t = 0; t < n; t++) {
                if (!q->real(c, b, t))
                    continue;
                for (int32_t k = 0; k < q->planes; k++)
                    for (int32_t d = 0; d < C; d++) {
                        size_t i = k * plane + ((size_t)b * n + t) * C + d;
                        double dd = (double)q->xb[i] - (double)q->xr[i];
                        he[d / q->group] += isfinite(dd) ? dd * dd : INFINITY;
                    }
            }
        for (int32_t h = 0; he && HS && h < nh; h++)
            if (den > 0 ? he[h] / (den / nh) > q->bound : he[h] > 0)
                HS[nH++] = h;
        if (nH && nH < nh) {
            char hs[96];
            describe_positions(hs, sizeof hs, HS, nH, 0, nh - 1);
            size_t u = strlen(where);
            snprintf(where + u, sizeof where - u, "%skv head%s", u ? ", " : "", hs + strlen("position"));
        }
        free(he);
        free(HS);
    }
    if (B > 1 && json_array_size(rows) < (size_t)B) {
        size_t u = (size_t)snprintf(rw, sizeof rw, "row%s", json_array_size(rows) > 1 ? "s" : "");
        for (size_t i = 0; i < json_array_size(rows) && i < 8 && u < sizeof rw; i++)
            u += (size_t)snprintf(rw + u, sizeof rw - u, "%s %lld", i ? "," : "",
                                  (long long)json_integer_value(json_array_get(rows, i)));
    }
    free(S);
    const size_t wk = (size_t)(wc / C), wi = wk * plane + ((size_t)wb * n + wt) * C + (size_t)(wc % C);
    *first_out =
        json_pack("{s:s, s:s, s:i, s:o, s:f, s:s, s:s, s:o, s:{s:i, s:s, s:i, s:i, s:f, s:f}}", "point", q->name,
                  "sublayer", q->sub, "layer", q->layer, "nmse", isfinite(nmse) ? json_real(nmse) : json_string("inf"),
                  "bound", q->bound, "positions", where[0] ? where : "(spread: no single position past the bound)",
                  "rows_text", rw, "rows", rows, "worst", "row", wb, "position_kind", q->pos_word, "position",
                  q->label0 + wt, "channel", wc, "backend", (double)q->xb[wi], "ref", (double)q->xr[wi]);
    return nmse;
}

/* the comparison of one call: json points, in the forward's order (block
 * l's keys and values, where both sides gave them, before its attention
 * output); the first over its bound at index *first of them (-1: none),
 * its trace point in *first_point (-1: a keys-and-values point) */
static json_t *compare_call(const gf_call_entry *c, const side *bs, const side *rs, int32_t L, int32_t D, int32_t KVd,
                            int32_t g_dh, const double *bound, int32_t *first, int32_t *first_point, json_t **first_out)
{
    const int32_t B = c->in.B, T = c->in.T, P = GF_TRACE_POINTS(L), Tk = c->cache_length + T;
    json_t *pts = json_array();
    *first = *first_point = -1;
    *first_out = NULL;
    double *pos_err = malloc((size_t)B * (Tk > T ? Tk : T) * sizeof *pos_err); /* (B, max(T, Tk)) */
    if (!pos_err)
        return pts;
    for (int32_t p = 0; p < P; p++) {
        char name[64];
        int32_t layer;
        const char *sub;
        point_name(name, sizeof name, L, p, &layer, &sub);
        if (layer >= 0 && p == gf_trace_index(L, GF_TRACE_ATTN_OUT, layer) && bs->kv_given && bs->kv_given[layer] &&
            rs->kv_given[layer]) { /* block l's keys and values, as its attention reads them */
            char kvn[64];
            snprintf(kvn, sizeof kvn, "layer %d keys and values", layer);
            const size_t off = 2 * (size_t)layer * B * Tk * KVd;
            cmp_point q = {.name = kvn,
                           .sub = "keys and values",
                           .pos_word = "cache position",
                           .layer = layer,
                           .n = Tk,
                           .C = KVd,
                           .planes = 2,
                           .label0 = 0,
                           .group = g_dh,
                           .xb = bs->kv + off,
                           .xr = rs->kv + off,
                           .bound = bound[p],
                           .real = real_key};
            json_t *o =
                json_pack("{s:s, s:s, s:i, s:f}", "point", kvn, "sublayer", q.sub, "layer", layer, "bound", bound[p]);
            compare_point(c, &q, pos_err, o, *first >= 0 ? NULL : first_out);
            json_array_append_new(pts, o);
            if (*first < 0 && *first_out)
                *first = (int32_t)json_array_size(pts) - 1;
        }
        json_t *o =
            json_pack("{s:s, s:s, s:i, s:f}", "point", name, "sublayer", sub, "layer", layer, "bound", bound[p]);
        if (!bs->given[p] || !rs->given[p]) {
            json_object_set_new(o, "nmse", json_null());
            json_object_set_new(o, "given", json_false());
            json_array_append_new(pts, o);
            continue;
        }
        cmp_point q = {.name = name,
                       .sub = sub,
                       .pos_word = "position",
                       .layer = layer,
                       .n = T,
                       .C = D,
                       .planes = 1,
                       .label0 = c->cache_length,
                       .xb = bs->out + (size_t)p * B * T * D,
                       .xr = rs->out + (size_t)p * B * T * D,
                       .bound = bound[p],
                       .real = real_pos};
        compare_point(c, &q, pos_err, o, *first >= 0 ? NULL : first_out);
        json_array_append_new(pts, o);
        if (*first < 0 && *first_out) {
            *first = (int32_t)json_array_size(pts) - 1;
            *first_point = p;
        }
    }
    free(pos_err);
    return pts;
}

/* A diverging cached call: which of its cache's first and last real
 * positions the worst (row, position) at the first divergent point depends
 * on, on the backend and on ref (gf_key_reach). Into res "key_reach" and,
 * where the two differ, a clause of the summary in text ("" otherwise). */
static void key_reach_of(gf_engine *be, gf_engine *re, const gf_call_log *log, size_t i, const gf_call_entry *c,
                         int32_t first, double bound, const side *bs, const side *rs, int32_t D, json_t *fo,
                         json_t *res, char *text, size_t cap)
{
    text[0] = '\0';
    if (c->cache < 0 || c->cache_length < 1 || log->overflow)
        return;
    json_t *w = json_object_get(fo, "worst");
    const int32_t B = c->in.B, T = c->in.T, L0 = c->cache_length, Tk = L0 + T;
    const int32_t b = (int32_t)json_integer_value(json_object_get(w, "row"));
    const int32_t t = (int32_t)json_integer_value(json_object_get(w, "position")) - L0;
    int32_t js[2] = {-1, -1}; /* the row's first and last real cache positions */
    for (int32_t j = 0; j < L0; j++)
        if (!c->in.key_mask || c->in.key_mask[(size_t)b * Tk + j]) {
            if (js[0] < 0)
                js[0] = j;
            js[1] = j;
        }
    if (js[0] < 0 || t < 0 || t >= T || b < 0 || b >= B)
        return;
    json_t *arr = json_array();
    size_t u = 0;
    for (int k = 0; k < 2 && (k == 0 || js[1] != js[0]); k++) {
        int dep[2] = {0, 0};
        char why[256] = "";
        const side *sd[2] = {bs, rs};
        gf_engine *es[2] = {be, re};
        int ok = 1;
        for (int q = 0; q < 2 && ok; q++) {
            const float *base = sd[q]->out + (((size_t)first * B + b) * T + t) * D;
            ok = gf_key_reach(es[q], log, i, first, b, t, js[k], base, bound, &dep[q], why, sizeof why) == 0;
        }
        if (!ok) {
            json_array_append_new(arr, json_pack("{s:i, s:s}", "cache_position", js[k], "error", why));
            continue;
        }
        json_array_append_new(arr,
                              json_pack("{s:i, s:b, s:b}", "cache_position", js[k], "backend", dep[0], "ref", dep[1]));
        if (dep[0] != dep[1] && u < cap)
            u += (size_t)snprintf(text + u, cap - u, "; there the backend %s cache position %d (ref %s)",
                                  dep[0] ? "depends on" : "does not depend on", js[k], dep[1] ? "does" : "does not");
    }
    json_object_set_new(res, "key_reach", arr);
}

static void side_free(side *s, int32_t n_caches)
{
    for (int32_t i = 0; s->caches && i < n_caches; i++)
        gf_engine_cache_free(s->e, s->caches[i]);
    free(s->caches);
    free(s->logits);
    free(s->out);
    free(s->given);
    free(s->kv);
    free(s->kv_given);
}

json_t *gf_localize(gf_session *s, const gf_call_log *log, const char *model_dir, int threads, double u,
                    double budget_s)
{
    double t0 = gf_now_s();
    json_t *res = json_object();
    char msg[1024] = "";
    const char *status = "not_localized";
    gf_engine_log_to(s->engine, NULL); /* the replay is not logged */
    const gf_model_config *g = gf_engine_config(s->engine);
    const int32_t L = g->n_layer, D = g->n_embd, V = g->vocab_size, P = GF_TRACE_POINTS(L);
    const int32_t KVd = (g->n_kv_head > 0 ? g->n_kv_head : g->n_head) * g->d_head;
    int32_t W = g->n_embd > g->d_ff ? g->n_embd : g->d_ff;
    if (g->n_head * g->d_head > W)
        W = g->n_head * g->d_head;
    double *bound = malloc((size_t)P * sizeof *bound);
    for (int32_t p = 0; bound && p < P; p++)
        bound[p] = GF_TRACE_SAFETY * (p + 1) * W * u * u;
    json_object_set_new(res, "unit_roundoff", json_real(u));
    char rule[200];
    snprintf(rule, sizeof rule, "%g x (p + 1) x W x u^2, W = max(n_embd, d_ff, n_head d_head) = %d, u = %g",
             GF_TRACE_SAFETY, W, u);
    json_object_set_new(res, "bound_rule", json_string(rule));
    json_object_set_new(res, "calls_logged", json_integer((json_int_t)log->n_forward));
    json_object_set_new(res, "log_overflow", json_boolean(log->overflow));
    gf_session rsess;
    side bs = {.e = s->engine}, rs = {0};
    int ref_open = 0;
    long long replayed = 0;
    json_t *peak = NULL; /* every point's largest NMSE over the calls replayed (a match's headroom) */
    if (!bound) {
        snprintf(msg, sizeof msg, "out of memory");
        goto done;
    }
    if (gf_session_open(&rsess, model_dir, "ref", threads, GF_SESSION_TOK_NONE) != GF_OK) {
        snprintf(msg, sizeof msg, "opening the model on ref: %s", gf_error_msg());
        goto done;
    }
    ref_open = 1;
    rs.e = rsess.engine;
    bs.caches = calloc((size_t)log->n_caches + 1, sizeof *bs.caches);
    rs.caches = calloc((size_t)log->n_caches + 1, sizeof *rs.caches);
    bs.given = malloc((size_t)P);
    rs.given = malloc((size_t)P);
    bs.kv_given = calloc((size_t)L, 1);
    rs.kv_given = calloc((size_t)L, 1);
    if (!bs.caches || !rs.caches || !bs.given || !rs.given || !bs.kv_given || !rs.kv_given) {
        snprintf(msg, sizeof msg, "out of memory");
        goto done;
    }
    json_t *not_given = NULL;
    for (size_t i = 0; i < log->n; i++) {
        const gf_call_entry *c = &log->v[i];
        side *sd[2] = {&bs, &rs};
        if (c->op == GF_CALL_CACHE_CREATE) {
            for (int k = 0; k < 2; k++)
                if (gf_engine_cache_create(sd[k]->e, c->batch, c->max_len, &sd[k]->caches[c->cache]) != GF_OK) {
                    snprintf(msg, sizeof msg, "the replay's cache_create failed on %s: %s", k ? "ref" : "the backend",
                             gf_error_msg());
                    goto done;
                }
            continue;
        }
        if (c->op == GF_CALL_CACHE_RESET || c->op == GF_CALL_CACHE_FREE) {
            for (int k = 0; k < 2; k++) {
                if (!sd[k]->caches[c->cache])
                    continue;
                if (c->op == GF_CALL_CACHE_RESET) {
                    gf_engine_cache_reset(sd[k]->e, sd[k]->caches[c->cache]);
                } else {
                    gf_engine_cache_free(sd[k]->e, sd[k]->caches[c->cache]);
                    sd[k]->caches[c->cache] = NULL;
                }
            }
            continue;
        }
        if (c->status != GF_OK)
            continue; /* it failed in the case too (a context limit the case expects): nothing to compare */
        if (gf_now_s() - t0 > budget_s) {
            snprintf(msg, sizeof msg,
                     "no point past its bound in the %lld calls replayed within %.0f s (of %zu logged)", replayed,
                     budget_s, log->n_forward);
            goto done;
        }
        const int32_t B = c->in.B, T = c->in.T, rows_t = c->in.logits_mode == GF_LOGITS_LAST ? 1 : T;
        const int32_t Tk = c->cache_length + T;
        size_t nl = (size_t)B * rows_t * V, no = (size_t)P * B * T * D, nkv = 2 * (size_t)L * B * Tk * KVd;
        const int want_kv = nkv <= GF_TRACE_KV_MAX_FLOATS; /* past it the keys and values are not asked for */
        for (int k = 0; k < 2; k++) {
            free(sd[k]->logits);
            free(sd[k]->out);
            free(sd[k]->kv);
            sd[k]->logits = malloc(nl * sizeof(float));
            sd[k]->out = calloc(no, sizeof(float));
            sd[k]->kv = want_kv ? calloc(nkv, sizeof(float)) : NULL;
            memset(sd[k]->kv_given, 0, (size_t)L);
            if (!sd[k]->logits || !sd[k]->out || (want_kv && !sd[k]->kv)) {
                snprintf(msg, sizeof msg, "out of memory for a (%d, %d, %d, %d) trace", P, B, T, D);
                goto done;
            }
            gf_trace_request req = {.struct_size = sizeof req,
                                    .n_layer = L,
                                    .n_embd = D,
                                    .row0 = 0,
                                    .rows = B,
                                    .pos0 = 0,
                                    .positions = T,
                                    .out = sd[k]->out,
                                    .given = sd[k]->given,
                                    .kv_dim = KVd,
                                    .kv_positions = Tk,
                                    .kv_out = sd[k]->kv,
                                    .kv_given = sd[k]->kv_given};
            void *cache = c->cache >= 0 ? sd[k]->caches[c->cache] : NULL;
            if (c->cache >= 0 && !cache) {
                snprintf(msg, sizeof msg, "the log's call %lld used a cache the replay does not hold", replayed + 1);
                goto done;
            }
            if (gf_engine_forward_trace(sd[k]->e, cache, &c->in, sd[k]->logits, &req) != GF_OK) {
                snprintf(msg, sizeof msg, "the replay's forward call #%lld failed on %s: %s", replayed + 1,
                         k ? "ref" : "the backend", gf_error_msg());
                goto done;
            }
        }
        replayed++;
        if (!not_given) {
            not_given = json_array();
            for (int32_t p = 0; p < P; p++)
                if (!bs.given[p]) {
                    char name[64];
                    int32_t layer;
                    const char *sub;
                    point_name(name, sizeof name, L, p, &layer, &sub);
                    json_array_append_new(not_given, json_string(name));
                }
            json_object_set_new(res, "not_given", not_given);
            int kv_all = 1;
            for (int32_t l = 0; l < L; l++)
                kv_all &= bs.kv_given[l] != 0;
            json_object_set_new(res, "keys_and_values",
                                json_string(!want_kv ? "not asked (the call's cache is too large to copy)"
                                            : kv_all ? "compared at every block"
                                                     : "not given by the backend for every block (those not "
                                                       "compared)"));
        }
        int32_t first, first_point;
        json_t *fo;
        json_t *pts = compare_call(c, &bs, &rs, L, D, KVd, g->d_head, bound, &first, &first_point, &fo);
        if (first < 0) {
            if (!peak) {
                peak = pts;
                continue;
            }
            for (size_t q = 0; q < json_array_size(pts) && q < json_array_size(peak); q++) {
                json_t *a = json_array_get(peak, q), *b = json_array_get(pts, q);
                if (strcmp(json_string_value(json_object_get(a, "point")),
                           json_string_value(json_object_get(b, "point"))))
                    continue; /* a call that gave other points (keys and values) */
                json_t *na = json_object_get(a, "nmse"), *nb = json_object_get(b, "nmse");
                if (json_is_real(nb) && (!json_is_real(na) || json_real_value(nb) > json_real_value(na)))
                    json_object_set(a, "nmse", nb);
            }
            json_decref(pts);
            continue;
        }
        json_decref(peak);
        peak = NULL;
        status = "diverged";
        char call[200];
        snprintf(call, sizeof call, "%s (forward call #%lld, B %d, T %d%s)",
                 c->cache >= 0 ? "cached call" : "uncached call", replayed, B, T, "");
        if (c->cache >= 0)
            snprintf(call, sizeof call, "cached call (forward call #%lld, B %d, T %d, cache length %d)", replayed, B, T,
                     c->cache_length);
        json_object_set_new(res, "call",
                            json_pack("{s:I, s:b, s:i, s:i, s:i, s:s}", "index", (json_int_t)replayed, "cached",
                                      c->cache >= 0, "cache_length", c->cache_length, "B", B, "T", T, "logits_mode",
                                      c->in.logits_mode == GF_LOGITS_LAST ? "last" : "all"));
        json_object_set_new(res, "points", pts);
        const char *rows_text = json_string_value(json_object_get(fo, "rows_text"));
        json_t *w = json_object_get(fo, "worst");
        char earlier[400] = "";
        size_t eu = 0;
        int n_earlier = 0;
        for (int32_t p = 0; p < first; p++) {
            json_t *po = json_array_get(pts, (size_t)p);
            if (!json_is_real(json_object_get(po, "nmse")))
                continue;
            n_earlier++;
            if (eu < sizeof earlier && n_earlier <= 4)
                eu += (size_t)snprintf(earlier + eu, sizeof earlier - eu, "%s%s %.1e", n_earlier > 1 ? ", " : "",
                                       json_string_value(json_object_get(po, "point")),
                                       json_real_value(json_object_get(po, "nmse")));
        }
        if (n_earlier > 4 && eu < sizeof earlier)
            snprintf(earlier + eu, sizeof earlier - eu, ", ...");
        char reach[400] = "";
        if (first_point >= 0) /* the keys and values were right (or not given): which keys it reads */
            key_reach_of(s->engine, rs.e, log, i, c, first_point, bound[first_point], &bs, &rs, D, fo, res, reach,
                         sizeof reach);
        json_t *nm = json_object_get(fo, "nmse");
        snprintf(msg, sizeof msg,
                 "first divergence at %s, %s%s%s, %s: NMSE %.2e > bound %.2e; worst row %lld %s %lld channel "
                 "%lld (backend %.6g, ref %.6g); %d earlier point%s below %s%s%s%s%s",
                 json_string_value(json_object_get(fo, "point")), json_string_value(json_object_get(fo, "positions")),
                 rows_text && rows_text[0] ? ", " : "", rows_text ? rows_text : "", call,
                 json_is_real(nm) ? json_real_value(nm) : INFINITY, json_real_value(json_object_get(fo, "bound")),
                 (long long)json_integer_value(json_object_get(w, "row")),
                 json_string_value(json_object_get(w, "position_kind")),
                 (long long)json_integer_value(json_object_get(w, "position")),
                 (long long)json_integer_value(json_object_get(w, "channel")),
                 json_real_value(json_object_get(w, "backend")), json_real_value(json_object_get(w, "ref")), n_earlier,
                 n_earlier == 1 ? "" : "s", n_earlier == 1 ? "its bound" : "their bounds", n_earlier ? " (" : "",
                 earlier, n_earlier ? ")" : "", reach);
        json_object_set_new(res, "first", fo);
        goto done;
    }
    if (replayed == 0) {
        snprintf(msg, sizeof msg, "no forward call was logged%s", log->overflow ? " (the log overflowed)" : "");
    } else {
        status = "matched";
        /* the point closest to its bound: the headroom */
        double worst = -1;
        const char *wname = "";
        for (size_t q = 0; q < json_array_size(peak); q++) {
            json_t *a = json_array_get(peak, q), *na = json_object_get(a, "nmse");
            double r = json_is_real(na) ? json_real_value(na) / json_real_value(json_object_get(a, "bound")) : -1;
            if (r > worst) {
                worst = r;
                wname = json_string_value(json_object_get(a, "point"));
            }
        }
        snprintf(msg, sizeof msg,
                 "the trace matches ref below every bound in all %lld calls replayed%s (closest: %s at %.2g of its "
                 "bound): the divergence lies after the final norm (the output head, the logits, or a slot outside "
                 "forward)",
                 replayed, log->overflow ? " (the log overflowed: later calls not replayed)" : "", wname,
                 worst < 0 ? 0 : worst);
        json_object_set_new(res, "headroom", json_real(worst > 0 ? 1.0 / worst : INFINITY));
        if (peak)
            json_object_set(res, "points", peak); /* each point's largest NMSE over the calls */
    }
done:
    json_decref(peak);
    json_object_set_new(res, "status", json_string(status));
    json_object_set_new(res, "summary", json_string(msg));
    json_object_set_new(res, "calls_replayed", json_integer(replayed));
    json_object_set_new(res, "seconds", json_real(gf_now_s() - t0));
    side_free(&bs, log->n_caches);
    bs.caches = NULL;
    if (ref_open) {
        side_free(&rs, log->n_caches);
        gf_session_close(&rsess);
    } else {
        free(rs.caches);
        free(rs.given);
        free(rs.kv_given);
    }
    free(bound);
    return res;
}
