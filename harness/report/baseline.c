/* Baselines of known findings: load (through the case loader's YAML layer),
 * apply to a finished run, and the reason patterns genfence baseline writes.
 * baseline.h. */
#define _GNU_SOURCE /* vasprintf */
#include "baseline.h"
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"
#include "utf8.h"

/* The verdicts an entry may expect: the failing ones (a pass or skip is no finding). */
static const char *const k_expectable[] = {"fail", "stale", "crash", "timeout", "error", NULL};

static void entry_clear(gf_baseline_entry *e)
{
    free(e->case_pat);
    free(e->backend);
    free(e->reason_pat);
    free(e->see);
    free(e->note);
    if (e->case_pat)
        regfree(&e->case_re);
    if (e->reason_pat)
        regfree(&e->reason_re);
    memset(e, 0, sizeof *e);
}

/* pat compiled into re (ERE; whole: anchored as ^(pat)$); 0, or -1 with the error at n. */
static int compile(gf_cctx *ctx, const gf_ynode *n, const char *key, const char *pat, int whole, regex_t *re)
{
    size_t len = strlen(pat) + 8;
    char *full = malloc(len);
    if (!full)
        return -1;
    snprintf(full, len, whole ? "^(%s)$" : "%s", pat);
    int rc = regcomp(re, full, REG_EXTENDED | REG_NOSUB);
    free(full);
    if (rc != 0) {
        char msg[256];
        regerror(rc, re, msg, sizeof msg);
        gf_y_error(ctx, n, "'%s' is not a POSIX extended regular expression: %s", key, msg);
        return -1;
    }
    return 0;
}

static int parse_entry(gf_cctx *ctx, const gf_ynode *m, const char *file, gf_baseline_entry *e)
{
    memset(e, 0, sizeof *e);
    e->file = file;
    e->line = m->line;
    e->col = m->col;
    if (!gf_y_node_is_map(ctx, m, "a finding"))
        return -1;
    size_t errors = ctx->n_errors;
    int v = 0;
    gf_y_string(ctx, m, "case", GF_Y_REQUIRED, &e->case_pat);
    gf_y_string(ctx, m, "backend", GF_Y_REQUIRED, &e->backend);
    if (gf_y_enum(ctx, m, "verdict", GF_Y_REQUIRED, k_expectable, &v) > 0)
        gf_verdict_parse(k_expectable[v], &e->verdict);
    gf_y_string(ctx, m, "reason", GF_Y_OPTIONAL, &e->reason_pat);
    gf_y_string(ctx, m, "see", GF_Y_OPTIONAL, &e->see);
    gf_y_string(ctx, m, "note", GF_Y_OPTIONAL, &e->note);
    gf_y_check_unknown(ctx, m, "in a finding (known: case, backend, verdict, reason, see, note)");
    if (e->backend && !e->backend[0])
        gf_y_error(ctx, gf_y_get(ctx, m, "backend", 0), "'backend' is empty");
    /* a pattern that did not compile is dropped here, so entry_clear frees only compiled ones */
    if (e->case_pat && compile(ctx, gf_y_get(ctx, m, "case", 0), "case", e->case_pat, 1, &e->case_re) != 0) {
        free(e->case_pat);
        e->case_pat = NULL;
    }
    if (e->reason_pat && compile(ctx, gf_y_get(ctx, m, "reason", 0), "reason", e->reason_pat, 0, &e->reason_re) != 0) {
        free(e->reason_pat);
        e->reason_pat = NULL;
    }
    if (ctx->n_errors > errors || !e->case_pat || !e->backend) {
        entry_clear(e);
        return -1;
    }
    return 0;
}

int gf_baseline_load(gf_baseline *bl, const char *path, const char *cmd)
{
    gf_cctx ctx = {.file = path};
    gf_ynode *tree = gf_yaml_read_file(&ctx, path);
    gf_baseline_entry *got = NULL;
    size_t n_got = 0;
    char *file = strdup(path);
    char **files = realloc(bl->files, (bl->n_files + 1) * sizeof *files);
    if (files)
        bl->files = files;
    if (!file || !files) {
        gf_y_error(&ctx, NULL, "out of memory");
        goto done;
    }
    if (!tree)
        goto done;
    if (!gf_y_node_is_map(&ctx, tree, "a baseline file's top level")) {
        goto done;
    }
    char *about = NULL;
    gf_y_string(&ctx, tree, "about", GF_Y_OPTIONAL, &about);
    free(about); /* for the reader: the engine and CPU path the findings were measured on */
    const gf_ynode *fs = gf_y_get(&ctx, tree, "findings", GF_Y_REQUIRED);
    gf_y_check_unknown(&ctx, tree, "at the top level of a baseline file (known: about, findings)");
    if (!fs || !gf_y_node_is_seq(&ctx, fs, "'findings'"))
        goto done;
    got = calloc(fs->n ? fs->n : 1, sizeof *got);
    for (size_t i = 0; got && i < fs->n; i++)
        if (parse_entry(&ctx, fs->items[i], file, &got[n_got]) == 0)
            n_got++;
done:
    gf_ynode_free(tree);
    if (ctx.n_errors || !got) {
        for (size_t i = 0; i < ctx.n_errors; i++)
            fprintf(stderr, "genfence: %s: %s\n", cmd, ctx.errors[i]);
        if (!ctx.n_errors)
            fprintf(stderr, "genfence: %s: %s: out of memory\n", cmd, path);
        else
            fprintf(stderr, "genfence: %s: %zu error%s in the baseline file %s; nothing was run\n", cmd, ctx.n_errors,
                    ctx.n_errors == 1 ? "" : "s", path);
        gf_y_strings_free(ctx.errors, ctx.n_errors);
        for (size_t i = 0; i < n_got; i++)
            entry_clear(&got[i]);
        free(got);
        free(file);
        return -1;
    }
    gf_baseline_entry *all = realloc(bl->e, (bl->n + n_got + 1) * sizeof *all);
    if (!all) {
        fprintf(stderr, "genfence: %s: %s: out of memory\n", cmd, path);
        for (size_t i = 0; i < n_got; i++)
            entry_clear(&got[i]);
        free(got);
        free(file);
        return -1;
    }
    bl->e = all;
    memcpy(bl->e + bl->n, got, n_got * sizeof *got);
    bl->n += n_got;
    bl->files[bl->n_files++] = file;
    free(got);
    return 0;
}

void gf_baseline_free(gf_baseline *bl)
{
    for (size_t i = 0; i < bl->n; i++)
        entry_clear(&bl->e[i]);
    free(bl->e);
    for (size_t i = 0; i < bl->n_files; i++)
        free(bl->files[i]);
    free(bl->files);
    json_decref(bl->summary);
    memset(bl, 0, sizeof *bl);
}

static int matches(const regex_t *re, const char *s) { return regexec(re, s ? s : "", 0, NULL, 0) == 0; }

static int entry_meets(const gf_baseline_entry *e, const gf_job *j)
{
    const gf_backend_probe *b = j->backend;
    return (!strcmp(e->backend, b->requested) || !strcmp(e->backend, b->name)) && matches(&e->case_re, j->c->id);
}

/* Does the run give the entry's finding: its verdict, and a reason its pattern finds? */
static int entry_found(const gf_baseline_entry *e, const gf_job *j)
{
    return j->verdict == e->verdict && (!e->reason_pat || matches(&e->reason_re, j->reason));
}

static json_t *entry_json(const gf_baseline_entry *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "file", gf_json_text(e->file));
    json_object_set_new(o, "line", json_integer(e->line));
    json_object_set_new(o, "case", gf_json_text(e->case_pat));
    json_object_set_new(o, "backend", gf_json_text(e->backend));
    json_object_set_new(o, "verdict", json_string(gf_verdict_str(e->verdict)));
    json_object_set_new(o, "reason_pattern", e->reason_pat ? gf_json_text(e->reason_pat) : json_null());
    json_object_set_new(o, "see", e->see ? gf_json_text(e->see) : json_null());
    if (e->note)
        json_object_set_new(o, "note", gf_json_text(e->note));
    return o;
}

/* What the entry expects, in words: "fail with a reason matching /RE/". */
static void expected_words(const gf_baseline_entry *e, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s%s", gf_verdict_str(e->verdict), e->reason_pat ? " with a reason matching /" : "",
             e->reason_pat ? e->reason_pat : "", e->reason_pat ? "/" : "");
}

/* One run against the entries: known, fixed, or a different finding (the
 * first entry that meets the run decides; one that the run gives wins). */
static void apply_job(gf_baseline *bl, gf_job *j)
{
    gf_baseline_entry *first = NULL, *found = NULL;
    for (size_t i = 0; i < bl->n && !found; i++) {
        if (!entry_meets(&bl->e[i], j))
            continue;
        bl->e[i].met++;
        if (!first)
            first = &bl->e[i];
        if (entry_found(&bl->e[i], j))
            found = &bl->e[i];
    }
    if (!first || j->verdict == GF_V_SKIP)
        return; /* no entry, or not run here: nothing to say */
    gf_baseline_entry *e = found ? found : first;
    json_t *b = entry_json(e);
    json_object_set_new(b, "was",
                        json_pack("{s:s, s:o}", "verdict", gf_verdict_str(j->verdict), "reason",
                                  gf_json_text(j->reason ? j->reason : "")));
    char want[1200];
    expected_words(e, want, sizeof want);
    char *why = NULL;
    const char *status;
    if (found) {
        status = "known";
        why = gf_str_printf("known finding (%s:%d%s%s): %s: %s", e->file, e->line, e->see ? "; see " : "",
                            e->see ? e->see : "", gf_verdict_str(j->verdict), j->reason ? j->reason : "");
        j->verdict = GF_V_KNOWN;
        bl->known++;
    } else if (gf_verdict_passed(j->verdict)) {
        status = "fixed";
        char see[600] = "";
        if (e->see)
            snprintf(see, sizeof see, ", written up in %s", e->see);
        why = gf_str_printf("fixed: %s:%d expects %s%s, and it passed; remove the entry once the fix is confirmed",
                            e->file, e->line, gf_verdict_str(e->verdict), see);
        j->verdict = GF_V_FIXED;
        bl->fixed++;
    } else {
        status = "differs"; /* a different finding than the known one: still a failure */
        why = gf_str_printf("not the known finding (%s:%d expects %s): %s", e->file, e->line, want,
                            j->reason ? j->reason : "");
        bl->differ++;
    }
    json_object_set_new(b, "status", json_string(status));
    json_decref(j->baseline);
    j->baseline = b;
    if (why) {
        free(j->reason);
        j->reason = why;
    }
}

void gf_baseline_apply(gf_baseline *bl, gf_run_info *r)
{
    if (!bl->n_files)
        return;
    bl->known = bl->fixed = bl->differ = bl->not_checked = 0;
    for (size_t i = 0; i < r->n_jobs; i++) {
        gf_job *j = &r->jobs[i];
        if (j->backend && j->decided && !j->interrupted)
            apply_job(bl, j);
    }
    json_t *unchecked = json_array();
    for (size_t i = 0; i < bl->n; i++)
        if (!bl->e[i].met) {
            json_array_append_new(unchecked, entry_json(&bl->e[i]));
            bl->not_checked++;
        }
    json_t *files = json_array();
    for (size_t i = 0; i < bl->n_files; i++)
        json_array_append_new(files, gf_json_text(bl->files[i]));
    json_decref(bl->summary);
    bl->summary = json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:b, s:o}", "files", files, "entries", (json_int_t)bl->n,
                            "known", (json_int_t)bl->known, "fixed", (json_int_t)bl->fixed, "differ",
                            (json_int_t)bl->differ, "not_checked", (json_int_t)bl->not_checked, "allow_fixed",
                            gf_verdict_exit(GF_V_FIXED, 0) == 0, "not_checked_entries", unchecked);
    r->baseline = bl->summary;
    gf_run_tally(r);

    /* the console: the live lines showed each run's own verdict; these say what the baseline made of them */
    printf("baseline %s%s: %zu entr%s; %zu known, %zu fixed, %zu different finding%s, %zu not checked (case or "
           "backend not in this run)\n",
           bl->files[0], bl->n_files > 1 ? " ..." : "", bl->n, bl->n == 1 ? "y" : "ies", bl->known, bl->fixed,
           bl->differ, bl->differ == 1 ? "" : "s", bl->not_checked);
    for (size_t i = 0; i < r->n_jobs; i++) {
        const gf_job *j = &r->jobs[i];
        if (!j->baseline || (r->quiet && j->verdict == GF_V_KNOWN))
            continue;
        printf("  %-8s %s [%s]: %.200s\n", gf_verdict_label(j->verdict), j->c->id, gf_backend_label(j->backend),
               j->reason ? j->reason : "");
    }
    fflush(stdout);
}

char *gf_baseline_reason_pattern(const char *reason)
{
    size_t n = strlen(reason), cut = n > 400 ? 400 : n;
    char *out = malloc(cut * 2 + 16 * cut + 4), *o = out;
    if (!out)
        return NULL;
    *o++ = '^';
    static const char num[] = "[-+.0-9eE]+";
    for (size_t i = 0; i < cut;) {
        char c = reason[i];
        int alnum_before =
            i > 0 && (reason[i - 1] == '_' || (reason[i - 1] >= '0' && reason[i - 1] <= '9') ||
                      (reason[i - 1] >= 'a' && reason[i - 1] <= 'z') || (reason[i - 1] >= 'A' && reason[i - 1] <= 'Z'));
        if (c >= '0' && c <= '9' && !alnum_before) { /* a number (not part of a name like row0): any number */
            while (i < cut && strchr("+-.0123456789eE", reason[i]))
                i++;
            memcpy(o, num, sizeof num - 1);
            o += sizeof num - 1;
            continue;
        }
        if (strchr(".[]()*+?{}|^$\\", c))
            *o++ = '\\';
        *o++ = c;
        i++;
    }
    if (cut == n)
        *o++ = '$';
    *o = '\0';
    return out;
}
