/* precision: the precision a backend effectively computes in, read off its
 * trace against ref's (issue 31 item 4, the precision fingerprint;
 * docs/cases.md "precision").
 *
 * The case decodes a prompt greedily on the backend (a prefill, then
 * `steps` cached one-token calls), logging its calls, and replays them
 * traced on the backend and on ref (gf_localize, localize.h). A dot product
 * of K terms rounded at unit roundoff u leaves an NMSE of about K u^2, so
 * each trace point's NMSE is judged against the bound of the backend's
 * declared precision (its compute dtype, or its weights' or KV cache's when
 * coarser: gf_trace_unit):
 *   - coarser than declared: a point past its bound. The backend computes
 *     there in a precision coarser than it says ("declared fp32, layer 0 MLP
 *     output computes like f16 or coarser"; a GELU through an fp16 table);
 *     the finest precision the measurement is consistent with is named.
 *   - finer than declared: a backend that declares a quantized or half
 *     precision KV cache must show that storage's error in its keys and
 *     values (the trace's keys-and-values points): rounding to a type of
 *     unit roundoff u leaves an NMSE of about u^2 / 3 (f16) to u^2 (q8_0);
 *     the largest over every block and call below u^2 / 64 means the cache
 *     is not stored as declared ("declared q8_0 KV, stores finer").
 * A backend without the trace slot is a skip (its precision cannot be read
 * per sublayer), one whose trace gives no keys and values is not judged on
 * the second rule (said). On ref itself the replay is ref against a second
 * ref session: its trace must match (the oracle's determinism). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "keys.h"
#include "kv_cache.h"
#include "localize.h"
#include "stat_thresholds.h"

typedef struct precision_spec {
    gf_prompt_spec prompt;
    long long steps;
} precision_spec;

static void precision_free(void *p)
{
    precision_spec *s = p;
    if (s) {
        free(s->prompt.text);
        free(s->prompt.ids);
    }
    free(s);
}

static int parse_precision(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    precision_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->steps = 8;
    int bad = gf_y_one_prompt(ctx, m, &s->prompt) < 0;
    bad |= gf_y_int(ctx, m, "steps", 0, 0, 256, &s->steps) < 0;
    return bad ? -1 : 0;
}

/* The ladder of unit roundoffs, finest first: what a measured u is named by. */
static const struct {
    const char *name;
    double u;
} k_ladder[] = {{"fp32", 0x1p-24}, {"f16 / tf32", 0x1p-11}, {"bf16 / 8-bit", 0x1p-8}, {"4-bit", 0x1p-4}};

/* the finest precision whose unit roundoff is at least u ("" past 4-bit) */
static const char *finest_at_least(double u)
{
    for (size_t i = 0; i < sizeof k_ladder / sizeof k_ladder[0]; i++)
        if (k_ladder[i].u >= u)
            return k_ladder[i].name;
    return "";
}

/* Each point's NMSE as an effective unit roundoff: the u whose bound it
 * would sit on (bound ~ u^2), into the record. */
static json_t *fingerprint(const json_t *points, double u)
{
    json_t *fp = json_array();
    for (size_t i = 0; i < json_array_size(points); i++) {
        const json_t *p = json_array_get(points, i), *nm = json_object_get(p, "nmse");
        double b = json_real_value(json_object_get(p, "bound"));
        json_t *o = json_pack("{s:s}", "point", json_string_value(json_object_get(p, "point")));
        if (json_is_real(nm) && b > 0) {
            double ue = u * sqrt(json_real_value(nm) / b);
            json_object_set_new(o, "nmse", json_real(json_real_value(nm)));
            json_object_set_new(o, "u_effective", json_real(ue));
            json_object_set_new(o, "log2_u_effective", ue > 0 ? json_real(log2(ue)) : json_string("-inf"));
        } else {
            json_object_set_new(o, "nmse", json_is_string(nm) ? json_string("inf") : json_null());
        }
        json_array_append_new(fp, o);
    }
    return fp;
}

/* A prefill and `steps` greedy cached calls on the backend (logged). */
static gf_status decode(gf_engine *e, const int32_t *prompt, int32_t n, int32_t steps)
{
    const int32_t V = gf_engine_config(e)->vocab_size, total = n + steps;
    int32_t *tok = malloc((size_t)total * sizeof *tok), *pos = malloc((size_t)total * sizeof *pos); /* (1, n + steps) */
    float *logits = malloc((size_t)V * sizeof *logits);                                             /* (1, 1, V) */
    void *cache = NULL;
    gf_status st = tok && pos && logits ? GF_OK : gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t i = 0; st == GF_OK && i < total; i++) {
        tok[i] = i < n ? prompt[i] : 0;
        pos[i] = i;
    }
    if (st == GF_OK)
        st = gf_engine_cache_create(e, 1, total, &cache);
    gf_batch in = {.B = 1, .T = n, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
    if (st == GF_OK)
        st = gf_engine_forward(e, cache, &in, logits);
    for (int32_t s = 0; st == GF_OK && s < steps; s++) {
        int32_t best = 0;
        for (int32_t v = 1; v < V; v++)
            best = logits[v] > logits[best] ? v : best;
        tok[n + s] = best;
        gf_batch one = {
            .B = 1, .T = 1, .tokens = tok + n + s, .position_ids = pos + n + s, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &one, logits);
    }
    if (cache)
        gf_engine_cache_free(e, cache);
    free(tok);
    free(pos);
    free(logits);
    return st;
}

/* the second rule: a declared coarse KV cache shows its storage's error */
static void judge_kv_floor(gf_krun *k, const json_t *loc, const char *kvt)
{
    /* K and V of different types: the finer one's floor (the points hold both) */
    char kt[32], vt[32];
    gf_kv_split(kvt, kt, sizeof kt, vt, sizeof vt);
    const double uk = gf_trace_unit(GF_COMPUTE_F32, NULL, kt), uvv = gf_trace_unit(GF_COMPUTE_F32, NULL, vt);
    const double ukv = uk < uvv ? uk : uvv;
    if (ukv <= 0x1p-24) {
        gf_k_metric_json(k, "kv_floor", json_string("not judged: the KV cache is declared f32 (no storage floor)"));
        return;
    }
    const json_t *pts = json_object_get(loc, "points");
    double mx = -1;
    const char *where = "";
    for (size_t i = 0; i < json_array_size(pts); i++) {
        const json_t *p = json_array_get(pts, i), *nm = json_object_get(p, "nmse");
        if (strcmp(json_string_value(json_object_get(p, "sublayer")), "keys and values") || !json_is_real(nm))
            continue;
        if (json_real_value(nm) > mx) {
            mx = json_real_value(nm);
            where = json_string_value(json_object_get(p, "point"));
        }
    }
    if (mx < 0) {
        gf_k_metric_json(k, "kv_floor",
                         json_string("not judged: the backend's trace gives no keys and values (docs/backends.md)"));
        return;
    }
    const double floor = ukv * ukv / 64;
    gf_k_metric_json(k, "kv_floor",
                     json_pack("{s:s, s:f, s:f, s:f, s:s}", "kv_cache", kvt, "unit_roundoff", ukv, "floor", floor,
                               "largest_nmse", mx, "at", where));
    gf_k_check(k, mx >= floor, "the keys and values show the declared KV type's rounding",
               "declared KV cache %s (u %g): its keys and values reach at most NMSE %.2e (%s) against ref's f32, "
               "below the floor u^2 / 64 = %.2e that storing them as %s leaves: the cache stores finer than "
               "declared",
               kvt, ukv, mx, where, floor, kvt);
}

static void run_precision(const gf_case *c, gf_krun *k)
{
    const precision_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    if (!gf_backend_has_trace(gf_engine_ops(e))) {
        gf_k_skip(k, "the backend has no trace slot: its precision cannot be read per sublayer (docs/backends.md, "
                     "\"The trace slot\")");
        return;
    }
    int32_t *prompt = NULL, n = 0;
    gf_status st = gf_prompt_tokens(k->session, &s->prompt, &prompt, &n);
    if (st != GF_OK) {
        gf_k_error(k, "%s", gf_error_msg());
        return;
    }
    char wt[32], kvt[32];
    gf_stat_backend_types(k, wt, sizeof wt, kvt, sizeof kvt);
    const double u = gf_trace_unit(k->dtype, wt, kvt);
    /* the runner's log when it keeps one (it localizes a failure from it), else our own */
    gf_call_log own = {0}, *log = gf_engine_log(e);
    if (!log) {
        log = &own;
        gf_engine_log_to(e, log);
    }
    st = decode(e, prompt, n, (int32_t)s->steps);
    free(prompt);
    if (st != GF_OK) {
        gf_engine_log_to(e, NULL);
        gf_call_log_clear(&own);
        gf_k_status(k, st, "the decode");
        return;
    }
    json_t *loc = gf_localize(k->session, log, c->model, k->threads, u, 120);
    gf_engine_log_to(e, NULL); /* gf_localize turned it off too */
    gf_call_log_clear(&own);
    gf_k_metric_json(k, "declared",
                     json_pack("{s:s, s:s, s:s, s:f}", "compute", gf_dtype_str(k->dtype), "weights", wt, "kv_cache",
                               kvt, "unit_roundoff", u));
    gf_k_metric_int(k, "steps", s->steps);
    const char *status = json_string_value(json_object_get(loc, "status"));
    gf_k_metric_json(k, "fingerprint", fingerprint(json_object_get(loc, "points"), u));
    if (!strcmp(status, "not_localized")) {
        gf_k_error(k, "the trace could not be compared: %s", json_string_value(json_object_get(loc, "summary")));
    } else if (!strcmp(status, "diverged")) {
        const json_t *f = json_object_get(loc, "first"), *nm = json_object_get(f, "nmse");
        double b = json_real_value(json_object_get(f, "bound"));
        double ue = json_is_real(nm) ? u * sqrt(json_real_value(nm) / b) : INFINITY;
        const char *like = finest_at_least(ue);
        gf_k_check(k, 0, "every trace point within the declared precision",
                   "declared %s (compute %s, weights %s, kv %s; u %g): %s computes like %s%s (NMSE %.2e > bound "
                   "%.2e at the declared precision; effective u %.2g = 2^%.1f)",
                   finest_at_least(u), gf_dtype_str(k->dtype), wt, kvt, u,
                   json_string_value(json_object_get(f, "point")), like[0] ? like : "nothing finer than 4-bit",
                   like[0] ? " or coarser" : " (a broken kernel, not a precision)",
                   json_is_real(nm) ? json_real_value(nm) : INFINITY, b, ue, log2(ue));
    } else {
        gf_k_check(k, 1, "every trace point within the declared precision", "%s",
                   json_string_value(json_object_get(loc, "summary")));
        judge_kv_floor(k, loc, kvt);
    }
    /* the reading is the record's localization where it names a point past
     * its bound (the runner prints it), none otherwise: a matched replay says
     * nothing a stored-finer finding needs */
    k->localized = 1;
    if (!strcmp(status, "diverged"))
        k->localization = loc;
    else
        json_decref(loc);
}

const gf_kind_def gf_kind_precision = {
    .name = "precision",
    .summary = "the precision a backend computes in, read off its trace against ref's, against the one it declares",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .parse = parse_precision,
    .free_spec = precision_free,
    .run = run_precision,
};
