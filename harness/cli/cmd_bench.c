/* genfence bench: what a backend costs. The seed's benchmark (a 16-token
 * prompt, 100 greedy tokens, one warm-up, the median of 5, cached and
 * uncached), prefill and decode timed apart, beside what the machine can do:
 * a read bandwidth and an fp32 peak the command measures itself. Each backend
 * runs in its own child process, so its peak RSS is its own. */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "commands.h"
#include "sys.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence bench (--model DIR | --shape NAME) [--backend NAME]... [options]\n"
               "\n"
               "Times the seed's benchmark on each backend, each in its own process: a 16-token\n"
               "prompt, 100 greedy new tokens (no EOS stop), one warm-up run, then the median of\n"
               "5 runs, cached and uncached. Prefill (the prompt's forward and its first token)\n"
               "and decode (each later token) are timed apart. Beside them, two compute-bound\n"
               "rows: a prefill of 128 tokens and a batched decode step of B = 8 rows.\n"
               "\n"
               "It also measures the machine, at the same thread count, before and after the\n"
               "backends (the best of the two is kept): a read bandwidth (a sum over a 1 GiB\n"
               "buffer, best of 5), the fp32 FMA peak (registers only) and, where\n"
               "libopenblas.so.0 is installed, an sgemm peak (n = 1536). Decode is\n"
               "reported as GB/s of weight traffic (every layer matrix and the output layer\n"
               "read once per token, at the backend's dtype) against that bandwidth;\n"
               "the compute-bound rows as GFLOP/s against the sgemm peak (the FMA peak\n"
               "without OpenBLAS). Ratios on a shared machine mean more than absolutes.\n"
               "\n"
               "  --model DIR         a Hugging Face model directory (config.json, model.safetensors)\n"
               "  --shape NAME        a model of that shape with seeded random weights, written (F32)\n"
               "                      into a temporary folder ($TMPDIR, else /tmp; removed at the\n"
               "                      end) and loaded from it as --model DIR is: gpt2-small (124M,\n"
               "                      openai-community/gpt2), llama-small (125M: GPT-2-small's\n"
               "                      width and depth with GQA 12/4 heads, SwiGLU 2048, a 32000\n"
               "                      vocabulary, untied head) or qwen2-0.5b (494M, 1.98 GB:\n"
               "                      Qwen2.5-0.5B's config, q/k/v biases, tied head)\n"
               "  --write-shape DIR   write the --shape model into DIR (a new folder) and stop: a\n"
               "                      model for run, generate or bench --model\n"
               "  --backend NAME      backend spec as for run (repeatable; default ref)\n"
               "  --threads N         backend and probe threads (default 1)\n"
               "  --new-tokens N      greedy tokens per run (default 100)\n"
               "  --repeats N         timed runs per mode, the median reported (default 5)\n"
               "  --no-uncached       skip the uncached runs (the recompute loop of a large model\n"
               "                      on a slow backend takes long)\n"
               "  --no-probe          skip the bandwidth and peak probes\n"
               "  --no-rates          skip the compute-bound rows (prefill 128, decode B=8)\n"
               "  --max-rss-ratio R   a backend whose peak RSS is above R times the weights' F32\n"
               "                      bytes fails (exit 1), named with both figures: memory, not\n"
               "                      speed, so a test may assert it (1.15: issue 27's bound)\n"
               "  --json              print one JSON object instead of the tables\n"
               "  -h, --help          this help\n"
               "\n"
               "Progress and each backend's row go to stderr as it finishes (a \\r line on a terminal);\n"
               "figures not measured (--no-probe) print as -, never nan. Timings are not checked:\n"
               "exit status 0 every backend ran (within --max-rss-ratio), 1 a backend failed, is\n"
               "unavailable or is over --max-rss-ratio, 2 bad input.\n");
}

/* ---- the child side ---- */

static int g_progress; /* stderr is a terminal */

static void progress(const char *backend, const char *what, int i, int n)
{
    if (!g_progress)
        return;
    fprintf(stderr, "\r\033[Kbench: %s: %s %d/%d", backend, what, i, n);
    fflush(stderr);
}

/* CPU seconds of this process (every thread): beside the wall clock, it
 * leaves out the time a busy machine kept the backend off the CPU. */
static double cpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct step_clock {
    double t0, t_first, t_last;
    double c0, c_first, c_last; /* process CPU seconds at the same moments */
    int steps;
} step_clock;

static gf_status on_step(void *user, const gf_step_info *info)
{
    step_clock *c = user;
    double t = gf_now_s();
    double cpu = cpu_now_s();
    if (info->step == 0)
        c->t_first = t, c->c_first = cpu;
    c->t_last = t;
    c->c_last = cpu;
    c->steps = info->step + 1;
    return GF_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static gf_status run_mode(gf_engine *e, const bench_opts *o, const char *name, int cached, const int32_t *prompt,
                          mode_result *r, size_t *cache_bytes)
{
    gf_generate_params gp = gf_generate_defaults();
    gp.sampler = gf_sampler_greedy();
    gp.max_new_tokens = o->new_tokens;
    gp.eos_id = -1;
    gp.use_cache = cached;
    gp.on_step = on_step;
    double pre[GF_BENCH_MAX_REPEATS], dec[GF_BENCH_MAX_REPEATS], tot[GF_BENCH_MAX_REPEATS];
    double cpre[GF_BENCH_MAX_REPEATS], cdec[GF_BENCH_MAX_REPEATS];
    int32_t len = GF_BENCH_PROMPT;
    for (int run = 0; run <= o->repeats; run++) { /* run 0 is the warm-up */
        progress(name, cached ? "cached run" : "uncached run", run, o->repeats);
        step_clock clk = {0};
        gp.user = &clk;
        gf_generation *g = NULL;
        clk.t0 = gf_now_s();
        clk.c0 = cpu_now_s();
        gf_status st = gf_generate(e, 1, &prompt, &len, &gp, &g);
        double t_end = gf_now_s();
        if (st != GF_OK)
            return st;
        if (cached && cache_bytes)
            *cache_bytes = g->cache_bytes;
        gf_generation_free(g);
        if (run == 0)
            continue;
        pre[run - 1] = clk.t_first - clk.t0;
        dec[run - 1] = clk.steps > 1 ? (clk.t_last - clk.t_first) / (clk.steps - 1) : NAN;
        tot[run - 1] = t_end - clk.t0;
        cpre[run - 1] = clk.c_first - clk.c0;
        cdec[run - 1] = clk.steps > 1 ? (clk.c_last - clk.c_first) / (clk.steps - 1) : NAN;
    }
    r->ran = 1;
    r->tokens = o->new_tokens;
    r->n_samples = o->repeats;
    const double *each[GF_BENCH_SAMPLE_MODE_KINDS] = {pre, dec, tot, cpre, cdec};
    for (int k = 0; k < GF_BENCH_SAMPLE_MODE_KINDS; k++) /* before median() sorts them */
        memcpy(r->samples[k], each[k], (size_t)o->repeats * sizeof *pre);
    r->prefill_s = median(pre, o->repeats);
    r->decode_s = median(dec, o->repeats);
    r->total_s = median(tot, o->repeats);
    r->prefill_cpu_s = median(cpre, o->repeats);
    r->decode_cpu_s = median(cdec, o->repeats);
    return GF_OK;
}

/* Compute-bound rows, straight on the engine: a T-token prefill into a fresh
 * cache (last logits only), and a decode step of B rows over a 16-token cache. */
static gf_status run_rates(gf_engine *e, const bench_opts *o, const char *name, bench_row *row)
{
    const gf_model_config *c = gf_engine_config(e);
    const int32_t V = c->vocab_size;
    int32_t T = GF_BENCH_PREFILL < c->n_positions ? GF_BENCH_PREFILL : c->n_positions;
    const int32_t B = GF_BENCH_ROWS, steps = GF_BENCH_STEPS;
    int32_t *tok = malloc((size_t)B * (T + GF_BENCH_PROMPT + steps) * sizeof *tok);
    int32_t *pos = malloc((size_t)B * (T + GF_BENCH_PROMPT + steps) * sizeof *pos);
    float *logits = malloc((size_t)B * (T > GF_BENCH_PROMPT ? T : GF_BENCH_PROMPT) * V * sizeof *logits);
    double pre[GF_BENCH_MAX_REPEATS], bat[GF_BENCH_MAX_REPEATS];
    double cpre[GF_BENCH_MAX_REPEATS], cbat[GF_BENCH_MAX_REPEATS];
    gf_status st = tok && pos && logits ? GF_OK : gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t i = 0; st == GF_OK && i < B * (T + GF_BENCH_PROMPT + steps); i++)
        tok[i] = (int32_t)((7 + 131 * (int64_t)i) % V);
    for (int run = 0; st == GF_OK && run <= o->repeats; run++) {
        progress(name, "prefill and batched decode", run, o->repeats);
        /* prefill of T positions */
        for (int32_t t = 0; t < T; t++)
            pos[t] = t;
        gf_batch in = {.B = 1, .T = T, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
        void *cache = NULL;
        st = gf_engine_cache_create(e, 1, T, &cache);
        double t0 = gf_now_s(), c0 = cpu_now_s();
        if (st == GF_OK)
            st = gf_engine_forward(e, cache, &in, logits);
        double t1 = gf_now_s(), c1 = cpu_now_s();
        gf_engine_cache_free(e, cache);
        cache = NULL;
        if (st != GF_OK)
            break;
        /* B rows: a 16-token prefill (untimed), then `steps` single-token steps */
        const int32_t S = GF_BENCH_PROMPT + steps;
        st = gf_engine_cache_create(e, B, S, &cache);
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < GF_BENCH_PROMPT; t++)
                pos[b * GF_BENCH_PROMPT + t] = t;
        in =
            (gf_batch){.B = B, .T = GF_BENCH_PROMPT, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
        if (st == GF_OK)
            st = gf_engine_forward(e, cache, &in, logits);
        double t2 = gf_now_s(), c2 = cpu_now_s();
        for (int32_t s = 0; st == GF_OK && s < steps; s++) {
            int32_t stok[GF_BENCH_ROWS], spos[GF_BENCH_ROWS];
            for (int32_t b = 0; b < B; b++)
                stok[b] = tok[(b * steps + s) % (B * T)], spos[b] = GF_BENCH_PROMPT + s;
            in = (gf_batch){.B = B, .T = 1, .tokens = stok, .position_ids = spos, .logits_mode = GF_LOGITS_LAST};
            st = gf_engine_forward(e, cache, &in, logits);
        }
        double t3 = gf_now_s(), c3 = cpu_now_s();
        gf_engine_cache_free(e, cache);
        if (st != GF_OK || run == 0)
            continue;
        pre[run - 1] = t1 - t0;
        bat[run - 1] = (t3 - t2) / steps;
        cpre[run - 1] = c1 - c0;
        cbat[run - 1] = (c3 - c2) / steps;
    }
    if (st == GF_OK) {
        rate_result *rr[2] = {&row->prefill, &row->batched};
        double *wall[2] = {pre, bat}, *cpu[2] = {cpre, cbat};
        for (int k = 0; k < 2; k++) {
            rr[k]->ran = 1;
            rr[k]->tokens = k ? B : T;
            rr[k]->n_samples = o->repeats;
            memcpy(rr[k]->samples, wall[k], (size_t)o->repeats * sizeof *pre); /* before median() sorts */
            memcpy(rr[k]->cpu_samples, cpu[k], (size_t)o->repeats * sizeof *pre);
            rr[k]->s = median(wall[k], o->repeats);
            rr[k]->cpu_s = median(cpu[k], o->repeats);
        }
    }
    free(tok);
    free(pos);
    free(logits);
    return st;
}

static void bench_child(const bench_opts *o, const char *spec, bench_row *row)
{
    gf_model *model = NULL;
    gf_backend_handle h = {0};
    gf_engine *e = NULL;
    const gf_model_desc *desc = NULL;
    /* a shape too is loaded from the folder it was written to: what generate
     * costs, mapped weights included */
    gf_status st = gf_model_load(o->load_dir, &model);
    if (st == GF_OK)
        desc = gf_model_desc_get(model);
    if (st == GF_OK)
        st = gf_registry_open(spec, &h);
    gf_backend_options bo = gf_registry_options(&h, o->threads);
    gf_engine_desc_poison(0); /* the RSS figures count the backend's copy of the weights, not a guard's */
    if (st == GF_OK)
        st = gf_engine_create(h.ops, desc, &bo, &e);
    if (st == GF_OK) {
        gf_backend_info info;
        gf_backend_describe(h.ops, &bo, &info);
        row->dtype = info.dtype;
        row->threads = info.threads;
        snprintf(row->library, sizeof row->library, "%s", info.library ? info.library : "");
        snprintf(row->detail, sizeof row->detail, "%s", info.detail ? info.detail : "");
        snprintf(row->cpu_path, sizeof row->cpu_path, "%s", info.cpu_path ? info.cpu_path : "");
        snprintf(row->weights, sizeof row->weights, "%s", info.weights ? info.weights : "");
        snprintf(row->kv_cache, sizeof row->kv_cache, "%s", info.kv_cache ? info.kv_cache : "");
        int32_t prompt[GF_BENCH_PROMPT];
        for (int32_t i = 0; i < GF_BENCH_PROMPT; i++)
            prompt[i] = (int32_t)((1 + 37 * (int64_t)i) % desc->config.vocab_size);
        st = run_mode(e, o, spec, 1, prompt, &row->cached, &row->cache_bytes);
        if (st == GF_OK && o->uncached)
            st = run_mode(e, o, spec, 0, prompt, &row->uncached, NULL);
        if (st == GF_OK && o->rates)
            st = run_rates(e, o, spec, row);
    }
    row->ok = st == GF_OK;
    if (st != GF_OK)
        snprintf(row->err, sizeof row->err, "%s", gf_error_msg());
    if (g_progress)
        fprintf(stderr, "\r\033[K");
    gf_engine_destroy(e);
    gf_registry_close(&h);
    gf_model_free(model);
}

/* Run fn in a child; its result struct comes back over a pipe, its peak RSS
 * from wait4. 0 ok, -1 the child died (err says how). */
static int in_child(void (*fn)(const void *, void *), const void *arg, void *out, size_t size, long *maxrss_kb,
                    char *err, size_t err_cap)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(err, err_cap, "pipe failed");
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(err, err_cap, "fork failed");
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        fn(arg, out);
        const char *p = out;
        for (size_t done = 0; done < size;) {
            ssize_t w = write(fds[1], p + done, size - done);
            if (w <= 0)
                _exit(3);
            done += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fds[0], (char *)out + got, size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fds[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0)
        ;
    if (maxrss_kb)
        *maxrss_kb = ru.ru_maxrss;
    if (got == size && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status))
        snprintf(err, err_cap, "the benchmark process died of signal %d", WTERMSIG(status));
    else
        snprintf(err, err_cap, "the benchmark process exited with status %d", WEXITSTATUS(status));
    return -1;
}

typedef struct child_arg {
    const bench_opts *o;
    const char *spec;
} child_arg;

static void backend_fn(const void *arg, void *out)
{
    const child_arg *a = arg;
    bench_child(a->o, a->spec, out);
}

typedef struct write_result {
    int ok;
    char err[512];
} write_result;

/* In a child (its memory is its own, not the backends' children's): the
 * shape built in memory and written into o->load_dir. */
static void write_fn(const void *arg, void *out)
{
    const bench_opts *o = arg;
    write_result *r = out;
    gf_bench_shape shape;
    fprintf(stderr, "bench: writing the %s shape (seeded random weights) into %s ...\n", o->shape, o->load_dir);
    gf_status st = gf_bench_shape_build(o->shape, 1, &shape);
    if (st == GF_OK)
        st = gf_model_write(&shape.desc, NULL, o->load_dir);
    gf_bench_shape_free(&shape);
    r->ok = st == GF_OK;
    snprintf(r->err, sizeof r->err, "%s", r->ok ? "" : gf_error_msg());
}

typedef struct probe_arg {
    const bench_opts *o;
    double ws_bytes; /* the f32 weight bytes a decoded token reads */
} probe_arg;

static void probe_fn(const void *arg, void *out)
{
    const probe_arg *pa = arg;
    const bench_opts *o = pa->o;
    probe_result *p = out;
    const char *isa = "";
    if (g_progress)
        fprintf(stderr, "\r\033[Kbench: measuring read bandwidth and fp32 peak (%d threads)", o->threads);
    p->bw_gbps = gf_bench_read_bw(o->threads, GF_BENCH_BW_BYTES, 5);
    /* a working set at least the big probe's is that probe again */
    p->ws_bytes = pa->ws_bytes;
    p->ws_gbps = pa->ws_bytes >= GF_BENCH_BW_BYTES ? p->bw_gbps : gf_bench_read_bw(o->threads, (size_t)pa->ws_bytes, 5);
    p->fma_gflops = gf_bench_fma_peak(o->threads, &isa);
    snprintf(p->fma_isa, sizeof p->fma_isa, "%s", isa);
    p->sgemm_gflops = gf_bench_sgemm_peak(o->threads, 1536);
    if (g_progress)
        fprintf(stderr, "\r\033[K");
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
    enum {
        O_SHAPE = 256,
        O_BACKEND,
        O_THREADS,
        O_NEW,
        O_REPEATS,
        O_NOUNC,
        O_NOPROBE,
        O_JSON,
        O_WRITE,
        O_NORATES,
        O_RSS
    };
    static const struct option longopts[] = {{"model", required_argument, 0, 'm'},
                                             {"shape", required_argument, 0, O_SHAPE},
                                             {"backend", required_argument, 0, O_BACKEND},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"new-tokens", required_argument, 0, O_NEW},
                                             {"repeats", required_argument, 0, O_REPEATS},
                                             {"no-uncached", no_argument, 0, O_NOUNC},
                                             {"no-probe", no_argument, 0, O_NOPROBE},
                                             {"no-rates", no_argument, 0, O_NORATES},
                                             {"write-shape", required_argument, 0, O_WRITE},
                                             {"max-rss-ratio", required_argument, 0, O_RSS},
                                             {"json", no_argument, 0, O_JSON},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    long v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case O_SHAPE: o->shape = optarg; break;
        case O_BACKEND:
            if (o->n_backends == (int)(sizeof o->backends / sizeof o->backends[0])) {
                gf_cli_error("bench: at most %d backends", o->n_backends);
                return GF_EXIT_USAGE;
            }
            o->backends[o->n_backends++] = optarg;
            break;
        case O_THREADS:
            if (!gf_parse_int(optarg, 1, 64, &v))
                goto bad_value;
            o->threads = (int)v;
            break;
        case O_NEW:
            if (!gf_parse_int(optarg, 2, 100000, &v))
                goto bad_value;
            o->new_tokens = (int)v;
            break;
        case O_REPEATS:
            if (!gf_parse_int(optarg, 1, GF_BENCH_MAX_REPEATS, &v))
                goto bad_value;
            o->repeats = (int)v;
            break;
        case O_NOUNC: o->uncached = 0; break;
        case O_NOPROBE: o->probe = 0; break;
        case O_NORATES: o->rates = 0; break;
        case O_WRITE: o->write_shape = optarg; break;
        case O_RSS: {
            char *end;
            o->max_rss_ratio = strtod(optarg, &end);
            if (end == optarg || *end || !(o->max_rss_ratio > 0.0) || o->max_rss_ratio > 1e6)
                goto bad_value;
            break;
        }
        case O_JSON: o->json = 1; break;
        case 'h': usage(stdout); return -1;
        default:
            gf_cli_error("bench: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
        continue;
    bad_value:
        gf_cli_error("bench: bad value '%s' for %s", optarg, argv[optind - 1]);
        return GF_EXIT_USAGE;
    }
    if (optind < argc) {
        gf_cli_error("bench: unexpected argument '%s'", argv[optind]);
        return GF_EXIT_USAGE;
    }
    if (!!o->model + !!o->shape != 1) {
        gf_cli_error("bench: need exactly one of --model DIR and --shape NAME");
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    if (o->write_shape && !o->shape) {
        gf_cli_error("bench: --write-shape DIR needs --shape NAME");
        return GF_EXIT_USAGE;
    }
    if (!o->n_backends)
        o->backends[o->n_backends++] = "ref";
    return GF_EXIT_OK;
}

int gf_cmd_bench(int argc, char **argv)
{
    bench_opts o = {.threads = 1, .new_tokens = 100, .repeats = 5, .uncached = 1, .probe = 1, .rates = 1};
    int rc = parse_args(argc, argv, &o);
    if (rc < 0)
        return GF_EXIT_OK;
    if (rc != GF_EXIT_OK)
        return rc;
    bench_model bm;
    if (bench_model_init(&o, &bm) != 0)
        return GF_EXIT_USAGE;
    g_progress = isatty(STDERR_FILENO);
    char err[512];
    /* a shape is written to disk (in a child of its own) and every backend's
     * child loads it from there, as --model */
    char tmp[4096] = "";
    o.load_dir = o.model;
    if (o.shape) {
        if (o.write_shape) {
            if (mkdir(o.write_shape, 0777) != 0) {
                gf_cli_error("bench: --write-shape %s: cannot make the folder: %s", o.write_shape, strerror(errno));
                return GF_EXIT_USAGE;
            }
            o.load_dir = o.write_shape;
        } else {
            const char *t = getenv("TMPDIR");
            snprintf(tmp, sizeof tmp, "%s/genfence-bench-XXXXXX", t && t[0] ? t : "/tmp");
            if (!mkdtemp(tmp)) {
                gf_cli_error("bench: cannot make a temporary folder %s: %s", tmp, strerror(errno));
                return GF_EXIT_FAIL;
            }
            o.load_dir = tmp;
        }
        write_result wr = {0};
        if (in_child(write_fn, &o, &wr, sizeof wr, NULL, err, sizeof err) != 0 || !wr.ok) {
            gf_cli_error("bench: writing the %s shape into %s failed: %s", o.shape, o.load_dir, wr.ok ? err : wr.err);
            gf_model_write_remove(o.load_dir);
            return GF_EXIT_FAIL;
        }
        if (o.write_shape) {
            printf("wrote the %s shape (seeded random weights, %.1f MiB of F32) into %s\n", o.shape,
                   bm.params * 4 / 1048576.0, o.write_shape);
            return GF_EXIT_OK;
        }
    }
    probe_result probe = {.bw_gbps = NAN, .fma_gflops = NAN, .sgemm_gflops = NAN, .ws_gbps = NAN, .ws_bytes = NAN};
    const probe_arg parg = {&o, (bm.matmul_params + bm.head_params) * 4};
    bench_machine mach = {.probes = {probe, probe}};
    gf_bench_state_read(&mach.start);
    if (o.probe && in_child(probe_fn, &parg, &probe, sizeof probe, NULL, err, sizeof err) != 0) {
        gf_cli_error("bench: the machine probe failed: %s", err);
        probe = (probe_result){.bw_gbps = NAN, .fma_gflops = NAN, .sgemm_gflops = NAN, .ws_gbps = NAN, .ws_bytes = NAN};
    }
    if (o.probe)
        mach.probes[mach.n_probes++] = probe;
    bench_row *rows = calloc((size_t)o.n_backends, sizeof *rows);
    if (!rows) {
        gf_cli_error("bench: out of memory");
        if (tmp[0])
            gf_model_write_remove(tmp);
        return GF_EXIT_FAIL;
    }
    rc = GF_EXIT_OK;
    for (int i = 0; i < o.n_backends; i++) {
        child_arg a = {&o, o.backends[i]};
        long rss = 0;
        /* progress whether or not stderr is a terminal: a large shape on a slow
         * backend takes minutes, and the log says what it is doing meanwhile */
        char then[64] = "";
        if (o.rates)
            snprintf(then, sizeof then, ", then prefill %d and B=%d", GF_BENCH_PREFILL, GF_BENCH_ROWS);
        fprintf(stderr, "bench: %s (%d/%d): %d greedy tokens, median of %d%s%s ...\n", o.backends[i], i + 1,
                o.n_backends, o.new_tokens, o.repeats, o.uncached ? ", cached and uncached" : "", then);
        memset(&rows[i], 0, sizeof rows[i]);
        if (in_child(backend_fn, &a, &rows[i], sizeof rows[i], &rss, err, sizeof err) != 0) {
            memset(&rows[i], 0, sizeof rows[i]);
            snprintf(rows[i].err, sizeof rows[i].err, "%s", err);
        }
        rows[i].maxrss_kb = rss;
        if (!rows[i].ok)
            rc = GF_EXIT_FAIL;
        if (rows[i].ok && o.max_rss_ratio > 0) {
            const double w_mib = bm.params * 4 / 1048576.0, r_mib = rss / 1024.0;
            rows[i].rss_over = r_mib > o.max_rss_ratio * w_mib;
            fprintf(stderr, "bench: %s: peak RSS %.1f MiB = %.3fx the weights' %.1f MiB: %s --max-rss-ratio %g\n",
                    o.backends[i], r_mib, r_mib / w_mib, w_mib, rows[i].rss_over ? "OVER" : "within", o.max_rss_ratio);
            if (rows[i].rss_over)
                rc = GF_EXIT_FAIL;
        }
        fprintf(stderr, "bench: %s done (%d/%d):\n", o.backends[i], i + 1, o.n_backends);
        bench_print_row(stderr, &o, i, &bm, &probe, &rows[i]); /* its row now; the tables at the end */
        fflush(stderr);
    }
    /* the machine again after the backends: a shared machine's load comes
     * and goes, and the best of the two is the closest to what it can do */
    probe_result again;
    if (o.probe && in_child(probe_fn, &parg, &again, sizeof again, NULL, err, sizeof err) == 0) {
        mach.probes[mach.n_probes++] = again;
        probe.bw_gbps = isnan(probe.bw_gbps) || again.bw_gbps > probe.bw_gbps ? again.bw_gbps : probe.bw_gbps;
        probe.ws_gbps = isnan(probe.ws_gbps) || again.ws_gbps > probe.ws_gbps ? again.ws_gbps : probe.ws_gbps;
        probe.ws_bytes = again.ws_bytes;
        if (isnan(probe.fma_gflops) || again.fma_gflops > probe.fma_gflops) { /* the figure with its ISA */
            probe.fma_gflops = again.fma_gflops;
            memcpy(probe.fma_isa, again.fma_isa, sizeof probe.fma_isa);
        }
        if (!isnan(again.sgemm_gflops) && (isnan(probe.sgemm_gflops) || again.sgemm_gflops > probe.sgemm_gflops))
            probe.sgemm_gflops = again.sgemm_gflops;
        if (!probe.fma_isa[0])
            memcpy(probe.fma_isa, again.fma_isa, sizeof probe.fma_isa);
    }
    gf_bench_state_read(&mach.end);
    if (o.json)
        bench_print_json(&o, &bm, &probe, &mach, rows);
    else
        bench_print_table(&o, &bm, &probe, &mach, rows);
    free(rows);
    if (tmp[0])
        gf_model_write_remove(tmp);
    return rc;
}
