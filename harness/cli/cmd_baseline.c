/* genfence baseline: a baseline of known findings (harness/report/baseline.h)
 * written from a run report's failures. docs/harness.md "Baselines". */
#include <errno.h>
#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "buf.h"
#include "cli.h"
#include "commands.h"
#include "sys.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence baseline RUN.json -o FILE [--backend NAME]... [--see TEXT] [--about TEXT]\n"
               "\n"
               "Writes a baseline of known findings (for genfence run --baseline) from a run report: one\n"
               "entry per result that failed (fail, stale, crash, timeout; error is bad input, not a\n"
               "finding, and is left out; so is a must-fail case that got the verdict it declares), or that\n"
               "the report's own baseline called known. Each entry is\n"
               "the case id (anchored), the backend as requested, the verdict, and a reason pattern: the\n"
               "reason with every number a number class, so the same finding with other figures is still\n"
               "known and another finding is not.\n"
               "\n"
               "  -o, --output FILE   where to write it (required)\n"
               "  --backend NAME      only results of this backend (requested or reported name; repeatable)\n"
               "  --see TEXT          where the findings are written up (each entry's see:)\n"
               "  --about TEXT        the file's about: (default: the report's machine and backends)\n"
               "  -h, --help          this help\n"
               "\n"
               "exit status: 0 written, 1 the report has no finding to write (nothing written), 2 bad input\n");
}

/* s as a YAML single-quoted scalar */
static void yq(gf_buf *b, const char *s)
{
    gf_buf_puts(b, "'");
    for (; *s; s++) {
        if (*s == '\'')
            gf_buf_puts(b, "''");
        else if (*s == '\n')
            gf_buf_puts(b, " ");
        else
            gf_buf_printf(b, "%c", *s);
    }
    gf_buf_puts(b, "'");
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* The default about: the machine and the libraries (engine version, CPU path) of the report's backends. */
static void default_about(const json_t *doc, const char *path, gf_buf *b)
{
    const json_t *env = json_object_get(doc, "environment");
    gf_buf_printf(b, "Findings of %s (genfence %s, started %s) on %s.", path,
                  jstr(json_object_get(doc, "genfence"), "version"), jstr(doc, "started"),
                  jstr(env, "cpu_model")[0] ? jstr(env, "cpu_model") : "an unknown CPU");
    size_t i;
    json_t *be;
    json_array_foreach(json_object_get(doc, "backends"), i, be)
    {
        if (!json_is_true(json_object_get(be, "available")))
            continue;
        gf_buf_printf(b, " %s: %s%s%s.", jstr(be, "requested"), jstr(be, "library"), jstr(be, "detail")[0] ? "; " : "",
                      jstr(be, "detail"));
    }
}

static int wanted_backend(const json_t *r, char **names, size_t n)
{
    if (!n)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], jstr(r, "backend")) || !strcmp(names[i], jstr(r, "backend_requested")))
            return 1;
    return 0;
}

int gf_cmd_baseline(int argc, char **argv)
{
    enum { O_BACKEND = 256, O_SEE, O_ABOUT };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'}, {"backend", required_argument, 0, O_BACKEND},
        {"see", required_argument, 0, O_SEE},  {"about", required_argument, 0, O_ABOUT},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *out = NULL, *see = NULL, *about = NULL;
    char **backends = NULL;
    size_t n_backends = 0;
    int rc = GF_EXIT_USAGE, c;
    json_t *doc = NULL;
    gf_buf b = {0};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case O_SEE: see = optarg; break;
        case O_ABOUT: about = optarg; break;
        case O_BACKEND: {
            char **g = realloc(backends, (n_backends + 1) * sizeof *g);
            if (!g)
                goto done;
            backends = g;
            backends[n_backends++] = optarg;
            break;
        }
        case 'h':
            usage(stdout);
            rc = GF_EXIT_OK;
            goto done;
        default:
            gf_cli_error("baseline: unknown or incomplete option '%s' (genfence baseline --help)", argv[optind - 1]);
            goto done;
        }
    }
    if (argc - optind != 1 || !out) {
        gf_cli_error("baseline: want one RUN.json and -o FILE (genfence baseline --help)");
        goto done;
    }
    const char *path = argv[optind];
    json_error_t err;
    doc = json_load_file(path, 0, &err);
    const json_t *results = doc ? json_object_get(doc, "results") : NULL;
    if (!doc) {
        if (err.line > 0)
            gf_cli_error("baseline: %s:%d:%d: %s", path, err.line, err.column, err.text);
        else
            gf_cli_error("baseline: %s", err.text);
        goto done;
    }
    if (!json_is_array(results)) {
        gf_cli_error("baseline: %s: not a genfence run report (no \"results\" array)", path);
        goto done;
    }
    gf_buf_printf(
        &b,
        "# A baseline of known findings: genfence run --baseline THIS (docs/harness.md \"Baselines\").\n"
        "# Written by genfence baseline from %s; edit the patterns and see: as the findings are written up.\n",
        path);
    gf_buf_puts(&b, "about: ");
    if (about)
        yq(&b, about);
    else {
        gf_buf a = {0};
        default_about(doc, path, &a);
        yq(&b, a.p ? a.p : "");
        gf_buf_free(&a);
    }
    gf_buf_puts(&b, "\nfindings:\n");
    size_t i, n = 0;
    json_t *r;
    json_array_foreach(results, i, r)
    {
        const char *v = jstr(r, "verdict"), *reason = jstr(r, "reason");
        const json_t *was = json_object_get(json_object_get(r, "baseline"), "was");
        if (!strcmp(v, "known") && was) { /* the finding as the run gave it, before the baseline */
            v = jstr(was, "verdict");
            reason = jstr(was, "reason");
        }
        gf_verdict vv;
        if (!gf_verdict_parse(v, &vv) || gf_verdict_exit(vv, 0) != 1 || gf_verdict_of_baseline(vv))
            continue; /* a pass, skip or error (bad input) is no finding; fixed is none any more */
        if (json_is_true(json_object_get(r, "as_declared")))
            continue; /* a must-fail case that got the verdict it declares passed: no finding */
        if (json_is_null(json_object_get(r, "backend")) || !wanted_backend(r, backends, n_backends))
            continue;
        const char *req = jstr(r, "backend_requested");
        const char *be = strchr(req, '/') ? jstr(r, "backend") : req; /* a plugin path is this machine's */
        char idre[1024];
        gf_id_regex(idre, sizeof idre, jstr(r, "id"));
        char *pat = gf_baseline_reason_pattern(reason);
        if (!pat)
            goto done;
        gf_buf_puts(&b, "  - case: ");
        yq(&b, idre);
        gf_buf_puts(&b, "\n    backend: ");
        yq(&b, be);
        gf_buf_printf(&b, "\n    verdict: %s\n    reason: ", v);
        yq(&b, pat);
        gf_buf_puts(&b, "\n");
        if (see) {
            gf_buf_puts(&b, "    see: ");
            yq(&b, see);
            gf_buf_puts(&b, "\n");
        }
        free(pat);
        n++;
    }
    if (!n) {
        gf_cli_error("baseline: %s has no finding%s to write (no result failed); %s not written", path,
                     n_backends ? " of the named backends" : "", out);
        rc = GF_EXIT_FAIL;
        goto done;
    }
    if (b.oom || gf_write_atomic(out, b.p, b.n) != 0) {
        gf_cli_error("baseline: cannot write %s: %s", out, strerror(errno));
        goto done;
    }
    printf("baseline: %zu finding%s of %s written to %s\n", n, n == 1 ? "" : "s", path, out);
    rc = GF_EXIT_OK;
done:
    gf_buf_free(&b);
    json_decref(doc);
    free(backends);
    return rc;
}
