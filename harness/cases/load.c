/* Case files, part 3: files and directories -> cases (common keys, the
 * kind's keys, duplicate ids), the repository root, backend filters. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case_internal.h"

#ifndef GENFENCE_SOURCE_DIR
#define GENFENCE_SOURCE_DIR "."
#endif

/* ---- the case as JSON (for its hash) ---- */

json_t *gf_ynode_to_json(const gf_ynode *n)
{
    if (!n)
        return NULL;
    if (n->type == GF_YN_MAP) {
        json_t *o = json_object();
        for (size_t i = 0; o && i < n->n; i++) {
            const gf_ynode *k = n->items[2 * i];
            json_t *v = gf_ynode_to_json(n->items[2 * i + 1]);
            if (!v || k->type != GF_YN_SCALAR || json_object_set_new(o, k->value, v)) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    if (n->type == GF_YN_SEQ) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n->n; i++) {
            json_t *v = gf_ynode_to_json(n->items[i]);
            if (!v || json_array_append_new(a, v)) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    gf_yvalue v = gf_yscalar_resolve(n);
    switch (v.type) {
    case GF_YS_NULL: return json_null();
    case GF_YS_BOOL: return json_boolean(v.b);
    case GF_YS_INT: return json_integer((json_int_t)v.i);
    case GF_YS_FLOAT:
        if (isfinite(v.d))
            return json_real(v.d);
        return json_pack("{s:s}", "$float", isnan(v.d) ? "NaN" : v.d > 0 ? "Infinity" : "-Infinity");
    default: return json_stringn(n->value, n->len);
    }
}

/* ---- cases ---- */

static void case_clear(gf_case *c)
{
    if (c->kind && c->kind->free_spec && c->spec)
        c->kind->free_spec(c->spec);
    free(c->id);
    free(c->description);
    gf_y_strings_free(c->tags, c->n_tags);
    gf_y_strings_free(c->backends, c->n_backends);
    free(c->model_arg);
    free(c->model);
    free(c->file);
    json_decref(c->tree);
    memset(c, 0, sizeof *c);
}

void gf_case_set_free(gf_case_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++)
        case_clear(&set->cases[i]);
    free(set->cases);
    gf_y_strings_free(set->errors, set->n_errors);
    gf_y_strings_free(set->files, set->n_files);
    memset(set, 0, sizeof *set);
}

static int valid_id(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-' || *s == '.'))
            return 0;
    return 1;
}

static char *dir_of(const char *file)
{
    char *d = strdup(file);
    if (!d)
        return NULL;
    char *slash = strrchr(d, '/');
    if (!slash) {
        free(d);
        return strdup(".");
    }
    if (slash == d)
        slash[1] = '\0';
    else
        *slash = '\0';
    return d;
}

char *gf_case_root_for(const char *root, const char *file)
{
    if (root)
        return strdup(root);
    char *d = dir_of(file ? file : ".");
    char *r = d ? gf_case_find_root(d) : NULL;
    free(d);
    return r;
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

char *gf_case_find_root(const char *dir)
{
    const char *env = getenv("GENFENCE_ROOT");
    if (env && env[0])
        return strdup(env);
    char buf[PATH_MAX];
    if (dir && realpath(dir, buf)) {
        for (;;) {
            char *cases = gf_path_join(buf, "cases"), *git = gf_path_join(buf, ".git"),
                 *cm = gf_path_join(buf, "CMakeLists.txt");
            int hit = cases && git && cm && is_dir(cases) && (exists(git) || exists(cm));
            free(cases);
            free(git);
            free(cm);
            if (hit)
                return strdup(buf);
            char *slash = strrchr(buf, '/');
            if (!slash || slash == buf)
                break;
            *slash = '\0';
        }
    }
    /* an installed genfence: <prefix>/bin/genfence finds <prefix>/share/genfence */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
    if (slash) {
        snprintf(slash, sizeof exe - (size_t)(slash - exe), "/../share/genfence/cases");
        if (is_dir(exe) && realpath(exe, buf)) {
            buf[strlen(buf) - strlen("/cases")] = '\0';
            return strdup(buf);
        }
    }
    return strdup(GENFENCE_SOURCE_DIR);
}

char *gf_case_default_dir(const char *root)
{
    if (is_dir("cases")) {
        char here[PATH_MAX], r[PATH_MAX];
        if (getcwd(here, sizeof here) && root && realpath(root, r) && !strcmp(here, r))
            return strdup("cases");
    }
    return gf_path_join(root ? root : GENFENCE_SOURCE_DIR, "cases");
}

int gf_case_has_tag(const gf_case *c, const char *tag)
{
    for (size_t i = 0; i < c->n_tags; i++)
        if (!strcmp(c->tags[i], tag))
            return 1;
    return 0;
}

int gf_case_backend_allowed(const gf_case *c, const char *requested, const char *name)
{
    if (c->n_backends == 0)
        return 1;
    int positives = 0, hit = 0;
    for (size_t i = 0; i < c->n_backends; i++) {
        const char *e = c->backends[i];
        int neg = e[0] == '!';
        if (neg)
            e++;
        int match = (requested && !strcmp(e, requested)) || (name && !strcmp(e, name));
        if (neg && match)
            return 0;
        if (!neg) {
            positives++;
            hit |= match;
        }
    }
    return positives == 0 || hit;
}

static int add_case(gf_case_set *set, gf_case *c)
{
    gf_case *grown = realloc(set->cases, (set->n + 1) * sizeof *grown);
    if (!grown)
        return 0;
    set->cases = grown;
    c->index = set->n;
    set->cases[set->n++] = *c;
    return 1;
}

/* Parse one case mapping; 1 added, 0 on errors (recorded). */
static int parse_case(gf_cctx *ctx, const gf_ynode *m, const char *file, const char *root, gf_case_set *set)
{
    if (!gf_y_node_is_map(ctx, m, "a case"))
        return 0;
    size_t errors_before = ctx->n_errors;
    gf_case c = {0};
    c.line = m->line;
    c.col = m->col;
    c.file = strdup(file);
    char *kind = NULL;
    const gf_ynode *idn = gf_y_get(ctx, m, "id", GF_Y_REQUIRED);
    if (idn && gf_y_node_string(ctx, idn, "'id'", &c.id) > 0) {
        if (!valid_id(c.id)) {
            gf_y_error(ctx, idn, "id '%s' may hold only letters, digits, '_', '-' and '.'", c.id);
        } else {
            for (size_t i = 0; i < set->n; i++)
                if (!strcmp(set->cases[i].id, c.id)) {
                    gf_y_error(ctx, idn, "duplicate id '%s' (first at %s:%d:%d)", c.id, set->cases[i].file,
                               set->cases[i].line, set->cases[i].col);
                    break;
                }
        }
    }
    const gf_ynode *kn = gf_y_get(ctx, m, "kind", GF_Y_REQUIRED);
    if (kn && gf_y_node_string(ctx, kn, "'kind'", &kind) > 0) {
        c.kind = gf_kind_lookup(set->kinds, kind);
        if (!c.kind) {
            char list[1024] = "";
            for (const gf_kind_def *const *k = set->kinds; k && *k; k++) {
                strncat(list, k == set->kinds ? "" : ", ", sizeof list - strlen(list) - 1);
                strncat(list, (*k)->name, sizeof list - strlen(list) - 1);
            }
            gf_y_error(ctx, kn, "unknown kind '%s' (known: %s)", kind, list);
        }
    }
    gf_y_string(ctx, m, "description", 0, &c.description);
    gf_y_strings(ctx, m, "tags", 0, &c.tags, &c.n_tags);
    char *expect = NULL;
    if (gf_y_string(ctx, m, "expect_verdict", 0, &expect) > 0) {
        c.has_expect_verdict = gf_verdict_parse(expect, &c.expect_verdict) && !gf_verdict_of_baseline(c.expect_verdict);
        if (!c.has_expect_verdict) { /* known / fixed come from a baseline (--baseline), not a case */
            char known[256] = "";
            for (int v = 0; v < GF_V_COUNT; v++)
                if (!gf_verdict_of_baseline((gf_verdict)v))
                    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", known[0] ? ", " : "",
                             gf_verdict_str((gf_verdict)v));
            gf_y_error(ctx, gf_y_get(ctx, m, "expect_verdict", 0), "'expect_verdict' is '%s'; a verdict is one of %s",
                       expect, known);
        }
    }
    free(expect);
    if (gf_y_strings(ctx, m, "backends", 0, &c.backends, &c.n_backends) > 0 && c.n_backends == 0)
        gf_y_error(ctx, gf_y_get(ctx, m, "backends", 0), "'backends' is empty (omit it to allow every backend)");
    if (c.kind) {
        const gf_ynode *mn = gf_y_get(ctx, m, "model", 0);
        if (c.kind->needs == GF_KIND_NEEDS_NOTHING) {
            if (mn)
                gf_y_error(ctx, mn, "kind '%s' takes no 'model'", c.kind->name);
        } else if (!mn) {
            gf_y_error(ctx, m, "missing required key 'model' (kind '%s')", c.kind->name);
        } else if (gf_y_node_string(ctx, mn, "'model'", &c.model_arg) > 0) {
            if (c.model_arg[0] == '$') { /* cases/model/: a template, instantiated by run --model */
                gf_y_error(ctx, mn,
                           "'model: %s' is a placeholder: this file is a model-suite template; run it with "
                           "`genfence run --model DIR %s` (docs/cases.md \"The model suite\")",
                           c.model_arg, file);
            } else if (c.model_arg[0] == '/') {
                c.model = strdup(c.model_arg);
            } else {
                char *r = gf_case_root_for(root, file);
                c.model = r ? gf_path_join(r, c.model_arg) : NULL;
                free(r);
            }
        }
        if (c.kind->parse(ctx, m, &c) < 0 && ctx->n_errors == errors_before)
            gf_y_error(ctx, m, "invalid case");
        int unknown = 0;
        for (size_t i = 0; m->type == GF_YN_MAP && i < m->n; i++)
            unknown |= !m->used[i];
        if (unknown) { /* the kind's keys (a census of its parse) only for the message */
            char where[3072], keys[1024], more[1024];
            gf_kind_keys(c.kind, GF_KEYS_PLAIN, keys, sizeof keys);
            gf_kind_keys(c.kind, GF_KEYS_CONDITIONAL, more, sizeof more);
            snprintf(where, sizeof where,
                     "for kind '%s' (its keys: id, kind, description, tags, backends, expect_verdict%s%s%s%s%s)",
                     c.kind->name, c.kind->needs != GF_KIND_NEEDS_NOTHING ? ", model" : "", keys[0] ? ", " : "", keys,
                     more[0] ? "; with a sampler-profile key also: " : "", more);
            gf_y_check_unknown(ctx, m, where);
        }
    }
    free(kind);
    if (ctx->n_errors == errors_before && c.id && c.kind) {
        c.tree = gf_ynode_to_json(m);
        if (!c.tree)
            gf_y_error(ctx, m, "cannot represent the case as JSON (out of memory?)");
    }
    if (ctx->n_errors != errors_before || !c.id || !c.kind) {
        case_clear(&c);
        return 0;
    }
    if (!add_case(set, &c)) {
        case_clear(&c);
        return 0;
    }
    return 1;
}

/* The value node of key in map m, or NULL; *at = its pair's index. */
static gf_ynode *map_find(const gf_ynode *m, const char *key, size_t *at)
{
    for (size_t i = 0; m->type == GF_YN_MAP && i < m->n; i++) {
        const gf_ynode *k = m->items[2 * i];
        if (k->type == GF_YN_SCALAR && !strcmp(k->value, key)) {
            if (at)
                *at = i;
            return m->items[2 * i + 1];
        }
    }
    return NULL;
}

/* A case with `models: [DIR, ...]` in place of `model` is that case once per
 * model, its id <id>.<the model folder's name> (docs/cases.md "Common keys"):
 * each copy is read as if it had been written out with `model: DIR`, so its
 * hash, golden path and errors are its own. Any other case: parse_case. */
static void parse_case_models(gf_cctx *ctx, const gf_ynode *m, const char *file, const char *root, gf_case_set *set)
{
    size_t at = 0;
    const gf_ynode *models = m->type == GF_YN_MAP ? map_find(m, "models", &at) : NULL;
    if (!models) {
        parse_case(ctx, m, file, root, set);
        return;
    }
    if (map_find(m, "model", NULL)) {
        gf_y_error(ctx, models, "give 'model' or a 'models' list, not both");
        return;
    }
    if (models->type != GF_YN_SEQ || !models->n) {
        gf_y_error(ctx, models, "'models' must be a non-empty list of model directories");
        return;
    }
    for (size_t i = 0; i < models->n; i++) {
        const gf_ynode *it = models->items[i];
        if (it->type != GF_YN_SCALAR || !it->len) {
            gf_y_error(ctx, it, "a 'models' item must be a model directory, got %s", gf_ynode_type_name(it));
            continue;
        }
        gf_ynode *c = gf_ynode_clone(m);
        gf_ynode *one = gf_ynode_clone(it);
        const gf_ynode *idn = c ? map_find(c, "id", NULL) : NULL;
        char *key = strdup("model");
        if (!c || !one || !key) {
            gf_y_error(ctx, it, "out of memory");
            gf_ynode_free(c);
            gf_ynode_free(one);
            free(key);
            return;
        }
        free(c->items[2 * at]->value);
        c->items[2 * at]->value = key;
        c->items[2 * at]->len = 5;
        gf_ynode_free(c->items[2 * at + 1]);
        c->items[2 * at + 1] = one;
        if (idn && idn->type == GF_YN_SCALAR) { /* <id>.<basename of the model folder> */
            size_t len = it->len;
            while (len > 1 && it->value[len - 1] == '/')
                len--;
            size_t b = len;
            while (b > 0 && it->value[b - 1] != '/')
                b--;
            size_t n = idn->len + 1 + (len - b) + 1;
            char *id = malloc(n);
            if (id) {
                snprintf(id, n, "%s.%.*s", idn->value, (int)(len - b), it->value + b);
                gf_ynode *w = (gf_ynode *)idn;
                free(w->value);
                w->value = id;
                w->len = strlen(id);
            }
        }
        parse_case(ctx, c, file, root, set);
        gf_ynode_free(c);
    }
}

/* The most cases one load may hold: 100000, or $GENFENCE_MAX_CASES. */
static size_t max_cases(void) { return (size_t)gf_env_limit("GENFENCE_MAX_CASES", 100000); }

static void load_tree(gf_cctx *ctx, const gf_ynode *root_node, const char *file, const char *root, gf_case_set *set)
{
    if (!gf_y_node_is_map(ctx, root_node, "a case file's top level"))
        return;
    const gf_ynode *cases = gf_y_get(ctx, root_node, "cases", GF_Y_REQUIRED);
    gf_y_check_unknown(ctx, root_node, "at the top level (known: cases)");
    if (!cases || !gf_y_node_is_seq(ctx, cases, "'cases'"))
        return;
    size_t max = max_cases();
    for (size_t i = 0; i < cases->n; i++) {
        if (set->n >= max) {
            gf_y_error(ctx, cases->items[i], "more than %zu cases (GENFENCE_MAX_CASES)", max);
            return;
        }
        parse_case_models(ctx, cases->items[i], file, root, set);
    }
}

static void take_errors(gf_case_set *set, gf_cctx *ctx)
{
    if (!ctx->n_errors)
        return;
    char **grown = realloc(set->errors, (set->n_errors + ctx->n_errors) * sizeof *grown);
    if (grown) {
        set->errors = grown;
        for (size_t i = 0; i < ctx->n_errors; i++)
            set->errors[set->n_errors++] = ctx->errors[i];
    } else {
        gf_y_strings_free(ctx->errors, ctx->n_errors);
        ctx->errors = NULL;
    }
    free(ctx->errors);
    ctx->errors = NULL;
    ctx->n_errors = ctx->cap = 0;
}

static void add_string(char ***v, size_t *n, const char *s)
{
    char **grown = realloc(*v, (*n + 1) * sizeof *grown);
    if (!grown)
        return;
    *v = grown;
    (*v)[(*n)++] = strdup(s);
}

static void load_one_text(const char *text, size_t len, const char *file, const char *root, gf_case_set *set)
{
    gf_cctx ctx = {.file = file, .root = root};
    add_string(&set->files, &set->n_files, file);
    gf_ynode *tree = gf_yaml_parse(&ctx, text, len);
    if (tree)
        load_tree(&ctx, tree, file, root, set);
    gf_ynode_free(tree);
    take_errors(set, &ctx);
}

/* The largest case file read: 16 MiB, or $GENFENCE_CASE_MAX_BYTES. */
static size_t case_file_max_bytes(void) { return (size_t)gf_env_limit("GENFENCE_CASE_MAX_BYTES", (uint64_t)16 << 20); }

static void file_error(gf_case_set *set, const char *path, const char *fmt, const char *detail)
{
    char msg[1400];
    snprintf(msg, sizeof msg, fmt, path, detail);
    add_string(&set->errors, &set->n_errors, msg);
}

/* Why stat/open failed, in words (a symlink loop is not "no such file"). */
static const char *open_error(int err)
{
    if (err == ELOOP)
        return "too many levels of symbolic links (a symlink loop?)";
    return strerror(err);
}

static const char *file_type_name(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* The bytes of a YAML file (regular files only, at most case_file_max_bytes),
 * NUL-terminated; NULL with "PATH:0:0: why" in err. */
static char *read_yaml_file(const char *path, size_t *len_out, char *err, size_t err_cap)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; only regular
     * files are read (a FIFO or a device could block or never end). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_cap, "cannot read: %s", open_error(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        snprintf(err, err_cap, "cannot read: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, err_cap, "cannot read: %s; a case file must be a regular file", file_type_name(sb.st_mode));
        close(fd);
        return NULL;
    }
    size_t max = case_file_max_bytes();
    if ((unsigned long long)sb.st_size > max) {
        snprintf(err, err_cap, "too large: %lld bytes; case files are limited to %zu (GENFENCE_CASE_MAX_BYTES)",
                 (long long)sb.st_size, max);
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    size_t cap = (size_t)sb.st_size + 1, len = 0;
    char *buf = malloc(cap);
    int rerr = 0;
    while (buf && len < cap) {
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            rerr = errno;
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    if (!buf) {
        snprintf(err, err_cap, "out of memory reading the file");
        return NULL;
    }
    if (rerr || len == cap) { /* a read error, or the file grew while read */
        snprintf(err, err_cap, "cannot read: %s", rerr ? strerror(rerr) : "the file changed while read");
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    *len_out = len;
    return buf;
}

static void load_file(const char *path, const char *root, gf_case_set *set)
{
    char err[1024];
    size_t len = 0;
    char *buf = read_yaml_file(path, &len, err, sizeof err);
    if (!buf) {
        file_error(set, path, "%s:0:0: %s", err);
        return;
    }
    load_one_text(buf, len, path, root, set);
    free(buf);
}

gf_ynode *gf_yaml_read_file(gf_cctx *ctx, const char *path)
{
    char err[1024];
    size_t len = 0;
    ctx->file = path;
    char *buf = read_yaml_file(path, &len, err, sizeof err);
    if (!buf) {
        gf_y_error_at(ctx, 0, 0, "%s", err);
        return NULL;
    }
    gf_ynode *tree = gf_yaml_parse(ctx, buf, len);
    free(buf);
    return tree;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load_dir(const char *dir, const char *root, gf_case_set *set)
{
    DIR *d = opendir(dir);
    if (!d) {
        char msg[1200];
        snprintf(msg, sizeof msg, "%s:0:0: cannot open directory: %s", dir, strerror(errno));
        add_string(&set->errors, &set->n_errors, msg);
        return;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if ((l > 5 && !strcmp(e->d_name + l - 5, ".yaml")) || (l > 4 && !strcmp(e->d_name + l - 4, ".yml"))) {
            char *p = gf_path_join(dir, e->d_name);
            if (p && !is_dir(p))
                add_string(&names, &n, p);
            free(p);
        }
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++)
        load_file(names[i], root, set);
    gf_y_strings_free(names, n);
}

static int finish(gf_case_set *set)
{
    if (set->n_errors) {
        for (size_t i = 0; i < set->n; i++)
            case_clear(&set->cases[i]);
        set->n = 0;
        return GF_E_FORMAT;
    }
    return GF_OK;
}

const gf_kind_def *gf_kind_lookup(const gf_kind_def *const *kinds, const char *name)
{
    for (const gf_kind_def *const *k = kinds; k && *k && name; k++)
        if (!strcmp((*k)->name, name))
            return *k;
    return NULL;
}

int gf_cases_load(const gf_kind_def *const *kinds, const char *const *paths, size_t n_paths, const char *root,
                  gf_case_set *set)
{
    memset(set, 0, sizeof *set);
    set->kinds = kinds;
    if (n_paths == 0) {
        char *r = root ? strdup(root) : gf_case_find_root(".");
        char *dir = gf_case_default_dir(r);
        if (dir)
            load_dir(dir, r, set);
        char *peers = dir ? gf_path_join(dir, "peers") : NULL; /* the peers' own vectors (docs/cases.md) */
        if (peers && is_dir(peers))
            load_dir(peers, r, set);
        free(peers);
        free(dir);
        free(r);
        return finish(set);
    }
    for (size_t i = 0; i < n_paths; i++) {
        const char *p = paths[i];
        struct stat sb;
        if (stat(p, &sb) != 0 && errno == ENOENT)
            file_error(set, p, "%s:0:0: no such file or directory%s", "");
        else if (stat(p, &sb) != 0)
            file_error(set, p, "%s:0:0: cannot read: %s", open_error(errno));
        else if (S_ISDIR(sb.st_mode))
            load_dir(p, root, set);
        else
            load_file(p, root, set);
    }
    return finish(set);
}

int gf_cases_load_text(const gf_kind_def *const *kinds, const char *text, size_t len, const char *file,
                       const char *root, gf_case_set *set)
{
    memset(set, 0, sizeof *set);
    set->kinds = kinds;
    load_one_text(text, len, file, root, set);
    return finish(set);
}
