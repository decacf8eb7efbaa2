/* genfence bless: goldens from a C backend (docs/goldens.md), for audits on
 * machines without Python. Same format as tools/golden.py's; the provenance
 * names the backend, the machine and the genfence commit. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "genfence/version.h"
#include "golden_generation.h"
#include "hash.h"
#include "sys.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence bless --backend NAME|PATH [PATHS...] [--filter REGEX] [--out-dir DIR]\n"
               "                      [--threads N] [--force]\n"
               "\n"
               "Writes the golden of every golden_generation case (default: those under cases/)\n"
               "from a C backend: each prompt alone, free-running (greedy, or the engine's seeded\n"
               "sampler with sequence id = the prompt's row), recording every step's last-position\n"
               "logits and the margin of its choice. Same format as tools/golden.py's goldens\n"
               "(docs/goldens.md); the provenance names the backend, this machine and the genfence\n"
               "commit. Check a backend against them with `genfence run --golden-dir DIR`.\n"
               "\n"
               "  --backend NAME|PATH   the backend that makes the goldens (required)\n"
               "  --filter REGEX        only cases whose id matches (POSIX extended regex)\n"
               "  --out-dir DIR         write DIR/<id>.safetensors (default: each case's own golden,\n"
               "                        golden/<id>.safetensors or its `golden:` path)\n"
               "  --threads N           backend threads (default 1)\n"
               "  --force               replace goldens that exist (otherwise they are left alone,\n"
               "                        reported, and the exit status is 2)\n"
               "\n"
               "exit status: 0 all written; 2 bad input, usage, a golden that could not be made or\n"
               "an existing one left alone\n");
}

typedef struct capture {
    float *logits;   /* (N, V) */
    double *margins; /* (N) */
    int32_t V, N;
} capture;

static gf_status capture_step(void *user, const gf_step_info *info)
{
    capture *c = user;
    if (info->step < c->N) {
        memcpy(c->logits + (size_t)info->step * c->V, info->logits, (size_t)c->V * sizeof(float));
        c->margins[info->step] = info->results[0].margin;
    }
    return GF_OK;
}

/* One case; 0 written, -1 failed (message printed), 1 skipped (exists). */
static int bless_case(const gf_case *c, const char *backend, int32_t threads, const char *out_dir, int force)
{
    const gf_golden_spec *s = c->spec;
    char *path = gf_golden_path_for(c, out_dir);
    if (!path) {
        gf_cli_error("bless: out of memory");
        return -1;
    }
    struct stat sb;
    if (!force && stat(path, &sb) == 0) {
        gf_cli_error("bless: %s: %s exists; pass --force to replace it", c->id, path);
        free(path);
        return 1;
    }
    const int32_t B = (int32_t)s->n_prompts, N = (int32_t)s->max_new;
    gf_session ses;
    gf_status st = gf_session_open(&ses, c->model, backend, threads, 0);
    if (st != GF_OK) {
        gf_cli_error("bless: %s: model '%s' on backend %s: %s", c->id, c->model_arg, backend, gf_error_msg());
        free(path);
        return -1;
    }
    const int32_t V = gf_engine_config(ses.engine)->vocab_size;
    gf_golden_row *rows = calloc((size_t)B, sizeof *rows);
    int rc = -1;
    double min_margin = INFINITY;
    char case_hex[65], model_hex[65];
    if (!rows) {
        gf_cli_error("bless: out of memory");
        goto done;
    }
    if (gf_case_hash_of(c, case_hex) != GF_OK || gf_model_hash(c->model, model_hex) != GF_OK) {
        gf_cli_error("bless: %s: %s", c->id, gf_error_msg());
        goto done;
    }
    for (int32_t b = 0; b < B; b++) {
        int32_t *prompt = NULL, P = 0;
        st = gf_prompt_tokens(&ses, &s->prompts[b], &prompt, &P);
        if (st != GF_OK) {
            gf_cli_error("bless: %s: %s", c->id, gf_error_msg());
            goto done;
        }
        capture cap = {.V = V, .N = N};
        cap.logits = malloc((size_t)N * V * sizeof *cap.logits);
        cap.margins = malloc((size_t)N * sizeof *cap.margins);
        gf_generation *gen = NULL;
        uint64_t seq = (uint64_t)b;
        gf_generate_params gp = gf_generate_defaults();
        gp.max_new_tokens = N;
        gp.sampler = s->sampler;
        gp.eos_id = -1;
        gp.use_cache = 1;
        gp.seq_ids = &seq;
        gp.on_step = capture_step;
        gp.user = &cap;
        st = cap.logits && cap.margins ? gf_generate(ses.engine, 1, (const int32_t *const *)&prompt, &P, &gp, &gen)
                                       : gf_error_set(GF_E_NOMEM, "out of memory");
        if (st == GF_OK && gen->steps != N)
            st = gf_error_set(GF_E_CONTEXT_LIMIT,
                              "prompt %d: %d of %d steps (%s): the prompt plus max_new_tokens - 1 "
                              "must fit the model's positions",
                              b, gen->steps, N, gf_stop_reason_str(gen->stop[0]));
        if (st != GF_OK) {
            gf_cli_error("bless: %s: generate: %s", c->id, gf_error_msg());
            free(cap.logits);
            free(cap.margins);
            free(prompt);
            gf_generation_free(gen);
            goto done;
        }
        rows[b].n_tokens = gen->n_tokens[0];
        rows[b].steps = N;
        rows[b].tokens = malloc((size_t)gen->n_tokens[0] * sizeof(int32_t));
        if (rows[b].tokens)
            memcpy(rows[b].tokens, gen->tokens[0], (size_t)gen->n_tokens[0] * sizeof(int32_t));
        rows[b].logits = cap.logits;
        rows[b].margins = cap.margins;
        for (int32_t t = 0; t < N; t++)
            if (cap.margins[t] < min_margin)
                min_margin = cap.margins[t];
        free(prompt);
        gf_generation_free(gen);
        if (!rows[b].tokens) {
            gf_cli_error("bless: out of memory");
            goto done;
        }
    }
    /* provenance */
    const gf_backend_ops *ops = gf_engine_ops(ses.engine);
    gf_backend_options bo = gf_registry_options(&ses.backend, threads);
    gf_backend_info info;
    char backend_detail[512] = "", dtype[16] = "fp32";
    if (gf_backend_describe(ops, &bo, &info) == GF_OK) {
        snprintf(backend_detail, sizeof backend_detail, "%s%s%s", info.library ? info.library : "",
                 info.detail && info.detail[0] ? "; " : "", info.detail ? info.detail : "");
        snprintf(dtype, sizeof dtype, "%s", gf_dtype_str(info.dtype ? info.dtype : GF_COMPUTE_F32));
    }
    struct utsname u;
    char machine[1024], cpu[256], created[32], seed[32], genver[128];
    if (!gf_cpu_model(cpu, sizeof cpu))
        snprintf(cpu, sizeof cpu, "unknown CPU");
    if (uname(&u) == 0)
        snprintf(machine, sizeof machine, "%s %s %s; %s", u.sysname, u.release, u.machine, cpu);
    else
        snprintf(machine, sizeof machine, "%s", cpu);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->sampler.seed);
    snprintf(genver, sizeof genver, "genfence %s", GENFENCE_VERSION);
    char *sampler = gf_golden_sampler_json(&s->sampler);
    const char *keys[] = {"generator",      "generator_version", "genfence_commit", "backend", "backend_requested",
                          "backend_detail", "backend_dtype",     "machine",         "model",   "model_hash",
                          "case_id",        "case_hash",         "created",         "sampler", "seed",
                          "decoding"};
    const char *vals[] = {"genfence-bless",
                          genver,
                          GENFENCE_COMMIT,
                          ops->name,
                          backend,
                          backend_detail,
                          dtype,
                          machine,
                          c->model_arg,
                          model_hex,
                          c->id,
                          case_hex,
                          created,
                          sampler ? sampler : "{}",
                          seed,
                          "each prompt alone, free-running, cached decode"};
    if (out_dir)
        mkdir(out_dir, 0777);
    st = gf_golden_write(path, rows, B, V, keys, vals, sizeof keys / sizeof keys[0]);
    free(sampler);
    if (st != GF_OK) {
        gf_cli_error("bless: %s: %s", c->id, gf_error_msg());
        goto done;
    }
    printf("bless: wrote %s: %d row%s x %d steps on %s, smallest margin %.4g\n", path, B, B == 1 ? "" : "s", N,
           ops->name, min_margin);
    rc = 0;
done:
    for (int32_t b = 0; rows && b < B; b++) {
        free(rows[b].tokens);
        free(rows[b].logits);
        free(rows[b].margins);
    }
    free(rows);
    gf_session_close(&ses);
    free(path);
    return rc;
}

int gf_cmd_bless(int argc, char **argv)
{
    enum { O_BACKEND = 256, O_FILTER, O_OUT, O_THREADS, O_FORCE };
    static const struct option longopts[] = {{"backend", required_argument, 0, O_BACKEND},
                                             {"filter", required_argument, 0, O_FILTER},
                                             {"out-dir", required_argument, 0, O_OUT},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"force", no_argument, 0, O_FORCE},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *backend = NULL, *filter = NULL, *out_dir = NULL;
    int force = 0, c;
    long threads = 1;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_BACKEND: backend = optarg; break;
        case O_FILTER: filter = optarg; break;
        case O_OUT: out_dir = optarg; break;
        case O_THREADS:
            if (!gf_parse_int(optarg, 1, 4096, &threads)) {
                gf_cli_error("bless: bad value '%s' for --threads", optarg);
                return GF_EXIT_USAGE;
            }
            break;
        case O_FORCE: force = 1; break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        default:
            gf_cli_error("bless: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
    }
    if (!backend) {
        gf_cli_error("bless: --backend is required (the backend that makes the goldens)");
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    char *kinds[] = {(char *)"golden_generation"};
    gf_case_filter cf;
    char err[512];
    if (gf_case_filter_init(&cf, gf_kinds(), filter, kinds, 1, NULL, 0, err, sizeof err) < 0) {
        gf_cli_error("bless: %s", err);
        return GF_EXIT_USAGE;
    }
    gf_case_set set;
    int ls = gf_cases_load(gf_kinds(), (const char *const *)(argv + optind), (size_t)(argc - optind), NULL, &set);
    if (ls != GF_OK || set.n_errors) {
        for (size_t i = 0; i < set.n_errors; i++)
            fprintf(stderr, "%s\n", set.errors[i]);
        gf_cli_error("bless: %zu error%s in the case files", set.n_errors, set.n_errors == 1 ? "" : "s");
        gf_case_set_free(&set);
        gf_case_filter_free(&cf);
        return GF_EXIT_USAGE;
    }
    int rc = GF_EXIT_OK;
    size_t n = 0, written = 0, skipped = 0;
    for (size_t i = 0; i < set.n; i++) {
        const gf_case *k = &set.cases[i];
        if (!gf_case_filter_match(&cf, k))
            continue;
        n++;
        int r = bless_case(k, backend, (int32_t)threads, out_dir, force);
        if (r == 0)
            written++;
        else
            rc = GF_EXIT_USAGE;
        if (r > 0)
            skipped++;
    }
    if (n == 0) {
        gf_cli_error("bless: no golden_generation case %s", set.n ? "matches" : "found");
        rc = GF_EXIT_USAGE;
    } else {
        printf("bless: %zu written, %zu left alone (exist), %zu failed\n", written, skipped, n - written - skipped);
    }
    gf_case_set_free(&set);
    gf_case_filter_free(&cf);
    return rc;
}
