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

/* One line (or object) per backend. Returns 1 when it cannot be used at all
 * (not loaded, or its info refuses these options: exec without a command or
 * with one that cannot run), 0 otherwise (an unavailable probe included). */
static int show(const char *name, long threads, int json, int first)
{
    gf_backend_handle h;
    gf_status st = gf_registry_open(name, &h);
    int opened = st == GF_OK;
    char why[512] = "";
    gf_backend_info info = {.struct_size = sizeof info};
    int avail = 0, unusable = 0;
    if (st != GF_OK) {
        snprintf(why, sizeof why, "%s", gf_error_msg());
        unusable = 1;
        snprintf(h.source, sizeof h.source, "%s", "");
    } else if ((st = gf_backend_available(h.ops, why, sizeof why)) == GF_OK) {
        avail = 1;
        gf_backend_options o = gf_registry_options(&h, (int32_t)threads);
        gf_error_clear();
        gf_status dst = gf_backend_describe(h.ops, &o, &info);
        if (dst != GF_OK &&
            h.ops->info) { /* its options refused (openblas:coretype=BAD, exec without a command), or not here */
            const char *vendor = gf_backend_last_error(h.ops, NULL);
            snprintf(why, sizeof why, "info: %s%s%s", gf_status_str(dst), vendor[0] || gf_error_msg()[0] ? ": " : "",
                     vendor[0] ? vendor : gf_error_msg());
            avail = 0;
            unusable = 1;
        }
    }
    /* where it came from: built-in, a plugin path, or a module and the rule
     * that chose its folder (registry.h) */
    const char *origin = NULL;
    int module = 0;
    for (const char *const *k = gf_registry_names(); *k; k++) {
        size_t n = strlen(*k);
        module |= strcmp(*k, "ref") && !strncmp(name, *k, n) && (!name[n] || name[n] == ':');
    }
    const char *dir = module ? gf_registry_module_dir_origin(&origin) : NULL;
    /* a backend that needs a config (exec) is not run without one: say so */
    const char *state = avail ? "available" : unusable && gf_registry_on_request(name) ? "on request" : "unavailable";
    if (json) {
        printf("%s{\"name\": ", first ? "" : ", ");
        gf_json_write_string(stdout, name, strlen(name));
        printf(", \"available\": %s, \"usable\": %s, \"why\": ", avail ? "true" : "false", unusable ? "false" : "true");
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
        if (avail && info.probes) { /* the mechanism probes it declares (docs/cases.md, "probe") */
            printf(", \"probes\": ");
            gf_json_write_string(stdout, info.probes, strlen(info.probes));
        }
        if (avail && info.invariance) { /* the invariance it declares (docs/cases.md, "invariance") */
            printf(", \"invariance\": ");
            gf_json_write_string(stdout, info.invariance, strlen(info.invariance));
        }
        printf(", \"source\": ");
        gf_json_write_string(stdout, h.source, strlen(h.source));
        if (opened) { /* the name it registers (a plugin given by path): GenfenceSuite.cmake's test names */
            const char *rn = h.ops && h.ops->name ? h.ops->name : "";
            printf(", \"registered_name\": ");
            gf_json_write_string(stdout, rn, strlen(rn));
            printf(", \"sample_slot\": %s", h.ops && gf_backend_has_sample(h.ops) ? "true" : "false");
        }
        if (module) {
            printf(", \"module_dir\": ");
            gf_json_write_string(stdout, dir, strlen(dir));
            printf(", \"module_origin\": ");
            gf_json_write_string(stdout, origin, strlen(origin));
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
        printf("%-10s %-12s %s\n", name, state, why);
    }
    if (!json) {
        if (h.source[0])
            printf("%-10s   from %s%s%s%s\n", "", h.source, origin ? " (" : "", origin ? origin : "",
                   origin ? ")" : "");
        else if (module)
            printf("%-10s   module folder %s (%s)\n", "", dir, origin);
    }
    gf_registry_close(&h);
    return unusable && !gf_registry_on_request(name);
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
    int i = 0, bad = 0;
    for (const char *const *n = gf_registry_names(); *n; n++, i++)
        show(*n, threads, json, i == 0);
    for (int k = 0; k < n_extra; k++, i++)
        bad |= show(extra[k], threads, json, i == 0); /* a named backend that cannot be used: exit 2, as in run */
    if (json)
        printf("]\n");
    return bad ? GF_EXIT_USAGE : GF_EXIT_OK;
}
