/* genfence compare A.json B.json: what changed between two runs (last night
 * and tonight, machine A and machine B) and the audit differences that may
 * explain it. Results are matched by (case id, backend). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "buf.h"
#include "commands.h"
#include "report.h"
#include "sys.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence compare A.json B.json [--json] [--html FILE] [--threshold X]\n"
               "\n"
               "Compares two run reports (reports/run.json), matching results by (case, backend):\n"
               "  - verdict changes (a regression: passing in A, failing in B)\n"
               "  - drift before failure: comparisons whose max |delta|, KLD or safety factor moved\n"
               "    by more than X relative to the larger of the two (default 0.5), or went from\n"
               "    exactly 0 (identical sides) to non-zero and back\n"
               "  - first-divergence and failing steps that moved\n"
               "  - the audit differences that may explain them: genfence version, environment\n"
               "    (CPU, ISA, thread counts, libraries), numerics variables (OPENBLAS_* OMP_* DNNL_*\n"
               "    CUDA_* ...), backend libraries, case-file, model and golden hashes\n"
               "\n"
               "  --json          one JSON document on stdout instead of text\n"
               "  --html FILE     also an HTML page: the tables, and A's and B's per-step plots\n"
               "                  overlaid for every result that changed\n"
               "  --threshold X   relative change counted as a move (default 0.5)\n"
               "\n"
               "exit status: 0 no verdict regressed, 1 a verdict regressed, 2 bad input or usage\n");
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* The backend as reports name it (gf_backend_label): as requested when that
 * carries options (openblas:coretype=Haswell), else its name. o is a result
 * (backend, backend_requested) or a backend entry (name, requested). */
static const char *label_of(const json_t *o, const char *name_key, const char *req_key)
{
    const char *req = jstr(o, req_key);
    return strchr(req, ':') && !strchr(req, '/') ? req : jstr(o, name_key);
}

/* key "id@backend" -> result */
static json_t *index_results(const json_t *doc)
{
    json_t *ix = json_object(), *r;
    size_t i;
    json_array_foreach(json_object_get(doc, "results"), i, r)
    {
        char key[1024];
        snprintf(key, sizeof key, "%s@%s", jstr(r, "id"), label_of(r, "backend", "backend_requested"));
        json_object_set(ix, key, r);
    }
    return ix;
}

/* Flatten scalars under prefix into out ("environment.libraries.glibc" -> value). */
static void flatten(json_t *out, const char *prefix, const json_t *v)
{
    char key[1024];
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            snprintf(key, sizeof key, "%s.%s", prefix, k);
            flatten(out, key, x);
        }
    } else if (json_is_array(v)) {
        char *s = json_dumps(v, JSON_COMPACT);
        json_object_set_new(out, prefix, json_string(s ? s : "?"));
        free(s);
    } else
        json_object_set(out, prefix, (json_t *)v);
}

/* What a run was made with, flattened: the audit, the environment, genfence
 * itself, backends by name, and per-result model / golden / case hashes. */
static json_t *audit_flat(const json_t *doc)
{
    json_t *f = json_object(), *b;
    flatten(f, "genfence", json_object_get(doc, "genfence"));
    json_t *env = json_deep_copy(json_object_get(doc, "environment"));
    if (json_is_object(env)) {
        json_object_del(json_object_get(env, "os"), "node"); /* the host name explains nothing */
        json_object_del(env, "env");                         /* the audit's numerics_env has every such variable set */
    }
    flatten(f, "environment", env);
    json_decref(env);
    json_t *audit = json_deep_copy(json_object_get(doc, "audit"));
    if (json_is_object(audit))
        json_object_del(audit, "backends"); /* below, with the backends */
    flatten(f, "audit", audit);
    json_decref(audit);
    size_t i;
    json_array_foreach(json_object_get(doc, "backends"), i, b)
    {
        char key[512];
        static const char *const keys[] = {"available", "library", "detail",   "threads",
                                           "dtype",     "source",  "cpu_path", NULL};
        for (int k = 0; keys[k]; k++) {
            snprintf(key, sizeof key, "backends.%s.%s", label_of(b, "name", "requested"), keys[k]);
            json_object_set(f, key, json_object_get(b, keys[k]));
        }
    }
    json_array_foreach(json_object_get(doc, "results"), i, b)
    {
        const json_t *m = json_object_get(b, "metrics");
        char key[1024];
        if (json_is_string(json_object_get(m, "model_hash"))) {
            snprintf(key, sizeof key, "models.%s", jstr(b, "model"));
            json_object_set(f, key, json_object_get(m, "model_hash"));
        }
        const json_t *g = json_object_get(m, "golden");
        if (json_is_string(json_object_get(g, "data_sha256"))) {
            snprintf(key, sizeof key, "goldens.%s", jstr(g, "path"));
            json_object_set(f, key, json_object_get(g, "data_sha256"));
        }
        if (json_is_string(json_object_get(m, "case_hash"))) {
            snprintf(key, sizeof key, "case_hashes.%s", jstr(b, "id"));
            json_object_set(f, key, json_object_get(m, "case_hash"));
        }
    }
    return f;
}

static json_t *audit_diff(const json_t *a, const json_t *b)
{
    json_t *fa = audit_flat(a), *fb = audit_flat(b), *out = json_array(), *v;
    const char *k;
    json_object_foreach(fa, k, v)
    {
        json_t *w = json_object_get(fb, k);
        if (!w || !json_equal(v, w))
            json_array_append_new(out, json_pack("{s:s, s:O, s:O}", "key", k, "a", v, "b", w ? w : json_null()));
    }
    json_object_foreach(fb, k, v) if (!json_object_get(fa, k))
        json_array_append_new(out, json_pack("{s:s, s:n, s:O}", "key", k, "a", "b", v));
    json_decref(fa);
    json_decref(fb);
    return out;
}

/* A metric of a comparison as a number: +inf when null with a "+inf" reason
 * (safety factor of identical sides); NAN when absent. */
static double metric(const json_t *c, const char *k)
{
    json_t *v = json_object_get(c, k);
    if (json_is_number(v))
        return json_number_value(v);
    char rk[128];
    snprintf(rk, sizeof rk, "%s_reason", k);
    const char *why = jstr(c, rk);
    return !strncmp(why, "+inf", 4) ? INFINITY : NAN;
}

static int moved(double x, double y, double thr)
{
    if (isnan(x) || isnan(y))
        return 0;
    if (isinf(x) || isinf(y))
        return x != y;
    double big = fmax(fabs(x), fabs(y));
    if (big == 0)
        return 0;
    if (x == 0 || y == 0)
        return 1; /* identical sides became different, or the other way */
    return fabs(x - y) > thr * big;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : isnan(v) ? json_null() : json_string("+inf"); }

static void drift(json_t *out, const char *key, const json_t *ra, const json_t *rb, double thr)
{
    const json_t *ca = json_object_get(json_object_get(ra, "metrics"), "comparisons");
    const json_t *cb = json_object_get(json_object_get(rb, "metrics"), "comparisons");
    const char *name;
    json_t *x;
    static const char *const nums[] = {"max_abs_delta", "kld", "safety_factor", NULL};
    static const char *const steps[] = {"first_divergence", "failing_step", NULL};
    json_object_foreach((json_t *)ca, name, x)
    {
        json_t *y = json_object_get(cb, name);
        if (!y)
            continue;
        for (int i = 0; nums[i]; i++) {
            double va = metric(x, nums[i]), vb = metric(y, nums[i]);
            if (moved(va, vb, thr))
                json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:o, s:o}", "result", key, "comparison", name,
                                                     "metric", nums[i], "a", num(va), "b", num(vb)));
        }
        for (int i = 0; steps[i]; i++) {
            json_t *sa = json_object_get(x, steps[i]), *sb = json_object_get(y, steps[i]);
            if (json_is_integer(sa) && json_is_integer(sb) && json_integer_value(sa) != json_integer_value(sb))
                json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:O, s:O}", "result", key, "comparison", name,
                                                     "metric", steps[i], "a", sa, "b", sb));
        }
    }
}

/* The audit differences that explain changed figures: the CPU (audit.cpu.*)
 * and each backend's CPU path, with the results of that backend (all of them
 * for the CPU) that moved or changed verdict. */
static json_t *cpu_path_changes(const json_t *rep)
{
    json_t *out = json_array(), *d;
    size_t i;
    json_array_foreach(json_object_get(rep, "audit_differences"), i, d)
    {
        const char *k = jstr(d, "key");
        size_t kl = strlen(k);
        char be[512] = "";
        int cpu = !strncmp(k, "audit.cpu.", 10);
        if (!cpu && (kl < 9 || strcmp(k + kl - 9, ".cpu_path") || strncmp(k, "backends.", 9)))
            continue;
        if (!cpu)
            snprintf(be, sizeof be, "@%.*s", (int)(kl - 9 - 9), k + 9);
        size_t n = 0, j;
        json_t *x;
        const char *lists[] = {"verdict_changes", "moved"};
        for (int l = 0; l < 2; l++)
            json_array_foreach(json_object_get(rep, lists[l]), j, x)
            {
                const char *r = jstr(x, "result");
                size_t rl = strlen(r), bl = strlen(be);
                n += cpu || (rl > bl && !strcmp(r + rl - bl, be));
            }
        char note[640];
        snprintf(note, sizeof note, "%zu changed figure%s or verdict%s of %s may come from it", n, n == 1 ? "" : "s",
                 n == 1 ? "" : "s", cpu ? "every backend" : be + 1);
        json_array_append_new(out, json_pack("{s:s, s:O, s:O, s:s, s:I}", "what", k, "a", json_object_get(d, "a"), "b",
                                             json_object_get(d, "b"), "note", note, "results", (json_int_t)n));
    }
    return out;
}

static json_t *load(const char *path)
{
    json_error_t e;
    json_t *d = json_load_file(path, 0, &e);
    if (!d)
        gf_cli_error("compare: %s:%d: %s", path, e.line, e.text);
    else if (!json_is_array(json_object_get(d, "results"))) {
        gf_cli_error("compare: %s: not a genfence run report (no \"results\")", path);
        json_decref(d);
        d = NULL;
    }
    return d;
}

static void print_value(const json_t *v)
{
    if (!v || json_is_null(v))
        printf("(absent)");
    else if (json_is_string(v))
        printf("%s", json_string_value(v));
    else if (json_is_real(v))
        printf("%.4g", json_real_value(v));
    else {
        char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        printf("%s", s ? s : "?");
        free(s);
    }
}

static void print_text(const json_t *rep, const char *pa, const char *pb)
{
    json_t *v;
    size_t i;
    printf("compare %s (A) -> %s (B)\n", pa, pb);
    printf("verdict changes: %zu\n", json_array_size(json_object_get(rep, "verdict_changes")));
    json_array_foreach(json_object_get(rep, "verdict_changes"), i, v)
        printf("  %-10s %-44s %s -> %s\n", json_is_true(json_object_get(v, "regression")) ? "REGRESSED" : "changed",
               jstr(v, "result"), jstr(v, "a"), jstr(v, "b"));
    json_array_foreach(json_object_get(rep, "only_in_a"), i, v) printf("  only in A  %s\n", json_string_value(v));
    json_array_foreach(json_object_get(rep, "only_in_b"), i, v) printf("  only in B  %s\n", json_string_value(v));
    printf("moved metrics (threshold %g): %zu\n", json_real_value(json_object_get(rep, "threshold")),
           json_array_size(json_object_get(rep, "moved")));
    json_array_foreach(json_object_get(rep, "moved"), i, v)
    {
        printf("  %-44s %-24s %-16s ", jstr(v, "result"), jstr(v, "comparison"), jstr(v, "metric"));
        print_value(json_object_get(v, "a"));
        printf(" -> ");
        print_value(json_object_get(v, "b"));
        printf("\n");
    }
    printf("audit differences: %zu\n", json_array_size(json_object_get(rep, "audit_differences")));
    json_array_foreach(json_object_get(rep, "audit_differences"), i, v)
    {
        printf("  %s: ", jstr(v, "key"));
        print_value(json_object_get(v, "a"));
        printf(" -> ");
        print_value(json_object_get(v, "b"));
        printf("\n");
    }
    /* a changed CPU or CPU path explains a changed figure: say which backends' */
    json_array_foreach(json_object_get(rep, "cpu_path_changes"), i, v)
    {
        printf("  explains: %s ", jstr(v, "what"));
        print_value(json_object_get(v, "a"));
        printf(" -> ");
        print_value(json_object_get(v, "b"));
        printf(" (%s)\n", jstr(v, "note"));
    }
    size_t reg = (size_t)json_integer_value(json_object_get(rep, "regressions"));
    printf("%zu regression(s)\n", reg);
}

int gf_cmd_compare(int argc, char **argv)
{
    enum { O_JSON = 256, O_THRESHOLD, O_HTML };
    static const struct option longopts[] = {{"json", no_argument, 0, O_JSON},
                                             {"threshold", required_argument, 0, O_THRESHOLD},
                                             {"html", required_argument, 0, O_HTML},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    int as_json = 0, c, rc = GF_EXIT_OK;
    const char *html = NULL;
    double thr = 0.5;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_JSON: as_json = 1; break;
        case O_HTML: html = optarg; break;
        case O_THRESHOLD:
            if (!gf_parse_double(optarg, &thr) || !(thr >= 0) || !isfinite(thr)) {
                gf_cli_error("compare: --threshold wants a number >= 0, got '%s'", optarg);
                return GF_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        default:
            gf_cli_error("compare: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
    }
    if (argc - optind != 2) {
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    const char *pa = argv[optind], *pb = argv[optind + 1];
    json_t *a = load(pa), *b = a ? load(pb) : NULL;
    if (!a || !b) {
        json_decref(a);
        return GF_EXIT_USAGE;
    }
    json_t *ia = index_results(a), *ib = index_results(b);
    json_t *changes = json_array(), *only_a = json_array(), *only_b = json_array(), *mv = json_array();
    size_t regressions = 0;
    const char *key;
    json_t *ra;
    json_object_foreach(ia, key, ra)
    {
        json_t *rb = json_object_get(ib, key);
        if (!rb) {
            json_array_append_new(only_a, json_string(key));
            continue;
        }
        if (strcmp(jstr(ra, "verdict"), jstr(rb, "verdict"))) {
            int reg = json_integer_value(json_object_get(ra, "exit_status")) == 0 &&
                      json_integer_value(json_object_get(rb, "exit_status")) != 0;
            regressions += (size_t)reg;
            json_array_append_new(changes,
                                  json_pack("{s:s, s:s, s:s, s:b, s:s}", "result", key, "a", jstr(ra, "verdict"), "b",
                                            jstr(rb, "verdict"), "regression", reg, "reason_b", jstr(rb, "reason")));
        }
        drift(mv, key, ra, rb, thr);
    }
    json_object_foreach(ib, key, ra) if (!json_object_get(ia, key)) json_array_append_new(only_b, json_string(key));
    json_t *rep = json_pack("{s:s, s:s, s:f, s:o, s:o, s:o, s:o, s:o, s:I}", "a", pa, "b", pb, "threshold", thr,
                            "verdict_changes", changes, "only_in_a", only_a, "only_in_b", only_b, "moved", mv,
                            "audit_differences", audit_diff(a, b), "regressions", (json_int_t)regressions);
    json_object_set_new(rep, "cpu_path_changes", cpu_path_changes(rep));
    if (as_json) {
        char *s = json_dumps(rep, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        if (s)
            puts(s);
        free(s);
    } else
        print_text(rep, pa, pb);
    rc = regressions ? GF_EXIT_FAIL : GF_EXIT_OK;
    if (html) {
        gf_buf hb = {0};
        if (gf_report_html_compare(rep, a, b, &hb) != 0 || gf_write_atomic(html, hb.p, hb.n) != 0) {
            gf_cli_error("compare: cannot write %s", html);
            rc = GF_EXIT_USAGE;
        }
        gf_buf_free(&hb);
    }
    json_decref(rep);
    json_decref(ia);
    json_decref(ib);
    json_decref(a);
    json_decref(b);
    return rc;
}
