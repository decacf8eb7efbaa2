/* genfence backends: every known backend, whether it runs here, and why not. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "genfence/engine.h"
#include "commands.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence backends [--backend PATH]... [--threads N] [--json]\n"
               "\n"
               "Lists the built-in backends (and any plugin paths given) with availability and the\n"
               "reason when unavailable, library versions, threads, compute dtype and, when the backend\n"
               "says, the weight and KV-cache types its options select (weights q8_0; kv f16)\n"
               "and, where it says, the CPU kernel path they run here (cpu path ...).\n");
}

static void show(const char *name, long threads, int json, int first)
{
    gf_backend_handle h;
    gf_status st = gf_registry_open(name, &h);
    int opened = st == GF_OK;
    char why[512] = "";
    gf_backend_info info = {.struct_size = sizeof info};
    int avail = 0;
    if (st != GF_OK) {
        snprintf(why, sizeof why, "%s", gf_error_msg());
    } else if ((st = gf_backend_available(h.ops, why, sizeof why)) == GF_OK) {
        avail = 1;
        gf_backend_options o = gf_registry_options(&h, (int32_t)threads);
        gf_error_clear();
        gf_status dst = gf_backend_describe(h.ops, &o, &info);
        if (dst != GF_OK && h.ops->info) { /* its options refused (openblas:coretype=BAD), or not here */
            avail = 0;
            const char *vendor = gf_backend_last_error(h.ops, NULL);
            snprintf(why, sizeof why, "info: %s: %s", gf_status_str(dst), vendor[0] ? vendor : gf_error_msg());
        }
    }
    if (json) {
        printf("%s{\"name\": ", first ? "" : ", ");
        gf_json_write_string(stdout, name, strlen(name));
        printf(", \"available\": %s, \"why\": ", avail ? "true" : "false");
        gf_json_write_string(stdout, why, strlen(why));
        printf(", \"dtype\": \"%s\", \"threads\": %d, \"library\": ", avail ? gf_dtype_str(info.dtype) : "",
               info.threads);
        const char *lib = info.library ? info.library : "";
        gf_json_write_string(stdout, lib, strlen(lib));
        if (avail && info.weights) {
            printf(", \"weights\": ");
            gf_json_write_string(stdout, info.weights, strlen(info.weights));
        }
        if (avail && info.kv_cache) {
            printf(", \"kv_cache\": ");
            gf_json_write_string(stdout, info.kv_cache, strlen(info.kv_cache));
        }
        if (avail && info.cpu_path) {
            printf(", \"cpu_path\": ");
            gf_json_write_string(stdout, info.cpu_path, strlen(info.cpu_path));
        }
        printf(", \"source\": ");
        gf_json_write_string(stdout, h.source, strlen(h.source));
        if (opened) { /* the name it registers (a plugin given by path): GenfenceSuite.cmake's test names */
            const char *rn = h.ops && h.ops->name ? h.ops->name : "";
            printf(", \"registered_name\": ");
            gf_json_write_string(stdout, rn, strlen(rn));
            printf(", \"sample_slot\": %s", h.ops && gf_backend_has_sample(h.ops) ? "true" : "false");
        }
        printf("}");
    } else if (avail) {
        printf("%-10s available    %-5s threads %-3d %s%s%s", name, gf_dtype_str(info.dtype), info.threads,
               info.library ? info.library : "", info.detail ? "; " : "", info.detail ? info.detail : "");
        /* the weight and KV types the options select, when the backend says (ABI 2) */
        if (info.weights)
            printf("; weights %s", info.weights);
        if (info.kv_cache)
            printf("; kv %s", info.kv_cache);
        if (info.cpu_path) /* the CPU kernel path these options run here */
            printf("; cpu path %s", info.cpu_path);
        printf("\n");
    } else {
        printf("%-10s unavailable  %s\n", name, why);
    }
    gf_registry_close(&h);
}

int gf_cmd_backends(int argc, char **argv)
{
    static const struct option longopts[] = {{"backend", required_argument, 0, 'b'},
                                             {"threads", required_argument, 0, 't'},
                                             {"json", no_argument, 0, 'j'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *extra[32];
    int n_extra = 0, json = 0, c;
    long threads = 1;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (n_extra < 32)
                extra[n_extra++] = optarg;
            break;
        case 't':
            if (!gf_parse_int(optarg, 1, 4096, &threads)) {
                gf_cli_error("backends: bad value '%s' for --threads", optarg);
                return GF_EXIT_USAGE;
            }
            break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        default:
            gf_cli_error("backends: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        gf_cli_error("backends: unexpected argument '%s'", argv[optind]);
        return GF_EXIT_USAGE;
    }
    if (json)
        printf("[");
    int i = 0;
    for (const char *const *n = gf_registry_names(); *n; n++, i++)
        show(*n, threads, json, i == 0);
    for (int k = 0; k < n_extra; k++, i++)
        show(extra[k], threads, json, i == 0);
    if (json)
        printf("]\n");
    return GF_EXIT_OK;
}
