/* genfence bless: goldens from a C backend (docs/goldens.md), for audits on
 * machines without Python. The recording is gf_golden_record
 * (golden/bless.c); this file is the command around it. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "bless.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence bless --backend NAME|PATH [PATHS...] [--filter REGEX] [--out-dir DIR]\n"
               "                      [--threads N] [--force]\n"
               "\n"
               "Writes the golden of every golden_generation case (default: those under cases/)\n"
               "from a C backend: each prompt alone, free-running (greedy, or the engine's seeded\n"
               "sampler with sequence id = the prompt's row), recording every step's last-position\n"
               "logits and the margin of its choice. Same format as tools/reference/golden.py's goldens\n"
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

/* One case; 0 written, -1 failed (message printed), 1 skipped (exists). */
static int bless_case(const gf_case *c, const char *backend, int32_t threads, const char *out_dir, int force)
{
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
    if (out_dir)
        mkdir(out_dir, 0777);
    gf_golden_recorded rec;
    gf_status st = gf_golden_record(c, backend, threads, path, &rec);
    if (st != GF_OK)
        gf_cli_error("bless: %s: %s", c->id, gf_error_msg());
    else
        printf("bless: wrote %s: %d row%s x %d steps on %s, smallest margin %.4g\n", path, rec.rows,
               rec.rows == 1 ? "" : "s", rec.steps, rec.backend, rec.min_margin);
    free(path);
    return st == GF_OK ? 0 : -1;
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
