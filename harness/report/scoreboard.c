/* genfence scoreboard: run reports -> the conformance table in Markdown
 * (scoreboard.h, docs/conformance.md). */
#include "scoreboard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* A number, or NaN when absent / null. */
static double jnum(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Markdown-safe: '|' escaped, newlines folded. */
static void put_md(gf_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            gf_buf_puts(b, "\\|");
        else if (*s == '\n' || *s == '\r')
            gf_buf_puts(b, " ");
        else
            gf_buf_put(b, s, 1);
    }
}

/* s with every "cwd/" made relative, into a malloc'd string. */
static char *relative(const char *s, const char *cwd)
{
    size_t cl = strlen(cwd);
    gf_buf b = {0};
    while (*s) {
        if (cl && !strncmp(s, cwd, cl) && s[cl] == '/') {
            s += cl + 1;
            continue;
        }
        gf_buf_put(&b, s, 1);
        s++;
    }
    gf_buf_put(&b, "", 0);
    if (b.oom || !b.p) {
        gf_buf_free(&b);
        return strdup("");
    }
    return b.p;
}

/* The column a result belongs to: the backend as requested when it carries
 * options (llamacpp:q8_0), else its name; "engine" for engine-only runs. */
static void column_of(const json_t *r, char *buf, size_t cap)
{
    const char *req = json_string_value(json_object_get(r, "backend_requested"));
    const char *name = json_string_value(json_object_get(r, "backend"));
    if (!name || !strcmp(name, "engine") || !req)
        snprintf(buf, cap, "%s", name ? name : "engine");
    else if (strchr(req, ':') && !strchr(req, '/'))
        snprintf(buf, cap, "%s", req);
    else
        snprintf(buf, cap, "%s", name);
}

/* The run's backend entry a result ran on (run.json "backends": matched by
 * the name or path as requested, else by name), or NULL. */
static const json_t *backend_entry(const json_t *doc, const json_t *r)
{
    const char *req = json_string_value(json_object_get(r, "backend_requested"));
    const char *name = json_string_value(json_object_get(r, "backend"));
    const json_t *bs = json_object_get(doc, "backends"), *b, *by_name = NULL;
    size_t i;
    json_array_foreach(bs, i, b)
    {
        if (req && !strcmp(jstr(b, "requested"), req))
            return b;
        if (!by_name && name && !strcmp(jstr(b, "name"), name))
            by_name = b;
    }
    return by_name;
}

typedef struct sb_col {
    char key[256];
    char types[128]; /* "weights q8_0, kv f16" or the dtype */
    int typed;       /* types from: 0 the dtype, 1 the backend entry, 2 the statistical tier */
    char path[128];  /* the backend entry's cpu_path ("" = not said) */
} sb_col;

/* A compute dtype's storage name, as the tier writes it (fp32 -> f32, tf32 -> f32). */
static void storage_of(const char *t, char *buf, size_t cap)
{
    if (!strcmp(t, "tf32"))
        snprintf(buf, cap, "f32");
    else if (!strncmp(t, "fp", 2))
        snprintf(buf, cap, "f%s", t + 2);
    else
        snprintf(buf, cap, "%s", t);
}

typedef struct sb_row {
    char id[256];
    char kind[64];
} sb_row;

typedef struct sb_cell {
    size_t row, col, doc;
    const json_t *r;
} sb_cell;

static long find_col(const sb_col *c, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(c[i].key, key))
            return (long)i;
    return -1;
}

static long find_row(const sb_row *rw, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rw[i].id, id))
            return (long)i;
    return -1;
}

/* the smallest bound / measured over the statistical thresholds judged */
static double stat_safety(const json_t *m)
{
    const json_t *t = json_object_get(m, "thresholds"), *s = json_object_get(m, "statistical");
    static const char *const up[] = {"kld_mean", "kld_p99", "kld_max", "dp_max"};
    double sf = INFINITY;
    for (size_t i = 0; i < sizeof up / sizeof *up; i++) {
        double b = jnum(t, up[i]), v = jnum(s, up[i]);
        if (!isnan(b) && !isnan(v))
            sf = fmin(sf, v > 0 ? b / v : INFINITY);
    }
    double b = jnum(t, "top1_min"), v = jnum(s, "top1_agreement");
    if (!isnan(b) && !isnan(v) && v < 1)
        sf = fmin(sf, (1 - b) / (1 - v));
    return sf;
}

static void put_sf(gf_buf *b, double sf)
{
    if (isinf(sf))
        gf_buf_puts(b, "sf inf");
    else if (!isnan(sf))
        gf_buf_printf(b, "sf %.2g", sf);
    else
        gf_buf_puts(b, "sf -");
}

static int is_finding(const char *v) { return strcmp(v, "pass") && strcmp(v, "pass-near-tie") && strcmp(v, "skip"); }

static void put_cell(gf_buf *b, const json_t *r, int note)
{
    const char *v = jstr(r, "verdict");
    const json_t *m = json_object_get(r, "metrics");
    const json_t *st = json_object_get(m, "statistical"), *s = json_object_get(m, "summary");
    if (is_finding(v))
        gf_buf_printf(b, "**%s**", v);
    else
        gf_buf_puts(b, v);
    if (!strcmp(v, "skip")) {
        gf_buf_printf(b, " (s%d)", note);
        return;
    }
    if (json_is_object(st) && !isnan(jnum(st, "kld_mean"))) {
        gf_buf_printf(b, " KL %.2g, top-1 %.4g%%, ", jnum(st, "kld_mean"), 100 * jnum(st, "top1_agreement"));
        put_sf(b, stat_safety(m));
        gf_buf_printf(b, "; max\\|d\\| %.2g", jnum(st, "max_abs_delta"));
    } else if (json_is_object(s) && json_object_get(s, "steps") && !isnan(jnum(s, "max_abs_delta"))) {
        double sf = jnum(s, "safety_factor");
        if (isnan(sf) && strstr(jstr(s, "safety_factor_reason"), "+inf"))
            sf = INFINITY;
        gf_buf_printf(b, " %.2g, ", jnum(s, "max_abs_delta"));
        put_sf(b, sf);
    } else {
        const json_t *checks = json_object_get(r, "checks");
        size_t ok = 0, n = json_array_size(checks);
        for (size_t i = 0; i < n; i++)
            ok += json_is_true(json_object_get(json_array_get(checks, i), "passed"));
        if (n)
            gf_buf_printf(b, " %zu/%zu checks", ok, n);
    }
    long long ties = json_integer_value(json_object_get(s, "near_ties"));
    if (ties > 0)
        gf_buf_printf(b, ", %lld tie%s", ties, ties == 1 ? "" : "s");
    if (is_finding(v))
        gf_buf_printf(b, " (f%d)", note);
}

static void put_run_header(gf_buf *b, const json_t *d, const char *path, size_t i)
{
    const json_t *env = json_object_get(d, "environment"), *os = json_object_get(env, "os");
    const json_t *g = json_object_get(d, "genfence"), *inv = json_object_get(d, "invocation");
    const char *cwd = jstr(inv, "cwd");
    gf_buf_printf(b, "**Run %zu** (`%s`): %s, genfence %s (commit %s); ", i + 1, path, jstr(d, "started"),
                  jstr(g, "version"), jstr(g, "commit"));
    gf_buf_printf(b, "%s, %s %s %s, %lld CPUs, %lld thread%s per job\n\n", jstr(env, "cpu_model"), jstr(os, "sysname"),
                  jstr(os, "release"), jstr(os, "machine"), json_integer_value(json_object_get(env, "nproc")),
                  json_integer_value(json_object_get(env, "threads_per_job")),
                  json_integer_value(json_object_get(env, "threads_per_job")) == 1 ? "" : "s");
    const json_t *cpu = json_object_get(json_object_get(d, "audit"), "cpu");
    if (json_is_string(json_object_get(cpu, "flags"))) /* the machine the CPU paths were chosen on */
        gf_buf_printf(b, "CPU flags: %s\n\n", jstr(cpu, "flags"));
    gf_buf_puts(b, "    ");
    const json_t *argv = json_object_get(d, "command");
    for (size_t a = 0; a < json_array_size(argv); a++) {
        const char *arg = json_string_value(json_array_get(argv, a));
        char *rel = relative(arg ? arg : "", cwd);
        int quote = strpbrk(rel, " '\"$*?[]()|&;<>") != NULL;
        gf_buf_printf(b, a ? (quote ? " '%s'" : " %s") : (quote ? "'%s'" : "%s"), rel);
        free(rel);
    }
    gf_buf_puts(b, "\n\n");
    const json_t *bk = json_object_get(d, "backends");
    for (size_t k = 0; k < json_array_size(bk); k++) {
        const json_t *e = json_array_get(bk, k);
        gf_buf_printf(b, "- `%s` (%s, %s): ",
                      jstr(e, "requested")[0] && !strchr(jstr(e, "requested"), '/') ? jstr(e, "requested")
                                                                                    : jstr(e, "name"),
                      jstr(e, "dtype"), json_is_true(json_object_get(e, "available")) ? "available" : "unavailable");
        put_md(b, jstr(e, "library"));
        if (jstr(e, "detail")[0]) {
            gf_buf_puts(b, "; ");
            put_md(b, jstr(e, "detail"));
        }
        if (jstr(e, "cpu_path")[0]) {
            gf_buf_puts(b, "; cpu path ");
            put_md(b, jstr(e, "cpu_path"));
        }
        gf_buf_puts(b, "\n");
    }
    gf_buf_puts(b, "\n");
}

int gf_scoreboard_markdown(json_t *const *docs, const char *const *paths, size_t n, const char *include,
                           const char *include_name, const char *self, gf_buf *out, char *err, size_t err_len)
{
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *res = json_object_get(docs[i], "results");
        if (!json_is_object(docs[i]) || !json_is_array(res) || !json_object_get(docs[i], "schema_version")) {
            snprintf(err, err_len, "%s is not a genfence run report (no schema_version / results)", paths[i]);
            return -1;
        }
        cap += json_array_size(res);
    }
    sb_col *cols = calloc(cap + 1, sizeof *cols);
    sb_row *rows = calloc(cap + 1, sizeof *rows);
    sb_cell *cells = calloc(cap + 1, sizeof *cells);
    size_t nc = 0, nr = 0, nx = 0;
    int rc = -1;
    if (!cols || !rows || !cells) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *res = json_object_get(docs[i], "results"), *r;
        size_t j;
        json_array_foreach(res, j, r)
        {
            char key[256];
            column_of(r, key, sizeof key);
            long c = find_col(cols, nc, key);
            if (c < 0) {
                c = (long)nc++;
                snprintf(cols[c].key, sizeof cols[c].key, "%s", key);
            }
            const json_t *m = json_object_get(r, "metrics");
            const json_t *be = backend_entry(docs[i], r);
            if (!cols[c].path[0] && jstr(be, "cpu_path")[0]) /* a changed path explains a changed figure */
                snprintf(cols[c].path, sizeof cols[c].path, "%s", jstr(be, "cpu_path"));
            /* the weight and KV types: the statistical tier's record (what it
             * measured) first, else the backend entry (what gf_backend_info
             * said at the probe; kv NULL = the compute dtype), else the dtype */
            if (json_is_string(json_object_get(m, "weights"))) {
                snprintf(cols[c].types, sizeof cols[c].types, "%s; weights %s, kv %s", jstr(r, "dtype"),
                         jstr(m, "weights"), jstr(m, "kv_cache"));
                cols[c].typed = 2;
            } else if (json_is_string(json_object_get(be, "weights")) && cols[c].typed < 2) {
                char kv[32];
                storage_of(json_is_string(json_object_get(be, "kv_cache")) ? jstr(be, "kv_cache") : jstr(r, "dtype"),
                           kv, sizeof kv);
                snprintf(cols[c].types, sizeof cols[c].types, "%s; weights %s, kv %s", jstr(r, "dtype"),
                         jstr(be, "weights"), kv);
                cols[c].typed = 1;
            } else if (!cols[c].types[0])
                snprintf(cols[c].types, sizeof cols[c].types, "%s", jstr(r, "dtype"));
            long w = find_row(rows, nr, jstr(r, "id"));
            if (w < 0) {
                w = (long)nr++;
                snprintf(rows[w].id, sizeof rows[w].id, "%s", jstr(r, "id"));
                snprintf(rows[w].kind, sizeof rows[w].kind, "%s", jstr(r, "kind"));
            }
            int dup = 0;
            for (size_t x = 0; x < nx; x++)
                dup |= cells[x].row == (size_t)w && cells[x].col == (size_t)c;
            if (!dup)
                cells[nx++] = (sb_cell){(size_t)w, (size_t)c, i, r};
        }
    }

    gf_buf_puts(out,
                "<!-- generated by `genfence scoreboard`; edit the runs or the included file, not this table -->\n");
    gf_buf_puts(out, "# Conformance table\n\n");
    gf_buf_puts(out, "Made by `genfence scoreboard` from the run reports below. Cells: verdict; for the statistical "
                     "tier (distribution_match) the mean KL divergence from the reference, top-1 agreement and the "
                     "smallest safety factor over its thresholds, with max |delta| beside; for comparisons max "
                     "|delta| and the safety factor (smallest margin / largest delta); otherwise the checks that "
                     "passed; near ties where there were any. (fN): a finding, its reason and reproduce line below; "
                     "(sN): a skip, its reason below; blank: not run.\n\n");
    if (self)
        gf_buf_printf(out, "This page:\n\n    %s\n\n", self);
    gf_buf_puts(out, "## Runs\n\n");
    for (size_t i = 0; i < n; i++)
        put_run_header(out, docs[i], paths[i], i);

    gf_buf_puts(out, "## Table\n\n| case | kind |");
    for (size_t c = 0; c < nc; c++) {
        gf_buf_puts(out, " ");
        put_md(out, cols[c].key);
        if (cols[c].types[0] || cols[c].path[0]) {
            gf_buf_printf(out, " (%s%s", cols[c].types, cols[c].types[0] && cols[c].path[0] ? "; " : "");
            if (cols[c].path[0]) {
                gf_buf_puts(out, "cpu path ");
                put_md(out, cols[c].path);
            }
            gf_buf_puts(out, ")");
        }
        gf_buf_puts(out, " |");
    }
    gf_buf_puts(out, "\n|---|---|");
    for (size_t c = 0; c < nc; c++)
        gf_buf_puts(out, "---|");
    gf_buf_puts(out, "\n");
    int nf = 0, ns = 0;
    int *note = calloc(nx + 1, sizeof *note);
    if (!note) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    for (size_t w = 0; w < nr; w++) {
        gf_buf_puts(out, "| ");
        put_md(out, rows[w].id);
        gf_buf_printf(out, " | %s |", rows[w].kind);
        for (size_t c = 0; c < nc; c++) {
            gf_buf_puts(out, " ");
            for (size_t x = 0; x < nx; x++)
                if (cells[x].row == w && cells[x].col == c) {
                    const char *v = jstr(cells[x].r, "verdict");
                    note[x] = !strcmp(v, "skip") ? ++ns : is_finding(v) ? ++nf : 0;
                    put_cell(out, cells[x].r, note[x]);
                }
            gf_buf_puts(out, " |");
        }
        gf_buf_puts(out, "\n");
    }

    gf_buf_printf(out, "\n## Findings (%d)\n\n", nf);
    if (!nf)
        gf_buf_puts(out, "None: every run passed or was skipped.\n");
    for (int f = 1; f <= nf; f++)
        for (size_t x = 0; x < nx; x++)
            if (note[x] == f && is_finding(jstr(cells[x].r, "verdict"))) {
                const char *cwd = jstr(json_object_get(docs[cells[x].doc], "invocation"), "cwd");
                char *why = relative(jstr(cells[x].r, "reason"), cwd);
                char *rep = relative(jstr(cells[x].r, "reproduce"), cwd);
                gf_buf_printf(out, "- **f%d** %s [", f, rows[cells[x].row].id);
                put_md(out, cols[cells[x].col].key);
                gf_buf_printf(out, "] %s: ", jstr(cells[x].r, "verdict"));
                put_md(out, why);
                gf_buf_printf(out, "\n\n      %s\n\n", rep[0] ? rep : "(no reproduce line in the report)");
                free(why);
                free(rep);
            }
    gf_buf_printf(out, "\n## Skips (%d)\n\n", ns);
    for (int s = 1; s <= ns; s++)
        for (size_t x = 0; x < nx; x++)
            if (note[x] == s && !strcmp(jstr(cells[x].r, "verdict"), "skip")) {
                const char *cwd = jstr(json_object_get(docs[cells[x].doc], "invocation"), "cwd");
                char *why = relative(jstr(cells[x].r, "reason"), cwd);
                gf_buf_printf(out, "- s%d %s [", s, rows[cells[x].row].id);
                put_md(out, cols[cells[x].col].key);
                gf_buf_puts(out, "]: ");
                put_md(out, why);
                gf_buf_puts(out, "\n");
                free(why);
            }
    free(note);
    if (include) {
        gf_buf_printf(out, "\n<!-- not generated: included as written from %s -->\n\n", include_name);
        gf_buf_puts(out, include);
        if (include[0] && include[strlen(include) - 1] != '\n')
            gf_buf_puts(out, "\n");
    }
    if (out->oom) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    rc = 0;
done:
    free(cols);
    free(rows);
    free(cells);
    return rc;
}
