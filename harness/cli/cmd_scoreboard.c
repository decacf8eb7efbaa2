/* genfence scoreboard RUN.json... [-o FILE] [--include FILE]: the conformance
 * table (docs/conformance.md) from run reports (harness/report/scoreboard.c). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "cli.h"
#include "commands.h"
#include "scoreboard.h"
#include "sys.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence scoreboard RUN.json... [-o FILE] [--include FILE]\n"
               "\n"
               "Writes the conformance table of one or more run reports (reports/run.json of\n"
               "`genfence run`) as Markdown: the runs (machine, genfence and backend versions,\n"
               "date, command), one row per case and one column per backend and weight / KV\n"
               "type (llamacpp:q8_0 ...), each cell the verdict with its figure (KL and top-1\n"
               "for the statistical tier, max |delta| and safety factor for comparisons),\n"
               "then every finding with its reason and reproduce line, and the skips.\n"
               "Give each backend configuration its own run (llamacpp:f32, llamacpp:q8_0 ...):\n"
               "the first report holding a (case, column) wins.\n"
               "\n"
               "  -o, --output FILE   write there (atomically) instead of standard output\n"
               "  --include FILE      append FILE as it is after the generated part, marked\n"
               "                      as not generated (hand-written findings)\n"
               "\n"
               "exit status: 0 written (whatever the verdicts), 2 bad input or usage\n");
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    gf_buf b = {0};
    char chunk[8192];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        gf_buf_put(&b, chunk, k);
    int bad = ferror(f) || b.oom;
    fclose(f);
    gf_buf_put(&b, "", 0);
    if (bad || !b.p) {
        gf_buf_free(&b);
        return NULL;
    }
    return b.p;
}

int gf_cmd_scoreboard(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"include", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *out_path = NULL, *inc_path = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out_path = optarg; break;
        case 'i': inc_path = optarg; break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        default:
            if (optopt)
                gf_cli_error("scoreboard: option '-%c' %s", optopt,
                             strchr("o", optopt) ? "needs a value" : "is unknown");
            else
                gf_cli_error("scoreboard: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
    }
    size_t n = (size_t)(argc - optind);
    if (!n) {
        gf_cli_error("scoreboard: give at least one run report (reports/run.json)");
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    int rc = GF_EXIT_USAGE;
    json_t **docs = calloc(n, sizeof *docs);
    char *inc = NULL;
    gf_buf out = {0};
    char err[1024] = "";
    if (!docs) {
        gf_cli_error("scoreboard: out of memory");
        return GF_EXIT_USAGE;
    }
    for (size_t i = 0; i < n; i++) {
        json_error_t e;
        docs[i] = json_load_file(argv[optind + (int)i], 0, &e);
        if (!docs[i]) {
            gf_cli_error("scoreboard: %s: %s (line %d)", argv[optind + (int)i], e.text, e.line);
            goto done;
        }
    }
    if (inc_path && !(inc = read_text(inc_path))) {
        gf_cli_error("scoreboard: cannot read --include %s", inc_path);
        goto done;
    }
    gf_buf self = {0}; /* this command, as given */
    gf_buf_puts(&self, "genfence");
    for (int a = 0; a < argc; a++)
        gf_buf_printf(&self, strpbrk(argv[a], " '\"$*?[]()|&;<>") ? " '%s'" : " %s", argv[a]);
    int bad = self.oom || gf_scoreboard_markdown(docs, (const char *const *)argv + optind, n, inc, inc_path, self.p,
                                                 &out, err, sizeof err);
    gf_buf_free(&self);
    if (bad) {
        gf_cli_error("scoreboard: %s", err);
        goto done;
    }
    if (out_path) {
        if (gf_write_atomic(out_path, out.p, out.n)) {
            gf_cli_error("scoreboard: cannot write %s", out_path);
            goto done;
        }
    } else if (fwrite(out.p, 1, out.n, stdout) != out.n) {
        goto done;
    }
    rc = GF_EXIT_OK;
done:
    for (size_t i = 0; i < n; i++)
        json_decref(docs[i]);
    free(docs);
    free(inc);
    gf_buf_free(&out);
    return rc;
}
