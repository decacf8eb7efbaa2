/* The JSON report (schema in docs/harness.md) and atomic file writes. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "genfence/version.h"
#include "hash.h"
#include "record.h"
#include "report.h"
#include "sys.h"
#include "utf8.h"

/* Every string from outside (backend text, case text, paths, argv, the
 * environment) goes in through gf_json_text: invalid UTF-8 is repaired
 * (\xNN, utf8.h), never a dropped field. */
static json_t *str_or_null(const char *s) { return gf_json_text(s); }
static json_t *text(const char *s) { return gf_json_text(s ? s : ""); }
static json_t *texts(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, text(v[i]));
    return a;
}

/* obj[key] = v with the key repaired too (jansson refuses an invalid key). */
static void set_keyed(json_t *obj, const char *key, json_t *v)
{
    if (gf_utf8_valid(key, strlen(key))) {
        json_object_set_new(obj, key, v);
        return;
    }
    char *k = gf_utf8_repair(key, strlen(key));
    if (k)
        json_object_set_new(obj, k, v);
    else
        json_decref(v);
    free(k);
}

/* The child's stderr tail: the pool keeps its last bytes, cut at a byte
 * offset; it starts at the first whole character. */
static json_t *stderr_tail(const char *s)
{
    if (!s)
        return json_null();
    size_t n = strlen(s), at = gf_utf8_tail_start(s, n);
    return gf_json_textn(s + at, n - at);
}

/* The ISA flags that matter, of those /proc/cpuinfo lists, space-separated
 * (read once). */
const char *gf_report_cpu_flags(void)
{
    static const char *const wanted[] = {
        "sse4_2",   "avx",         "avx2",        "fma",         "f16c",     "avx512f",  "avx512bw",
        "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
        "asimd",    "asimdhp",     "sve",         "sve2",        "bf16",     "i8mm",     NULL};
    static char out[512];
    static int done;
    if (done)
        return out;
    done = 1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon || (strncmp(line, "flags", 5) && strncmp(line, "Features", 8)))
            continue;
        char *val = colon + 1;
        while (*val == ' ' || *val == '\t')
            val++;
        val[strcspn(val, "\n")] = '\0';
        for (int i = 0; wanted[i]; i++) {
            size_t wl = strlen(wanted[i]);
            for (const char *p = val; (p = strstr(p, wanted[i])); p += wl)
                if ((p == val || p[-1] == ' ') && (p[wl] == ' ' || p[wl] == '\0')) {
                    size_t n = strlen(out);
                    snprintf(out + n, sizeof out - n, "%s%s", n ? " " : "", wanted[i]);
                    break;
                }
        }
        break;
    }
    if (f)
        fclose(f);
    return out;
}

/* The CPU model (gf_cpu_model) and the ISA flags that matter. */
static void cpu_info(json_t *env)
{
    char model[256] = "";
    json_t *isa = json_array();
    const char *fl = gf_report_cpu_flags();
    for (const char *p = fl; *p;) {
        size_t n = strcspn(p, " ");
        json_array_append_new(isa, json_stringn(p, n));
        p += n;
        while (*p == ' ')
            p++;
    }
    gf_cpu_model(model, sizeof model);
    json_object_set_new(env, "cpu_model", model[0] ? text(model) : json_null());
    json_object_set_new(env, "isa", isa);
}

json_t *gf_report_environment(const gf_run_info *r)
{
    json_t *env = json_object();
    cpu_info(env);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    json_object_set_new(env, "nproc", json_integer(gf_cpu_count()));
    json_object_set_new(env, "cpus_online", json_integer(online));
    json_object_set_new(env, "jobs", json_integer(r->opts->jobs));
    json_object_set_new(env, "threads_per_job", json_integer(r->opts->threads));
    json_object_set_new(env, "oversubscribe", json_boolean(r->oversubscribe));
    struct utsname u;
    if (uname(&u) == 0)
        json_object_set_new(env, "os",
                            json_pack("{s:o, s:o, s:o, s:o}", "sysname", text(u.sysname), "release", text(u.release),
                                      "machine", text(u.machine), "node", text(u.nodename)));
    char pcre_ver[64] = "";
    pcre2_config(PCRE2_CONFIG_VERSION, pcre_ver);
    json_t *libs = json_object();
    json_object_set_new(libs, "jansson", json_string(JANSSON_VERSION));
    json_object_set_new(libs, "libyaml", json_string(gf_case_yaml_version()));
    json_object_set_new(libs, "pcre2", json_string(pcre_ver));
    json_object_set_new(libs, "glibc", json_string(gnu_get_libc_version()));
#ifdef __VERSION__
    json_object_set_new(libs, "compiler", json_string(__VERSION__));
#endif
    json_object_set_new(env, "libraries", libs);
    static const char *const vars[] = {"OMP_NUM_THREADS",
                                       "OPENBLAS_NUM_THREADS",
                                       "OPENBLAS_CORETYPE",
                                       "MKL_NUM_THREADS",
                                       "GENFENCE_MODULE_DIR",
                                       "GENFENCE_MODULE_PATH",
                                       "GENFENCE_ROOT",
                                       "CUDA_VISIBLE_DEVICES",
                                       "ONEDNN_MAX_CPU_ISA",
                                       "DNNL_MAX_CPU_ISA",
                                       NULL};
    json_t *ev = json_object();
    for (int i = 0; vars[i]; i++)
        json_object_set_new(ev, vars[i], str_or_null(getenv(vars[i])));
    json_object_set_new(env, "env", ev);
#ifdef __SANITIZE_ADDRESS__
    json_object_set_new(env, "memory_cap", json_string("off (AddressSanitizer build)"));
#endif
    return env;
}

/* The audit bundle: what a second machine needs to explain a different result
 * (genfence compare): the numerics environment variables actually set (every
 * OPENBLAS_* OMP_* GOMP_* KMP_* MKL_* DNNL_* ONEDNN_* CUDA_*), thread counts,
 * the backends' libraries and the case files' sha256. Model and golden hashes
 * are per result (metrics.model_hash, metrics.golden.data_sha256). */
extern char **environ;
static json_t *audit_json(const gf_run_info *r)
{
    static const char *const prefixes[] = {"OPENBLAS_", "OMP_",    "GOMP_", "KMP_", "MKL_",
                                           "DNNL_",     "ONEDNN_", "CUDA_", NULL};
    json_t *a = json_object(), *ev = json_object(), *bk = json_object(), *files = json_object();
    for (char **e = environ; e && *e; e++)
        for (int i = 0; prefixes[i]; i++)
            if (!strncmp(*e, prefixes[i], strlen(prefixes[i])) && strchr(*e, '=')) {
                char name[256];
                snprintf(name, sizeof name, "%.*s", (int)(strchr(*e, '=') - *e), *e);
                set_keyed(ev, name, text(strchr(*e, '=') + 1));
                break;
            }
    json_object_set_new(a, "numerics_env", ev);
    json_object_set_new(a, "threads",
                        json_pack("{s:i, s:i}", "jobs", r->opts->jobs, "threads_per_job", r->opts->threads));
    char model[256] = ""; /* the machine: what a backend's CPU path is chosen from */
    gf_cpu_model(model, sizeof model);
    json_object_set_new(
        a, "cpu",
        json_pack("{s:o, s:s}", "model", model[0] ? text(model) : json_null(), "flags", gf_report_cpu_flags()));
    for (size_t i = 0; i < r->n_backends; i++) { /* keyed as the reports name them: two configs, two entries */
        const gf_backend_probe *b = &r->backends[i];
        set_keyed(bk, gf_backend_label(b),
                  json_pack("{s:o, s:o, s:i, s:s, s:b, s:o}", "library", text(b->library), "detail", text(b->detail),
                            "threads", b->threads, "dtype", gf_dtype_str(b->dtype), "available", b->available,
                            "cpu_path", b->cpu_path[0] ? text(b->cpu_path) : json_null()));
    }
    json_object_set_new(a, "backends", bk);
    for (size_t i = 0; r->cases && i < r->cases->n_files; i++) {
        char hex[65];
        set_keyed(files, r->cases->files[i],
                  gf_sha256_file(r->cases->files[i], hex) == GF_OK ? json_string(hex) : json_null());
    }
    json_object_set_new(a, "case_files", files);
    return a;
}

static json_t *backend_json(const gf_backend_probe *b)
{
    json_t *o = json_object();
    json_object_set_new(o, "requested", text(b->requested));
    json_object_set_new(o, "name", text(b->name));
    json_object_set_new(o, "available", json_boolean(b->available));
    json_object_set_new(o, "required", json_boolean(b->required));
    if (!b->available)
        json_object_set_new(o, "why", text(b->why));
    json_object_set_new(o, "dtype", json_string(gf_dtype_str(b->dtype)));
    json_object_set_new(o, "threads", json_integer(b->threads));
    json_object_set_new(o, "library", text(b->library));
    json_object_set_new(o, "detail", text(b->detail));
    if (b->weights[0])
        json_object_set_new(o, "weights", text(b->weights));
    if (b->kv_cache[0])
        json_object_set_new(o, "kv_cache", text(b->kv_cache));
    if (b->cpu_path[0]) /* gf_backend_info's CPU kernel path */
        json_object_set_new(o, "cpu_path", text(b->cpu_path));
    json_object_set_new(o, "source", text(b->source));
    json_object_set_new(o, "description", text(b->description));
    json_object_set_new(o, "sample_slot", json_boolean(b->has_sample));
    json_object_set_new(o, "speculate_slot", json_boolean(b->has_speculate));
    json_object_set_new(o, "logprobs_slot", json_boolean(b->has_logprobs));
    return o;
}

static json_t *job_json(const gf_run_info *r, const gf_job *j)
{
    const gf_case *c = j->c;
    json_t *o = json_object();
    json_object_set_new(o, "id", text(c->id));
    json_object_set_new(o, "kind", json_string(c->kind->name));
    json_object_set_new(o, "file", text(c->file));
    json_object_set_new(o, "line", json_integer(c->line));
    json_object_set_new(o, "tags", texts(c->tags, c->n_tags));
    json_object_set_new(o, "model", str_or_null(c->model_arg));
    json_object_set_new(o, "backend", j->backend ? text(j->backend->name) : json_null());
    json_object_set_new(o, "backend_requested", j->backend ? text(j->backend->requested) : json_null());
    json_object_set_new(o, "backend_required", json_boolean(gf_job_required(j)));
    json_object_set_new(o, "dtype", json_string(gf_dtype_str(j->backend ? j->backend->dtype : GF_COMPUTE_F32)));
    json_object_set_new(o, "verdict", json_string(gf_verdict_str(j->verdict)));
    if (c->has_expect_verdict)
        json_object_set_new(o, "expect_verdict", json_string(gf_verdict_str(c->expect_verdict)));
    json_object_set_new(o, "reason", text(j->reason));
    if (gf_job_declared(r, j) >= 0) /* judged against expect_verdict (not --raw-verdicts) */
        json_object_set_new(o, "as_declared", json_boolean(gf_job_declared(r, j)));
    json_object_set_new(o, "exit_status", json_integer(gf_job_exit(r, j)));
    json_object_set_new(o, "seconds", json_real(j->seconds));
    const char *smp = c->kind->reaches == GF_KIND_REACHES_MODEL ? "engine (generation loop)" : "engine";
    json_t *rs = j->record ? json_object_get(json_object_get(j->record, "metrics"), "sampler") : NULL;
    if (json_is_string(rs) && !strcmp(json_string_value(rs), "engine + backend slot"))
        smp = "engine + backend slot"; /* the case's sampling calls also ran through the backend's slot */
    json_object_set_new(o, "sampler", json_string(smp));
    if (j->record) {
        json_t *m = json_object_get(j->record, "metrics");
        json_object_set(o, "metrics", m ? m : json_object());
        json_object_set(o, "checks", json_object_get(j->record, "checks"));
        json_object_set(o, "seeds", json_object_get(j->record, "seeds"));
        json_object_set(o, "artifacts", json_object_get(j->record, "artifacts"));
        json_t *cs = json_object_get(j->record, "child_seconds");
        if (cs)
            json_object_set(o, "child_seconds", cs);
        json_t *loc = json_object_get(j->record, "localization"); /* harness/kit/localize.h */
        if (loc)
            json_object_set(o, "localization", loc);
        json_t *fc = json_object_get(j->record, "failed_call"); /* a fail from a call, not a check (krun) */
        if (json_is_string(fc))
            json_object_set(o, "failed_call", fc);
    } else {
        json_object_set_new(o, "metrics", json_object());
        json_object_set_new(o, "checks", json_array());
        json_object_set_new(o, "seeds", json_object());
        json_object_set_new(o, "artifacts", json_array());
    }
    if (j->crash_context) /* the backend call a crash or timeout was in (harness/run/jobs.c) */
        json_object_set(o, "crash_context", j->crash_context);
    if (j->baseline) /* the baseline entry it met and its own verdict and reason (baseline.c) */
        json_object_set(o, "baseline", j->baseline);
    if (j->ran)
        json_object_set_new(o, "process",
                            json_pack("{s:i, s:i, s:o}", "exit_code", j->exit_code, "signal", j->signal, "stderr_tail",
                                      stderr_tail(j->stderr_tail)));
    if (j->interrupted) { /* stopped by SIGINT / SIGTERM while running, or never started */
        json_object_set_new(o, "interrupted", json_true());
        json_object_set_new(o, "not_run", json_boolean(!j->ran));
    }
    if (gf_verdict_exit(j->verdict, gf_job_required(j)) != 0) {
        char *rep = gf_job_reproduce(j, r->opts);
        json_object_set_new(o, "reproduce", str_or_null(rep));
        free(rep);
        if (j->record && json_object_get(j->record, "localization")) { /* genfence trace: the replay alone */
            char *tl = gf_job_trace_line(j, r->opts);
            json_object_set_new(o, "trace_command", str_or_null(tl));
            free(tl);
        }
    }
    return o;
}

/* The process's argv from /proc/self/cmdline (NUL-separated), or NULL. */
static json_t *exact_argv(void)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char buf[65536];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf && (n = read(fd, buf + len, sizeof buf - len)) > 0)
        len += (size_t)n;
    close(fd);
    if (len == 0 || len == sizeof buf)
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < len;) {
        size_t l = strnlen(buf + i, len - i);
        json_array_append_new(a, gf_json_textn(buf + i, l));
        i += l + 1;
    }
    return a;
}

json_t *gf_report_json(const gf_run_info *r)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "schema_version", json_integer(GF_REPORT_SCHEMA_VERSION));
    json_object_set_new(doc, "genfence",
                        json_pack("{s:s, s:s}", "version", GENFENCE_VERSION, "commit", GENFENCE_COMMIT));
    char when[64];
    struct tm tm;
    gmtime_r(&r->started, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(doc, "started", json_string(when));
    json_object_set_new(doc, "seconds", json_real(r->seconds));
    /* SIGINT / SIGTERM: the runs that finished, the others marked interrupted / not_run */
    json_object_set_new(doc, "interrupted", json_boolean(r->interrupted != 0));
    json_object_set_new(doc, "interrupted_by",
                        r->interrupted ? json_string(gf_report_signal_name(r->interrupted)) : json_null());
    /* the command as it ran: the process's exact argv (/proc/self/cmdline),
     * the binary's absolute path and the working directory (replayable) */
    json_t *argv = exact_argv();
    if (!argv) { /* no /proc: what the subcommand saw */
        argv = json_array();
        json_array_append_new(argv, json_string("genfence"));
        json_array_append_new(argv, json_string("run"));
        for (int i = 0; i < r->argc; i++)
            json_array_append_new(argv, text(r->argv[i]));
    }
    json_object_set(doc, "command", argv);
    char exe[4096], cwd[4096];
    ssize_t en = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[en > 0 ? en : 0] = '\0';
    json_object_set_new(doc, "invocation",
                        json_pack("{s:o, s:o, s:o}", "argv", argv, "binary", str_or_null(en > 0 ? exe : NULL), "cwd",
                                  str_or_null(getcwd(cwd, sizeof cwd) ? cwd : NULL)));
    json_t *opts = json_object();
    json_object_set_new(opts, "jobs", json_integer(r->opts->jobs));
    json_object_set_new(opts, "threads", json_integer(r->opts->threads));
    json_object_set_new(opts, "timeout_s", json_real(r->opts->timeout_s));
    json_object_set_new(opts, "memory_limit_bytes",
                        r->opts->memory_limit ? json_integer((json_int_t)r->opts->memory_limit) : json_null());
    json_object_set_new(opts, "filter", str_or_null(r->filter));
    json_object_set_new(opts, "kinds", texts(r->kinds, r->n_kinds));
    json_object_set_new(opts, "tags", texts(r->tags, r->n_tags));
    json_object_set_new(opts, "shard",
                        r->shard_n ? json_pack("{s:i, s:i}", "index", r->shard_i, "count", r->shard_n) : json_null());
    json_object_set_new(opts, "report_dir", str_or_null(r->report_dir));
    json_object_set_new(opts, "golden_dir", str_or_null(r->opts->golden_dir));
    json_object_set_new(opts, "as_declared", json_boolean(r->as_declared));
    json_object_set_new(doc, "options", opts);
    json_object_set_new(doc, "environment", gf_report_environment(r));
    json_object_set_new(doc, "audit", audit_json(r));
    json_t *bs = json_array();
    for (size_t i = 0; i < r->n_backends; i++)
        json_array_append_new(bs, backend_json(&r->backends[i]));
    json_object_set_new(doc, "backends", bs);
    json_t *files = json_array();
    for (size_t i = 0; r->cases && i < r->cases->n_files; i++)
        json_array_append_new(files, text(r->cases->files[i]));
    json_object_set_new(doc, "case_files", files);
    json_t *res = json_array();
    for (size_t i = 0; i < r->n_jobs; i++)
        json_array_append_new(res, job_json(r, &r->jobs[i]));
    json_object_set_new(doc, "results", res);
    json_t *sum = json_object();
    json_object_set_new(sum, "passed", json_integer((json_int_t)r->passed));
    json_object_set_new(sum, "failed", json_integer((json_int_t)r->failed));
    json_object_set_new(sum, "skipped", json_integer((json_int_t)r->skipped));
    json_t *byv = json_object();
    for (int v = 0; v < GF_V_COUNT; v++)
        json_object_set_new(byv, gf_verdict_str((gf_verdict)v), json_integer((json_int_t)r->by_verdict[v]));
    json_object_set_new(sum, "by_verdict", byv);
    json_object_set_new(sum, "required_skips", json_integer((json_int_t)r->required_skips));
    json_object_set_new(sum, "cases", json_integer((json_int_t)r->n_selected));
    json_object_set_new(sum, "runs", json_integer((json_int_t)r->n_jobs));
    json_object_set_new(sum, "exit_status", json_integer(r->exit_status));
    /* each backend's own runs, the engine alone's and those of no backend apart */
    json_t *groups = gf_report_groups(res, bs);
    json_object_update(sum, groups);
    json_decref(groups);
    json_object_set_new(sum, "required_unreached", json_integer((json_int_t)r->required_unreached));
    json_object_set_new(sum, "as_declared",
                        r->as_declared ? json_pack("{s:I, s:I}", "runs", (json_int_t)r->n_declared, "as_declared",
                                                   (json_int_t)r->n_as_declared)
                                       : json_null());
    json_object_set_new(doc, "triangulation", r->triangulation ? json_incref(r->triangulation) : json_null());
    if (r->baseline) /* --baseline: its files, counts and the entries no run met (baseline.c) */
        json_object_set(doc, "baseline", r->baseline);
    /* what a backend left in the report folder: listed, not genfence's (stray.c) */
    json_object_set_new(doc, "stray_files", r->stray_files ? json_incref(r->stray_files) : json_array());
    json_object_set_new(doc, "summary", sum);
    return doc;
}

int gf_report_json_write_doc(const json_t *doc, const char *path)
{
    char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (t) {
        s = t;
        s[n++] = '\n';
        s[n] = '\0';
    }
    int rc = gf_write_atomic(path, s, n);
    free(s);
    return rc;
}
