/* Triangulation against the ref backend (see triangulate.h). */
#include "triangulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"
#include "utf8.h"
#include "compare.h"
#include "genfence/rows.h"
#include "genfence/sampler.h"

enum { TRI_MAX_T = 96 };
#define TRI_SEED 0x747269u

typedef struct tri_arg {
    const char *model;
    const char *backend; /* as requested (name or plugin path) */
    const char *name;    /* as the backend reports it */
    int threads;
} tri_arg;

typedef struct tri_part {
    double max;
    int32_t pos;
    double ref_margin;
} tri_part;

/* rows of V logits: test vs ref; pos0: the position of row 0 (max |delta| and
 * the margin: genfence/rows.h, as the gate computes them) */
static void compare_rows(tri_part *p, const float *test, const float *ref, int32_t rows, int32_t V, int32_t pos0)
{
    for (int32_t r = 0; r < rows; r++) {
        double d = gf_max_abs_delta(test + (size_t)r * V, ref + (size_t)r * V, (size_t)V, NULL);
        if (d > p->max || p->pos < 0) {
            p->max = d;
            p->pos = pos0 + r;
            gf_row_top(ref + (size_t)r * V, V, NULL, &p->ref_margin);
        }
    }
}

static json_t *part_json(const tri_part *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "max_abs_delta", isfinite(p->max) ? json_real(p->max) : json_null());
    json_object_set_new(o, "position", json_integer(p->pos));
    json_object_set_new(o, "ref_margin", isfinite(p->ref_margin) ? json_real(p->ref_margin) : json_null());
    return o;
}

/* One side's probe outputs. A: the probe sequence (T tokens); Bq: a second
 * sequence of distinct tokens (n2 = T - h), row 1 of the padded batches. */
typedef struct tri_out {
    float *forward; /* (T, V): A uncached */
    float *alone;   /* (n2, V): Bq uncached, alone */
    float *cached;  /* (T - h + 1, V): A's positions h-1 .. T-1, decoded one token at a time */
    float *chunked; /* (T, V): A prefilled into a cache in chunks of c1, c2, then the rest */
    float *padded;  /* (2, T, V): [A; h pads + Bq] uncached */
    float *pcached; /* (2, D + 1, V): the same batch, columns T-D-1 .. T-1 through a cache */
} tri_out;

enum { TRI_DECODE = 8 }; /* columns the padded batch decodes through the cache */

static int32_t tri_decode_cols(int32_t T) /* D: at most 8, and row 1 real at column T-D-1 */
{
    int32_t h = T / 2, d = T - h - 2;
    return d < TRI_DECODE ? (d < 1 ? 1 : d) : TRI_DECODE;
}

/* the padded batch through a cache: prefill columns [0, T-D), then decode
 * the last D columns one at a time (key mask (2, length + 1)) */
static gf_status probe_padded_cached(gf_engine *e, const int32_t *tok2, const uint8_t *mask, const int32_t *pos2,
                                     int32_t T, float *out)
{
    const int32_t V = gf_engine_config(e)->vocab_size, D = tri_decode_cols(T), P = T - D;
    int32_t tk[2 * TRI_MAX_T], ps[2 * TRI_MAX_T];
    uint8_t km[2 * TRI_MAX_T];
    void *cache = NULL;
    gf_status st = gf_engine_cache_create(e, 2, T, &cache);
    if (st != GF_OK)
        return st;
    float *last = malloc((size_t)2 * V * sizeof *last);
    if (!last) {
        gf_engine_cache_free(e, cache);
        return gf_error_set(GF_E_NOMEM, "out of memory");
    }
    for (int32_t col = P - 1; col < T && st == GF_OK; col++) {
        const int32_t c0 = col == P - 1 ? 0 : col, n = col - c0 + 1; /* columns [c0, col] */
        for (int32_t b = 0; b < 2; b++) {
            memcpy(tk + b * n, tok2 + (size_t)b * T + c0, (size_t)n * sizeof *tk);
            memcpy(ps + b * n, pos2 + (size_t)b * T + c0, (size_t)n * sizeof *ps);
            memcpy(km + b * (col + 1), mask + (size_t)b * T, (size_t)(col + 1)); /* keys [0, col] */
        }
        gf_batch in = {.B = 2, .T = n, .tokens = tk, .position_ids = ps, .key_mask = km, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &in, last);
        for (int32_t b = 0; st == GF_OK && b < 2; b++)
            memcpy(out + ((size_t)b * (D + 1) + (col - P + 1)) * V, last + (size_t)b * V, (size_t)V * sizeof *last);
    }
    free(last);
    gf_engine_cache_free(e, cache);
    return st;
}

static gf_status run_probe(gf_session *s, const int32_t *tok, const int32_t *tokb, int32_t T, tri_out *o)
{
    gf_engine *e = s->engine;
    const int32_t V = gf_engine_config(e)->vocab_size, h = T / 2, n2 = T - h;
    int32_t pos[TRI_MAX_T], tok2[2 * TRI_MAX_T], pos2[2 * TRI_MAX_T];
    uint8_t mask[2 * TRI_MAX_T];
    for (int32_t t = 0; t < T; t++)
        pos[t] = t;
    gf_batch in = {.B = 1, .T = T, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    gf_status st = gf_engine_forward(e, NULL, &in, o->forward);
    if (st != GF_OK)
        return st;
    gf_batch inb = {.B = 1, .T = n2, .tokens = tokb, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    if ((st = gf_engine_forward(e, NULL, &inb, o->alone)) != GF_OK)
        return st;
    /* cached: prefill h, then one token at a time */
    void *cache = NULL;
    if ((st = gf_engine_cache_create(e, 1, T, &cache)) != GF_OK)
        return st;
    gf_batch pre = {.B = 1, .T = h, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
    st = gf_engine_forward(e, cache, &pre, o->cached);
    for (int32_t t = h; st == GF_OK && t < T; t++) {
        gf_batch one = {.B = 1, .T = 1, .tokens = tok + t, .position_ids = pos + t, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &one, o->cached + (size_t)(t - h + 1) * V);
    }
    /* chunked prefill: pieces of T/4, T/3, then the rest, every position's logits */
    if (st == GF_OK)
        st = gf_engine_cache_reset(e, cache);
    const int32_t cut[3] = {T / 4 > 0 ? T / 4 : 1, T / 4 + T / 3 < T ? T / 4 + T / 3 : T, T};
    for (int32_t i = 0, at = 0; st == GF_OK && i < 3; i++) {
        if (cut[i] <= at)
            continue;
        gf_batch ch = {
            .B = 1, .T = cut[i] - at, .tokens = tok + at, .position_ids = pos + at, .logits_mode = GF_LOGITS_ALL};
        st = gf_engine_forward(e, cache, &ch, o->chunked + (size_t)at * V);
        at = cut[i];
    }
    gf_engine_cache_free(e, cache);
    if (st != GF_OK)
        return st;
    /* row 0: A; row 1: h pads, then Bq (tokens of its own, not A's) */
    for (int32_t t = 0; t < T; t++) {
        tok2[t] = tok[t];
        mask[t] = 1;
        tok2[T + t] = t < h ? 0 : tokb[t - h];
        mask[T + t] = t >= h;
    }
    gf_positions_from_mask(mask, 2, T, pos2, NULL);
    gf_batch pb = {
        .B = 2, .T = T, .tokens = tok2, .position_ids = pos2, .key_mask = mask, .logits_mode = GF_LOGITS_ALL};
    if ((st = gf_engine_forward(e, NULL, &pb, o->padded)) != GF_OK)
        return st;
    return probe_padded_cached(e, tok2, mask, pos2, T, o->pcached);
}

static void tri_out_free(tri_out *o)
{
    free(o->forward);
    free(o->alone);
    free(o->cached);
    free(o->chunked);
    free(o->padded);
    free(o->pcached);
}

static int tri_out_alloc(tri_out *o, int32_t T, int32_t V)
{
    const int32_t h = T / 2, D = tri_decode_cols(T);
    o->forward = malloc((size_t)T * V * sizeof(float));
    o->alone = malloc((size_t)(T - h) * V * sizeof(float));
    o->cached = malloc((size_t)(T - h + 1) * V * sizeof(float));
    o->chunked = malloc((size_t)T * V * sizeof(float));
    o->padded = malloc((size_t)2 * T * V * sizeof(float));
    o->pcached = malloc((size_t)2 * (D + 1) * V * sizeof(float));
    return o->forward && o->alone && o->cached && o->chunked && o->padded && o->pcached;
}

static json_t *tri_child(const void *varg)
{
    const tri_arg *a = varg;
    json_t *r = json_object();
    gf_session ref = {0}, test = {0};
    tri_out o[2] = {{0}};
    gf_status st = gf_session_open(&ref, a->model, "ref", 1, 0);
    if (st == GF_OK)
        st = gf_session_open(&test, a->model, a->backend, a->threads, 0);
    if (st != GF_OK) {
        json_object_set_new(r, "error", gf_json_text(gf_error_msg()));
        goto done;
    }
    const gf_model_config *cfg = gf_engine_config(ref.engine);
    const int32_t V = cfg->vocab_size;
    const int32_t T = cfg->n_positions < TRI_MAX_T ? cfg->n_positions : TRI_MAX_T;
    const int32_t h = T / 2, n2 = T - h, D = tri_decode_cols(T);
    int32_t tok[TRI_MAX_T], tokb[TRI_MAX_T];
    for (int32_t t = 0; t < T; t++) /* A from stream 0, Bq from stream 1: distinct rows */
        tok[t] = (int32_t)(gf_rng_uniform(TRI_SEED, 0, 0, (uint32_t)t) * V) % V;
    for (int32_t t = 0; t < n2; t++)
        tokb[t] = (int32_t)(gf_rng_uniform(TRI_SEED, 1, 0, (uint32_t)t) * V) % V;
    if (!tri_out_alloc(&o[0], T, V) || !tri_out_alloc(&o[1], T, V)) {
        json_object_set_new(r, "error", json_string("out of memory"));
        goto done;
    }
    st = run_probe(&ref, tok, tokb, T, &o[0]);
    if (st != GF_OK) {
        json_object_set_new(r, "error", json_sprintf("ref: %s", gf_error_msg()));
        goto done;
    }
    st = run_probe(&test, tok, tokb, T, &o[1]);
    if (st != GF_OK) {
        json_object_set_new(r, "error", gf_json_text(gf_error_msg()));
        goto done;
    }
    /* every part against ref's uncached single-row forwards (the oracle) */
    tri_part fwd = {0, -1, NAN}, cached = {0, -1, NAN}, chunked = {0, -1, NAN}, padded = {0, -1, NAN},
             pcached = {0, -1, NAN};
    compare_rows(&fwd, o[1].forward, o[0].forward, T, V, 0);
    compare_rows(&fwd, o[1].alone, o[0].alone, n2, V, 0);
    compare_rows(&cached, o[1].cached, o[0].forward + (size_t)(h - 1) * V, T - h + 1, V, h - 1);
    compare_rows(&chunked, o[1].chunked, o[0].forward, T, V, 0);
    /* padded rows against each sequence alone: row 0 = A, row 1's real positions = Bq */
    compare_rows(&padded, o[1].padded, o[0].forward, T, V, 0);
    compare_rows(&padded, o[1].padded + ((size_t)T + h) * V, o[0].alone, n2, V, 0);
    compare_rows(&pcached, o[1].pcached, o[0].forward + (size_t)(T - D - 1) * V, D + 1, V, T - D - 1);
    compare_rows(&pcached, o[1].pcached + (size_t)(D + 1) * V, o[0].alone + (size_t)(T - D - 1 - h) * V, D + 1, V,
                 T - D - 1 - h);
    json_object_set_new(r, "probe_tokens", json_integer(T));
    json_object_set_new(r, "forward", part_json(&fwd));
    json_object_set_new(r, "cached", part_json(&cached));
    json_object_set_new(r, "chunked", part_json(&chunked));
    json_object_set_new(r, "padded", part_json(&padded));
    json_object_set_new(r, "padded_cached", part_json(&pcached));
done:
    tri_out_free(&o[0]);
    tri_out_free(&o[1]);
    gf_session_close(&test);
    gf_session_close(&ref);
    return r;
}

json_t *gf_triangulate(const char *const *models, size_t n_models, const gf_backend_probe *backends, size_t n_backends,
                       const gf_run_opts *o)
{
    json_t *out = json_array();
    size_t n = 0;
    /* a served backend's rows are top-k log-probabilities, not logits: its
     * max |delta| against ref's logits would measure the log-sum-exp */
    for (size_t b = 0; b < n_backends; b++)
        for (size_t m = 0; backends[b].available && !strcmp(backends[b].weights, GF_WEIGHTS_SERVED) && m < n_models;
             m++)
            json_array_append_new(
                out,
                json_pack("{s:s, s:b, s:o, s:o, s:o}", "error",
                          "not probed: a served backend's rows are its top-k log-probabilities, not logits "
                          "(the cases compare them at their ids: docs/http.md)",
                          "skipped", 1, "model", gf_json_text(models[m]), "backend", gf_json_text(backends[b].name),
                          "backend_requested", gf_json_text(backends[b].requested)));
    for (size_t b = 0; b < n_backends; b++)
        if (backends[b].available && !backends[b].opt_in && strcmp(backends[b].name, "ref") &&
            strcmp(backends[b].weights, GF_WEIGHTS_SERVED))
            n += n_models;
    if (!n)
        return out;
    tri_arg *args = calloc(n, sizeof *args);
    const void **argp = calloc(n, sizeof *argp);
    json_t **rec = calloc(n, sizeof *rec);
    char(*why)[256] = calloc(n, sizeof *why);
    if (args && argp && rec && why) {
        size_t k = 0;
        for (size_t b = 0; b < n_backends; b++) {
            if (!backends[b].available || backends[b].opt_in || !strcmp(backends[b].name, "ref") ||
                !strcmp(backends[b].weights, GF_WEIGHTS_SERVED))
                continue; /* (an opt-in backend runs its declared cases only) */
            for (size_t m = 0; m < n_models; m++, k++) {
                args[k] = (tri_arg){.model = models[m],
                                    .backend = backends[b].requested,
                                    .name = backends[b].name,
                                    .threads = o->threads};
                argp[k] = &args[k];
            }
        }
        gf_runner_isolated(tri_child, argp, n, o->jobs, o->timeout_s, o->memory_limit, rec, why);
        for (size_t i = 0; i < n; i++) {
            json_t *r = rec[i] ? rec[i] : json_object();
            if (!rec[i]) { /* no answer: say how the child ended; a hung probe is a timeout */
                int timeout = !strncmp(why[i], "timed out", 9) || strstr(why[i], "(signal 14,") != NULL;
                if (timeout && strncmp(why[i], "timed out", 9))
                    json_object_set_new(r, "error",
                                        json_sprintf("timed out after %.0f s (the probe hung)", o->timeout_s));
                else
                    json_object_set_new(r, "error", gf_json_text(why[i]));
                json_object_set_new(r, "status",
                                    json_string(timeout                          ? "timeout"
                                                : !strncmp(why[i], "crashed", 7) ? "crash"
                                                                                 : "error"));
            }
            json_object_set_new(r, "model", gf_json_text(args[i].model));
            json_object_set_new(r, "backend", gf_json_text(args[i].name));
            json_object_set_new(r, "backend_requested", gf_json_text(args[i].backend));
            json_array_append_new(out, r);
        }
    }
    free(args);
    free(argp);
    free(rec);
    free(why);
    return out;
}

static double part_max(const json_t *r, const char *part)
{
    json_t *v = json_object_get(json_object_get(r, part), "max_abs_delta");
    return json_is_number(v) ? json_number_value(v) : INFINITY;
}

/* The worst part of one backend's record: its name and size. */
static const char *const k_parts[] = {"forward", "cached", "chunked", "padded", "padded_cached"};
enum { N_PARTS = sizeof k_parts / sizeof k_parts[0] };

static const char *worst_part(const json_t *r, double *size)
{
    const char *const *parts = k_parts;
    const char *w = parts[0];
    *size = -1;
    for (int i = 0; i < N_PARTS; i++) {
        double m = part_max(r, parts[i]);
        if (m > *size) {
            *size = m;
            w = parts[i];
        }
    }
    return w;
}

static const json_t *record_for(const json_t *tri, const char *backend, const char *model)
{
    size_t i;
    json_t *r;
    json_array_foreach(tri, i, r)
    {
        if (!strcmp(json_string_value(json_object_get(r, "backend_requested")), backend) &&
            !strcmp(json_string_value(json_object_get(r, "model")), model))
            return r;
    }
    return NULL;
}

/* The backends whose outcome (pass or not) differs from ref's on job a's
 * case, or without ref in the run from the majority's: " -> off: NAME, ...". */
static void print_off(const gf_job *ja, const gf_job *jobs, size_t n_jobs)
{
    int ref_bad = -1;
    size_t n_bad = 0, n_all = 0;
    for (size_t b = 0; b < n_jobs; b++) {
        const gf_job *jb = &jobs[b];
        if (jb->c != ja->c || !jb->backend || !jb->ran)
            continue;
        int bad = gf_verdict_exit(jb->verdict, 0) != 0;
        n_all++;
        n_bad += (size_t)bad;
        if (!strcmp(jb->backend->name, "ref"))
            ref_bad = bad;
    }
    int off_bad; /* the outcome called off: 1 = the failing ones */
    const char *why;
    if (ref_bad >= 0) {
        off_bad = !ref_bad;
        why = ref_bad ? "they pass where ref, the reference, does not" : "they fail where ref, the reference, passes";
    } else if (2 * n_bad != n_all) {
        off_bad = 2 * n_bad < n_all;
        why = "against the majority (no ref in this run)";
    } else {
        printf(" -> off: undecided (no ref in this run and no majority)");
        return;
    }
    printf(" -> off:");
    int first = 1;
    for (size_t b = 0; b < n_jobs; b++) {
        const gf_job *jb = &jobs[b];
        if (jb->c != ja->c || !jb->backend || !jb->ran || (gf_verdict_exit(jb->verdict, 0) != 0) != off_bad)
            continue;
        printf("%s %s", first ? "" : ",", jb->backend->name);
        first = 0;
    }
    size_t n_off = off_bad ? n_bad : n_all - n_bad;
    if (ref_bad >= 0 && 2 * n_off > n_all)
        printf(" (%s; ref is outvoted %zu to %zu)", why, n_off, n_all - n_off);
    else
        printf(" (%s)", why);
}

void gf_triangulation_print(const json_t *tri, const gf_job *jobs, size_t n_jobs)
{
    const double tol = GF_TRIANGULATION_AGREE;
    if (!tri || !json_array_size(tri))
        return;
    printf("triangulation against ref (one probe per model: uncached forward, cached decode, chunked prefill, "
           "padded batch with distinct rows, uncached and cached):\n");
    size_t i;
    json_t *r;
    json_array_foreach(tri, i, r)
    {
        const char *backend = json_string_value(json_object_get(r, "backend"));
        const char *model = json_string_value(json_object_get(r, "model"));
        const char *err = json_string_value(json_object_get(r, "error"));
        if (err) {
            const char *status = json_string_value(json_object_get(r, "status"));
            if (json_is_true(json_object_get(r, "skipped")))
                printf("  %-10s %s: %s\n", backend, model, err);
            else if (status && !strcmp(status, "timeout"))
                printf("  %-10s %s: the probe timed out: %s\n", backend, model, err);
            else
                printf("  %-10s %s: could not run the probe: %s\n", backend, model, err);
            continue;
        }
        double w;
        const char *part = worst_part(r, &w);
        printf("  %-10s %s:", backend, model);
        for (int p = 0; p < N_PARTS; p++)
            printf(" %s %.1e", k_parts[p], part_max(r, k_parts[p]));
        printf("  -> %s", w <= tol ? "agrees with ref" : "OFF");
        if (w > tol) {
            json_t *p = json_object_get(r, part);
            printf(" (%s differs by %.3g at position %lld, ref margin there %.3g)", part, w,
                   (long long)json_integer_value(json_object_get(p, "position")),
                   json_number_value(json_object_get(p, "ref_margin")));
        }
        printf("\n");
    }
    /* cases whose verdicts differ across backends: name the one that is off */
    for (size_t a = 0; a < n_jobs; a++) {
        const gf_job *ja = &jobs[a];
        if (!ja->backend || !ja->c->model || !ja->ran)
            continue;
        int first = 1;
        for (size_t b = 0; b < a; b++)
            if (jobs[b].c == ja->c && jobs[b].backend && jobs[b].ran)
                first = 0;
        if (!first)
            continue;
        int differ = 0;
        for (size_t b = a + 1; b < n_jobs; b++)
            if (jobs[b].c == ja->c && jobs[b].backend && jobs[b].ran &&
                (gf_verdict_exit(jobs[b].verdict, 0) != 0) != (gf_verdict_exit(ja->verdict, 0) != 0))
                differ = 1;
        if (!differ)
            continue;
        printf("  case %s: backends disagree:", ja->c->id);
        for (size_t b = a; b < n_jobs; b++) {
            const gf_job *jb = &jobs[b];
            if (jb->c != ja->c || !jb->backend || !jb->ran)
                continue;
            const json_t *rec = record_for(tri, jb->backend->requested, ja->c->model);
            double w = 0;
            const char *part = rec ? worst_part(rec, &w) : "forward";
            if (!strcmp(jb->backend->name, "ref"))
                printf(" %s %s (the reference);", jb->backend->name, gf_verdict_str(jb->verdict));
            else if (rec && !json_object_get(rec, "error") && w > tol)
                printf(" %s %s (%s off ref by %.2g: this one is off);", jb->backend->name, gf_verdict_str(jb->verdict),
                       part, w);
            else if (rec && !json_object_get(rec, "error"))
                printf(" %s %s (the probe agrees with ref to %.2g);", jb->backend->name, gf_verdict_str(jb->verdict),
                       w);
            else
                printf(" %s %s (no probe);", jb->backend->name, gf_verdict_str(jb->verdict));
        }
        print_off(ja, jobs, n_jobs);
        printf("\n");
    }
}
