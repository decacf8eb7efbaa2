/* genfence run: load cases, probe backends, run every (case, backend) in its
 * own child, report. docs/harness.md. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "kinds.h"
#include "krun.h"
#include "registry.h"
#include "report.h"
#include "runner.h"
#include "sys.h"
#include "triangulate.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: genfence run [PATHS...] [--backend NAME]... [--require-backend NAME]...\n"
            "                    [--filter REGEX] [--kind KIND]... [--tag TAG]... [-j N] [--threads N]\n"
            "                    [--timeout S] [--memory-limit SIZE] [--shard I/N] [--report-dir DIR]\n"
            "                    [--golden-dir DIR] [--no-triangulate] [--plan] [--durations N]\n"
            "                    [--rerun-failed RUN.json] [--in-process]\n"
            "\n"
            "Runs conformance cases (docs/cases.md). PATHS are case files or directories (their\n"
            "*.yaml files, not recursing); default: every case under cases/ (not cases/detect/).\n"
            "Each (case, backend) runs in its own child process with a watchdog and a memory cap.\n"
            "\n"
            "  --backend NAME|PATH      run on this backend (repeatable); default: every built-in\n"
            "                           backend whose probe succeeds here (not exec, which needs\n"
            "                           exec:COMMAND). A named backend that cannot be loaded\n"
            "                           (unknown, missing, refused, probe crash or hang) is an\n"
            "                           error (exit 2); one unavailable here is a skip\n"
            "  --require-backend NAME   like --backend, and a skip on it (unavailable) is a failure\n"
            "  --filter REGEX           only cases whose id matches (POSIX extended regex)\n"
            "  --kind KIND              only cases of this kind (repeatable)\n"
            "  --tag TAG                only cases with this tag (repeatable: any); !TAG excludes\n"
            "  -j, --jobs N             children at once (default: cores / threads)\n"
            "  --threads N              backend threads per child (default 1); -j x --threads may\n"
            "                           not exceed the cores (%d here) unless --oversubscribe\n"
            "  --oversubscribe          allow -j x --threads above the core count\n"
            "  --timeout S              seconds per (case, backend) before it is killed (default %.0f;\n"
            "                           0 = none); the verdict is then timeout\n"
            "  --memory-limit SIZE      address-space cap per child, e.g. 8G, 512M (default %.0fG;\n"
            "                           0 = none; off in AddressSanitizer builds)\n"
            "  --shard I/N              run the I-th of N interleaved slices of the cases (1 <= I <= N)\n"
            "  --report-dir DIR         where run.json, junit.xml and failing-step logits go\n"
            "                           (default reports/)\n"
            "  --no-report              write no report files\n"
            "  --golden-dir DIR         golden_generation cases read DIR/<id>.safetensors instead of\n"
            "                           their own golden (e.g. goldens made by genfence bless)\n"
            "  --no-triangulate         skip the probe that compares every other backend with ref\n"
            "                           (run when two or more backends run model cases)\n"
            "  --plan                   print every (case, backend) this run would do, and why any is\n"
            "                           skipped or an error, then stop (backends are probed, nothing runs)\n"
            "  --durations N            after the summary, list the N slowest (case, backend) runs\n"
            "  --rerun-failed RUN.json  only the cases that did not pass (fail, stale, crash, timeout,\n"
            "                           error) in that earlier report, on this run's backends\n"
            "  --in-process, --no-fork  run every probe and case in this process, one after another:\n"
            "                           no child, no watchdog, no memory cap, so gdb and sanitizers\n"
            "                           see the backend directly; isolation is off (a crash kills\n"
            "                           genfence); docs/backends.md \"Debugging your backend\"\n"
            "  --as-declared            judge each case that declares expect_verdict (cases/detect/)\n"
            "                           by it: as declared counts as passed, another verdict as failed\n"
            "  -q, --quiet              print only failures and the summary\n"
            "  -h, --help               this help\n"
            "\n"
            "Verdicts: pass, pass-near-tie, skip -> 0; fail, stale, crash, timeout -> 1; error (bad\n"
            "case, bad input) -> 2; 2 wins over 1. The last line is \"N passed, N failed, N skipped\".\n"
            "\n"
            "exit status: 0 all passed, 1 a case failed, 2 bad input or usage (also: the report directory\n"
            "is in use by another run), 130 / 143 interrupted by SIGINT / SIGTERM (the report says so)\n",
            gf_cpu_count(), GF_RUN_DEFAULT_TIMEOUT_S, GF_RUN_DEFAULT_MEMORY_GIB);
}

typedef struct strv {
    char **v;
    size_t n;
} strv;

static void strv_push(strv *s, const char *x)
{
    char **g = realloc(s->v, (s->n + 1) * sizeof *g);
    if (!g)
        return;
    s->v = g;
    s->v[s->n++] = (char *)x;
}

static int add_backend(gf_backend_probe **bs, size_t *n, const char *name, int required)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*bs)[i].requested, name)) {
            (*bs)[i].required |= required;
            return 1;
        }
    gf_backend_probe *g = realloc(*bs, (*n + 1) * sizeof *g);
    if (!g)
        return 0;
    *bs = g;
    memset(&g[*n], 0, sizeof g[*n]);
    g[*n].requested = strdup(name);
    g[*n].required = required;
    g[*n].explicit_ = 1;
    (*n)++;
    return 1;
}

/* Triangulate when two or more backends ran model cases: every model used,
 * every available backend but ref, against ref (triangulate.h). */
static json_t *run_triangulation(const gf_run_info *info, const gf_run_opts *o)
{
    const char *models[64];
    size_t n_models = 0, n_backends = 0;
    const gf_backend_probe *seen[64];
    for (size_t i = 0; i < info->n_jobs; i++) {
        const gf_job *j = &info->jobs[i];
        if (!j->ran || !j->backend || !j->c->model || !j->c->kind->uses_backend)
            continue;
        size_t k;
        for (k = 0; k < n_models && strcmp(models[k], j->c->model); k++)
            ;
        if (k == n_models && n_models < 64)
            models[n_models++] = j->c->model;
        for (k = 0; k < n_backends && seen[k] != j->backend; k++)
            ;
        if (k == n_backends && n_backends < 64)
            seen[n_backends++] = j->backend;
    }
    if (n_backends < 2 || !n_models)
        return NULL;
    return gf_triangulate(models, n_models, info->backends, info->n_backends, o);
}

/* The run's report folder, for on_finished (one run per process). */
static const gf_report_dir *g_report_dir;

/* A job finished: its artifacts renamed to where they will be (the report
 * folder, not its staging folder) before the console names them. */
static void on_finished(gf_job *j, size_t done, size_t total, void *user)
{
    if (g_report_dir)
        gf_report_dir_rebase(g_report_dir, j, 1);
    gf_console_finished(j, done, total, user);
}

/* A verdict decided without a child (a skip or an error), with its reason. */
static void job_decide(gf_job *j, gf_verdict v, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    j->verdict = v;
    j->decided = 1;
    j->reason = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (j->reason)
        vsnprintf(j->reason, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
}

/* --rerun-failed: the ids of results in a run.json whose verdict is not
 * pass, pass-near-tie or skip, as {id: true}; NULL (message given) if the
 * file is not a genfence report. */
static json_t *failed_ids(const char *path)
{
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    json_t *res = doc ? json_object_get(doc, "results") : NULL;
    if (!doc || !json_is_array(res)) {
        if (!doc)
            if (err.line > 0)
                gf_cli_error("run: --rerun-failed %s:%d:%d: %s", path, err.line, err.column, err.text);
            else
                gf_cli_error("run: --rerun-failed %s", err.text);
        else
            gf_cli_error("run: --rerun-failed %s: not a genfence run report (no \"results\" array)", path);
        json_decref(doc);
        return NULL;
    }
    json_t *ids = json_object();
    size_t i;
    json_t *r;
    json_array_foreach(res, i, r) {
        const char *id = json_string_value(json_object_get(r, "id"));
        const char *v = json_string_value(json_object_get(r, "verdict"));
        if (!id || !v) {
            gf_cli_error("run: --rerun-failed %s: result %zu has no id or verdict", path, i);
            json_decref(ids);
            ids = NULL;
            break;
        }
        if (strcmp(v, "pass") && strcmp(v, "pass-near-tie") && strcmp(v, "skip"))
            json_object_set_new(ids, id, json_true());
    }
    json_decref(doc);
    return ids;
}

/* --plan: one line per (case, backend) and what would happen to it. */
static void print_plan(const gf_job *jobs, size_t n_jobs, const gf_backend_probe *bs, size_t n_bs, size_t n_cases)
{
    size_t n_run = 0, n_skip = 0, n_err = 0;
    for (size_t b = 0; b < n_bs; b++)
        if (!bs[b].explicit_ && !bs[b].available)
            printf("plan: backend %s not in this run: %s\n", bs[b].requested, bs[b].why);
    for (size_t i = 0; i < n_jobs; i++) {
        const gf_job *j = &jobs[i];
        const char *be = j->backend ? j->backend->requested : "-";
        if (!j->decided) {
            n_run++;
            printf("plan: run   %-44s [%s]%s\n", j->c->id, be,
                   j->backend && j->backend->engine_ ? "  (reaches no backend slot: once, on the engine)" : "");
        } else if (j->verdict == GF_V_ERROR) {
            n_err++;
            printf("plan: error %-44s [%s]  %s\n", j->c->id, be, j->reason ? j->reason : "");
        } else {
            n_skip++;
            printf("plan: skip  %-44s [%s]  %s\n", j->c->id, be, j->reason ? j->reason : "");
        }
    }
    printf("plan: %zu (case, backend) pairs over %zu cases: %zu to run, %zu skipped, %zu errors; nothing was run\n",
           n_jobs, n_cases, n_run, n_skip, n_err);
}

static int by_seconds_desc(const void *a, const void *b)
{
    const gf_job *x = *(const gf_job *const *)a, *y = *(const gf_job *const *)b;
    return (x->seconds < y->seconds) - (x->seconds > y->seconds);
}

/* --durations N: the N slowest runs, slowest first. */
static void print_durations(gf_job *jobs, size_t n_jobs, size_t n)
{
    gf_job **v = calloc(n_jobs ? n_jobs : 1, sizeof *v);
    if (!v)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n_jobs; i++)
        if (jobs[i].ran)
            v[k++] = &jobs[i];
    if (k)
        qsort(v, k, sizeof *v, by_seconds_desc);
    printf("slowest %zu of %zu runs:\n", n < k ? n : k, k);
    for (size_t i = 0; i < k && i < n; i++)
        printf("  %8.2fs  %-44s [%s] %s\n", v[i]->seconds, v[i]->c->id, v[i]->backend ? v[i]->backend->requested : "-",
               gf_verdict_str(v[i]->verdict));
    free(v);
}

int gf_cmd_run(int argc, char **argv)
{
    enum {
        O_BACKEND = 256,
        O_REQUIRE,
        O_FILTER,
        O_KIND,
        O_TAG,
        O_THREADS,
        O_TIMEOUT,
        O_MEM,
        O_SHARD,
        O_REPORT,
        O_NOREPORT,
        O_OVER,
        O_GOLDEN_DIR,
        O_NOTRI,
        O_PLAN,
        O_DURATIONS,
        O_RERUN,
        O_INPROC,
        O_DECLARED
    };
    static const struct option longopts[] = {{"backend", required_argument, 0, O_BACKEND},
                                             {"require-backend", required_argument, 0, O_REQUIRE},
                                             {"filter", required_argument, 0, O_FILTER},
                                             {"kind", required_argument, 0, O_KIND},
                                             {"tag", required_argument, 0, O_TAG},
                                             {"jobs", required_argument, 0, 'j'},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"timeout", required_argument, 0, O_TIMEOUT},
                                             {"memory-limit", required_argument, 0, O_MEM},
                                             {"shard", required_argument, 0, O_SHARD},
                                             {"report-dir", required_argument, 0, O_REPORT},
                                             {"no-report", no_argument, 0, O_NOREPORT},
                                             {"oversubscribe", no_argument, 0, O_OVER},
                                             {"quiet", no_argument, 0, 'q'},
                                             {"golden-dir", required_argument, 0, O_GOLDEN_DIR},
                                             {"no-triangulate", no_argument, 0, O_NOTRI},
                                             {"plan", no_argument, 0, O_PLAN},
                                             {"durations", required_argument, 0, O_DURATIONS},
                                             {"rerun-failed", required_argument, 0, O_RERUN},
                                             {"in-process", no_argument, 0, O_INPROC},
                                             {"no-fork", no_argument, 0, O_INPROC},
                                             {"as-declared", no_argument, 0, O_DECLARED},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    gf_run_opts o = {.jobs = 0,
                     .threads = 1,
                     .timeout_s = GF_RUN_DEFAULT_TIMEOUT_S,
                     .memory_limit = (unsigned long long)(GF_RUN_DEFAULT_MEMORY_GIB * 1024 * 1024 * 1024),
                     .report_dir = "reports"};
    gf_run_info info;
    memset(&info, 0, sizeof info);
    info.started = time(NULL);
    info.argc = argc - 1;
    info.argv = argv + 1;
    double t0 = gf_now_s();
    strv backends = {0}, required = {0}, kinds = {0}, tags = {0};
    const char *filter = NULL;
    int no_report = 0, oversubscribe = 0, quiet = 0, shard_i = 0, shard_n = 0, triangulate = 1;
    int plan = 0;
    long durations = 0;
    json_t *rerun = NULL; /* ids that did not pass in --rerun-failed's report: {id: true} */
    const char *rerun_path = NULL;
    int rc = GF_EXIT_USAGE;
    gf_report_dir rd = {.lock_fd = -1}; /* the locked report folder (outdir.c) */
    long v;
    double d;
    int c;
    optind = 1;
    opterr = 0;
    int li = -1;
    char optname[64];
    while ((c = getopt_long(argc, argv, "j:qh", longopts, &li)) != -1) {
        /* the option's own name for messages (argv[optind - 1] is its value
         * when the value is a separate word: "bad value '4/3' for 4/3") */
        if (li >= 0)
            snprintf(optname, sizeof optname, "--%s", longopts[li].name);
        else
            snprintf(optname, sizeof optname, "-%c", c);
        li = -1;
        switch (c) {
        case O_BACKEND: strv_push(&backends, optarg); break;
        case O_REQUIRE: strv_push(&required, optarg); break;
        case O_FILTER: filter = optarg; break;
        case O_KIND: strv_push(&kinds, optarg); break;
        case O_TAG: strv_push(&tags, optarg); break;
        case 'j':
            if (!gf_parse_int(optarg, 1, 4096, &v))
                goto bad_value;
            o.jobs = (int)v;
            break;
        case O_THREADS:
            if (!gf_parse_int(optarg, 1, 4096, &v))
                goto bad_value;
            o.threads = (int)v;
            break;
        case O_TIMEOUT:
            if (!gf_parse_double(optarg, &d) || !(d >= 0) || !isfinite(d))
                goto bad_value;
            o.timeout_s = d;
            break;
        case O_MEM:
            if (!gf_parse_size(optarg, &o.memory_limit))
                goto bad_value;
            break;
        case O_SHARD:
            if (!gf_shard_parse(optarg, &shard_i, &shard_n))
                goto bad_value;
            break;
        case O_REPORT: o.report_dir = optarg; break;
        case O_NOREPORT: no_report = 1; break;
        case O_NOTRI: triangulate = 0; break;
        case O_PLAN: plan = 1; break;
        case O_DECLARED: info.as_declared = 1; break;
        case O_DURATIONS:
            if (!gf_parse_int(optarg, 1, 1000000, &durations))
                goto bad_value;
            break;
        case O_RERUN:
            json_decref(rerun);
            rerun_path = optarg;
            if (!(rerun = failed_ids(optarg)))
                goto out;
            break;
        case O_OVER: oversubscribe = 1; break;
        case O_INPROC: gf_runner_in_process(1); break;
        case O_GOLDEN_DIR: {
            struct stat sb;
            if (stat(optarg, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                gf_cli_error("run: --golden-dir %s is not a directory", optarg);
                goto out;
            }
            o.golden_dir = optarg;
            break;
        }
        case 'q': quiet = 1; break;
        case 'h':
            usage(stdout);
            rc = GF_EXIT_OK;
            goto out;
        default: /* one line: which option, and where the help is */
            if (optopt == 'j')
                gf_cli_error("run: option -%c needs a value (genfence run --help)", optopt);
            else
                gf_cli_error("run: unknown or incomplete option '%s' (genfence run --help)", argv[optind - 1]);
            goto out;
        }
        continue;
    bad_value:
        if (c == O_SHARD)
            gf_cli_error("run: bad value '%s' for --shard: want I/N with 1 <= I <= N", optarg);
        else if (c == 'j' || c == O_THREADS)
            gf_cli_error("run: bad value '%s' for %s: want an integer from 1 to 4096", optarg, optname);
        else
            gf_cli_error("run: bad value '%s' for %s", optarg, optname);
        goto out;
    }
    int cores = gf_cpu_count();
    if (o.jobs == 0) /* default: fill the cores, never oversubscribe them */
        o.jobs = cores / o.threads > 0 ? cores / o.threads : 1;
    if (!oversubscribe && (long)o.jobs * o.threads > cores) {
        gf_cli_error("run: -j %d x --threads %d = %ld exceeds the %d cores this process may use; "
                     "lower them or pass --oversubscribe",
                     o.jobs, o.threads, (long)o.jobs * o.threads, cores);
        goto out;
    }

    /* cases */
    gf_case_filter cf;
    gf_case_set set;
    if (gf_case_select_load("run", "; nothing was run", filter, kinds.v, kinds.n, tags.v, tags.n,
                            (const char *const *)(argv + optind), (size_t)(argc - optind), &cf, &set) < 0)
        goto out;
    const gf_case **sel = calloc(set.n ? set.n : 1, sizeof *sel);
    size_t n_sel = 0, n_matched = 0;
    for (size_t i = 0; sel && i < set.n; i++) {
        if (!gf_case_filter_match(&cf, &set.cases[i]))
            continue;
        if (rerun && !json_object_get(rerun, set.cases[i].id))
            continue;
        if (!gf_shard_takes(&n_matched, shard_i, shard_n))
            continue;
        sel[n_sel++] = &set.cases[i];
    }
    if (!shard_n)
        n_matched = n_sel;
    gf_case_filter_free(&cf);
    if (n_matched == 0 && rerun) {
        if (json_object_size(rerun))
            gf_cli_error("run: none of the %zu case(s) that did not pass in %s is among the selected cases",
                         json_object_size(rerun), rerun_path);
        else {
            printf("run: every case passed in %s; nothing to rerun\n", rerun_path);
            rc = GF_EXIT_OK;
        }
        free(sel);
        gf_case_set_free(&set);
        goto out;
    }
    if (n_matched == 0) {
        if (set.n)
            gf_cli_error("run: no case matches the filters");
        else if (argc > optind) /* name where it looked: the paths, and whether any file was read */
            gf_cli_error("run: no case found in %s%s (%zu case file%s read)", argv[optind], argc - optind > 1 ? " ..." : "",
                         set.n_files, set.n_files == 1 ? "" : "s");
        else
            gf_cli_error("run: no case found in the default suite (%zu case file%s read)", set.n_files,
                         set.n_files == 1 ? "" : "s");
        free(sel);
        gf_case_set_free(&set);
        goto out;
    }

    /* backends: as asked, else every built-in name (kept when available) */
    gf_backend_probe *bs = NULL;
    size_t n_bs = 0;
    for (size_t i = 0; i < backends.n; i++)
        add_backend(&bs, &n_bs, backends.v[i], 0);
    for (size_t i = 0; i < required.n; i++)
        add_backend(&bs, &n_bs, required.v[i], 1);
    info.default_backends = n_bs == 0;
    if (info.default_backends)
        for (const char *const *nm = gf_registry_names(); *nm; nm++) {
            if (gf_registry_on_request(*nm))
                continue; /* needs NAME:CONFIG (exec): only when named */
            add_backend(&bs, &n_bs, *nm, 0);
            bs[n_bs - 1].explicit_ = 0;
        }
    if (gf_runner_is_in_process())
        printf("run: --in-process: isolation is off: every case runs in this process, one at a time, with no "
               "watchdog or memory cap; a crash or hang in a backend stops genfence\n");
    gf_runner_probe(bs, n_bs, &o);

    /* jobs: case-major. A kind runs on a backend only where it reaches one of
     * the backend's slots (gf_kind_reaches); where it reaches none of an
     * available backend's, it runs once, on the engine (not a pass of that
     * backend). */
    static gf_backend_probe engine = {.requested = (char *)"engine", .name = (char *)"engine", .available = 1, .engine_ = 1};
    engine.dtype = GF_COMPUTE_F32;
    engine.threads = o.threads;
    snprintf(engine.source, sizeof engine.source, "the engine's own code (no backend slot)");
    gf_job *jobs = calloc(n_sel * (n_bs + 2) + 1, sizeof *jobs);
    size_t n_jobs = 0;
    for (size_t i = 0; jobs && i < n_sel; i++) {
        size_t before = n_jobs;
        gf_kind_reach reach = gf_kind_reaches(sel[i]->kind);
        int on_engine = 0;
        for (size_t b = 0; b < n_bs; b++) {
            if (bs[b].available && !bs[b].unusable && reach != GF_KIND_REACHES_MODEL &&
                !(reach == GF_KIND_REACHES_SAMPLE && bs[b].has_sample)) {
                if (gf_case_backend_allowed(sel[i], bs[b].requested, bs[b].name))
                    on_engine = 1; /* nothing of this backend is tested: the engine run stands for it */
                continue;
            }
            if (!bs[b].explicit_ && !bs[b].available)
                continue; /* default mode: only what runs here */
            /* a named backend that cannot be used is an error on every case:
             * its real name (for the cases' backends filter) is unknown */
            if (!bs[b].unusable && !gf_case_backend_allowed(sel[i], bs[b].requested, bs[b].name))
                continue;
            gf_job *j = &jobs[n_jobs];
            j->c = sel[i];
            j->backend = &bs[b];
            j->index = n_jobs++;
            if (bs[b].unusable)
                job_decide(j, GF_V_ERROR, "backend '%s' cannot be used: %s", bs[b].requested, bs[b].why);
            else if (!bs[b].available)
                job_decide(j, GF_V_SKIP, "backend unavailable: %s", bs[b].why);
        }
        if (on_engine) {
            gf_job *j = &jobs[n_jobs];
            j->c = sel[i];
            j->backend = &engine;
            j->index = n_jobs++;
        }
        if (n_jobs == before) {
            gf_job *j = &jobs[n_jobs];
            j->c = sel[i];
            j->index = n_jobs++;
            char buf[1024] = "";
            for (size_t k = 0; k < sel[i]->n_backends; k++) {
                strncat(buf, k ? ", " : "", sizeof buf - strlen(buf) - 1);
                strncat(buf, sel[i]->backends[k], sizeof buf - strlen(buf) - 1);
            }
            job_decide(j, GF_V_SKIP, "no selected backend matches the case's backends filter [%s]", buf);
        }
    }

    if (plan) {
        print_plan(jobs, n_jobs, bs, n_bs, n_sel);
        rc = GF_EXIT_OK;
        goto done;
    }

    info.opts = &o;
    info.filter = filter;
    info.kinds = kinds.v;
    info.n_kinds = kinds.n;
    info.tags = tags.v;
    info.n_tags = tags.n;
    info.shard_i = shard_i;
    info.shard_n = shard_n;
    info.oversubscribe = oversubscribe;
    info.backends = bs;
    info.n_backends = n_bs;
    info.jobs = jobs;
    info.n_jobs = n_jobs;
    info.cases = &set;
    info.n_selected = n_sel;
    info.tty = isatty(STDOUT_FILENO);
    info.quiet = quiet;
    if (no_report)
        o.report_dir = NULL;
    info.report_dir = o.report_dir;
    if (o.report_dir) { /* locked for the run; the new report is staged until complete */
        char why[1024];
        if (gf_report_dir_open(&rd, o.report_dir, why, sizeof why) != 0) {
            gf_cli_error("run: %s; nothing was run", why);
            rc = GF_EXIT_USAGE;
            goto done;
        }
        o.report_dir = rd.stage; /* the children write their failing-step logits there */
        if (!gf_runner_is_in_process()) /* in-process: a signal stops genfence as usual */
            gf_report_catch_signals();
    }

    gf_console_header(&info);
    for (size_t i = 0; i < n_jobs; i++)
        if (jobs[i].decided)
            gf_console_line(&info, &jobs[i]);
    g_report_dir = rd.stage ? &rd : NULL;
    gf_run_hooks hooks = {.started = gf_console_started, .finished = on_finished, .user = &info};
    if (!gf_report_signal_seen())
        gf_runner_run(jobs, n_jobs, &o, &hooks);
    info.interrupted = gf_runner_interrupted() ? gf_runner_interrupted() : gf_report_signal_seen();
    for (size_t i = 0; info.interrupted && i < n_jobs; i++)
        if (!jobs[i].decided) { /* the signal came before the pool started */
            job_decide(&jobs[i], GF_V_ERROR, "not run: the run was interrupted (%s)",
                       gf_report_signal_name(info.interrupted));
            jobs[i].interrupted = 1;
        }
    gf_run_tally(&info);
    if (triangulate && !info.interrupted)
        info.triangulation = run_triangulation(&info, &o);
    gf_triangulation_print(info.triangulation, jobs, n_jobs);
    info.seconds = gf_now_s() - t0;

    char json_path[4096], junit_path[4096];
    if (rd.stage) { /* written in the staging folder, then moved over the old report at once */
        gf_report_dir_rebase(&rd, jobs, n_jobs); /* (each job's already, as it finished) */
        snprintf(json_path, sizeof json_path, "%s/run.json", rd.stage);
        snprintf(junit_path, sizeof junit_path, "%s/junit.xml", rd.stage);
        int ok = 1;
        if (gf_report_json_write(&info, json_path) != 0 || gf_report_junit_write(&info, junit_path) != 0) {
            gf_cli_error("run: cannot write the report in %s: %s; the previous report is kept", rd.stage,
                         strerror(errno));
            ok = 0;
        } else if (gf_report_dir_commit(&rd) != 0) {
            gf_cli_error("run: cannot move the report into %s: %s", rd.dir, strerror(errno));
            ok = 0;
        }
        snprintf(json_path, sizeof json_path, "%s/run.json", rd.dir);
        snprintf(junit_path, sizeof junit_path, "%s/junit.xml", rd.dir);
        if (ok) {
            info.json_path = json_path;
            info.junit_path = junit_path;
        }
    }
    gf_report_dir_close(&rd);
    g_report_dir = NULL;
    gf_console_summary(&info);
    if (durations)
        print_durations(jobs, n_jobs, (size_t)durations);
    rc = info.exit_status;

    json_decref(info.triangulation);
done:
    gf_report_dir_close(&rd);
    for (size_t i = 0; i < n_jobs; i++)
        gf_job_clear(&jobs[i]);
    free(jobs);
    for (size_t b = 0; b < n_bs; b++)
        gf_backend_probe_clear(&bs[b]);
    free(bs);
    free(sel);
    gf_case_set_free(&set);
out:
    json_decref(rerun);
    free(backends.v);
    free(required.v);
    free(kinds.v);
    free(tags.v);
    return rc;
}
