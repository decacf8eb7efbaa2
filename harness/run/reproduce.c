/* Reproduce lines: the shell command that reruns one job alone, runnable as
 * printed (docs/harness.md): the binary's absolute path, the case file's
 * absolute path, and every flag that changes the outcome (--backend or
 * --require-backend as given, --threads, --timeout, --memory-limit,
 * --golden-dir, --raw-verdicts for a case that declares expect_verdict) and its own report folder (--report-dir DIR/reproduce/ID,
 * or --no-report like the run). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"
#include "sys.h"

/* The running binary's absolute path ("genfence" if /proc cannot say). */
static const char *self_path(void)
{
    static char exe[4096];
    if (!exe[0]) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0)
            exe[n] = '\0';
        else
            snprintf(exe, sizeof exe, "genfence");
    }
    return exe;
}

/* path made absolute (realpath; as given if that fails) and shell-quoted */
static void abs_quoted(char *out, size_t cap, const char *path)
{
    char real[PATH_MAX];
    gf_shell_quote(out, cap, realpath(path, real) ? real : path);
}

/* `genfence CMD FILE --filter ID --backend X ...` (cmd: "run" or "trace") */
static char *command_line(const gf_job *j, const gf_run_opts *o, const char *cmd)
{
    char exe[4200], file[4200], filt[1024], be[4400], idre[600];
    gf_shell_quote(exe, sizeof exe, self_path());
    abs_quoted(file, sizeof file, j->c->file);
    gf_id_regex(idre, sizeof idre, j->c->id); /* the id is [A-Za-z0-9_.-] */
    gf_shell_quote(filt, sizeof filt, idre);
    be[0] = '\0';
    if (j->backend && j->backend->engine_) {
        /* on the engine alone: ref has no sample slot, so the case runs once, on the engine */
        snprintf(be, sizeof be, " --backend ref");
    } else if (j->backend) {
        /* a plugin path absolute, a name (or NAME:CONFIG) as given */
        const char *req = j->backend->requested;
        char q[4200];
        if (strchr(req, '/') && !strchr(req, ':'))
            abs_quoted(q, sizeof q, req);
        else
            gf_shell_quote(q, sizeof q, req);
        snprintf(be, sizeof be, " %s %s", j->backend->required ? "--require-backend" : "--backend", q);
    }
    char extra[12288] = "";
    size_t used = 0;
#define ADD(...) used += (size_t)snprintf(extra + used, used < sizeof extra ? sizeof extra - used : 0, __VA_ARGS__)
    if (o->threads != 1)
        ADD(" --threads %d", o->threads);
    if (o->timeout_s != GF_RUN_DEFAULT_TIMEOUT_S)
        ADD(" --timeout %g", o->timeout_s);
    if (o->memory_limit != (unsigned long long)(GF_RUN_DEFAULT_MEMORY_GIB * 1024 * 1024 * 1024))
        ADD(" --memory-limit %llu", o->memory_limit);
    if (!o->as_declared && j->c->has_expect_verdict) /* judged by its verdict, as in the run */
        ADD(" --raw-verdicts");
    if (o->golden_dir) {
        char q[4200];
        abs_quoted(q, sizeof q, o->golden_dir);
        ADD(" --golden-dir %s", q);
    }
    /* its own report folder, <the run's report folder>/reproduce/ID (a rerun
     * of the line keeps it), so it never replaces the run's report; none
     * when the run wrote none */
    if (!o->report_home) {
        ADD(" --no-report");
    } else {
        char home[PATH_MAX], dir[PATH_MAX + 700], q[2 * PATH_MAX + 1400], tail[700];
        if (!realpath(o->report_home, home))
            snprintf(home, sizeof home, "%s", o->report_home);
        snprintf(tail, sizeof tail, "/reproduce/%s", j->c->id);
        size_t nh = strlen(home), nt = strlen(tail);
        if (nh >= nt && !strcmp(home + nh - nt, tail))
            snprintf(dir, sizeof dir, "%s", home);
        else
            snprintf(dir, sizeof dir, "%s%s", home, tail);
        gf_shell_quote(q, sizeof q, dir);
        ADD(" --report-dir %s", q);
    }
#undef ADD
    size_t n = strlen(exe) + strlen(cmd) + strlen(file) + strlen(filt) + strlen(be) + strlen(extra) + 64;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s %s %s --filter %s%s%s", exe, cmd, file, filt, be, extra);
    return out;
}

char *gf_job_reproduce(const gf_job *j, const gf_run_opts *o) { return command_line(j, o, "run"); }

char *gf_job_trace_line(const gf_job *j, const gf_run_opts *o) { return command_line(j, o, "trace"); }
