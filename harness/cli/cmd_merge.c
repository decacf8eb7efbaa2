/* genfence merge SHARD.json... -o OUT.json: the reports of `run --shard I/N`
 * (one per I, on one machine or many) joined into the report of the unsharded
 * run: results back in case order, the summary tallied again. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "commands.h"
#include "report.h"
#include "sys.h"
#include "verdict.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence merge SHARD.json... -o OUT.json [--junit FILE] [--html FILE]\n"
               "\n"
               "Joins the JSON reports of `genfence run --shard I/N` (every I from 1 to N, once)\n"
               "into one report equal to the unsharded run's, timings aside: results in case order\n"
               "(case file, line, backend), the summary and exit status tallied again, triangulation\n"
               "entries joined. The shards must come from the same genfence, case files and backends;\n"
               "the merged report lists them under \"merged_from\" (path, shard, started, seconds,\n"
               "machine). A single unsharded report is accepted as is (N = 1).\n"
               "\n"
               "  -o, --output FILE   the merged report (written atomically; its folder is created)\n"
               "  --junit FILE        the merged run's JUnit XML (default: junit.xml beside OUT)\n"
               "  --html FILE         also the HTML report of the merged run\n"
               "\n"
               "exit status: that of the merged run (0 all passed, 1 a check failed, 2 an error), or\n"
               "2 for bad input (unreadable report, missing or repeated shard, mismatched shards)\n");
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static long index_of(const json_t *arr, const char *s, const char *key)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *x = key ? jstr(v, key) : json_string_value(v);
        if (x && !strcmp(x, s))
            return (long)i;
    }
    return -1;
}

/* order of the unsharded run: case file, line, then backend */
static const json_t *g_files, *g_backends;
static int by_case_order(const void *pa, const void *pb)
{
    const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    long fa = index_of(g_files, jstr(a, "file"), NULL), fb = index_of(g_files, jstr(b, "file"), NULL);
    if (fa != fb)
        return fa < fb ? -1 : 1;
    json_int_t la = json_integer_value(json_object_get(a, "line")), lb = json_integer_value(json_object_get(b, "line"));
    if (la != lb)
        return la < lb ? -1 : 1;
    long ba = index_of(g_backends, jstr(a, "backend"), "name"), bb = index_of(g_backends, jstr(b, "backend"), "name");
    return (ba > bb) - (ba < bb);
}

static json_t *summary_of(const json_t *results, const json_t *backends, json_int_t cases, int as_declared)
{
    size_t by[GF_V_COUNT] = {0}, req_skips = 0, unreached = 0, n_decl = 0, n_ok = 0, i, k;
    gf_counts all = {0};
    json_t *r, *b;
    /* a shard run with --baseline-allow-fixed: its fixed results (exit_status 0) exit 0 here too */
    json_array_foreach(
        results, i, r) if (!strcmp(jstr(r, "verdict"), "fixed") && json_is_integer(json_object_get(r, "exit_status")) &&
                           json_integer_value(json_object_get(r, "exit_status")) == 0) gf_verdict_allow_fixed(1);
    json_array_foreach(results, i, r)
    {
        gf_verdict v;
        if (!gf_verdict_parse(jstr(r, "verdict"), &v))
            return NULL;
        int req = json_is_true(json_object_get(r, "backend_required"));
        const json_t *d = json_object_get(r, "as_declared");
        by[v]++;
        gf_counts_add(&all, v, req, json_is_boolean(d) ? json_is_true(d) : -1, 0);
        if (v == GF_V_SKIP && req)
            req_skips++;
        gf_verdict ev; /* the runs judged against expect_verdict (tally.c) */
        if (gf_verdict_parse(jstr(r, "expect_verdict"), &ev) && (v != GF_V_SKIP || ev == GF_V_SKIP)) {
            n_decl++;
            n_ok += v == ev;
        }
    }
    json_t *groups = gf_report_groups(results, backends);
    /* a required backend that no shard's case reached (tally.c's rule) */
    json_array_foreach(json_object_get(groups, "by_backend"), k, b)
    {
        if (json_is_true(json_object_get(b, "required")) && !json_integer_value(json_object_get(b, "reached")) &&
            !json_integer_value(json_object_get(b, "runs"))) {
            unreached++;
            all.exit_status = gf_exit_combine(all.exit_status, 1);
        }
    }
    json_t *s = json_object(), *byv = json_object();
    json_object_set_new(s, "passed", json_integer((json_int_t)all.passed));
    json_object_set_new(s, "failed", json_integer((json_int_t)(all.failed + unreached)));
    json_object_set_new(s, "skipped", json_integer((json_int_t)all.skipped));
    for (int v = 0; v < GF_V_COUNT; v++)
        json_object_set_new(byv, gf_verdict_str((gf_verdict)v), json_integer((json_int_t)by[v]));
    json_object_set_new(s, "by_verdict", byv);
    json_object_set_new(s, "required_skips", json_integer((json_int_t)req_skips));
    json_object_set_new(s, "cases", json_integer(cases));
    json_object_set_new(s, "runs", json_integer((json_int_t)json_array_size(results)));
    json_object_set_new(s, "exit_status", json_integer(all.exit_status));
    json_object_update(s, groups);
    json_decref(groups);
    json_object_set_new(s, "required_unreached", json_integer((json_int_t)unreached));
    json_object_set_new(s, "as_declared",
                        as_declared
                            ? json_pack("{s:I, s:I}", "runs", (json_int_t)n_decl, "as_declared", (json_int_t)n_ok)
                            : json_null());
    return s;
}

/* The folder of PATH created if missing; -1 with why said. */
static int make_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (gf_report_mkdir_p(dir) != 0) {
        gf_cli_error("merge: cannot create the folder %s for %s: %s", dir, path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Shards must agree on what was run: genfence, case files, backends (by name and library). */
static const char *mismatch(const json_t *a, const json_t *b)
{
    if (!json_equal(json_object_get(a, "genfence"), json_object_get(b, "genfence")))
        return "genfence version or commit";
    if (!json_equal(json_object_get(a, "case_files"), json_object_get(b, "case_files")))
        return "case files";
    if (!json_equal(json_object_get(json_object_get(a, "options"), "filter"),
                    json_object_get(json_object_get(b, "options"), "filter")))
        return "--filter";
    const json_t *ba = json_object_get(a, "backends"), *bb = json_object_get(b, "backends");
    if (json_array_size(ba) != json_array_size(bb))
        return "backends";
    for (size_t i = 0; i < json_array_size(ba); i++)
        if (strcmp(jstr(json_array_get(ba, i), "name"), jstr(json_array_get(bb, i), "name")))
            return "backends";
    return NULL;
}

int gf_cmd_merge(int argc, char **argv)
{
    enum { O_HTML = 256, O_JUNIT };
    static const struct option longopts[] = {{"output", required_argument, 0, 'o'},
                                             {"html", required_argument, 0, O_HTML},
                                             {"junit", required_argument, 0, O_JUNIT},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *out = NULL, *html = NULL, *junit = NULL;
    int c, rc = GF_EXIT_USAGE;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case O_HTML: html = optarg; break;
        case O_JUNIT: junit = optarg; break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        default:
            gf_cli_error("merge: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
    }
    size_t n = (size_t)(argc - optind);
    if (!out || n == 0) {
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    json_t **docs = calloc(n, sizeof *docs), *merged = NULL, *all = json_array(), *seen = json_object();
    json_t *tri = json_array(), *from = json_array();
    const json_t **rs = NULL;
    int count = 0;
    char *seen_shard = NULL;
    json_int_t cases = 0;
    if (!docs)
        goto done;
    for (size_t i = 0; i < n; i++) {
        const char *p = argv[optind + (int)i];
        json_error_t e;
        docs[i] = json_load_file(p, 0, &e);
        if (!docs[i]) {
            gf_cli_error("merge: %s:%d: %s", p, e.line, e.text);
            goto done;
        }
        if (!json_is_array(json_object_get(docs[i], "results"))) {
            gf_cli_error("merge: %s: not a genfence run report (no \"results\")", p);
            goto done;
        }
        const json_t *sh = json_object_get(json_object_get(docs[i], "options"), "shard");
        int si = json_is_object(sh) ? (int)json_integer_value(json_object_get(sh, "index")) : 1;
        int sn = json_is_object(sh) ? (int)json_integer_value(json_object_get(sh, "count")) : 1;
        if (i == 0) {
            count = sn;
            seen_shard = calloc((size_t)count + 1, 1);
            if (!seen_shard)
                goto done;
        }
        if (sn != count || si < 1 || si > count) {
            gf_cli_error("merge: %s is shard %d/%d, the first report is of %d shards", p, si, sn, count);
            goto done;
        }
        if (seen_shard[si]) {
            gf_cli_error("merge: %s: shard %d/%d given twice", p, si, sn);
            goto done;
        }
        seen_shard[si] = 1;
        const char *why = i ? mismatch(docs[0], docs[i]) : NULL;
        if (why) {
            gf_cli_error("merge: %s and %s differ in %s: not shards of one run", argv[optind], p, why);
            goto done;
        }
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(docs[i], "results"), k, r)
        {
            char key[1024];
            snprintf(key, sizeof key, "%s@%s", jstr(r, "id"), jstr(r, "backend"));
            if (json_object_get(seen, key)) {
                gf_cli_error("merge: %s: %s is in two reports", p, key);
                goto done;
            }
            json_object_set_new(seen, key, json_true());
            json_array_append(all, r);
        }
        json_array_foreach(json_object_get(docs[i], "triangulation"), k, r)
        {
            size_t t;
            json_t *x;
            int dup = 0;
            json_array_foreach(tri, t, x) dup |=
                !strcmp(jstr(x, "model"), jstr(r, "model")) && !strcmp(jstr(x, "backend"), jstr(r, "backend"));
            if (!dup)
                json_array_append(tri, r);
        }
        cases += json_integer_value(json_object_get(json_object_get(docs[i], "summary"), "cases"));
        const json_t *env = json_object_get(docs[i], "environment");
        json_array_append_new(from, json_pack("{s:s, s:i, s:i, s:O?, s:O?, s:O?, s:O?}", "path", p, "index", si,
                                              "count", sn, "started", json_object_get(docs[i], "started"), "seconds",
                                              json_object_get(docs[i], "seconds"), "cpu_model",
                                              json_object_get(env, "cpu_model"), "node",
                                              json_object_get(json_object_get(env, "os"), "node")));
    }
    for (int s = 1; s <= count; s++)
        if (!seen_shard[s]) {
            gf_cli_error("merge: shard %d/%d is missing", s, count);
            goto done;
        }
    /* results in the unsharded order */
    size_t nr = json_array_size(all);
    rs = nr ? malloc(nr * sizeof *rs) : NULL;
    if (nr && !rs)
        goto done;
    for (size_t i = 0; i < nr; i++)
        rs[i] = json_array_get(all, i);
    g_files = json_object_get(docs[0], "case_files");
    g_backends = json_object_get(docs[0], "backends");
    qsort(rs, nr, sizeof *rs, by_case_order);
    json_t *sorted = json_array();
    for (size_t i = 0; i < nr; i++)
        json_array_append(sorted, (json_t *)rs[i]);
    json_t *sum = summary_of(sorted, json_object_get(docs[0], "backends"), cases,
                             json_is_true(json_object_get(json_object_get(docs[0], "options"), "as_declared")));
    if (!sum) {
        json_decref(sorted);
        gf_cli_error("merge: a result has an unknown verdict");
        goto done;
    }
    /* the first shard's document, with what is the whole run's put in */
    merged = json_deep_copy(docs[0]);
    const char *first = NULL;
    double secs = 0;
    for (size_t i = 0; i < n; i++) {
        const char *st = jstr(docs[i], "started");
        if (*st && (!first || strcmp(st, first) < 0))
            first = st;
        double s = json_number_value(json_object_get(docs[i], "seconds"));
        secs = s > secs ? s : secs;
    }
    if (first)
        json_object_set_new(merged, "started", json_string(first));
    json_object_set_new(merged, "seconds", json_real(secs)); /* the longest shard: they run side by side */
    json_object_set_new(json_object_get(merged, "options"), "shard", json_null());
    json_object_set_new(merged, "results", sorted);
    json_object_set_new(merged, "triangulation", json_array_size(tri) ? json_incref(tri) : json_null());
    json_object_set_new(merged, "summary", sum);
    json_object_set_new(merged, "merged_from", json_incref(from));
    /* junit.xml beside the merged report unless --junit says where */
    char junit_def[4096];
    const char *oslash = strrchr(out, '/');
    snprintf(junit_def, sizeof junit_def, "%.*sjunit.xml", oslash ? (int)(oslash - out + 1) : 0, out);
    if (!junit)
        junit = junit_def;
    if (make_parent(out) != 0 || make_parent(junit) != 0 || (html && make_parent(html) != 0))
        goto done;
    char *s = json_dumps(merged, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (!s || gf_write_atomic(out, s, strlen(s)) != 0) {
        gf_cli_error("merge: cannot write %s: %s", out, s ? strerror(errno) : "out of memory");
        free(s);
        goto done;
    }
    free(s);
    if (gf_report_junit_write_doc(merged, junit) != 0) {
        gf_cli_error("merge: cannot write %s: %s", junit, strerror(errno));
        goto done;
    }
    if (html && gf_report_html_write_doc(merged, html) != 0) {
        gf_cli_error("merge: cannot write %s: %s", html, strerror(errno));
        goto done;
    }
    printf("merged %zu report(s) of %d shard(s): %lld runs, %lld passed, %lld failed, %lld skipped -> %s, %s%s%s\n", n,
           count, (long long)nr, (long long)json_integer_value(json_object_get(sum, "passed")),
           (long long)json_integer_value(json_object_get(sum, "failed")),
           (long long)json_integer_value(json_object_get(sum, "skipped")), out, junit, html ? ", " : "",
           html ? html : "");
    gf_report_groups_print(sum); /* the last line, as a run's: each backend's figures, the engine alone's apart */
    rc = (int)json_integer_value(json_object_get(sum, "exit_status"));
done:
    for (size_t i = 0; docs && i < n; i++)
        json_decref(docs[i]);
    free(docs);
    free(rs);
    free(seen_shard);
    json_decref(merged);
    json_decref(all);
    json_decref(seen);
    json_decref(tri);
    json_decref(from);
    return rc;
}
