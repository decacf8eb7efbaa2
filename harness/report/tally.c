/* The tally of a run and its exit status: decided here, once, from the
 * verdict table (verdict/verdict.h), for the run as a whole and for each
 * backend apart (the runs that reached it, the engine alone, no backend). */
#include <string.h>

#include "report.h"

int gf_job_required(const gf_job *j) { return j->backend && j->backend->required; }

int gf_job_declared(const gf_run_info *r, const gf_job *j)
{
    if (!r || !r->as_declared || !j->c->has_expect_verdict)
        return -1;
    if (j->verdict == GF_V_SKIP && j->c->expect_verdict != GF_V_SKIP)
        return -1; /* not run (its backend not named or unavailable): a skip like any other, not judged */
    return j->verdict == j->c->expect_verdict;
}

gf_outcome gf_outcome_of(gf_verdict v, int req, int declared)
{
    if (declared == 1)
        return GF_OUT_PASSED;
    if (gf_verdict_skipped(v, req))
        return GF_OUT_SKIPPED;
    if (declared == 0 || !gf_verdict_passed(v))
        return GF_OUT_FAILED;
    return GF_OUT_PASSED;
}

int gf_outcome_exit(gf_verdict v, int req, int declared)
{
    if (declared == 1)
        return 0;
    if (declared == 0) { /* not as declared: a check failed; an error stays bad input (an unusable backend) */
        int e = gf_verdict_exit(v, req);
        return gf_verdict_skipped(v, req) ? 0 : e > 1 ? e : 1;
    }
    return gf_verdict_exit(v, req);
}

int gf_job_exit(const gf_run_info *r, const gf_job *j)
{
    return gf_outcome_exit(j->verdict, gf_job_required(j), gf_job_declared(r, j));
}

void gf_counts_add(gf_counts *c, gf_verdict v, int req, int declared, int ran)
{
    c->runs++;
    c->reached += ran != 0;
    switch (gf_outcome_of(v, req, declared)) {
    case GF_OUT_PASSED: c->passed++; break;
    case GF_OUT_SKIPPED: c->skipped++; break;
    case GF_OUT_FAILED: c->failed++; break;
    }
    c->exit_status = gf_exit_combine(c->exit_status, gf_outcome_exit(v, req, declared));
}

int gf_counts_format(const gf_counts *c, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%zu passed, %zu failed, %zu skipped", c->passed, c->failed, c->skipped);
}

gf_counts gf_run_counts_of(const gf_run_info *r, gf_job_group g, const gf_backend_probe *b)
{
    gf_counts c = {0};
    for (size_t i = 0; i < r->n_jobs; i++) {
        const gf_job *j = &r->jobs[i];
        int in = g == GF_GROUP_BACKEND  ? j->backend == b
                 : g == GF_GROUP_ENGINE ? j->backend && j->backend->engine_
                                        : !j->backend;
        if (in)
            gf_counts_add(&c, j->verdict, gf_job_required(j), gf_job_declared(r, j), j->ran);
    }
    return c;
}

int gf_backend_unreached(const gf_run_info *r, const gf_backend_probe *b)
{
    if (!b->available || b->unusable)
        return 0; /* its skips or errors say why */
    for (size_t i = 0; i < r->n_jobs; i++)
        if (r->jobs[i].backend == b && r->jobs[i].ran)
            return 0;
    return 1;
}

const char *gf_backend_label(const gf_backend_probe *b)
{
    if (b->requested && strchr(b->requested, ':') && !strchr(b->requested, '/'))
        return b->requested;
    return b->name ? b->name : b->requested;
}

void gf_run_tally(gf_run_info *r)
{
    memset(r->by_verdict, 0, sizeof r->by_verdict);
    r->passed = r->failed = r->skipped = r->required_skips = 0;
    r->n_declared = r->n_as_declared = r->required_unreached = 0;
    gf_counts all = {0};
    for (size_t i = 0; i < r->n_jobs; i++) {
        const gf_job *j = &r->jobs[i];
        int req = gf_job_required(j), d = gf_job_declared(r, j);
        r->by_verdict[j->verdict]++;
        gf_counts_add(&all, j->verdict, req, d, j->ran);
        if (j->verdict == GF_V_SKIP && req)
            r->required_skips++;
        if (j->c->has_expect_verdict && (j->verdict != GF_V_SKIP || j->c->expect_verdict == GF_V_SKIP)) {
            r->n_declared++; /* (a skip: not run, their backend was not named or is unavailable) */
            r->n_as_declared += j->verdict == j->c->expect_verdict;
        }
    }
    /* a backend named with --require-backend that no case reached (every
     * selected case ran on the engine alone, or none allowed it) tested
     * nothing: a failure, not a pass of that backend */
    for (size_t b = 0; b < r->n_backends; b++)
        if (r->backends[b].required && gf_backend_unreached(r, &r->backends[b])) {
            r->required_unreached++;
            all.exit_status = gf_exit_combine(all.exit_status, 1);
        }
    r->passed = all.passed;
    r->failed = all.failed + r->required_unreached; /* (each one failure: the last line agrees with the exit status) */
    r->skipped = all.skipped;
    r->exit_status = r->interrupted ? 128 + r->interrupted : all.exit_status;
}

/* ---- the same groups from a JSON report (json.c, merge) ---- */

static const char *js(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static json_t *counts_json(const gf_counts *c)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "passed", (json_int_t)c->passed, "failed", (json_int_t)c->failed,
                     "skipped", (json_int_t)c->skipped, "runs", (json_int_t)c->runs, "reached", (json_int_t)c->reached);
}

static void add_result(gf_counts *c, const json_t *res)
{
    gf_verdict v;
    if (!gf_verdict_parse(js(res, "verdict"), &v))
        v = GF_V_ERROR;
    const json_t *d = json_object_get(res, "as_declared");
    gf_counts_add(c, v, json_is_true(json_object_get(res, "backend_required")),
                  json_is_boolean(d) ? json_is_true(d) : -1, json_is_object(json_object_get(res, "process")));
}

static int is_engine(const json_t *res)
{
    return !strcmp(js(res, "backend"), "engine") && !strcmp(js(res, "backend_requested"), "engine");
}

static void group_print(const json_t *g, const char *name, int *n)
{
    long long f = (long long)json_integer_value(json_object_get(g, "failed"));
    int unreached = json_is_true(json_object_get(g, "required")) &&
                    !json_integer_value(json_object_get(g, "reached")) &&
                    !json_integer_value(json_object_get(g, "runs"));
    printf("%s%s: %lld passed, %lld failed, %lld skipped%s", (*n)++ ? "; " : "", name,
           (long long)json_integer_value(json_object_get(g, "passed")), f + unreached,
           (long long)json_integer_value(json_object_get(g, "skipped")),
           unreached ? " (reached no case, --require-backend)" : "");
}

void gf_report_groups_print(const json_t *summary)
{
    int n = 0;
    size_t k;
    const json_t *b;
    json_array_foreach(json_object_get(summary, "by_backend"), k, b)
    {
        const char *req = js(b, "requested"); /* NAME:CONFIG as given, a plugin by its name (gf_backend_label) */
        group_print(b, strchr(req, ':') && !strchr(req, '/') ? req : js(b, "backend"), &n);
    }
    const json_t *e = json_object_get(summary, "engine_alone"), *none = json_object_get(summary, "no_backend");
    if (json_integer_value(json_object_get(e, "runs")))
        group_print(e, "engine alone", &n);
    if (json_integer_value(json_object_get(none, "runs")))
        group_print(none, "no backend matched the case", &n);
    printf("%s\n", n ? "" : "nothing run: 0 passed, 0 failed, 0 skipped");
}

json_t *gf_report_groups(const json_t *results, const json_t *backends)
{
    json_t *by = json_array(), *out = json_object();
    gf_counts eng = {0}, none = {0};
    size_t i, k;
    json_t *res, *b;
    json_array_foreach(results, i, res)
    {
        if (json_is_null(json_object_get(res, "backend")))
            add_result(&none, res);
        else if (is_engine(res))
            add_result(&eng, res);
    }
    /* every backend of the run that was named or has runs, in the run's order */
    json_array_foreach(backends, k, b)
    {
        gf_counts c = {0};
        const char *req = js(b, "requested");
        json_array_foreach(results, i, res) if (!json_is_null(json_object_get(res, "backend")) && !is_engine(res) &&
                                                !strcmp(js(res, "backend_requested"), req)) add_result(&c, res);
        if (!c.runs && !json_is_true(json_object_get(b, "available")))
            continue; /* not run here (default mode) or named and unavailable with no case: its line says so */
        json_t *o = counts_json(&c);
        json_object_set_new(o, "backend", json_string(js(b, "name")));
        json_object_set_new(o, "requested", json_string(req));
        json_object_set_new(o, "required", json_boolean(json_is_true(json_object_get(b, "required"))));
        json_array_append_new(by, o);
    }
    json_object_set_new(out, "by_backend", by);
    json_object_set_new(out, "engine_alone", counts_json(&eng));
    json_object_set_new(out, "no_backend", counts_json(&none));
    return out;
}
