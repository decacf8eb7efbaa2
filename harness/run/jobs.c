/* (case, backend) jobs: each runs its kind in a child; the parent turns the
 * record (or the wait status) into a verdict. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hash.h"
#include "localize.h"
#include "slot.h"
#include "pool.h"
#include "registry.h"
#include "runner.h"
#include "sys.h"

/* ---- (case, backend) jobs ---- */

typedef struct job_arg {
    const gf_job *job;
    const gf_run_opts *o;
} job_arg;

static void stem_for(char *buf, size_t cap, const gf_job *j)
{
    snprintf(buf, cap, "%s@%s", j->c->id, j->backend ? j->backend->name : "none");
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '-' || *p == '.' || *p == '@'))
            *p = '_';
}

/* A sampler-only kind on a backend with the slot it reaches (the sample
 * slot, or the speculate slot): open the backend in the child (a protocol
 * client's slots are known once it answered info), hand the kind the table
 * (model NULL), and run it. */
static void run_on_slot(const gf_case *c, gf_krun *k)
{
    const int spec = c->kind->reaches == GF_KIND_REACHES_SPECULATE;
    const int lp = c->kind->reaches == GF_KIND_REACHES_LOGPROBS;
    const char *slot = spec ? "speculate" : lp ? "logprobs" : "sample";
    gf_backend_handle h;
    gf_status st = gf_registry_open(k->backend, &h);
    if (st == GF_OK) {
        gf_backend_options bo = gf_registry_options(&h, k->threads);
        gf_backend_info bi;
        gf_backend_describe(h.ops, &bo, &bi);
    }
    const int has = st == GF_OK && (spec ? gf_backend_has_speculate(h.ops)
                                    : lp ? gf_backend_has_logprobs(h.ops)
                                         : gf_backend_has_sample(h.ops));
    if (!has) {
        gf_k_fail(k, "opening backend '%s' for its %s slot: %s", k->backend, slot,
                  st != GF_OK ? gf_error_msg() : "it has no such slot");
    } else if (spec) {
        k->spec_ops = h.ops; /* every round also through the slot */
        c->kind->run(c, k);
        k->spec_ops = NULL;
    } else if (lp) {
        k->lp_ops = h.ops; /* every row also through the slot */
        c->kind->run(c, k);
        k->lp_ops = NULL;
    } else {
        k->sample_ops = h.ops; /* every sampling call also through the slot */
        c->kind->run(c, k);
        gf_k_slot_finish(k);
        k->sample_ops = NULL;
    }
    if (st == GF_OK)
        gf_registry_close(&h);
}

static json_t *job_child(const void *arg)
{
    const job_arg *a = arg;
    const gf_job *j = a->job;
    const gf_case *c = j->c;
    double t0 = gf_now_s();
    gf_krun k;
    gf_krun_init(&k);
    k.backend = j->backend->requested;
    k.backend_name = j->backend->name;
    k.threads = a->o->threads;
    k.dtype = j->backend->dtype;
    k.weights = j->backend->weights;
    k.backend_has_sample = j->backend->has_sample;
    char stem[512], dir[4096];
    stem_for(stem, sizeof stem, j);
    snprintf(dir, sizeof dir, "%s/failures", a->o->report_dir ? a->o->report_dir : "reports");
    k.artifact_stem = stem;
    k.artifact_dir = a->o->report_dir ? dir : NULL;
    k.golden_dir = a->o->golden_dir;
    k.stat_note = j->stat_note;
    k.model = c->model_arg;
    json_t *loc = NULL; /* the localization of a failing model case (localize.h) */
    if (c->kind->opens_sessions) {
        c->kind->run(c, &k); /* its own model, its own sessions (case.h): not localized */
    } else if (c->kind->reaches == GF_KIND_REACHES_MODEL) {
        gf_session s;
        gf_status st = gf_session_open(&s, c->model, k.backend, k.threads, 0);
        if (st != GF_OK) {
            switch (st) {
            case GF_E_UNAVAILABLE:
            case GF_E_UNSUPPORTED: gf_k_skip(&k, "%s", gf_error_msg()); break;
            case GF_E_IO:
            case GF_E_FORMAT:
            case GF_E_NOT_FOUND:
            case GF_E_INVALID_ARG: gf_k_error(&k, "model '%s': %s", c->model_arg, gf_error_msg()); break;
            default: gf_k_fail(&k, "opening the model on the backend: %s", gf_error_msg()); break;
            }
        } else {
            k.session = &s;
            /* a backend with the trace slot (not ref itself): log the calls,
             * to replay them traced if the case fails (or always: trace) */
            gf_call_log clog = {0};
            int tracing = a->o->trace >= 0 && gf_backend_has_trace(gf_engine_ops(s.engine)) &&
                          strcmp(j->backend->name, "ref") != 0;
            if (tracing)
                gf_engine_log_to(s.engine, &clog);
            c->kind->run(c, &k);
            /* a fail from a failed call (a dead client, an error status) has no
             * hidden state to compare: only a fail of the numbers is replayed */
            if (k.localized) { /* the kind replayed its calls itself (precision) */
                loc = k.localization;
                k.localization = NULL;
            } else if (tracing && ((k.verdict == GF_V_FAIL && !k.failed_call[0]) || a->o->trace > 0)) {
                double left = a->o->timeout_s - (gf_now_s() - t0);
                loc = gf_localize(&s, &clog, c->model, k.threads,
                                  gf_trace_unit(j->backend->dtype, j->backend->weights, j->backend->kv_cache),
                                  left > 3 ? left / 3 : 1);
            }
            gf_engine_log_to(s.engine, NULL);
            gf_call_log_clear(&clog);
            k.session = NULL;
            gf_session_close(&s);
        }
    } else if ((c->kind->reaches == GF_KIND_REACHES_SPECULATE && j->backend->has_speculate) ||
               (c->kind->reaches == GF_KIND_REACHES_LOGPROBS && j->backend->has_logprobs) ||
               (c->kind->reaches == GF_KIND_REACHES_SAMPLE && k.backend_has_sample)) {
        run_on_slot(c, &k); /* a sampler-only kind beside the backend's own slot */
    } else {
        c->kind->run(c, &k);
    }
    json_t *r = gf_krun_record(&k);
    json_object_set_new(r, "child_seconds", json_real(gf_now_s() - t0));
    json_object_set_new(r, "case", json_string(c->id)); /* checked by the parent (gf_runner_record_check) */
    if (loc)
        json_object_set_new(r, "localization", loc);
    gf_krun_clear(&k);
    return r;
}

typedef struct run_ctx {
    gf_job *jobs;
    size_t *map; /* task index -> job index */
    size_t total;
    const gf_run_hooks *hooks;
    gf_task *tasks;
    const gf_run_opts *o;
    int failures; /* finished jobs that did not pass (--maxfail) */
} run_ctx;

static void on_started(size_t ti, size_t running, size_t done, void *u)
{
    run_ctx *r = u;
    gf_job *j = &r->jobs[r->map[ti]];
    j->ran = 1;
    if (r->hooks && r->hooks->started)
        r->hooks->started(j, running, done, r->total, r->hooks->user);
}

static void set_reason(gf_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(gf_job *j, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(j->reason);
    j->reason = strdup(buf);
}

/* The record's schema (runner.h), as the record layer writes it (harness/record/record.c). */
int gf_runner_record_check(const json_t *r, const char *case_id, char *why, size_t cap)
{
    const char *rc = json_string_value(json_object_get(r, "case"));
    if (!rc || strcmp(rc, case_id)) {
        snprintf(why, cap, "it is not this case's (case '%.80s', want '%.80s')", rc ? rc : "(none)", case_id);
        return 0;
    }
    const char *rv = json_string_value(json_object_get(r, "verdict"));
    json_t *checks = json_object_get(r, "checks");
    gf_verdict v;
    if (!rv) {
        snprintf(why, cap, "no verdict");
        return 0;
    }
    if (!gf_verdict_parse(rv, &v)) {
        snprintf(why, cap, "verdict '%.40s' is not a verdict", rv);
        return 0;
    }
    if (gf_verdict_of_baseline(v)) {
        snprintf(why, cap, "verdict '%s' is given only by a baseline (--baseline), never by a run", rv);
        return 0;
    }
    if (!json_is_string(json_object_get(r, "reason"))) {
        snprintf(why, cap, "no reason");
        return 0;
    }
    if (!json_is_array(checks)) {
        snprintf(why, cap, "no checks array");
        return 0;
    }
    if (!json_is_object(json_object_get(r, "metrics"))) {
        snprintf(why, cap, "no metrics object");
        return 0;
    }
    size_t i;
    json_t *ck;
    json_array_foreach(checks, i, ck)
    {
        const char *name = json_string_value(json_object_get(ck, "name"));
        json_t *passed = json_object_get(ck, "passed");
        if (!name || !json_is_boolean(passed)) {
            snprintf(why, cap, "check %zu has no name or no passed flag", i);
            return 0;
        }
        if (json_is_false(passed) && (v == GF_V_PASS || v == GF_V_PASS_NEAR_TIE)) {
            snprintf(why, cap, "verdict %s, but check '%.80s' failed", rv, name);
            return 0;
        }
    }
    json_t *comps = json_object_get(json_object_get(r, "metrics"), "comparisons");
    if ((v == GF_V_PASS || v == GF_V_PASS_NEAR_TIE) && json_array_size(checks) == 0 && json_object_size(comps) == 0) {
        snprintf(why, cap, "verdict %s with no check run and no comparison made", rv);
        return 0;
    }
    return 1;
}

static void on_finished(size_t ti, size_t done, void *u)
{
    run_ctx *r = u;
    gf_task *t = &r->tasks[ti];
    gf_job *j = &r->jobs[r->map[ti]];
    j->decided = 1;
    j->seconds = t->seconds;
    j->exit_code = t->exit_code;
    j->signal = t->signal;
    j->stderr_tail = t->err;
    t->err = NULL;
    j->record = t->record;
    t->record = NULL;
    char ctx[600], why[256];
    gf_task_trace_text(t, ctx, sizeof ctx);
    const char *after = j->record ? " after writing its result" : "";
    if (t->spawn_failed) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "could not start a child: %s", t->spawn_err);
    } else if (t->interrupted) {
        j->verdict = GF_V_ERROR;
        j->interrupted = 1;
        set_reason(j, "interrupted (%s) while it ran: its process group was killed%s",
                   gf_signal_name(gf_runner_interrupted()), ctx);
    } else if (t->over_total) {
        j->verdict = GF_V_TIMEOUT;
        set_reason(j,
                   "timed out: still making backend calls after %.0f s, %d x --timeout (the pair's cap)%s (watchdog%s)",
                   r->o->timeout_s * GF_RUN_TOTAL_FACTOR, GF_RUN_TOTAL_FACTOR, ctx, t->timed_out ? ", killed" : "");
    } else if (t->timed_out || t->signal == SIGALRM) {
        j->verdict = GF_V_TIMEOUT;
        /* a stall: the call in ctx ran --timeout s, or none started for that long after it returned */
        set_reason(j, "timed out after %.0f s%s%s (watchdog%s)", r->o->timeout_s,
                   t->has_trace && !t->trace.in_call ? " without a backend call" : "", ctx,
                   t->timed_out ? ", killed" : "");
    } else if (t->signal) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "killed by signal %d (%s, %s)%s%s", t->signal, gf_signal_name(t->signal), strsignal(t->signal),
                   ctx, after);
    } else if (t->exit_code == GF_CHILD_EXIT_WRITE) {
        j->verdict = GF_V_CRASH;
        set_reason(j,
                   "could not write its result record (exit status %d): the backend closed or reused file "
                   "descriptors it does not own%s",
                   t->exit_code, ctx);
    } else if (t->exit_code != 0) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "exited with status %d%s%s", t->exit_code, j->record ? after : " without a result", ctx);
    } else if (t->rejected) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "result record rejected: %s%s", t->reject_why, ctx);
    } else if (!j->record) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "exited with status 0 without a result%s", ctx);
    } else if (!gf_runner_record_check(j->record, j->c->id, why, sizeof why)) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "result record rejected: %s", why);
    } else {
        gf_verdict v = GF_V_CRASH;
        gf_verdict_parse(json_string_value(json_object_get(j->record, "verdict")), &v);
        j->verdict = v;
        set_reason(j, "%s", json_string_value(json_object_get(j->record, "reason")));
    }
    if (j->verdict == GF_V_CRASH || j->verdict == GF_V_TIMEOUT || j->interrupted)
        j->crash_context = gf_task_trace_json(t);
    int bad = gf_verdict_exit(j->verdict, j->backend->required) != 0;
    if (r->o->as_declared && j->c->has_expect_verdict) /* the declaration decides, as in the tally */
        bad = j->verdict != j->c->expect_verdict;
    if (bad && !j->interrupted && r->o->maxfail > 0 && ++r->failures >= r->o->maxfail)
        gf_pool_stop_starting(1);
    if (r->hooks && r->hooks->finished)
        r->hooks->finished(j, done, r->total, r->hooks->user);
}

void gf_runner_run(gf_job *jobs, size_t n, const gf_run_opts *o, const gf_run_hooks *hooks)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!jobs[i].decided && jobs[i].backend && jobs[i].backend->available)
            m++;
    gf_task *tasks = calloc(m ? m : 1, sizeof *tasks);
    job_arg *args = calloc(m ? m : 1, sizeof *args);
    size_t *map = calloc(m ? m : 1, sizeof *map);
    if (!tasks || !args || !map) {
        free(tasks);
        free(args);
        free(map);
        return;
    }
    if (o->report_dir) {
        mkdir(o->report_dir, 0777);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/failures", o->report_dir);
        mkdir(dir, 0777);
    }
    for (size_t i = 0; i < n; i++) { /* each model a child will hash, hashed once here (hash.c's memo) */
        const gf_case *c = jobs[i].c;
        char hex[65];
        if (!jobs[i].decided && jobs[i].backend && jobs[i].backend->available && c->kind && c->kind->hashes_model &&
            c->model && gf_model_hash(c->model, hex) != GF_OK)
            gf_error_clear(); /* the child meets the error and reports it */
    }
    size_t t = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].decided || !jobs[i].backend || !jobs[i].backend->available)
            continue;
        args[t].job = &jobs[i];
        args[t].o = o;
        tasks[t].fn = job_child;
        tasks[t].arg = &args[t];
        tasks[t].timeout_s = o->timeout_s;
        tasks[t].total_s = o->timeout_s * GF_RUN_TOTAL_FACTOR;
        map[t] = i;
        t++;
    }
    run_ctx ctx = {.jobs = jobs, .map = map, .total = n, .hooks = hooks, .tasks = tasks, .o = o};
    gf_pool_run(tasks, m, o->jobs, o->memory_limit, on_started, on_finished, &ctx);
    gf_pool_stop_starting(0);
    for (size_t i = 0; i < m; i++) {
        gf_job *j = &jobs[map[i]];
        if (tasks[i].not_started && tasks[i].interrupted) { /* the run was interrupted first */
            j->verdict = GF_V_ERROR;
            j->decided = j->interrupted = 1;
            set_reason(j, "not run: the run was interrupted (%s)", gf_signal_name(gf_runner_interrupted()));
        } else if (tasks[i].not_started) { /* --maxfail: a skip that says so */
            j->verdict = GF_V_SKIP;
            j->decided = j->not_run = 1;
            set_reason(j, "not run: --maxfail %d: the run stopped after %d failure%s", o->maxfail, ctx.failures,
                       ctx.failures == 1 ? "" : "s");
        }
        json_decref(tasks[i].record);
        free(tasks[i].err);
    }
    free(tasks);
    free(args);
    free(map);
}

void gf_job_clear(gf_job *j)
{
    free(j->reason);
    free(j->stderr_tail);
    free(j->stat_note);
    j->stat_note = NULL;
    json_decref(j->record);
    json_decref(j->crash_context);
    json_decref(j->baseline);
    j->crash_context = j->baseline = NULL;
    j->reason = NULL;
    j->stderr_tail = NULL;
    j->record = NULL;
}
