/* Triangulation against the ref backend (see triangulate.h). */
#include "triangulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"
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

static double margin_of(const float *x, int32_t V)
{
    gf_sample_result r;
    gf_sampler_greedy_pick(x, V, &r);
    return r.margin;
}

/* rows of V logits: test vs ref; pos0: the position of row 0 */
static void compare_rows(tri_part *p, const float *test, const float *ref, int32_t rows, int32_t V, int32_t pos0)
{
    for (int32_t r = 0; r < rows; r++)
        for (int32_t v = 0; v < V; v++) {
            double d = fabs((double)test[(size_t)r * V + v] - ref[(size_t)r * V + v]);
            if (d != d)
                d = INFINITY;
            if (d > p->max || p->pos < 0) {
                p->max = d;
                p->pos = pos0 + r;
                p->ref_margin = margin_of(ref + (size_t)r * V, V);
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

/* One side's three probe outputs. */
typedef struct tri_out {
    float *forward; /* (T, V) */
    float *cached;  /* (T - h + 1, V): positions h-1 .. T-1 */
    float *padded;  /* (T - h, V): row 1's real positions */
} tri_out;

static gf_status run_probe(gf_session *s, const int32_t *tok, int32_t T, tri_out *o)
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
    void *cache = NULL;
    st = gf_engine_cache_create(e, 1, T, &cache);
    if (st != GF_OK)
        return st;
    gf_batch pre = {.B = 1, .T = h, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
    st = gf_engine_forward(e, cache, &pre, o->cached);
    for (int32_t t = h; st == GF_OK && t < T; t++) {
        gf_batch one = {.B = 1, .T = 1, .tokens = tok + t, .position_ids = pos + t, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &one, o->cached + (size_t)(t - h + 1) * V);
    }
    gf_engine_cache_free(e, cache);
    if (st != GF_OK)
        return st;
    /* row 0: the whole sequence; row 1: h pads, then the second half */
    for (int32_t t = 0; t < T; t++) {
        tok2[t] = tok[t];
        mask[t] = 1;
        tok2[T + t] = t < h ? 0 : tok[t];
        mask[T + t] = t >= h;
    }
    gf_positions_from_mask(mask, 2, T, pos2, NULL);
    float *both = malloc((size_t)2 * T * V * sizeof *both);
    if (!both)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    gf_batch pb = {
        .B = 2, .T = T, .tokens = tok2, .position_ids = pos2, .key_mask = mask, .logits_mode = GF_LOGITS_ALL};
    st = gf_engine_forward(e, NULL, &pb, both);
    if (st == GF_OK)
        memcpy(o->padded, both + ((size_t)T + h) * V, (size_t)n2 * V * sizeof(float));
    free(both);
    return st;
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
        json_object_set_new(r, "error", json_string(gf_error_msg()));
        goto done;
    }
    const gf_model_config *cfg = gf_engine_config(ref.engine);
    const int32_t V = cfg->vocab_size;
    const int32_t T = cfg->n_positions < TRI_MAX_T ? cfg->n_positions : TRI_MAX_T;
    int32_t tok[TRI_MAX_T];
    for (int32_t t = 0; t < T; t++)
        tok[t] = (int32_t)(gf_rng_uniform(TRI_SEED, 0, 0, (uint32_t)t) * V) % V;
    for (int i = 0; i < 2; i++) {
        o[i].forward = malloc((size_t)T * V * sizeof(float));
        o[i].cached = malloc((size_t)(T - T / 2 + 1) * V * sizeof(float));
        o[i].padded = malloc((size_t)(T - T / 2) * V * sizeof(float));
        if (!o[i].forward || !o[i].cached || !o[i].padded) {
            json_object_set_new(r, "error", json_string("out of memory"));
            goto done;
        }
    }
    st = run_probe(&ref, tok, T, &o[0]);
    if (st != GF_OK) {
        json_object_set_new(r, "error", json_sprintf("ref: %s", gf_error_msg()));
        goto done;
    }
    st = run_probe(&test, tok, T, &o[1]);
    if (st != GF_OK) {
        json_object_set_new(r, "error", json_string(gf_error_msg()));
        goto done;
    }
    const int32_t h = T / 2;
    tri_part fwd = {0, -1, NAN}, cached = {0, -1, NAN}, padded = {0, -1, NAN};
    compare_rows(&fwd, o[1].forward, o[0].forward, T, V, 0);
    /* the cached decode is judged against ref's uncached forward: the oracle */
    compare_rows(&cached, o[1].cached, o[0].forward + (size_t)(h - 1) * V, T - h + 1, V, h - 1);
    /* row 1 alone == positions 0 .. n2-1 of the second half run unpadded: ref's
     * padded row is itself checked in ref's unit tests, so it is the reference */
    compare_rows(&padded, o[1].padded, o[0].padded, T - h, V, 0);
    json_object_set_new(r, "probe_tokens", json_integer(T));
    json_object_set_new(r, "forward", part_json(&fwd));
    json_object_set_new(r, "cached", part_json(&cached));
    json_object_set_new(r, "padded", part_json(&padded));
done:
    for (int i = 0; i < 2; i++) {
        free(o[i].forward);
        free(o[i].cached);
        free(o[i].padded);
    }
    gf_session_close(&test);
    gf_session_close(&ref);
    return r;
}

json_t *gf_triangulate(const char *const *models, size_t n_models, const gf_backend_probe *backends, size_t n_backends,
                       const gf_run_opts *o)
{
    json_t *out = json_array();
    size_t n = 0;
    for (size_t b = 0; b < n_backends; b++)
        if (backends[b].available && strcmp(backends[b].name, "ref"))
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
            if (!backends[b].available || !strcmp(backends[b].name, "ref"))
                continue;
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
            if (!rec[i])
                json_object_set_new(r, "error", json_string(why[i]));
            json_object_set_new(r, "model", json_string(args[i].model));
            json_object_set_new(r, "backend", json_string(args[i].name));
            json_object_set_new(r, "backend_requested", json_string(args[i].backend));
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
static const char *worst_part(const json_t *r, double *size)
{
    static const char *const parts[] = {"forward", "cached", "padded"};
    const char *w = parts[0];
    *size = -1;
    for (int i = 0; i < 3; i++) {
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

void gf_triangulation_print(const json_t *tri, const gf_job *jobs, size_t n_jobs, double tol)
{
    if (!tri || !json_array_size(tri))
        return;
    printf("triangulation against ref (one probe per model: uncached forward, cached decode, padded row):\n");
    size_t i;
    json_t *r;
    json_array_foreach(tri, i, r)
    {
        const char *backend = json_string_value(json_object_get(r, "backend"));
        const char *model = json_string_value(json_object_get(r, "model"));
        const char *err = json_string_value(json_object_get(r, "error"));
        if (err) {
            printf("  %-10s %s: could not run the probe: %s\n", backend, model, err);
            continue;
        }
        double w;
        const char *part = worst_part(r, &w);
        printf("  %-10s %s: forward %.1e  cached %.1e  padded %.1e  -> %s", backend, model, part_max(r, "forward"),
               part_max(r, "cached"), part_max(r, "padded"), w <= tol ? "agrees with ref" : "OFF");
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
            else if (rec && !json_object_get(rec, "error"))
                printf(" %s %s (%s off ref by %.2g%s);", jb->backend->name, gf_verdict_str(jb->verdict), part, w,
                       w > tol ? ": this one is off" : "");
            else
                printf(" %s %s (no probe);", jb->backend->name, gf_verdict_str(jb->verdict));
        }
        printf("\n");
    }
}
