/* genfence list: the cases (after filters), as text or JSON. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "commands.h"
#include "golden_case.h"
#include "genfence/sampler.h"
#include "hash.h"
#include "kinds.h"
#include "model_suite.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence list [PATHS...] [--filter REGEX] [--kind KIND]... [--tag TAG]...\n"
               "                     [--backend NAME]... [--shard I/N] [--json]\n"
               "       genfence list --model DIR [TEMPLATES...] [--reference transformers|ref] [...]\n"
               "       genfence list --kinds\n"
               "       genfence list --profiles [--json]\n"
               "\n"
               "Loads and checks the case files (default: cases/*.yaml) and prints one line per case:\n"
               "id, kind, file:line, tags, backends filter, model. Schema errors are printed with\n"
               "FILE:LINE:COLUMN and exit status 2.\n"
               "\n"
               "  --filter REGEX   only cases whose id matches (POSIX extended regex)\n"
               "  --kind KIND      only cases of this kind (repeatable)\n"
               "  --tag TAG        only cases with this tag (repeatable: any); !TAG excludes\n"
               "  --backend NAME   only cases whose backends filter lets them run on NAME (repeatable:\n"
               "                   any); the name as given to run --backend\n"
               "  --shard I/N      the I-th of N interleaved slices, exactly as run --shard cuts them\n"
               "  --json           one JSON array of cases; each also carries \"case\" (the case as\n"
               "                   JSON) and \"case_hash\", with a model \"model_dir\" and \"model_hash\",\n"
               "                   golden_generation cases \"golden\" (docs/goldens.md)\n"
               "  --model DIR      the model suite run --model DIR would run (cases/model/*.yaml, or\n"
               "                   TEMPLATES, instantiated for the model in DIR; the header names the\n"
               "                   model, the suite file, the goldens cached and the cases left out)\n"
               "  --reference ref  with --model: the addresses of goldens made by ref (run --reference)\n"
               "  --kinds          list the kinds and their keys instead\n"
               "  --profiles       the sampler profiles (seed, hf, llamacpp, vllm) and what each\n"
               "                   parameter means under each (docs/sampler.md)\n"
               "\n"
               "exit status: 0 listed, 2 bad case files or usage\n");
}

static void join(char *buf, size_t cap, char **v, size_t n)
{
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strncat(buf, i ? "," : "", cap - strlen(buf) - 1);
        strncat(buf, v[i], cap - strlen(buf) - 1);
    }
    if (!n)
        snprintf(buf, cap, "-");
}

/* The model hash of dir, once per directory (null when it cannot be read). */
static const char *model_hash_cached(json_t **cache, const char *dir)
{
    json_t *v = json_object_get(*cache, dir);
    if (!v) {
        char hex[65];
        v = gf_model_hash(dir, hex) == GF_OK ? json_string(hex) : json_null();
        json_object_set_new(*cache, dir, v);
    }
    return json_string_value(v);
}

/* The semantics table of the sampler profiles (engine/sampler_profile.c):
 * one block per profile, one line per parameter; --json: an object per
 * profile name. */
static void print_profiles(int json)
{
    size_t n = 0;
    const gf_profile_row *rows = gf_sampler_profile_rows(&n);
    if (json) {
        json_t *o = json_object();
        for (int p = 0; p < GF_PROFILE_COUNT; p++) {
            json_t *m = json_object();
            for (size_t i = 0; i < n; i++)
                json_object_set_new(m, rows[i].what, json_string(rows[i].by_profile[p]));
            json_object_set_new(o, gf_sampler_profile_name(p), m);
        }
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s)
            puts(s);
        free(s);
        json_decref(o);
        return;
    }
    for (int p = 0; p < GF_PROFILE_COUNT; p++) {
        printf("%s%s%s\n", p ? "\n" : "", gf_sampler_profile_name(p), p == GF_PROFILE_SEED ? " (default)" : "");
        for (size_t i = 0; i < n; i++)
            printf("  %-28s %s\n", rows[i].what, rows[i].by_profile[p]);
    }
}

int gf_cmd_list(int argc, char **argv)
{
    enum { O_FILTER = 256, O_KIND, O_TAG, O_JSON, O_KINDS, O_BACKEND, O_SHARD, O_PROFILES, O_MODEL, O_REFERENCE };
    static const struct option longopts[] = {{"filter", required_argument, 0, O_FILTER},
                                             {"kind", required_argument, 0, O_KIND},
                                             {"tag", required_argument, 0, O_TAG},
                                             {"json", no_argument, 0, O_JSON},
                                             {"kinds", no_argument, 0, O_KINDS},
                                             {"profiles", no_argument, 0, O_PROFILES},
                                             {"backend", required_argument, 0, O_BACKEND},
                                             {"shard", required_argument, 0, O_SHARD},
                                             {"model", required_argument, 0, O_MODEL},
                                             {"reference", required_argument, 0, O_REFERENCE},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *filter = NULL, *model = NULL;
    gf_golden_source reference = GF_GOLDENS_TRANSFORMERS;
    gf_model_suite ms;
    memset(&ms, 0, sizeof ms);
    char **kinds = NULL, **tags = NULL, **backends = NULL;
    size_t n_kinds = 0, n_tags = 0, n_backends = 0;
    int shard_i = 0, shard_n = 0;
    int json = 0, list_kinds = 0, list_profiles = 0, rc = GF_EXIT_USAGE, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_FILTER: filter = optarg; break;
        case O_KIND: {
            char **g = realloc(kinds, (n_kinds + 1) * sizeof *g);
            if (g) {
                kinds = g;
                kinds[n_kinds++] = optarg;
            }
            break;
        }
        case O_TAG: {
            char **g = realloc(tags, (n_tags + 1) * sizeof *g);
            if (g) {
                tags = g;
                tags[n_tags++] = optarg;
            }
            break;
        }
        case O_BACKEND: {
            char **g = realloc(backends, (n_backends + 1) * sizeof *g);
            if (g) {
                backends = g;
                backends[n_backends++] = optarg;
            }
            break;
        }
        case O_SHARD:
            if (!gf_shard_parse(optarg, &shard_i, &shard_n)) {
                gf_cli_error("list: bad value '%s' for --shard: want I/N with 1 <= I <= N", optarg);
                goto out;
            }
            break;
        case O_JSON: json = 1; break;
        case O_KINDS: list_kinds = 1; break;
        case O_PROFILES: list_profiles = 1; break;
        case O_MODEL: model = optarg; break;
        case O_REFERENCE:
            if (strcmp(optarg, "ref") && strcmp(optarg, "transformers")) {
                gf_cli_error("list: --reference %s: want transformers or ref", optarg);
                goto out;
            }
            reference = strcmp(optarg, "ref") ? GF_GOLDENS_TRANSFORMERS : GF_GOLDENS_REF;
            break;
        case 'h':
            usage(stdout);
            rc = GF_EXIT_OK;
            goto out;
        default:
            gf_cli_error("list: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            goto out;
        }
    }
    if (list_profiles) {
        print_profiles(json);
        rc = GF_EXIT_OK;
        goto out;
    }
    if (list_kinds) {
        for (const gf_kind_def *const *k = gf_kinds(); *k; k++) {
            /* the keys its parse asks for (gf_kind_keys): its own, then the
             * sampler-profile keys (kit/keys.h) it takes with a profile */
            char own[1024], more[1024];
            gf_kind_keys(*k, GF_KEYS_PLAIN, own, sizeof own);
            printf("%-24s %s\n%-24s   keys: %s%s%s\n", (*k)->name, (*k)->summary, "",
                   (*k)->needs != GF_KIND_NEEDS_NOTHING ? "model" : "",
                   (*k)->needs != GF_KIND_NEEDS_NOTHING && own[0] ? ", " : "", own);
            if (gf_kind_keys(*k, GF_KEYS_CONDITIONAL, more, sizeof more))
                printf("%-24s   sampler keys: %s (docs/sampler.md; genfence list --profiles)\n", "", more);
        }
        rc = GF_EXIT_OK;
        goto out;
    }
    const char *const *paths = (const char *const *)(argv + optind);
    size_t n_paths = (size_t)(argc - optind);
    if (model) { /* the model suite: header on stderr under --json (stdout stays one JSON document) */
        if (gf_model_suite_open(&ms, "list", model, reference, paths, n_paths) != 0)
            goto out;
        gf_model_suite_print(&ms, "list", json ? stderr : stdout);
        paths = (const char *const *)&ms.suite_file;
        n_paths = 1;
    }
    gf_case_filter cf;
    gf_case_set set;
    if (gf_case_select_load("list", "", filter, kinds, n_kinds, tags, n_tags, paths, n_paths, &cf, &set) < 0)
        goto out;
    json_t *arr = json ? json_array() : NULL;
    json_t *mh_cache = json_object();
    size_t shown = 0, matched = 0;
    for (size_t i = 0; i < set.n; i++) {
        const gf_case *k = &set.cases[i];
        if (!gf_case_filter_match(&cf, k))
            continue;
        /* the same slices as run --shard: over the cases the filters match */
        if (!gf_shard_takes(&matched, shard_i, shard_n))
            continue;
        int allowed = n_backends == 0;
        for (size_t b = 0; b < n_backends && !allowed; b++)
            allowed = gf_case_backend_allowed(k, backends[b], backends[b]);
        if (!allowed)
            continue;
        shown++;
        if (json) {
            json_t *o = json_pack(
                "{s:s, s:s, s:s, s:i, s:i, s:o, s:o, s:s?, s:s?}", "id", k->id, "kind", k->kind->name, "file", k->file,
                "line", k->line, "column", k->col, "tags", gf_json_strings(k->tags, k->n_tags), "backends",
                gf_json_strings(k->backends, k->n_backends), "model", k->model_arg, "description", k->description);
            /* what goldens are hashed over (docs/goldens.md) */
            char hex[65];
            json_object_set(o, "case", k->tree ? k->tree : json_null());
            json_object_set_new(o, "case_hash", gf_case_hash_of(k, hex) == GF_OK ? json_string(hex) : json_null());
            /* which backend slot the kind reaches: "model", "sample" (a backend's sampler slot, where it has
             * one) or "none" (the engine alone); cmake/GenfenceSuite.cmake labels the engine's cases by it */
            gf_kind_reach reach = k->kind->reaches;
            json_object_set_new(o, "reaches",
                                json_string(reach == GF_KIND_REACHES_MODEL       ? "model"
                                            : reach == GF_KIND_REACHES_SAMPLE    ? "sample"
                                            : reach == GF_KIND_REACHES_SPECULATE ? "speculate"
                                            : reach == GF_KIND_REACHES_LOGPROBS  ? "logprobs"
                                                                                 : "none"));
            if (k->model) {
                json_object_set_new(o, "model_dir", json_string(k->model));
                const char *mh = model_hash_cached(&mh_cache, k->model);
                json_object_set_new(o, "model_hash", mh ? json_string(mh) : json_null());
            }
            if (k->kind == &gf_kind_golden_generation) {
                char *gp = gf_golden_path_for(k, NULL);
                json_object_set_new(o, "golden", gp ? json_string(gp) : json_null());
                free(gp);
            }
            json_array_append_new(arr, o);
        } else {
            char t[512], b[512], where[1200];
            join(t, sizeof t, k->tags, k->n_tags);
            join(b, sizeof b, k->backends, k->n_backends);
            snprintf(where, sizeof where, "%s:%d", k->file, k->line);
            printf("%-34s %-24s %-34s tags=%-20s backends=%-12s model=%s\n", k->id, k->kind->name, where, t, b,
                   k->model_arg ? k->model_arg : "-");
        }
    }
    if (shown == 0 && shard_n && matched) { /* an empty shard is not an error (as in run) */
        if (json)
            printf("[]\n");
        else
            printf("0 cases\n");
        json_decref(arr);
        json_decref(mh_cache);
        gf_case_set_free(&set);
        gf_case_filter_free(&cf);
        rc = GF_EXIT_OK;
        goto out;
    }
    if (shown == 0) { /* as `run` says it: a filter that matches nothing is an error (exit 2) */
        if (set.n)
            gf_cli_error("list: no case matches the filters");
        else {
            char none[2048];
            gf_case_none_found(none, sizeof none, &set, argv + optind, (size_t)(argc - optind));
            gf_cli_error("list: %s", none);
        }
        json_decref(arr);
        json_decref(mh_cache);
        gf_case_set_free(&set);
        gf_case_filter_free(&cf);
        rc = GF_EXIT_USAGE;
        goto out;
    }
    if (json) {
        char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s)
            printf("%s\n", s);
        free(s);
        json_decref(arr);
    } else {
        printf("%zu case%s\n", shown, shown == 1 ? "" : "s");
    }
    json_decref(mh_cache);
    gf_case_set_free(&set);
    gf_case_filter_free(&cf);
    rc = GF_EXIT_OK;
out:
    gf_model_suite_free(&ms);
    free(kinds);
    free(tags);
    free(backends);
    return rc;
}
