/* genfence run: load cases, probe backends, run every (case, backend) in its
 * own child, report. docs/harness.md. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "baseline.h"
#include "cli.h"
#include "commands.h"
#include "kinds.h"
#include "model_suite.h"
#include "plan.h"
#include "registry.h"
#include "report.h"
#include "runner.h"
#include "sys.h"
#include "triangulate.h"

/* The hang guard per (case, backend) of the model suite when --timeout is not
 * given: SmolLM2-135M's statistical case took 115 s on openblas on the loaded
 * 2-core machine, near the default 120 s (docs/cases.md "The model suite"). */
#define GF_RUN_MODEL_TIMEOUT_S 900.0

static void usage(FILE *f)
{
    fprintf(f,
            "usage: genfence run [PATHS...] [--backend NAME]... [--require-backend NAME]...\n"
            "                    [--model DIR [--make-goldens] [--reference transformers|ref]]\n"
            "                    [--filter REGEX] [--kind KIND]... [--tag TAG]... [-j N] [--threads N]\n"
            "                    [--timeout S] [--memory-limit SIZE] [--shard I/N] [--report-dir DIR]\n"
            "                    [--golden-dir DIR] [--no-triangulate] [--plan] [--durations N]\n"
            "                    [--rerun-failed RUN.json] [--maxfail N | -x] [--limit N] [--in-process]\n"
            "                    [--baseline FILE]... [--baseline-allow-fixed] [--no-trace] [--no-desc-poison]\n"
            "\n"
            "Runs conformance cases (docs/cases.md). PATHS are case files or directories (their\n"
            "*.yaml files, not recursing); default: every case under cases/ (not cases/detect/).\n"
            "Each (case, backend) runs in its own child process with a watchdog and a memory cap.\n"
            "\n"
            "  --model DIR              the model suite (cases/model/*.yaml, or PATHS as templates) on\n"
            "                           the checkpoint in DIR (a Hugging Face model directory or hub\n"
            "                           cache folder), its goldens from the user's cache\n"
            "                           (docs/cases.md \"The model suite\")\n"
            "                           (the default --timeout is then %.0f s)\n"
            "  --make-goldens           with --model: make the goldens not yet cached first\n"
            "                           (transformers; docs/goldens.md \"Goldens on demand\")\n"
            "  --reference ref          with --model: goldens from genfence's ref backend instead of\n"
            "                           transformers (no torch here), marked as such\n"
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
            "  --timeout S              seconds a (case, backend) may go without progress (no backend\n"
            "                           call started or returned) before it is killed, and 10 x S in all\n"
            "                           (default %.0f; 0 = none); the verdict is then timeout\n"
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
            "                           skipped or an error, then stop (backends are probed, nothing runs);\n"
            "                           exit 2 if any pair is an error, 1 if a --require-backend one\n"
            "                           would skip, else 0\n"
            "  --durations N            before the summary, list the N slowest (case, backend) runs\n"
            "  --rerun-failed RUN.json  only the (case, backend) pairs that did not pass (fail, stale,\n"
            "                           crash, timeout, error) in that earlier report, on the backends\n"
            "                           they ran on there (NAME:CONFIG and --require-backend kept);\n"
            "                           --backend narrows them to the pairs of the named backends;\n"
            "                           without PATHS, from the case files they came from\n"
            "  --maxfail N              start no (case, backend) run after N of them failed (fail,\n"
            "                           stale, crash, timeout, error); the rest are skips saying so\n"
            "  -x, --exitfirst          --maxfail 1\n"
            "  --limit N                only the first N cases of each kind (after the filters)\n"
            "  --in-process, --no-fork  run every probe and case in this process, one after another:\n"
            "                           no child, no watchdog, no memory cap, so gdb and sanitizers\n"
            "                           see the backend directly; isolation is off (a crash kills\n"
            "                           genfence); docs/backends.md \"Debugging your backend\"\n"
            "  --raw-verdicts           judge every run by its verdict alone; by default a case that\n"
            "                           declares expect_verdict (the must-fail cases of cases/detect/)\n"
            "                           is judged by it: as declared counts as passed (exit 0), another\n"
            "                           verdict as failed (--as-declared: that default, said explicitly)\n"
            "  --baseline FILE          known findings (docs/harness.md \"Baselines\"; repeatable): a run\n"
            "                           that gives an entry's verdict and reason is known (exit 0); one\n"
            "                           that passes where an entry expects a finding is fixed (exit 1)\n"
            "  --baseline-allow-fixed   a fixed finding exits 0 (still reported fixed)\n"
            "  --no-trace               no localization: a failing model case on a backend with the\n"
            "                           trace slot is not replayed traced against ref (genfence trace)\n"
            "  --no-desc-poison         hand model_load the model description itself, not a copy that is\n"
            "                           unmapped once it returns (by default a backend that kept pointers\n"
            "                           into it crashes on its next read, and the reason says so)\n"
            "  -q, --quiet              print only failures and the summary\n"
            "  -h, --help               this help\n"
            "\n"
            "Verdicts: pass, pass-near-tie, skip -> 0; fail, stale, crash, timeout -> 1; error (bad\n"
            "case, bad input) -> 2; 2 wins over 1. The last line gives each backend's own figures, then\n"
            "the engine alone's: \"B: N passed, N failed, N skipped; engine alone: N passed, ...\"\n"
            "(the line above: \"total: N passed, N failed, N skipped\").\n"
            "\n"
            "exit status: 0 all passed, 1 a case failed, 2 bad input or usage (also: the report directory\n"
            "is in use by another run), 130 / 143 interrupted by SIGINT / SIGTERM (the report says so)\n",
            GF_RUN_MODEL_TIMEOUT_S, gf_cpu_count(), GF_RUN_DEFAULT_TIMEOUT_S, GF_RUN_DEFAULT_MEMORY_GIB);
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
        if (!j->ran || !j->backend || !j->c->model || j->c->kind->reaches != GF_KIND_REACHES_MODEL)
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
        printf("  %8.2fs  %-44s [%s] %s\n", v[i]->seconds, v[i]->c->id, v[i]->backend ? v[i]->backend->name : "-",
               gf_verdict_str(v[i]->verdict));
    free(v);
}

/* What the command line asked for. */
typedef struct run_cli {
    gf_run_opts o;
    strv backends, required, kinds, tags;
    const char *filter;
    int no_report, oversubscribe, quiet, shard_i, shard_n, triangulate, plan, as_declared;
    long durations, limit;
    gf_rerun rerun; /* --rerun-failed (rerun.pairs NULL: none) */
    gf_baseline bl; /* --baseline (baseline.h) */
    const char *const *paths;
    size_t n_paths;
    const char *model; /* --model DIR */
    int make_goldens, timeout_given;
    gf_golden_source reference;
    gf_model_suite ms; /* the model suite (model set) */
    const char *suite_path[1];
} run_cli;

static void run_cli_free(run_cli *cli)
{
    gf_model_suite_free(&cli->ms);
    gf_rerun_free(&cli->rerun);
    gf_baseline_free(&cli->bl);
    free(cli->backends.v);
    free(cli->required.v);
    free(cli->kinds.v);
    free(cli->tags.v);
}

/* The options into cli: -1 to go on, else the exit status (--help, a bad
 * option: the message given). */
static int parse_options(int argc, char **argv, run_cli *cli)
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
        O_MAXFAIL,
        O_LIMIT,
        O_DECLARED,
        O_RAW,
        O_BASELINE,
        O_BASELINE_FIXED,
        O_MODEL,
        O_MAKE_GOLDENS,
        O_REFERENCE,
        O_NOTRACE,
        O_NOPOISON
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
                                             {"no-trace", no_argument, 0, O_NOTRACE},
                                             {"no-desc-poison", no_argument, 0, O_NOPOISON},
                                             {"no-fork", no_argument, 0, O_INPROC},
                                             {"maxfail", required_argument, 0, O_MAXFAIL},
                                             {"exitfirst", no_argument, 0, 'x'},
                                             {"limit", required_argument, 0, O_LIMIT},
                                             {"as-declared", no_argument, 0, O_DECLARED},
                                             {"raw-verdicts", no_argument, 0, O_RAW},
                                             {"baseline", required_argument, 0, O_BASELINE},
                                             {"baseline-allow-fixed", no_argument, 0, O_BASELINE_FIXED},
                                             {"model", required_argument, 0, O_MODEL},
                                             {"make-goldens", no_argument, 0, O_MAKE_GOLDENS},
                                             {"reference", required_argument, 0, O_REFERENCE},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    long v;
    double d;
    int c;
    optind = 1;
    opterr = 0;
    int li = -1;
    char optname[64];
    while ((c = getopt_long(argc, argv, "j:qxh", longopts, &li)) != -1) {
        /* the option's own name for messages (argv[optind - 1] is its value
         * when the value is a separate word: "bad value '4/3' for 4/3") */
        if (li >= 0)
            snprintf(optname, sizeof optname, "--%s", longopts[li].name);
        else
            snprintf(optname, sizeof optname, "-%c", c);
        li = -1;
        switch (c) {
        case O_BACKEND: strv_push(&cli->backends, optarg); break;
        case O_REQUIRE: strv_push(&cli->required, optarg); break;
        case O_FILTER: cli->filter = optarg; break;
        case O_KIND: strv_push(&cli->kinds, optarg); break;
        case O_TAG: strv_push(&cli->tags, optarg); break;
        case 'j':
            if (!gf_parse_int(optarg, 1, 4096, &v))
                goto bad_value;
            cli->o.jobs = (int)v;
            break;
        case O_THREADS:
            if (!gf_parse_int(optarg, 1, 4096, &v))
                goto bad_value;
            cli->o.threads = (int)v;
            break;
        case O_TIMEOUT:
            if (!gf_parse_double(optarg, &d) || !(d >= 0) || !isfinite(d))
                goto bad_value;
            cli->o.timeout_s = d;
            cli->timeout_given = 1;
            break;
        case O_MEM:
            if (!gf_parse_size(optarg, &cli->o.memory_limit))
                goto bad_value;
            break;
        case O_SHARD:
            if (!gf_shard_parse(optarg, &cli->shard_i, &cli->shard_n))
                goto bad_value;
            break;
        case O_REPORT: cli->o.report_dir = optarg; break;
        case O_NOREPORT: cli->no_report = 1; break;
        case O_NOTRI: cli->triangulate = 0; break;
        case O_PLAN: cli->plan = 1; break;
        case O_DURATIONS:
            if (!gf_parse_int(optarg, 1, 1000000, &cli->durations))
                goto bad_value;
            break;
        case O_MAXFAIL:
            if (!gf_parse_int(optarg, 1, 1000000000, &v))
                goto bad_value;
            cli->o.maxfail = (int)v;
            break;
        case 'x': cli->o.maxfail = 1; break;
        case O_LIMIT:
            if (!gf_parse_int(optarg, 1, 1000000000, &cli->limit))
                goto bad_value;
            break;
        case O_RERUN: {
            char why[1024];
            gf_rerun_free(&cli->rerun);
            if (gf_rerun_load(&cli->rerun, optarg, why, sizeof why) != 0) {
                gf_cli_error("run: %s", why);
                return GF_EXIT_USAGE;
            }
            break;
        }
        case O_OVER: cli->oversubscribe = 1; break;
        case O_INPROC: gf_runner_in_process(1); break;
        case O_NOTRACE: cli->o.trace = -1; break;
        case O_NOPOISON: gf_engine_desc_poison(0); break; /* process-wide: the children inherit it */
        case O_GOLDEN_DIR: {
            struct stat sb;
            if (stat(optarg, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                gf_cli_error("run: --golden-dir %s is not a directory", optarg);
                return GF_EXIT_USAGE;
            }
            cli->o.golden_dir = optarg;
            break;
        }
        case O_DECLARED: cli->as_declared = 1; break;
        case O_RAW: cli->as_declared = 0; break;
        case O_MODEL: cli->model = optarg; break;
        case O_MAKE_GOLDENS: cli->make_goldens = 1; break;
        case O_REFERENCE:
            if (!strcmp(optarg, "ref"))
                cli->reference = GF_GOLDENS_REF;
            else if (strcmp(optarg, "transformers"))
                goto bad_value;
            break;
        case O_BASELINE:
            if (gf_baseline_load(&cli->bl, optarg, "run") != 0)
                return GF_EXIT_USAGE;
            break;
        case O_BASELINE_FIXED: gf_verdict_allow_fixed(1); break;
        case 'q': cli->quiet = 1; break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        default: /* one line: which option, and where the help is */
            if (optopt == 'j')
                gf_cli_error("run: option -%c needs a value (genfence run --help)", optopt);
            else
                gf_cli_error("run: unknown or incomplete option '%s' (genfence run --help)", argv[optind - 1]);
            return GF_EXIT_USAGE;
        }
        continue;
    bad_value:
        if (c == O_SHARD)
            gf_cli_error("run: bad value '%s' for --shard: want I/N with 1 <= I <= N", optarg);
        else if (c == 'j' || c == O_THREADS)
            gf_cli_error("run: bad value '%s' for %s: want an integer from 1 to 4096", optarg, optname);
        else if (c == O_MAXFAIL || c == O_LIMIT)
            gf_cli_error("run: bad value '%s' for %s: want a positive integer", optarg, optname);
        else
            gf_cli_error("run: bad value '%s' for %s", optarg, optname);
        return GF_EXIT_USAGE;
    }
    cli->paths = (const char *const *)(argv + optind);
    cli->n_paths = (size_t)(argc - optind);
    if (!cli->model && (cli->make_goldens || cli->reference != GF_GOLDENS_TRANSFORMERS)) {
        gf_cli_error("run: --make-goldens and --reference need --model DIR");
        return GF_EXIT_USAGE;
    }
    int cores = gf_cpu_count();
    if (cli->o.jobs == 0) /* default: fill the cores, never oversubscribe them */
        cli->o.jobs = cores / cli->o.threads > 0 ? cores / cli->o.threads : 1;
    if (!cli->oversubscribe && (long)cli->o.jobs * cli->o.threads > cores) {
        gf_cli_error("run: -j %d x --threads %d = %ld exceeds the %d cores this process may use; "
                     "lower them or pass --oversubscribe",
                     cli->o.jobs, cli->o.threads, (long)cli->o.jobs * cli->o.threads, cores);
        return GF_EXIT_USAGE;
    }
    return -1;
}

/* --limit: the first n cases of each kind, over the cases the filters kept. */
static int limit_takes(const gf_kind_def **seen, long *count, size_t *n_seen, size_t cap, const gf_kind_def *k, long n)
{
    size_t i;
    for (i = 0; i < *n_seen && seen[i] != k; i++)
        ;
    if (i == *n_seen) {
        if (*n_seen == cap)
            return 1;
        seen[i] = k;
        count[i] = 0;
        (*n_seen)++;
    }
    return count[i]++ < n;
}

/* The cases the filters, --rerun-failed, --limit and --shard keep into
 * (*sel, *n_sel); -1 to go on, else the exit status (message given). */
static int select_cases(const run_cli *cli, gf_case_set *set, const gf_case ***sel, size_t *n_sel)
{
    gf_case_filter cf;
    /* --rerun-failed without paths: the case files the failing pairs came from */
    const char *const *paths = cli->paths;
    size_t n_paths = cli->n_paths;
    if (!n_paths && cli->rerun.n_files) {
        paths = (const char *const *)cli->rerun.files;
        n_paths = cli->rerun.n_files;
    }
    if (gf_case_select_load("run", "; nothing was run", cli->filter, cli->kinds.v, cli->kinds.n, cli->tags.v,
                            cli->tags.n, paths, n_paths, &cf, set) < 0)
        return GF_EXIT_USAGE;
    const gf_case **v = calloc(set->n ? set->n : 1, sizeof *v);
    const gf_kind_def *seen[256];
    long count[256];
    size_t n = 0, n_matched = 0, n_seen = 0;
    for (size_t i = 0; v && i < set->n; i++) {
        if (!gf_case_filter_match(&cf, &set->cases[i]))
            continue;
        if (cli->rerun.pairs && !gf_rerun_has_case(&cli->rerun, set->cases[i].id))
            continue;
        if (cli->limit && !limit_takes(seen, count, &n_seen, 256, set->cases[i].kind, cli->limit))
            continue;
        if (!gf_shard_takes(&n_matched, cli->shard_i, cli->shard_n))
            continue;
        v[n++] = &set->cases[i];
    }
    if (!cli->shard_n)
        n_matched = n;
    gf_case_filter_free(&cf);
    *sel = v;
    *n_sel = n;
    if (n_matched)
        return -1;
    if (cli->rerun.pairs) {
        if (cli->rerun.n_pairs) {
            gf_cli_error("run: none of the %zu case(s) that did not pass in %s is among the selected cases",
                         json_object_size(cli->rerun.pairs), cli->rerun.path);
            return GF_EXIT_USAGE;
        }
        printf("run: every case passed in %s; nothing to rerun\n", cli->rerun.path);
        return GF_EXIT_OK;
    }
    if (set->n)
        gf_cli_error("run: no case matches the filters");
    else { /* name where it looked: the files read (or the paths), and how many */
        char none[2048];
        gf_case_none_found(none, sizeof none, set, (char *const *)cli->paths, cli->n_paths);
        gf_cli_error("run: %s", none);
    }
    return GF_EXIT_USAGE;
}

/* The backends: as asked; else --rerun-failed's (the failing pairs' own,
 * required as they were); else every built-in name (kept when available). */
/* The default run's built-in protocol client: exec with the C echo client
 * the build makes beside genfence (<dir of genfence>/tools/echo_ref), so the
 * pipe's framing is judged on every default run. Opt-in: it runs only the
 * cases tagged exec (cases/exec.yaml, a subset that reaches every op
 * echo_ref speaks; they run on the other backends as any case does). Without echo_ref there (an installed
 * genfence, GENFENCE_WITH_EXEC=OFF) it is unavailable, and the summary says
 * why. */
static void add_echo_client(gf_backend_probe **bs, size_t *n_bs)
{
    int have_exec = 0;
    for (const char *const *nm = gf_registry_names(); *nm; nm++)
        have_exec |= !strcmp(*nm, "exec");
    char exe[4096], spec[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(spec, sizeof spec, "exec:%s/tools/echo_ref", exe);
    const int found = have_exec && n > 0 && slash && access(spec + 5, X_OK) == 0;
    if (!add_backend(bs, n_bs, found ? spec : "exec:echo_ref", 0))
        return;
    gf_backend_probe *p = &(*bs)[*n_bs - 1];
    p->explicit_ = 0;
    p->opt_in = 1;
    if (!found) {
        p->absent = 1;
        free(p->name);
        p->name = strdup("exec"); /* as the module reports itself: its cases' filter names it */
        if (!have_exec)
            snprintf(p->why, sizeof p->why,
                     "the exec module is not built: the C echo client's cases (cases/exec.yaml) "
                     "do not run");
        else
            snprintf(p->why, sizeof p->why,
                     "the C echo client is not beside this genfence (%.300s/tools/echo_ref): its cases "
                     "(cases/exec.yaml) do not run",
                     exe);
    }
}

static void select_backends(const run_cli *cli, gf_backend_probe **bs, size_t *n_bs, int *default_backends)
{
    for (size_t i = 0; i < cli->backends.n; i++)
        add_backend(bs, n_bs, cli->backends.v[i], 0);
    for (size_t i = 0; i < cli->required.n; i++)
        add_backend(bs, n_bs, cli->required.v[i], 1);
    if (*n_bs == 0)
        for (size_t i = 0; i < cli->rerun.n_backends; i++)
            add_backend(bs, n_bs, cli->rerun.backends[i], cli->rerun.required[i]);
    *default_backends = *n_bs == 0;
    if (*default_backends) {
        for (const char *const *nm = gf_registry_names(); *nm; nm++) {
            if (gf_registry_on_request(*nm))
                continue; /* needs NAME:CONFIG (exec): only when named */
            add_backend(bs, n_bs, *nm, 0);
            (*bs)[*n_bs - 1].explicit_ = 0;
        }
        add_echo_client(bs, n_bs);
    }
}

/* Write the report (GF_REPORT_FORMAT_LIST) in the staging folder, then move it over
 * the old report at once; info's paths are set when that worked. */
/* What a backend left in the report folder: said, not removed (stray.c). */
static void list_strays(gf_run_info *info, const gf_report_dir *rd, json_t *before)
{
    info->stray_files = gf_report_dir_strays(rd, before, info->jobs, info->n_jobs);
    size_t ns = json_array_size(info->stray_files);
    if (!ns)
        return;
    printf("report folder %s: %zu file%s genfence did not write (a backend's, during the run; listed in run.json's "
           "stray_files):",
           rd->dir, ns, ns == 1 ? "" : "s");
    for (size_t i = 0; i < ns && i < 5; i++)
        printf(" %s", json_string_value(json_array_get(info->stray_files, i)));
    printf("%s\n", ns > 5 ? " ..." : "");
}

static void write_reports(gf_run_info *info, gf_report_dir *rd, char *json_path, char *junit_path, size_t cap)
{
    gf_report_dir_rebase(rd, info->jobs, info->n_jobs); /* (each job's already, as it finished) */
    int ok = 1;
    if (gf_report_write(info, rd->stage) != 0) { /* every format of GF_REPORT_FORMAT_LIST */
        gf_cli_error("run: cannot write the report in %s: %s; the previous report is kept", rd->stage, strerror(errno));
        ok = 0;
    } else if (gf_report_dir_commit(rd) != 0) {
        gf_cli_error("run: cannot move the report into %s: %s", rd->dir, strerror(errno));
        ok = 0;
    }
    snprintf(json_path, cap, "%s/run.json", rd->dir);
    snprintf(junit_path, cap, "%s/junit.xml", rd->dir);
    if (ok) {
        info->json_path = json_path;
        info->junit_path = junit_path;
    }
}

/* options -> cases -> backends (probed) -> plan -> run -> reports */
int gf_cmd_run(int argc, char **argv) { return gf_cmd_run_traced(argc, argv, 0); }

int gf_cmd_run_traced(int argc, char **argv, int trace)
{
    run_cli cli = {.o = {.jobs = 0,
                         .trace = trace,
                         .threads = 1,
                         .timeout_s = GF_RUN_DEFAULT_TIMEOUT_S,
                         .memory_limit = (unsigned long long)(GF_RUN_DEFAULT_MEMORY_GIB * 1024 * 1024 * 1024),
                         .report_dir = "reports"},
                   .triangulate = 1,
                   .as_declared = 1};
    gf_run_info info;
    memset(&info, 0, sizeof info);
    info.started = time(NULL);
    info.argc = argc - 1;
    info.argv = argv + 1;
    double t0 = gf_now_s();
    gf_run_opts *o = &cli.o;
    gf_report_dir rd = {.lock_fd = -1}; /* the locked report folder (outdir.c) */
    gf_case_set set;
    memset(&set, 0, sizeof set);
    const gf_case **sel = NULL;
    size_t n_sel = 0;
    gf_backend_probe *bs = NULL;
    size_t n_bs = 0;
    gf_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = parse_options(argc, argv, &cli);
    if (rc >= 0)
        goto out;
    if (cli.model) { /* the model suite: its templates instantiated, then an ordinary case file */
        if (gf_model_suite_open(&cli.ms, "run", cli.model, cli.reference, cli.paths, cli.n_paths) != 0) {
            rc = GF_EXIT_USAGE;
            goto out;
        }
        gf_model_suite_print(&cli.ms, "run", stdout);
        if (cli.make_goldens && gf_model_suite_goldens_cached(&cli.ms) < cli.ms.n_goldens) {
            if ((rc = gf_model_suite_make_goldens(&cli.ms, "run", 0, cli.o.threads)) != GF_EXIT_OK)
                goto out;
            gf_model_suite_free(&cli.ms); /* again: now the made goldens are where the suite points */
            if (gf_model_suite_open(&cli.ms, "run", cli.model, cli.reference, cli.paths, cli.n_paths) != 0) {
                rc = GF_EXIT_USAGE;
                goto out;
            }
            printf("run: %zu of %zu goldens in the cache\n", gf_model_suite_goldens_cached(&cli.ms), cli.ms.n_goldens);
        }
        if (!cli.timeout_given) /* a real checkpoint's case takes minutes on a loaded CPU: the hang guard is longer */
            cli.o.timeout_s = GF_RUN_MODEL_TIMEOUT_S;
        fflush(stdout);
        cli.suite_path[0] = cli.ms.suite_file;
        cli.paths = cli.suite_path;
        cli.n_paths = 1;
    }
    if ((rc = select_cases(&cli, &set, &sel, &n_sel)) >= 0)
        goto done;

    /* backends, probed in children */
    select_backends(&cli, &bs, &n_bs, &info.default_backends);
    if (gf_runner_is_in_process())
        printf("run: --in-process: isolation is off: every case runs in this process, one at a time, with no "
               "watchdog or memory cap; a crash or hang in a backend stops genfence\n");
    gf_runner_probe(bs, n_bs, o);

    /* the plan: every (case, backend), run, skip or error (plan.h) */
    rc = GF_EXIT_USAGE;
    if (gf_plan_build(&plan, sel, n_sel, bs, n_bs, set.kinds, o->threads, cli.rerun.pairs ? &cli.rerun : NULL) != 0) {
        gf_cli_error("run: out of memory; nothing was run");
        goto done;
    }
    if (cli.rerun.pairs && plan.n_jobs == 0) {
        gf_cli_error("run: none of the %zu (case, backend) pair(s) that did not pass in %s is on this run's "
                     "backends; nothing was run",
                     cli.rerun.n_pairs, cli.rerun.path);
        goto done;
    }
    if (cli.plan) {
        gf_plan_print(&plan);
        rc = gf_plan_exit_status(&plan);
        goto done;
    }
    gf_job *jobs = plan.jobs;
    size_t n_jobs = plan.n_jobs;

    info.opts = o;
    info.filter = cli.filter;
    info.kinds = cli.kinds.v;
    info.n_kinds = cli.kinds.n;
    info.tags = cli.tags.v;
    info.n_tags = cli.tags.n;
    info.shard_i = cli.shard_i;
    info.shard_n = cli.shard_n;
    info.oversubscribe = cli.oversubscribe;
    info.backends = bs;
    info.n_backends = n_bs;
    info.jobs = jobs;
    info.n_jobs = n_jobs;
    info.cases = &set;
    info.n_selected = n_sel;
    info.tty = isatty(STDOUT_FILENO);
    info.quiet = cli.quiet;
    info.as_declared = o->as_declared = cli.as_declared;
    if (cli.no_report)
        o->report_dir = NULL;
    info.report_dir = o->report_home = o->report_dir;
    if (o->report_dir) { /* locked for the run; the new report is staged until complete */
        char why[1024];
        if (gf_report_dir_open(&rd, o->report_dir, why, sizeof why) != 0) {
            gf_cli_error("run: %s; nothing was run", why);
            goto done;
        }
        o->report_dir = rd.stage;       /* the children write their failing-step logits there */
        if (!gf_runner_is_in_process()) /* in-process: a signal stops genfence as usual */
            gf_report_catch_signals();
    }

    /* the run: the plan's undecided pairs, each in its own child */
    gf_console_header(&info);
    for (size_t i = 0; i < n_jobs; i++)
        if (jobs[i].decided)
            gf_console_line(&info, &jobs[i]);
    g_report_dir = rd.stage ? &rd : NULL;
    json_t *before = rd.stage ? gf_report_dir_listing(rd.dir) : NULL; /* what was there: not this run's */
    gf_run_hooks hooks = {.started = gf_console_started, .finished = on_finished, .user = &info};
    if (!gf_report_signal_seen())
        gf_runner_run(jobs, n_jobs, o, &hooks);
    info.interrupted = gf_runner_interrupted() ? gf_runner_interrupted() : gf_report_signal_seen();
    for (size_t i = 0; info.interrupted && i < n_jobs; i++)
        if (!jobs[i].decided) { /* the signal came before the pool started */
            gf_job_decide(&jobs[i], GF_V_ERROR, "not run: the run was interrupted (%s)",
                          gf_report_signal_name(info.interrupted));
            jobs[i].interrupted = 1;
        }
    size_t n_not_run = 0;
    for (size_t i = 0; i < n_jobs; i++)
        if (jobs[i].not_run) { /* --maxfail: skips that say so */
            gf_console_line(&info, &jobs[i]);
            n_not_run++;
        }
    if (n_not_run)
        printf("run: --maxfail %d reached: %zu (case, backend) run%s not started (skips, each saying so)\n", o->maxfail,
               n_not_run, n_not_run == 1 ? "" : "s");
    gf_run_tally(&info);
    gf_baseline_apply(&cli.bl, &info); /* known / fixed, then tallied again */
    if (cli.triangulate && !info.interrupted)
        info.triangulation = run_triangulation(&info, o);
    gf_triangulation_print(info.triangulation, jobs, n_jobs);
    gf_probe_table_print(&info);
    info.seconds = gf_now_s() - t0;

    /* the reports */
    char json_path[4096], junit_path[4096];
    if (rd.stage) {
        gf_report_dir_rebase(&rd, jobs, n_jobs); /* (each job's already, as it finished) */
        list_strays(&info, &rd, before);
        write_reports(&info, &rd, json_path, junit_path, sizeof json_path);
    }
    gf_report_dir_close(&rd);
    g_report_dir = NULL;
    if (cli.durations) /* before the summary: its last line stays the last */
        print_durations(jobs, n_jobs, (size_t)cli.durations);
    gf_console_summary(&info);
    rc = info.exit_status;

    json_decref(info.triangulation);
    json_decref(info.stray_files);
    json_decref(before);
done:
    gf_report_dir_close(&rd);
    gf_plan_free(&plan);
    for (size_t b = 0; b < n_bs; b++)
        gf_backend_probe_clear(&bs[b]);
    free(bs);
    free(sel);
    gf_case_set_free(&set);
out:
    run_cli_free(&cli);
    return rc;
}
