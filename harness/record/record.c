/* The run of one (case, backend): checks, metrics, verdict, artifacts. */
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
#include "record.h"
#include "utf8.h"

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
    json_decref(k->localization);
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
    json_array_append_new(k->checks,
                          json_pack("{s:s, s:b, s:o}", "name", name, "passed", ok, "detail", gf_json_text(detail)));
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
    /* said once: what is not repeated where the message starts with it (a
     * label batch.c put there), nor the status where the message ends with it */
    const char *msg = gf_error_unprefixed(gf_error_msg(), what), *sts = gf_status_str(st);
    size_t nm = strlen(msg), ns = strlen(sts);
    int said = nm >= ns && !strcmp(msg + nm - ns, sts);
    char model[600] = "";
    if ((st == GF_E_INVALID_ARG || st == GF_E_CONTEXT_LIMIT) && k->model && !strstr(msg, k->model))
        snprintf(model, sizeof model, " (model %.500s)", k->model); /* the request did not fit this model */
    switch (gf_verdict_of_status(st)) {
    case GF_V_PASS: return;
    case GF_V_SKIP: gf_k_skip(k, "%s: %s", what, msg); return;
    case GF_V_ERROR: gf_k_error(k, "%s: %s%s", what, msg, model); return;
    default:
        if (!k->failed_call[0] && (gf_verdict_worse(k->verdict, GF_V_FAIL) != k->verdict || !k->reason[0]))
            snprintf(k->failed_call, sizeof k->failed_call, "%s", what);
        gf_k_fail(k, "%s: %s%s%s%s", what, msg, said ? "" : " (", said ? "" : sts, said ? "" : ")");
        return;
    }
}

void gf_k_metric(gf_krun *k, const char *key, double v) { gf_json_set_number(k->metrics, key, v, NULL); }

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
    const char *vals[] = {label,
                          step_s,
                          ref_side,
                          test_side,
                          k->backend_name ? k->backend_name : k->backend,
                          gf_dtype_str(k->dtype),
                          GENFENCE_VERSION " (" GENFENCE_COMMIT ")"};
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
    json_object_set_new(r, "reason", gf_json_text(k->reason)); /* backend text: repaired, not lost (utf8.h) */
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
    if (k->failed_call[0]) /* the failure came from an engine or backend call, not a check */
        json_object_set_new(r, "failed_call", gf_json_text(k->failed_call));
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
