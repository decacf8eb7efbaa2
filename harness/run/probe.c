/* Backend probes: open, probe and describe each backend in its own child. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "pool.h"
#include "utf8.h"
#include "registry.h"
#include "runner.h"
#include "sys.h"

/* ---- probes ---- */

void gf_backend_probe_clear(gf_backend_probe *b)
{
    free(b->requested);
    free(b->name);
    memset(b, 0, sizeof *b);
}

typedef struct probe_arg {
    const gf_backend_probe *b;
    int threads;
} probe_arg;

static json_t *probe_child(const void *arg)
{
    const probe_arg *a = arg;
    gf_backend_handle h;
    json_t *r = json_object();
    if (a->b->absent) { /* the default run's echo client, not built here (cmd_run.c) */
        json_object_set_new(r, "available", json_false());
        json_object_set_new(r, "why", gf_json_text(a->b->why));
        return r;
    }
    gf_status st = gf_registry_open(a->b->requested, &h);
    if (st != GF_OK) { /* unknown name, missing file, refused table: unusable */
        json_object_set_new(r, "available", json_false());
        json_object_set_new(r, "unusable", json_true());
        json_object_set_new(r, "why", gf_json_text(gf_error_msg()));
        return r;
    }
    const gf_backend_ops *ops = h.ops;
    json_object_set_new(r, "name", gf_json_text(ops->name));
    json_object_set_new(r, "description", gf_json_text(ops->description ? ops->description : ""));
    json_object_set_new(r, "source", gf_json_text(h.source));
    char why[512] = "";
    st = gf_backend_available(ops, why, sizeof why);
    json_object_set_new(r, "available", json_boolean(st == GF_OK));
    json_object_set_new(r, "why", gf_json_text(why));
    if (st != GF_OK && st != GF_E_UNAVAILABLE) /* it wrote outside why (engine/guard.c): broken, not absent */
        json_object_set_new(r, "unusable", json_true());
    if (st == GF_OK) {
        gf_backend_options o = gf_registry_options(&h, a->threads);
        gf_backend_info info;
        gf_error_clear();
        gf_status dst = gf_backend_describe(ops, &o, &info);
        if (dst == GF_OK) {
            json_object_set_new(r, "dtype", json_integer(info.dtype));
            json_object_set_new(r, "threads", json_integer(info.threads));
            json_object_set_new(r, "library", gf_json_text(info.library ? info.library : ""));
            json_object_set_new(r, "detail", gf_json_text(info.detail ? info.detail : ""));
            if (info.weights)
                json_object_set_new(r, "weights", gf_json_text(info.weights));
            if (info.kv_cache)
                json_object_set_new(r, "kv_cache", gf_json_text(info.kv_cache));
            if (info.cpu_path)
                json_object_set_new(r, "cpu_path", gf_json_text(info.cpu_path));
        } else if (dst == GF_E_UNAVAILABLE || dst == GF_E_INVALID_ARG) {
            /* it probes but cannot run with these options (exec without a
             * client command): nothing can run on it. Other failures (a
             * client that crashes at its handshake) are the backend's fault,
             * found by the runs (fail). UNSUPPORTED: no info slot, defaults. */
            const char *vendor = gf_backend_last_error(ops, NULL);
            char msg[512];
            snprintf(msg, sizeof msg, "info: %s%s%s", gf_status_str(dst), vendor[0] || gf_error_msg()[0] ? ": " : "",
                     vendor[0] ? vendor : gf_error_msg());
            json_object_set_new(r, "available", json_false());
            json_object_set_new(r, "unusable", json_true());
            json_object_set_new(r, "why", gf_json_text(msg));
        }
    }
    /* after describe: a protocol client's sample slot is known once it has
     * answered (backends/exec) */
    json_object_set_new(r, "has_sample", json_boolean(gf_backend_has_sample(ops)));
    json_object_set_new(r, "has_speculate", json_boolean(gf_backend_has_speculate(ops)));
    json_object_set_new(r, "has_logprobs", json_boolean(gf_backend_has_logprobs(ops)));
    gf_registry_close(&h);
    return r;
}

static void copy_str(char *dst, size_t cap, json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    snprintf(dst, cap, "%s", v ? v : "");
}

void gf_runner_probe(gf_backend_probe *b, size_t n, const gf_run_opts *o)
{
    gf_task *tasks = calloc(n ? n : 1, sizeof *tasks);
    probe_arg *args = calloc(n ? n : 1, sizeof *args);
    if (!tasks || !args) {
        free(tasks);
        free(args);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        args[i].b = &b[i];
        args[i].threads = o->threads;
        tasks[i].fn = probe_child;
        tasks[i].arg = &args[i];
        /* a probe gets GF_RUN_PROBE_TIMEOUT_S, or --timeout when that is shorter */
        tasks[i].timeout_s =
            o->timeout_s > 0 && o->timeout_s < GF_RUN_PROBE_TIMEOUT_S ? o->timeout_s : GF_RUN_PROBE_TIMEOUT_S;
    }
    gf_pool_run(tasks, n, (int)(n > 16 ? 16 : n), o->memory_limit, NULL, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        gf_task *t = &tasks[i];
        gf_backend_probe *p = &b[i];
        p->dtype = GF_COMPUTE_F32;
        p->threads = o->threads;
        char ctx[200];
        gf_task_trace_text(t, ctx, sizeof ctx);
        if (!t->record) {
            p->available = 0;
            p->unusable = 1;
            if (t->spawn_failed)
                snprintf(p->why, sizeof p->why, "probe not started: %s", t->spawn_err);
            else if (t->interrupted)
                snprintf(p->why, sizeof p->why, "the probe was interrupted (%s)",
                         gf_signal_name(gf_runner_interrupted()));
            else if (t->timed_out || t->signal == SIGALRM)
                snprintf(p->why, sizeof p->why, "the probe did not answer within %.0f s (it hangs)%s", t->timeout_s,
                         ctx);
            else if (t->signal)
                snprintf(p->why, sizeof p->why, "the probe crashed (signal %d, %s)%s", t->signal, strsignal(t->signal),
                         ctx);
            else if (t->rejected)
                snprintf(p->why, sizeof p->why, "the probe's result record was rejected: %s", t->reject_why);
            else
                snprintf(p->why, sizeof p->why, "the probe exited with status %d without an answer%s", t->exit_code,
                         ctx);
        } else {
            json_t *r = t->record;
            const char *name = json_string_value(json_object_get(r, "name"));
            if (name) {
                free(p->name);
                p->name = strdup(name);
            }
            p->available = json_is_true(json_object_get(r, "available"));
            p->unusable = json_is_true(json_object_get(r, "unusable"));
            copy_str(p->why, sizeof p->why, r, "why");
            copy_str(p->library, sizeof p->library, r, "library");
            copy_str(p->detail, sizeof p->detail, r, "detail");
            copy_str(p->source, sizeof p->source, r, "source");
            copy_str(p->description, sizeof p->description, r, "description");
            copy_str(p->weights, sizeof p->weights, r, "weights");
            copy_str(p->kv_cache, sizeof p->kv_cache, r, "kv_cache");
            copy_str(p->cpu_path, sizeof p->cpu_path, r, "cpu_path");
            p->has_sample = json_is_true(json_object_get(r, "has_sample"));
            p->has_speculate = json_is_true(json_object_get(r, "has_speculate"));
            p->has_logprobs = json_is_true(json_object_get(r, "has_logprobs"));
            json_int_t dt = json_integer_value(json_object_get(r, "dtype"));
            if (dt >= GF_COMPUTE_F32 && dt <= GF_COMPUTE_TF32)
                p->dtype = (gf_compute_dtype)dt;
            json_int_t th = json_integer_value(json_object_get(r, "threads"));
            if (th > 0)
                p->threads = (int32_t)th;
        }
        if (!p->name)
            p->name = strdup(p->requested);
        json_decref(t->record);
        free(t->err);
    }
    free(tasks);
    free(args);
}
