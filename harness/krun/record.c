/* The run of one (case, backend): checks, metrics, verdict, artifacts; and
 * key readers shared by the kinds. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "genfence/engine.h"
#include "genfence/safetensors.h"
#include "genfence/version.h"
#include "kind.h"

void gf_krun_init(gf_krun *k)
{
    memset(k, 0, sizeof *k);
    k->checks = json_array();
    k->metrics = json_object();
    k->seeds = json_object();
    k->artifacts = json_array();
    k->verdict = GF_V_PASS;
    k->dtype = GF_COMPUTE_F32;
    k->threads = 1;
}

void gf_krun_clear(gf_krun *k)
{
    json_decref(k->checks);
    json_decref(k->metrics);
    json_decref(k->seeds);
    json_decref(k->artifacts);
    memset(k, 0, sizeof *k);
}

/* Raise the verdict; the first reason of the most severe kind is kept. */
static void raise_verdict(gf_krun *k, gf_verdict v, const char *fmt, va_list ap)
{
    gf_verdict worse = gf_verdict_worse(k->verdict, v);
    if (worse == k->verdict && !(v == k->verdict && !k->reason[0]))
        return;
    k->verdict = worse;
    vsnprintf(k->reason, sizeof k->reason, fmt, ap);
}

int gf_k_check(gf_krun *k, int ok, const char *name, const char *fmt, ...)
{
    char detail[1024] = "";
    va_list ap;
    if (fmt) {
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    json_array_append_new(k->checks, json_pack("{s:s, s:b, s:s}", "name", name, "passed", ok, "detail", detail));
    if (!ok)
        gf_k_fail(k, "%s: %s", name, detail);
    return ok;
}

void gf_k_fail(gf_krun *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_verdict(k, GF_V_FAIL, fmt, ap);
    va_end(ap);
}

void gf_k_error(gf_krun *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_verdict(k, GF_V_ERROR, fmt, ap);
    va_end(ap);
}

void gf_k_skip(gf_krun *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_verdict(k, GF_V_SKIP, fmt, ap);
    va_end(ap);
}

void gf_k_stale(gf_krun *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_verdict(k, GF_V_STALE, fmt, ap);
    va_end(ap);
}

static void near_tie(gf_krun *k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    raise_verdict(k, GF_V_PASS_NEAR_TIE, fmt, ap);
    va_end(ap);
}

void gf_k_status(gf_krun *k, gf_status st, const char *what)
{
    switch (st) {
    case GF_OK:
        return;
    case GF_E_UNAVAILABLE:
    case GF_E_UNSUPPORTED:
        gf_k_skip(k, "%s: %s", what, gf_error_msg());
        return;
    case GF_E_IO:
    case GF_E_FORMAT:
    case GF_E_NOT_FOUND:
        gf_k_error(k, "%s: %s", what, gf_error_msg());
        return;
    default:
        gf_k_fail(k, "%s: %s (%s)", what, gf_error_msg(), gf_status_str(st));
        return;
    }
}

void gf_k_metric(gf_krun *k, const char *key, double v)
{
    gf_json_set_number(k->metrics, key, v, NULL);
}

void gf_k_metric_int(gf_krun *k, const char *key, long long v)
{
    json_object_set_new(k->metrics, key, json_integer(v));
}

void gf_k_metric_json(gf_krun *k, const char *key, json_t *v)
{
    json_object_set_new(k->metrics, key, v ? v : json_null());
}

void gf_k_seed(gf_krun *k, const char *what, uint64_t seed)
{
    json_object_set_new(k->seeds, what, json_integer((json_int_t)seed));
}

void gf_k_compare(gf_krun *k, const char *label, const gf_cmp *c)
{
    json_t *comps = json_object_get(k->metrics, "comparisons");
    if (!comps) {
        comps = json_object();
        json_object_set_new(k->metrics, "comparisons", comps);
    }
    json_object_set_new(comps, label, gf_cmp_json(c));
    if (!k->has_summary) {
        k->summary = *c;
        k->has_summary = 1;
    } else {
        gf_cmp_merge(&k->summary, c);
    }
    char why[600];
    gf_verdict v = gf_cmp_verdict(c, why, sizeof why);
    if (v == GF_V_FAIL)
        gf_k_fail(k, "%s: %s", label, why);
    else if (v == GF_V_PASS_NEAR_TIE)
        near_tie(k, "%s: %s", label, why);
}

static void sanitize(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-' || *s == '.' || *s == '@'))
            *s = '_';
}

void gf_k_write_logits(gf_krun *k, const char *label, int32_t step, const float *ref, const char *ref_side,
                       const float *test, const char *test_side, int32_t V)
{
    if (!k->artifact_dir || !k->artifact_stem)
        return;
    mkdir(k->artifact_dir, 0777);
    char name[512], path[4096];
    snprintf(name, sizeof name, "%s.%s.step%d", k->artifact_stem, label, step);
    sanitize(name);
    snprintf(path, sizeof path, "%s/%s.safetensors", k->artifact_dir, name);
    gf_st_write_tensor t[2] = {
        {.name = "reference", .dtype = GF_DT_F32, .ndim = 1, .shape = {V}, .data = ref},
        {.name = "test", .dtype = GF_DT_F32, .ndim = 1, .shape = {V}, .data = test},
    };
    char step_s[32];
    snprintf(step_s, sizeof step_s, "%d", step);
    const char *keys[] = {"label", "step", "reference", "test", "backend", "dtype", "genfence"};
    const char *vals[] = {label, step_s, ref_side, test_side, k->backend_name ? k->backend_name : k->backend,
                          gf_dtype_str(k->dtype), GENFENCE_VERSION " (" GENFENCE_COMMIT ")"};
    gf_status st = gf_safetensors_write(path, t, 2, keys, vals, sizeof keys / sizeof keys[0]);
    if (st == GF_OK)
        json_array_append_new(k->artifacts, json_string(path));
    else
        json_array_append_new(k->artifacts, json_pack("{s:s, s:s}", "path", path, "error", gf_error_msg()));
}

json_t *gf_krun_record(const gf_krun *k)
{
    json_t *r = json_object();
    json_object_set_new(r, "verdict", json_string(gf_verdict_str(k->verdict)));
    json_object_set_new(r, "reason", json_string(k->reason));
    json_object_set(r, "checks", k->checks);
    json_t *m = json_deep_copy(k->metrics);
    if (k->has_summary) {
        json_object_set_new(m, "summary", gf_cmp_json(&k->summary));
    } else { /* the comparison metrics exist for every case: null here, with the reason */
        json_t *s = json_object();
        json_object_set_new(s, "comparison", json_false());
        static const char *const keys[] = {"max_abs_delta", "max_delta_step", "min_margin", "safety_factor",
                                           "near_ties"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            gf_json_set_number(s, keys[i], NAN, "no logits comparison in this kind");
        json_object_set_new(m, "summary", s);
    }
    json_object_set_new(r, "metrics", m);
    json_object_set(r, "seeds", k->seeds);
    json_object_set(r, "artifacts", k->artifacts);
    return r;
}

/* ---- small shared helpers ---- */

const char *gf_k_ids_str(char *buf, size_t cap, const int32_t *v, size_t n)
{
    size_t at = 0;
    at += (size_t)snprintf(buf + at, cap - at, "[");
    for (size_t i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, i ? ", %d" : "%d", v[i]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
    return buf;
}

void gf_k_note_sampler(gf_krun *k)
{
    k->sampler_noted = 1;
    if (k->sample_ops) { /* gf_k_slot_finish replaces the slot's entry with its tally */
        gf_k_metric_json(k, "sampler", json_string("engine + backend slot"));
        gf_k_metric_json(k, "backend_sample_slot", json_string("exercised"));
        return;
    }
    gf_k_metric_json(k, "sampler", json_string("engine"));
    gf_k_metric_json(k, "backend_sample_slot",
                     json_string(k->backend_has_sample ? "present (not exercised: the generation loop samples on the engine)"
                                                       : "none"));
}

void gf_k_slot_rows(gf_krun *k, const char *what, const float *logits, int32_t B, int32_t V,
                    const gf_sampler_params *p, const uint64_t *seq_ids, uint64_t step,
                    const int32_t *engine_tokens)
{
    if (!k->sample_ops || B < 1)
        return;
    int32_t *ids = malloc((size_t)B * sizeof *ids);
    k->slot_calls++;
    gf_status st = ids ? gf_backend_sample(k->sample_ops, NULL, logits, B, V, p, seq_ids, step, ids)
                       : gf_error_set(GF_E_NOMEM, "out of memory");
    if (st != GF_OK) {
        if (!k->slot_errors++ && !k->slot_mismatches)
            snprintf(k->slot_first, sizeof k->slot_first, "%s: %s", what, gf_error_msg());
        free(ids);
        return;
    }
    for (int32_t b = 0; b < B; b++) {
        k->slot_rows++;
        if (ids[b] == engine_tokens[b])
            continue;
        if (!k->slot_mismatches++ && !k->slot_errors)
            snprintf(k->slot_first, sizeof k->slot_first, "%s, row %d (seq %llu, step %llu): slot %d, engine %d",
                     what, b, (unsigned long long)(seq_ids ? seq_ids[b] : (uint64_t)b), (unsigned long long)step,
                     ids[b], engine_tokens[b]);
    }
    free(ids);
}

void gf_k_slot_finish(gf_krun *k)
{
    if (!k->sample_ops || !k->sampler_noted)
        return;
    json_t *m = json_object();
    json_object_set_new(m, "ran", json_true());
    json_object_set_new(m, "model", json_null()); /* sampler-only: called without a model */
    json_object_set_new(m, "calls", json_integer(k->slot_calls));
    json_object_set_new(m, "rows", json_integer(k->slot_rows));
    json_object_set_new(m, "mismatches", json_integer(k->slot_mismatches));
    json_object_set_new(m, "errors", json_integer(k->slot_errors));
    json_object_set_new(m, "first_difference", k->slot_first[0] ? json_string(k->slot_first) : json_null());
    gf_k_metric_json(k, "backend_sample_slot", m);
    int ok = k->slot_calls > 0 && !k->slot_mismatches && !k->slot_errors;
    if (ok)
        gf_k_check(k, 1, "backend sample slot equals engine sampler", "%lld calls, %lld rows: every token equal",
                   k->slot_calls, k->slot_rows);
    else if (!k->slot_calls)
        gf_k_check(k, 0, "backend sample slot equals engine sampler", "the slot was never called");
    else
        gf_k_check(k, 0, "backend sample slot equals engine sampler",
                   "%lld of %lld rows differ, %lld of %lld calls failed; first: %s", k->slot_mismatches,
                   k->slot_rows, k->slot_errors, k->slot_calls, k->slot_first);
}

/* ---- shared key readers ---- */

int gf_y_sampler(gf_cctx *ctx, const gf_ynode *map, gf_sampler_params *p)
{
    int bad = 0;
    bad |= gf_y_double(ctx, map, "temperature", 0, &p->temperature) < 0;
    const gf_ynode *k = gf_y_get(ctx, map, "top_k", 0);
    if (k) {
        if (gf_yscalar_resolve(k).type == GF_YS_NULL) {
            p->use_top_k = 0;
        } else {
            long long v;
            if (gf_y_node_int(ctx, k, "'top_k'", -2147483647LL, 2147483647LL, &v) < 0)
                bad = 1;
            p->use_top_k = 1;
            p->top_k = (int32_t)v;
        }
    }
    const gf_ynode *tp = gf_y_get(ctx, map, "top_p", 0);
    if (tp) {
        if (gf_yscalar_resolve(tp).type == GF_YS_NULL) {
            p->use_top_p = 0;
        } else {
            if (gf_y_node_double(ctx, tp, "'top_p'", &p->top_p) < 0)
                bad = 1;
            p->use_top_p = 1;
        }
    }
    long long seed;
    int rc = gf_y_int(ctx, map, "seed", 0, 0, 0x7fffffffffffffffLL, &seed);
    if (rc < 0)
        bad = 1;
    else if (rc > 0)
        p->seed = (uint64_t)seed;
    return bad ? -1 : 0;
}

json_t *gf_sampler_json(const gf_sampler_params *p)
{
    json_t *o = json_object();
    gf_json_set_number(o, "temperature", p->temperature, NULL);
    json_object_set_new(o, "top_k", p->use_top_k ? json_integer(p->top_k) : json_null());
    if (p->use_top_p)
        gf_json_set_number(o, "top_p", p->top_p, NULL);
    else
        json_object_set_new(o, "top_p", json_null());
    json_object_set_new(o, "seed", json_integer((json_int_t)p->seed));
    return o;
}

int gf_y_probs_or_logits(gf_cctx *ctx, const gf_ynode *map, int flags, float **logits, int32_t *V,
                         int *from_probs)
{
    double *v = NULL;
    size_t n = 0;
    int rp = gf_y_doubles(ctx, map, "probs", 0, 1, &v, &n);
    if (rp < 0)
        return -1;
    if (rp > 0) {
        const gf_ynode *other = gf_y_get(ctx, map, "logits", 0);
        if (other) {
            gf_y_error(ctx, other, "give 'probs' or 'logits', not both");
            free(v);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (!(v[i] >= 0) || !isfinite(v[i])) {
                gf_y_error(ctx, gf_y_get(ctx, map, "probs", 0), "probs entry %zu is %g; probabilities must be >= 0",
                           i, v[i]);
                free(v);
                return -1;
            }
        *from_probs = 1;
    } else {
        int rl = gf_y_doubles(ctx, map, "logits", 0, 1, &v, &n);
        if (rl < 0)
            return -1;
        if (rl == 0) {
            if (flags & GF_Y_REQUIRED)
                gf_y_error(ctx, map, "missing required key 'probs' or 'logits'");
            return (flags & GF_Y_REQUIRED) ? -1 : 0;
        }
        *from_probs = 0;
    }
    *logits = malloc(n * sizeof **logits);
    if (!*logits) {
        free(v);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        (*logits)[i] = *from_probs ? (float)log(v[i]) : (float)v[i];
    *V = (int32_t)n;
    free(v);
    return 1;
}

void gf_prompts_free(gf_prompt_spec *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++) {
        free(p[i].text);
        free(p[i].ids);
    }
    free(p);
}

int gf_y_prompts(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, gf_prompt_spec **out,
                 size_t *n_out)
{
    const gf_ynode *n = gf_y_get(ctx, map, key, flags);
    if (!n)
        return (flags & GF_Y_REQUIRED) ? -1 : 0;
    char what[128];
    snprintf(what, sizeof what, "'%s'", key);
    if (!gf_y_node_is_seq(ctx, n, what))
        return -1;
    if (n->n == 0) {
        gf_y_error(ctx, n, "'%s' is empty", key);
        return -1;
    }
    gf_prompt_spec *p = calloc(n->n, sizeof *p);
    if (!p)
        return -1;
    int ok = 1;
    for (size_t i = 0; i < n->n; i++) {
        const gf_ynode *it = n->items[i];
        snprintf(what, sizeof what, "'%s' entry %zu", key, i);
        if (it->type == GF_YN_SEQ) {
            p[i].ids = calloc(it->n ? it->n : 1, sizeof *p[i].ids);
            p[i].n_ids = it->n;
            if (it->n == 0) {
                gf_y_error(ctx, it, "%s: an empty token list", what);
                ok = 0;
            }
            for (size_t j = 0; p[i].ids && j < it->n; j++) {
                long long v = 0;
                if (gf_y_node_int(ctx, it->items[j], what, 0, 2147483647LL, &v) < 0)
                    ok = 0;
                p[i].ids[j] = (int32_t)v;
            }
        } else if (gf_y_node_string(ctx, it, what, &p[i].text) < 0) {
            ok = 0;
        } else if (!p[i].text[0]) {
            gf_y_error(ctx, it, "%s: an empty prompt", what);
            ok = 0;
        }
    }
    if (!ok) {
        gf_prompts_free(p, n->n);
        return -1;
    }
    *out = p;
    *n_out = n->n;
    return 1;
}

gf_status gf_prompt_tokens(const gf_session *s, const gf_prompt_spec *p, int32_t **ids, int32_t *n)
{
    *ids = NULL;
    *n = 0;
    if (p->ids) {
        *ids = malloc(p->n_ids * sizeof **ids);
        if (!*ids)
            return gf_error_set(GF_E_NOMEM, "out of memory");
        memcpy(*ids, p->ids, p->n_ids * sizeof **ids);
        *n = (int32_t)p->n_ids;
        return GF_OK;
    }
    size_t len = 0;
    gf_status st = gf_session_tokens(s, p->text, NULL, ids, &len);
    if (st != GF_OK)
        return gf_error_prefix(st, "prompt '%s'", p->text);
    *n = (int32_t)len;
    return GF_OK;
}

void gf_k_normals(uint64_t seed, uint64_t stream, double *out, size_t n)
{
    /* Box-Muller on Philox uniforms (step = stream, seq 0x6e6f726d "norm") */
    for (size_t i = 0; i < n; i += 2) {
        double u1 = gf_rng_uniform(seed, 0x6e6f726dULL, stream, (uint32_t)i);
        double u2 = gf_rng_uniform(seed, 0x6e6f726dULL, stream, (uint32_t)i + 1);
        double r = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
        out[i] = r * cos(th);
        if (i + 1 < n)
            out[i + 1] = r * sin(th);
    }
}
