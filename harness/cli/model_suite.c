/* The model suite: the templates of cases/model/ instantiated for one
 * checkpoint, its goldens content-addressed in the user's cache folder
 * (model_suite.h; docs/cases.md "The model suite", docs/goldens.md "Goldens
 * on demand"). The templates' placeholders are filled by text before the case
 * loader reads the result, so the instantiated file is an ordinary case file
 * (written to the cache: golden.py, reproduce lines and --rerun-failed read it).
 * The makers of its goldens and calibration are model_suite_make.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "commands.h"
#include "golden.h"
#include "golden_case.h"
#include "genfence/model.h"
#include "genfence/tokenizer.h"
#include "genfence/version.h"
#include "hash.h"
#include "model_suite.h"
#include "buf.h"
#include "sys.h"

/* Steps per case: STEPS_SMALL under GF_SUITE_SMALL_PARAMS parameters, else STEPS_LARGE. */
#define GF_SUITE_SMALL_PARAMS 20000000.0
#define GF_SUITE_STEPS_SMALL  32
#define GF_SUITE_STEPS_LARGE  8
/* The statistical case's own steps above GF_SUITE_SMALL_PARAMS: its
 * positions are the three goldens' (36 there) plus these, and the top-1
 * test at alpha 0.005, beta 0.2, theta 0.02 needs 80 (stat_hypothesis.c):
 * with 8 steps a calibrated case is refused for want of power. */
#define GF_SUITE_STAT_STEPS_LARGE 48

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int gf_ms_is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static char *read_text(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) {
            char *g = realloc(b, cap *= 2);
            if (!g) {
                free(b);
                b = NULL;
            } else
                b = g;
        }
    }
    fclose(f);
    if (b) {
        b[n] = '\0';
        if (len_out)
            *len_out = n;
    }
    return b;
}

static void push(char ***v, size_t *n, char *s)
{
    char **g = s ? realloc(*v, (*n + 1) * sizeof *g) : NULL;
    if (!g) {
        free(s);
        return;
    }
    *v = g;
    g[(*n)++] = s;
}

/* ---- the model folder ---- */

/* DIR itself when it holds config.json; a hub cache folder
 * (models--ORG--NAME: snapshots/REV, refs/main) resolved to the snapshot
 * refs/main names, or its only snapshot. */
static int resolve_dir(gf_model_suite *ms, const char *cmd, const char *arg)
{
    char buf[PATH_MAX];
    char *cfg = gf_path_join(arg, "config.json");
    int plain = cfg && gf_ms_is_file(cfg);
    free(cfg);
    if (plain) {
        if (!realpath(arg, buf)) {
            gf_cli_error("%s: --model %s: %s", cmd, arg, strerror(errno));
            return -1;
        }
        ms->dir = strdup(buf);
        ms->layout = strdup(strstr(buf, "/snapshots/") ? "a snapshot of a Hugging Face cache folder"
                                                       : "a plain Hugging Face model directory");
        return 0;
    }
    char *snaps = gf_path_join(arg, "snapshots");
    if (!snaps || !is_dir(snaps)) {
        gf_cli_error("%s: --model %s: no config.json there, and it is not a Hugging Face cache folder "
                     "(models--ORG--NAME with snapshots/REV and refs/main)",
                     cmd, arg);
        free(snaps);
        return -1;
    }
    char *ref = gf_path_join(arg, "refs/main");
    char *rev = ref ? read_text(ref, NULL) : NULL;
    char *how = NULL;
    if (rev) {
        rev[strcspn(rev, " \t\r\n")] = '\0';
        how = gf_str_printf("snapshot %s, named by refs/main", rev);
    } else { /* no refs/main: its only snapshot */
        DIR *d = opendir(snaps);
        struct dirent *e;
        int n = 0;
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.') {
                n++;
                free(rev);
                rev = strdup(e->d_name);
            }
        if (d)
            closedir(d);
        if (n != 1) {
            gf_cli_error("%s: --model %s: no refs/main, and %d snapshots under snapshots/ (want refs/main or one "
                         "snapshot); name the snapshot folder itself",
                         cmd, arg, n);
            free(rev);
            free(ref);
            free(snaps);
            return -1;
        }
        how = gf_str_printf("snapshot %s, the only one (no refs/main)", rev);
    }
    char *snap = rev ? gf_path_join(snaps, rev) : NULL;
    char *scfg = snap ? gf_path_join(snap, "config.json") : NULL;
    int ok = scfg && gf_ms_is_file(scfg) && realpath(snap, buf);
    if (!ok)
        gf_cli_error("%s: --model %s: the snapshot %s has no config.json", cmd, arg, snap ? snap : "?");
    else {
        ms->dir = strdup(buf);
        ms->layout = gf_str_printf("a Hugging Face cache folder (%s)", how ? how : "?");
    }
    free(how);
    free(scfg);
    free(snap);
    free(rev);
    free(ref);
    free(snaps);
    return ok ? 0 : -1;
}

/* The end ids: generation_config.json's eos_token_id (an int or a list),
 * else config.json's; n 0 when neither names one. */
static size_t eos_ids_of(const char *dir, long long *ids, size_t cap, const char **from)
{
    static const char *const files[] = {"generation_config.json", "config.json"};
    for (int f = 0; f < 2; f++) {
        char *p = gf_path_join(dir, files[f]);
        json_t *j = p ? json_load_file(p, 0, NULL) : NULL;
        free(p);
        json_t *v = json_object_get(j, "eos_token_id");
        size_t n = 0;
        if (json_is_integer(v))
            ids[n++] = json_integer_value(v);
        else if (json_is_array(v))
            for (size_t i = 0; i < json_array_size(v) && n < cap; i++)
                if (json_is_integer(json_array_get(v, i)))
                    ids[n++] = json_integer_value(json_array_get(v, i));
        json_decref(j);
        if (n) {
            *from = files[f];
            return n;
        }
    }
    return 0;
}

/* ---- the generator ---- */

char *gf_ms_root_path(const char *rel)
{
    char *root = gf_case_find_root(".");
    char *p = root ? gf_path_join(root, rel) : NULL;
    free(root);
    return p;
}

/* The interpreter for golden.py: $GENFENCE_PYTHON, else the repository's
 * .venv, else python3; its versions line from `golden.py --versions`
 * (importlib.metadata: no torch import), or why it cannot make goldens. */
static void find_generator(gf_model_suite *ms)
{
    if (ms->source == GF_GOLDENS_REF) {
        ms->generator = gf_str_printf("genfence-bless ref genfence %s", GENFENCE_VERSION);
        return;
    }
    const char *env = getenv("GENFENCE_PYTHON");
    char *venv = gf_ms_root_path(".venv/bin/python");
    char *py = env && *env ? strdup(env) : venv && access(venv, X_OK) == 0 ? strdup(venv) : strdup("python3");
    free(venv);
    char *tool = gf_ms_root_path("tools/reference/golden.py");
    char qp[PATH_MAX + 8], qt[PATH_MAX + 8], cmd[2 * PATH_MAX + 64], line[2048] = "";
    gf_shell_quote(qp, sizeof qp, py);
    gf_shell_quote(qt, sizeof qt, tool ? tool : "golden.py");
    snprintf(cmd, sizeof cmd, "%s %s --versions 2>&1", qp, qt);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(line, 1, sizeof line - 1, p) : 0;
    line[n] = '\0';
    int st = p ? pclose(p) : -1;
    char *found = strstr(line, "transformers "); /* the versions line, after any warning the interpreter printed */
    while (found && found != line && found[-1] != '\n')
        found = strstr(found + 1, "transformers ");
    if (st == 0 && found) {
        found[strcspn(found, "\n")] = '\0';
        ms->python = py;
        ms->generator = strdup(found);
    } else {
        line[strcspn(line, "\n")] = '\0';
        ms->python_why =
            gf_str_printf("%s cannot make transformers goldens (%s): install them with tools/setup/setup.sh (the "
                          "pinned .venv: transformers 4.47, torch), or `pip install torch transformers "
                          "safetensors tokenizers numpy` and point GENFENCE_PYTHON at that python; or use ref "
                          "as the reference: --reference ref (marked genfence-bless ref in every golden)",
                          py,
                          WIFEXITED(st) && WEXITSTATUS(st) == 127 ? "not found"
                          : line[0]                               ? line
                                                                  : "failed");
        ms->generator = strdup("transformers (unavailable here)");
        free(py);
    }
    free(tool);
}

/* ---- the templates ---- */

typedef struct vars {
    const gf_model_suite *ms;
    gf_model_config cfg;
    long long eos[16];
    size_t n_eos;
    const char *eos_from; /* the file the end ids came from */
    long long steps;
    long long window; /* every layer's sliding window (gf_config_sliding_window), 0 = none */
    gf_tokenizer *tok;
    json_t *golden_paths;    /* id -> path (pass 2), NULL in pass 1 */
    const char *calibration; /* the suite's calibration table when it exists (pass 2), else NULL */
    const char *file;
    int line;
} vars;

static long long var_int(const vars *v, const char *name, int *ok)
{
    *ok = 1;
    const gf_model_config *c = &v->cfg;
    if (!strcmp(name, "N_POSITIONS"))
        return c->n_positions;
    if (!strcmp(name, "CTX_PROMPT"))
        return (long long)c->n_positions - 8;
    if (!strcmp(name, "CTX_TOTAL"))
        return (long long)c->n_positions + 1;
    if (!strcmp(name, "CTX_UNCACHED"))
        return (long long)c->n_positions - 8 + 20;
    if (!strcmp(name, "EOS_ID"))
        return v->n_eos ? v->eos[0] : -1;
    if (!strcmp(name, "N_EOS"))
        return (long long)v->n_eos;
    if (!strcmp(name, "STEPS"))
        return v->steps;
    if (!strcmp(name, "STAT_STEPS"))
        return v->steps == GF_SUITE_STEPS_SMALL ? GF_SUITE_STEPS_SMALL : GF_SUITE_STAT_STEPS_LARGE;
    if (!strcmp(name, "VOCAB"))
        return c->vocab_size;
    if (!strcmp(name, "LAYERS"))
        return c->n_layer;
    if (!strcmp(name, "WINDOW"))
        return v->window;
    if (!strcmp(name, "CALIBRATED"))
        return v->calibration != NULL;
    *ok = 0;
    return 0;
}

/* A YAML double-quoted scalar of s. */
static void put_quoted(gf_buf *b, const char *s)
{
    gf_buf_puts(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            gf_buf_printf(b, "\\%c", *s);
        else
            gf_buf_printf(b, "%c", *s);
    }
    gf_buf_puts(b, "\"");
}

/* One placeholder (name: what is between ${ and }, or after a bare $) into
 * b; 0 ok, -1 after the error. */
static int put_var(gf_buf *b, vars *v, const char *cmd, const char *name)
{
    int ok;
    long long x = var_int(v, name, &ok);
    if (ok) {
        gf_buf_printf(b, "%lld", x);
        return 0;
    }
    if (!strcmp(name, "MODEL")) {
        put_quoted(b, v->ms->dir);
        return 0;
    }
    if (!strcmp(name, "EOS_IDS")) {
        gf_buf_puts(b, "[");
        for (size_t i = 0; i < v->n_eos; i++)
            gf_buf_printf(b, "%s%lld", i ? ", " : "", v->eos[i]);
        gf_buf_puts(b, "]");
        return 0;
    }
    if (!strncmp(name, "TOKEN:", 6)) {
        int32_t *ids = NULL;
        size_t n = 0;
        const char *text = name + 6;
        if (!v->tok || gf_tokenizer_encode(v->tok, text, strlen(text), &ids, &n) != GF_OK || n != 1) {
            gf_cli_error("%s: %s:%d: ${%s}: '%s' is %zu tokens in %s/tokenizer.json, not one", cmd, v->file, v->line,
                         name, text, n, v->ms->dir);
            free(ids);
            return -1;
        }
        gf_buf_printf(b, "%d", ids[0]);
        free(ids);
        return 0;
    }
    if (!strncmp(name, "WINDOW_PROMPT:", 14)) { /* WINDOW + K token ids, K a signed integer */
        char *end;
        long long k = strtoll(name + 14, &end, 10), n = v->window + k;
        if (end == name + 14 || *end || n < 1 || n > v->cfg.n_positions - 1) {
            gf_cli_error("%s: %s:%d: ${%s}: want WINDOW_PROMPT:K with 1 <= WINDOW + K < %d (WINDOW %lld)", cmd, v->file,
                         v->line, name, v->cfg.n_positions, v->window);
            return -1;
        }
        /* a prompts list of one prompt: ids spread over the vocabulary, none
         * an end id (a prompt, not a stop) */
        gf_buf_puts(b, "[[");
        for (long long i = 0, id = 11; i < n; i++) {
            int is_eos;
            do {
                id = (id + 7919) % v->cfg.vocab_size;
                is_eos = 0;
                for (size_t e = 0; e < v->n_eos; e++)
                    is_eos |= v->eos[e] == id;
            } while (is_eos);
            gf_buf_printf(b, "%s%lld", i ? ", " : "", id);
        }
        gf_buf_puts(b, "]]");
        return 0;
    }
    if (!strcmp(name, "CALIBRATION")) { /* only under #@if CALIBRATED > 0 */
        if (!v->calibration) {
            gf_cli_error("%s: %s:%d: ${CALIBRATION} outside '#@if CALIBRATED > 0': the suite is not calibrated", cmd,
                         v->file, v->line);
            return -1;
        }
        put_quoted(b, v->calibration);
        return 0;
    }
    if (!strncmp(name, "GOLDEN:", 7)) {
        const char *p = v->golden_paths ? json_string_value(json_object_get(v->golden_paths, name + 7)) : NULL;
        if (v->golden_paths && !p) {
            gf_cli_error("%s: %s:%d: ${%s}: no golden_generation case %s in the suite", cmd, v->file, v->line, name,
                         name + 7);
            return -1;
        }
        put_quoted(b, p ? p : "pending.safetensors");
        return 0;
    }
    gf_cli_error("%s: %s:%d: unknown placeholder ${%s} (docs/cases.md \"The model suite\")", cmd, v->file, v->line,
                 name);
    return -1;
}

/* "#@if NAME OP INT [-- why]": 1 true, 0 false, -1 malformed. */
static int eval_if(vars *v, const char *s, const char **why)
{
    char name[64], op[3];
    long long rhs;
    int used = 0;
    if (sscanf(s, " %63[A-Z_] %2[<>=!] %lld%n", name, op, &rhs, &used) != 3)
        return -1;
    int ok;
    long long lhs = var_int(v, name, &ok);
    if (!ok)
        return -1;
    const char *w = strstr(s + used, "--");
    *why = w ? w + 2 : "";
    while (**why == ' ')
        (*why)++;
    if (!strcmp(op, "<="))
        return lhs <= rhs;
    if (!strcmp(op, "<"))
        return lhs < rhs;
    if (!strcmp(op, ">="))
        return lhs >= rhs;
    if (!strcmp(op, ">"))
        return lhs > rhs;
    if (!strcmp(op, "=="))
        return lhs == rhs;
    if (!strcmp(op, "!="))
        return lhs != rhs;
    return -1;
}

/* The template text with its placeholders filled and its #@if blocks
 * decided, appended to out; the cases left out pushed to ms (pass 2 only). */
static int instantiate(gf_model_suite *ms, vars *v, const char *cmd, const char *text, gf_buf *out, int record)
{
    int skipping = 0, in_if = 0;
    const char *why = "";
    char *why_copy = NULL, cond[256] = "";
    v->line = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = strndup(p, len);
        p += len + (nl ? 1 : 0);
        v->line++;
        if (!line)
            return -1;
        const char *t = line + strspn(line, " ");
        if (!strncmp(t, "#@if", 4)) {
            int r = in_if ? -1 : eval_if(v, t + 4, &why);
            if (r < 0) {
                gf_cli_error("%s: %s:%d: bad or nested '#@if' (want '#@if NAME OP INT -- why')", cmd, v->file, v->line);
                free(line);
                free(why_copy);
                return -1;
            }
            in_if = 1;
            skipping = !r;
            free(why_copy);
            why_copy = strdup(why);
            snprintf(cond, sizeof cond, "%.*s", (int)(strcspn(t + 4, "-")), t + 4);
        } else if (!strncmp(t, "#@endif", 7)) {
            in_if = skipping = 0;
        } else if (*t == '#') { /* a comment: kept as written */
            gf_buf_puts(out, line);
        } else if (skipping) {
            const char *id = strstr(t, "- id:");
            if (record && id == t) {
                int ok;
                char name[64] = "";
                sscanf(cond, " %63[A-Z_]", name);
                long long val = var_int(v, name, &ok);
                push(&ms->left_out, &ms->n_left_out,
                     gf_str_printf("%s: left out (%s=%lld, the case wants%s: %s)", id + 5 + strspn(id + 5, " "), name,
                                   val, cond + strlen(name) + 1, why_copy ? why_copy : ""));
            }
        } else {
            for (const char *c = line; *c;) {
                if (*c != '$') {
                    size_t k = strcspn(c, "$");
                    gf_buf_put(out, c, k);
                    c += k;
                    continue;
                }
                char name[512];
                if (c[1] == '{') {
                    const char *end = strchr(c + 2, '}');
                    if (!end || (size_t)(end - c - 2) >= sizeof name) {
                        gf_cli_error("%s: %s:%d: an unclosed ${", cmd, v->file, v->line);
                        free(line);
                        free(why_copy);
                        return -1;
                    }
                    snprintf(name, sizeof name, "%.*s", (int)(end - c - 2), c + 2);
                    c = end + 1;
                } else {
                    size_t k = 1;
                    while ((c[k] >= 'A' && c[k] <= 'Z') || c[k] == '_')
                        k++;
                    if (k == 1) { /* a lone $ stays */
                        gf_buf_put(out, c, 1);
                        c++;
                        continue;
                    }
                    snprintf(name, sizeof name, "%.*s", (int)(k - 1), c + 1);
                    c += k;
                }
                if (put_var(out, v, cmd, name) < 0) {
                    free(line);
                    free(why_copy);
                    return -1;
                }
            }
        }
        gf_buf_puts(out, "\n");
        free(line);
    }
    free(why_copy);
    if (in_if) {
        gf_cli_error("%s: %s: an '#@if' without its '#@endif'", cmd, v->file);
        return -1;
    }
    return out->oom ? -1 : 0;
}

static int by_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The bundled templates: the .yaml files of cases/model/, sorted. */
static size_t bundled_templates(char ***out)
{
    char *dir = gf_ms_root_path("cases/model");
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    size_t n = 0;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] != '.' && l > 5 && !strcmp(e->d_name + l - 5, ".yaml"))
            push(out, &n, gf_path_join(dir, e->d_name));
    }
    if (d)
        closedir(d);
    free(dir);
    if (n)
        qsort(*out, n, sizeof **out, by_str);
    return n;
}

/* Both passes over every template into out. */
static int fill_all(gf_model_suite *ms, vars *v, const char *cmd, char **files, size_t n_files, gf_buf *out, int record)
{
    out->n = 0;
    gf_buf_printf(out,
                  "# genfence's model suite for %s (%s; model hash %s),\n"
                  "# instantiated from %zu template(s) by genfence (docs/cases.md \"The model suite\");\n"
                  "# goldens from %s.\n",
                  ms->dir, ms->layout, ms->model_hash, n_files, ms->generator);
    gf_buf_printf(out, "# positions %d; end ids [", v->cfg.n_positions);
    for (size_t i = 0; i < v->n_eos; i++)
        gf_buf_printf(out, "%s%lld", i ? ", " : "", v->eos[i]);
    gf_buf_printf(out, "] from %s; steps per case %lld\n", v->n_eos ? v->eos_from : "no file", v->steps);
    int wrote_cases = 0;
    for (size_t i = 0; i < n_files; i++) {
        size_t len;
        char *text = read_text(files[i], &len);
        if (!text) {
            gf_cli_error("%s: cannot read the template %s: %s", cmd, files[i], strerror(errno));
            return -1;
        }
        v->file = files[i];
        gf_buf body = {0};
        int rc = instantiate(ms, v, cmd, text, &body, record);
        free(text);
        if (rc < 0) {
            gf_buf_free(&body);
            return -1;
        }
        /* the files' case lists, one after another under one `cases:` */
        const char *s = body.p ? body.p : "";
        const char *c = strstr(s, "\ncases:");
        if (c || !strncmp(s, "cases:", 6)) {
            const char *after = c ? c + 7 : s + 6;
            if (!wrote_cases)
                gf_buf_puts(out, "cases:");
            wrote_cases = 1;
            gf_buf_puts(out, after);
        }
        gf_buf_free(&body);
    }
    if (!wrote_cases)
        gf_buf_puts(out, "cases: []\n");
    return out->oom ? -1 : 0;
}

char *gf_model_cache_dir(void);
char *gf_model_cache_dir(void)
{
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && *x)
        return gf_path_join(x, "genfence");
    const char *h = getenv("HOME");
    char *c = gf_path_join(h && *h ? h : ".", ".cache");
    char *g = c ? gf_path_join(c, "genfence") : NULL;
    free(c);
    return g;
}

int gf_ms_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *s = '/';
        }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* The folder of one case's goldens for the model at this location:
 * goldens/<sha256(model folder)[:16]>/<case id>; what else lies there was made
 * for another content of the model, another case or another generator. */
static char *golden_folder(const gf_model_suite *ms, const char *id)
{
    char where[65];
    gf_sha256_of(ms->dir, strlen(ms->dir), where);
    return gf_str_printf("%s/goldens/%.16s/%s", ms->cache, where, id);
}

/* The golden's address: sha256 of the model hash, the case hash and the
 * generator versions, in its case's folder. */
static char *golden_address(const gf_model_suite *ms, const char *id, const char *case_hash)
{
    char *key = gf_str_printf("genfence-golden-address-1\nmodel %s\ncase %s\ngenerator %s\n", ms->model_hash, case_hash,
                              ms->generator);
    char *dir = golden_folder(ms, id);
    char hex[65];
    char *p = NULL;
    if (key && dir) {
        gf_sha256_of(key, strlen(key), hex);
        p = gf_str_printf("%s/%s.safetensors", dir, hex);
    }
    free(key);
    free(dir);
    return p;
}

/* The address of the calibration table of the suite's statistical cases:
 * sha256 of the model hash, the generator versions and every
 * distribution_match case's hash (pass 1's, without the table), in the
 * model's folder under calibration/; what else lies there was made for
 * another content of the model, other cases or another generator, and is
 * never read. */
static char *calibration_address(const gf_model_suite *ms, const char *case_hashes)
{
    char *key = gf_str_printf("genfence-calibration-address-1\nmodel %s\ncases %s\ngenerator %s\n", ms->model_hash,
                              case_hashes, ms->generator);
    char where[65], hex[65];
    gf_sha256_of(ms->dir, strlen(ms->dir), where);
    char *p = NULL;
    if (key) {
        gf_sha256_of(key, strlen(key), hex);
        p = gf_str_printf("%s/calibration/%.16s/%s.yaml", ms->cache, where, hex);
    }
    free(key);
    return p;
}

/* Where the address holds nothing: the newest other golden of the case's
 * folder when it was made for another model content or another case, so that
 * the run says `stale` with both hashes (never compares it); NULL when there
 * is none, or it differs only by its generator (then it is not used: the
 * header counts it). */
static char *stale_golden(const gf_model_suite *ms, const char *id, const char *case_hash, int *other_generator)
{
    char *dir = golden_folder(ms, id);
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    char *best = NULL;
    time_t best_t = 0;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || l < 12 || strcmp(e->d_name + l - 12, ".safetensors"))
            continue;
        char *p = gf_path_join(dir, e->d_name);
        struct stat sb;
        if (p && stat(p, &sb) == 0 && (!best || sb.st_mtime > best_t)) {
            free(best);
            best = p;
            best_t = sb.st_mtime;
        } else
            free(p);
    }
    if (d)
        closedir(d);
    free(dir);
    gf_golden *g = NULL;
    if (best && gf_golden_read(best, &g) == GF_OK) {
        const char *mh = gf_golden_meta(g, "model_hash"), *ch = gf_golden_meta(g, "case_hash");
        if (mh && ch && !strcmp(mh, ms->model_hash) && !strcmp(ch, case_hash)) {
            *other_generator = 1;
            free(best);
            best = NULL;
        }
    }
    gf_golden_free(g);
    return best;
}

int gf_model_suite_open(gf_model_suite *ms, const char *cmd, const char *arg, gf_golden_source source,
                        const char *const *templates, size_t n_templates)
{
    memset(ms, 0, sizeof *ms);
    ms->given = strdup(arg);
    ms->source = source;
    vars v = {.ms = ms};
    char **files = NULL;
    size_t n_files = 0;
    gf_buf text = {0};
    gf_case_set set;
    memset(&set, 0, sizeof set);
    int rc = -1;
    if (resolve_dir(ms, cmd, arg) < 0)
        goto done;
    char *cfg = gf_path_join(ms->dir, "config.json");
    gf_status st = gf_config_load(cfg, &v.cfg);
    int32_t window = 0;
    if (st == GF_OK)
        st = gf_config_sliding_window(cfg, &window);
    v.window = window;
    free(cfg);
    if (st != GF_OK) {
        gf_cli_error("%s: --model %s: %s", cmd, arg, gf_error_msg());
        goto done;
    }
    if (gf_model_hash(ms->dir, ms->model_hash) != GF_OK) {
        gf_cli_error("%s: --model %s: cannot hash the model (config.json, the weights, tokenizer.json): %s", cmd, arg,
                     gf_error_msg());
        goto done;
    }
    if (gf_tokenizer_load(ms->dir, &v.tok) != GF_OK) {
        gf_cli_error("%s: --model %s: %s", cmd, arg, gf_error_msg());
        goto done;
    }
    v.n_eos = eos_ids_of(ms->dir, v.eos, 16, &v.eos_from);
    double D = v.cfg.n_embd,
           params = (double)v.cfg.vocab_size * D + (double)v.cfg.n_layer * (4 * D * D + 3 * D * v.cfg.d_ff);
    v.steps = params < GF_SUITE_SMALL_PARAMS ? GF_SUITE_STEPS_SMALL : GF_SUITE_STEPS_LARGE;
    ms->cache = gf_model_cache_dir();
    find_generator(ms);
    if (n_templates)
        for (size_t i = 0; i < n_templates; i++)
            push(&files, &n_files, strdup(templates[i]));
    else if (!(n_files = bundled_templates(&files))) {
        gf_cli_error("%s: no template under cases/model/ (the repository or share/genfence)", cmd);
        goto done;
    }
    /* pass 1: the cases, to hash the golden ones; pass 2: their golden paths */
    if (fill_all(ms, &v, cmd, files, n_files, &text, 0) < 0)
        goto done;
    char hex[65];
    gf_sha256_of(text.p, text.n, hex);
    char *tmpname = gf_str_printf("%s/suites/%.16s.yaml", ms->cache ? ms->cache : ".", hex);
    int ls = gf_cases_load_text(gf_kinds(), text.p, text.n, tmpname, NULL, &set);
    free(tmpname);
    if (ls != GF_OK || set.n_errors) {
        for (size_t i = 0; i < set.n_errors; i++)
            fprintf(stderr, "%s\n", set.errors[i]);
        gf_cli_error("%s: the model suite for %s does not load (%zu error%s above)", cmd, ms->dir, set.n_errors,
                     set.n_errors == 1 ? "" : "s");
        goto done;
    }
    v.golden_paths = json_object();
    json_t *addresses = json_object(); /* id -> its address: the suite the maker writes into */
    gf_buf stat_hashes = {0};          /* "id hash\n" of each distribution_match case */
    for (size_t i = 0; i < set.n; i++) {
        const gf_case *c = &set.cases[i];
        char ch[65];
        if (!strcmp(c->kind->name, "distribution_match")) {
            if (gf_case_hash_of(c, ch) != GF_OK)
                goto done_addr;
            gf_buf_printf(&stat_hashes, "%s %s\n", c->id, ch);
            char *ids = gf_str_printf("%s%s%s", ms->stat_ids ? ms->stat_ids : "", ms->stat_ids ? "," : "", c->id);
            free(ms->stat_ids);
            ms->stat_ids = ids;
            continue;
        }
        if (strcmp(c->kind->name, "golden_generation"))
            continue;
        if (gf_case_hash_of(c, ch) != GF_OK)
            goto done_addr;
        char *path = golden_address(ms, c->id, ch);
        int other_gen = 0;
        char *stale = path && !gf_ms_is_file(path) ? stale_golden(ms, c->id, ch, &other_gen) : NULL;
        if (stale)
            push(&ms->stale, &ms->n_stale,
                 gf_str_printf("%s: the cached golden %s was made for another model content or case: "
                               "the run says stale; --make-goldens makes its new one",
                               c->id, stale));
        else if (other_gen)
            push(&ms->stale, &ms->n_stale,
                 gf_str_printf("%s: a cached golden made by another generator is not used (%s)", c->id, ms->generator));
        json_object_set_new(v.golden_paths, c->id, json_string(stale ? stale : path ? path : ""));
        json_object_set_new(addresses, c->id, json_string(path ? path : ""));
        free(stale);
        push(&ms->golden_ids, &ms->n_goldens, strdup(c->id));
        ms->n_goldens--;
        push(&ms->golden_paths, &ms->n_goldens, path);
    }
    if (ms->stat_ids) {
        ms->calibration_path = calibration_address(ms, stat_hashes.p ? stat_hashes.p : "");
        if (!ms->calibration_path || stat_hashes.oom)
            goto done_addr;
        if (gf_ms_is_file(ms->calibration_path))
            v.calibration = ms->calibration_path;
    }
    /* the suite a run reads (a stale golden where its address holds none), and the one the maker
     * writes into (every golden at its address); the same file when nothing is stale */
    for (int pass = 0; pass < 2; pass++) {
        json_t *paths = v.golden_paths;
        if (pass == 1)
            v.golden_paths = addresses;
        int bad = fill_all(ms, &v, cmd, files, n_files, &text, pass == 0) < 0;
        v.golden_paths = paths;
        if (bad)
            goto done_addr;
        gf_sha256_of(text.p, text.n, hex);
        char *sdir = gf_str_printf("%s/suites", ms->cache);
        char *file = gf_str_printf("%s/%.16s.yaml", sdir, hex);
        if (!sdir || !file || gf_ms_mkdirs(sdir) != 0 || gf_write_atomic(file, text.p, text.n) != 0) {
            gf_cli_error("%s: cannot write the model suite %s: %s", cmd, file ? file : "?", strerror(errno));
            free(sdir);
            free(file);
            goto done_addr;
        }
        free(sdir);
        *(pass == 0 ? &ms->suite_file : &ms->make_file) = file;
    }
    rc = 0;
done_addr:
    json_decref(addresses);
    gf_buf_free(&stat_hashes);
done:
    for (size_t i = 0; i < n_files; i++)
        free(files[i]);
    free(files);
    gf_buf_free(&text);
    json_decref(v.golden_paths);
    gf_tokenizer_free(v.tok);
    gf_case_set_free(&set);
    return rc;
}

void gf_model_suite_free(gf_model_suite *ms)
{
    if (!ms)
        return;
    free(ms->given);
    free(ms->dir);
    free(ms->layout);
    free(ms->python);
    free(ms->python_why);
    free(ms->generator);
    free(ms->cache);
    free(ms->suite_file);
    free(ms->make_file);
    free(ms->stat_ids);
    free(ms->calibration_path);
    for (size_t i = 0; i < ms->n_goldens; i++) {
        free(ms->golden_ids[i]);
        free(ms->golden_paths[i]);
    }
    free(ms->golden_ids);
    free(ms->golden_paths);
    for (size_t i = 0; i < ms->n_left_out; i++)
        free(ms->left_out[i]);
    free(ms->left_out);
    for (size_t i = 0; i < ms->n_stale; i++)
        free(ms->stale[i]);
    free(ms->stale);
    memset(ms, 0, sizeof *ms);
}

size_t gf_model_suite_goldens_cached(const gf_model_suite *ms)
{
    size_t n = 0;
    for (size_t i = 0; i < ms->n_goldens; i++)
        n += gf_ms_is_file(ms->golden_paths[i]);
    return n;
}

void gf_model_suite_print(const gf_model_suite *ms, const char *cmd, FILE *f)
{
    fprintf(f, "%s: model %s: %s; model hash %.16s\n", cmd, ms->dir, ms->layout, ms->model_hash);
    fprintf(f, "%s: suite %s\n", cmd, ms->suite_file);
    size_t have = gf_model_suite_goldens_cached(ms);
    fprintf(f, "%s: goldens: %zu of %zu in %s/goldens (from %s)", cmd, have, ms->n_goldens, ms->cache, ms->generator);
    fprintf(f, "\n");
    for (size_t i = 0; i < ms->n_stale; i++)
        fprintf(f, "%s: %s\n", cmd, ms->stale[i]);
    if (have < ms->n_goldens)
        fprintf(f,
                "%s: %zu golden%s missing: make %s with `genfence goldens --model %s%s` or `run --model ... "
                "--make-goldens`%s%s\n",
                cmd, ms->n_goldens - have, ms->n_goldens - have == 1 ? "" : "s",
                ms->n_goldens - have == 1 ? "it" : "them", ms->given,
                ms->source == GF_GOLDENS_REF ? " --reference ref" : "", ms->python_why ? "; " : "",
                ms->python_why ? ms->python_why : "");
    if (ms->source == GF_GOLDENS_REF)
        fprintf(f,
                "%s: the reference is genfence's own ref backend (--reference ref), not transformers: a "
                "golden so made checks a backend against ref, and is marked genfence-bless in its provenance\n",
                cmd);
    if (ms->stat_ids && gf_model_suite_calibrated(ms))
        fprintf(f, "%s: calibration: %s judged by the hypothesis tests of the null in %s\n", cmd, ms->stat_ids,
                ms->calibration_path);
    else if (ms->stat_ids)
        fprintf(f,
                "%s: calibration: none for %s, judged by the fixed bounds of its types (labelled so in the "
                "record): `genfence goldens --model %s --calibrate` measures its null\n",
                cmd, ms->stat_ids, ms->given);
    for (size_t i = 0; i < ms->n_left_out; i++)
        fprintf(f, "%s: %s\n", cmd, ms->left_out[i]);
}

int gf_model_suite_calibrated(const gf_model_suite *ms)
{
    return ms->calibration_path && gf_ms_is_file(ms->calibration_path);
}
