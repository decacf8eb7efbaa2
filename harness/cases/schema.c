/* Case files, part 2: reading the node tree against a schema (typed
 * getters, unknown-key checks), each error with FILE:LINE:COLUMN. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_internal.h"

/* ---- the key census (gf_kind_keys) ---- */

#define CENSUS_MAX 128

struct gf_key_census {
    const gf_ynode *map; /* the case map the parse is given */
    int all;             /* the conditional readers read too (gf_y_census_all) */
    char *asked[CENSUS_MAX], *refused[CENSUS_MAX];
    size_t n_asked, n_refused;
};

static int census_has(char *const *v, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], key))
            return 1;
    return 0;
}

static void census_add(char **v, size_t *n, const char *key)
{
    if (*n < CENSUS_MAX && !census_has(v, *n, key) && (v[*n] = strdup(key)) != NULL)
        (*n)++;
}

static void census_note(gf_cctx *ctx, const gf_ynode *map, const char *key, int refused)
{
    gf_key_census *c = ctx ? ctx->census : NULL;
    if (!c || map != c->map)
        return;
    if (refused)
        census_add(c->refused, &c->n_refused, key);
    else
        census_add(c->asked, &c->n_asked, key);
}

/* One census of k's parse on an empty map; all: the conditional readers too. */
static void census_run(const gf_kind_def *k, int all, gf_key_census *census)
{
    memset(census, 0, sizeof *census);
    gf_ynode map;
    memset(&map, 0, sizeof map);
    map.type = GF_YN_MAP;
    map.line = map.col = 1;
    census->map = &map;
    census->all = all;
    gf_cctx ctx = {.file = "(keys)", .root = ".", .census = census};
    gf_case c;
    memset(&c, 0, sizeof c);
    c.id = (char *)"keys";
    c.kind = k;
    c.file = (char *)"(keys)";
    k->parse(&ctx, &map, &c); /* on an empty map: errors expected, and dropped */
    if (k->free_spec)
        k->free_spec(c.spec);
    for (size_t i = 0; i < ctx.n_errors; i++)
        free(ctx.errors[i]);
    free(ctx.errors);
    census->map = NULL;
}

static void census_free(gf_key_census *c)
{
    for (size_t i = 0; i < c->n_asked; i++)
        free(c->asked[i]);
    for (size_t i = 0; i < c->n_refused; i++)
        free(c->refused[i]);
}

int gf_y_census_all(const gf_cctx *ctx) { return ctx && ctx->census && ctx->census->all; }

int gf_kind_keys(const gf_kind_def *k, gf_kind_keys_which which, char *buf, size_t cap)
{
    gf_key_census plain, all;
    census_run(k, 0, &plain);
    census_run(k, 1, &all);
    int n = 0;
    size_t used = 0;
    if (cap)
        buf[0] = '\0';
    for (size_t i = 0; i < all.n_asked; i++) { /* in the order the parse asks them */
        const char *key = all.asked[i];
        if (census_has(all.refused, all.n_refused, key))
            continue;
        int is_plain = census_has(plain.asked, plain.n_asked, key);
        if ((which == GF_KEYS_PLAIN && !is_plain) || (which == GF_KEYS_CONDITIONAL && is_plain))
            continue;
        int w = snprintf(buf + used, cap - used, "%s%s", n ? ", " : "", key);
        if (w < 0 || (size_t)w >= cap - used)
            break;
        used += (size_t)w;
        n++;
    }
    census_free(&plain);
    census_free(&all);
    return n;
}

const gf_ynode *gf_y_refuse(gf_cctx *ctx, const gf_ynode *map, const char *key)
{
    census_note(ctx, map, key, 1);
    if (!map || map->type != GF_YN_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++) {
        const gf_ynode *k = map->items[2 * i];
        if (k->type == GF_YN_SCALAR && !strcmp(k->value, key)) {
            map->used[i] = 1; /* the caller reports it, not again as an unknown key */
            return k;
        }
    }
    return NULL;
}

/* ---- schema getters ---- */

const gf_ynode *gf_y_get(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags)
{
    census_note(ctx, map, key, 0);
    if (!map || map->type != GF_YN_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++) {
        const gf_ynode *k = map->items[2 * i];
        if (k->type == GF_YN_SCALAR && !strcmp(k->value, key)) {
            map->used[i] = 1;
            return map->items[2 * i + 1];
        }
    }
    if (flags & GF_Y_REQUIRED)
        gf_y_error(ctx, map, "missing required key '%s'", key);
    return NULL;
}

static int is_null(const gf_ynode *n) { return n->type == GF_YN_SCALAR && gf_yscalar_resolve(n).type == GF_YS_NULL; }

/* Present and not null (optional); errors for required null. */
static const gf_ynode *get_value(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, int *rc)
{
    const gf_ynode *n = gf_y_get(ctx, map, key, flags);
    *rc = 0;
    if (!n) {
        *rc = (flags & GF_Y_REQUIRED) ? -1 : 0;
        return NULL;
    }
    if (is_null(n)) {
        if (flags & GF_Y_REQUIRED) {
            gf_y_error(ctx, n, "key '%s' must not be null", key);
            *rc = -1;
        }
        return NULL;
    }
    *rc = 1;
    return n;
}

int gf_y_node_double(gf_cctx *ctx, const gf_ynode *n, const char *what, double *out)
{
    gf_yvalue v = gf_yscalar_resolve(n);
    if (n->type != GF_YN_SCALAR || (v.type != GF_YS_INT && v.type != GF_YS_FLOAT)) {
        gf_y_error(ctx, n, "%s must be a number, got %s%s%s%s", what, gf_ynode_type_name(n),
                   n->type == GF_YN_SCALAR ? " '" : "", n->type == GF_YN_SCALAR ? n->value : "",
                   n->type == GF_YN_SCALAR ? "'" : "");
        return -1;
    }
    *out = v.d;
    return 1;
}

int gf_y_node_int(gf_cctx *ctx, const gf_ynode *n, const char *what, long long lo, long long hi, long long *out)
{
    gf_yvalue v = gf_yscalar_resolve(n);
    if (n->type != GF_YN_SCALAR || v.type != GF_YS_INT) {
        gf_y_error(ctx, n, "%s must be an integer, got %s%s%s%s", what, gf_ynode_type_name(n),
                   n->type == GF_YN_SCALAR ? " '" : "", n->type == GF_YN_SCALAR ? n->value : "",
                   n->type == GF_YN_SCALAR ? "'" : "");
        return -1;
    }
    if (v.overflow || v.d < (double)lo || v.d > (double)hi || v.i < lo || v.i > hi) {
        gf_y_error(ctx, n, "%s must lie in [%lld, %lld], got %s", what, lo, hi, n->value);
        return -1;
    }
    *out = v.i;
    return 1;
}

int gf_y_node_string(gf_cctx *ctx, const gf_ynode *n, const char *what, char **out)
{
    if (n->type != GF_YN_SCALAR || gf_yscalar_resolve(n).type != GF_YS_STR) {
        gf_y_error(ctx, n, "%s must be a string, got %s", what, gf_ynode_type_name(n));
        return -1;
    }
    *out = strdup(n->value);
    return *out ? 1 : -1;
}

int gf_y_node_is_map(gf_cctx *ctx, const gf_ynode *n, const char *what)
{
    if (n->type == GF_YN_MAP)
        return 1;
    gf_y_error(ctx, n, "%s must be a mapping, got %s", what, gf_ynode_type_name(n));
    return 0;
}

int gf_y_node_is_seq(gf_cctx *ctx, const gf_ynode *n, const char *what)
{
    if (n->type == GF_YN_SEQ)
        return 1;
    gf_y_error(ctx, n, "%s must be a sequence, got %s", what, gf_ynode_type_name(n));
    return 0;
}

/* Reads one value (a scalar, or a list entry) into slot, named `what` in errors. */
typedef int (*entry_reader)(gf_cctx *ctx, const gf_ynode *item, const char *what, const void *arg, void *slot);

static int entry_double(gf_cctx *ctx, const gf_ynode *item, const char *what, const void *arg, void *slot)
{
    (void)arg;
    return gf_y_node_double(ctx, item, what, slot);
}

typedef struct int_range {
    long long lo, hi;
} int_range;

static int entry_int(gf_cctx *ctx, const gf_ynode *item, const char *what, const void *arg, void *slot)
{
    const int_range *r = arg;
    return gf_y_node_int(ctx, item, what, r->lo, r->hi, slot);
}

static int entry_int32(gf_cctx *ctx, const gf_ynode *item, const char *what, const void *arg, void *slot)
{
    const int_range *r = arg;
    long long x = 0;
    int rc = gf_y_node_int(ctx, item, what, r->lo, r->hi, &x);
    *(int32_t *)slot = (int32_t)x;
    return rc;
}

static int entry_string(gf_cctx *ctx, const gf_ynode *item, const char *what, const void *arg, void *slot)
{
    (void)arg;
    return gf_y_node_string(ctx, item, what, slot);
}

/* The value under key through read, named "'key'" in errors: 1 read, 0 for an
 * absent or null optional key, -1 after an error. */
static int read_value(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, entry_reader read, const void *arg,
                      void *out)
{
    int rc;
    const gf_ynode *n = get_value(ctx, map, key, flags, &rc);
    if (rc <= 0)
        return rc;
    char what[128];
    snprintf(what, sizeof what, "'%s'", key);
    return read(ctx, n, what, arg, out);
}

int gf_y_double(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, double *out)
{
    return read_value(ctx, map, key, flags, entry_double, NULL, out);
}

int gf_y_int(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, long long lo, long long hi, long long *out)
{
    const int_range r = {lo, hi};
    return read_value(ctx, map, key, flags, entry_int, &r, out);
}

int gf_y_bool(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, int *out)
{
    int rc;
    const gf_ynode *n = get_value(ctx, map, key, flags, &rc);
    if (rc <= 0)
        return rc;
    gf_yvalue v = gf_yscalar_resolve(n);
    if (n->type != GF_YN_SCALAR || v.type != GF_YS_BOOL) {
        gf_y_error(ctx, n, "'%s' must be true or false, got %s", key, gf_ynode_type_name(n));
        return -1;
    }
    *out = v.b;
    return 1;
}

int gf_y_string(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, char **out)
{
    return read_value(ctx, map, key, flags, entry_string, NULL, out);
}

int gf_y_enum(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, const char *const *words, int *out)
{
    int rc;
    const gf_ynode *n = get_value(ctx, map, key, flags, &rc);
    if (rc <= 0)
        return rc;
    if (n->type == GF_YN_SCALAR)
        for (int i = 0; words[i]; i++)
            if (!strcmp(n->value, words[i])) {
                *out = i;
                return 1;
            }
    char list[256] = "";
    for (int i = 0; words[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, words[i], sizeof list - strlen(list) - 1);
    }
    gf_y_error(ctx, n, "'%s' must be one of %s, got %s%s%s", key, list, n->type == GF_YN_SCALAR ? "'" : "",
               n->type == GF_YN_SCALAR ? n->value : gf_ynode_type_name(n), n->type == GF_YN_SCALAR ? "'" : "");
    return -1;
}

static int entry_seq(gf_cctx *ctx, const gf_ynode *item, const char *what, const void *arg, void *slot)
{
    (void)arg;
    if (!gf_y_node_is_seq(ctx, item, what))
        return -1;
    *(const gf_ynode **)slot = item;
    return 1;
}

/* The sequence under key (present, not null, a sequence of at least min_len
 * entries): 1 with *seq, 0 for an absent or null optional key, -1 after an error. */
static int get_seq(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, size_t min_len, const gf_ynode **seq)
{
    const gf_ynode *n = NULL;
    int rc = read_value(ctx, map, key, flags, entry_seq, NULL, &n);
    if (rc <= 0)
        return rc;
    if (n->n < min_len) {
        gf_y_error(ctx, n, "'%s' needs at least %zu entries, has %zu", key, min_len, n->n);
        return -1;
    }
    *seq = n;
    return 1;
}

/* A typed list: get_seq, then every entry through read into a calloc'd array
 * of n elements of `size` bytes; on a bad entry the array goes to drop (NULL:
 * free). Same returns as get_seq; *out and *n_out are set only on 1. */
static int read_list(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, size_t min_len, size_t size,
                     entry_reader read, const void *arg, void (*drop)(void *, size_t), void **out, size_t *n_out)
{
    const gf_ynode *n = NULL;
    int rc = get_seq(ctx, map, key, flags, min_len, &n);
    if (rc <= 0)
        return rc;
    unsigned char *v = calloc(n->n ? n->n : 1, size);
    if (!v)
        return -1;
    int ok = 1;
    for (size_t i = 0; i < n->n; i++) {
        char what[128];
        snprintf(what, sizeof what, "'%s' entry %zu", key, i);
        if (read(ctx, n->items[i], what, arg, v + i * size) < 0)
            ok = 0;
    }
    if (!ok) {
        if (drop)
            drop(v, n->n);
        else
            free(v);
        return -1;
    }
    *out = v;
    *n_out = n->n;
    return 1;
}

static void drop_strings(void *v, size_t n) { gf_y_strings_free(v, n); }

int gf_y_doubles(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, size_t min_len, double **out,
                 size_t *n_out)
{
    void *v = NULL;
    int rc = read_list(ctx, map, key, flags, min_len, sizeof **out, entry_double, NULL, NULL, &v, n_out);
    if (rc > 0)
        *out = v;
    return rc;
}

int gf_y_ints(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, long long lo, long long hi, size_t min_len,
              int32_t **out, size_t *n_out)
{
    const int_range r = {lo, hi};
    void *v = NULL;
    int rc = read_list(ctx, map, key, flags, min_len, sizeof **out, entry_int32, &r, NULL, &v, n_out);
    if (rc > 0)
        *out = v;
    return rc;
}

int gf_y_matrix(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, int allow_flat, double **out,
                size_t *rows, size_t *cols)
{
    const gf_ynode *n = NULL;
    int rc = get_seq(ctx, map, key, flags, 0, &n);
    if (rc <= 0)
        return rc;
    if (n->n == 0) {
        gf_y_error(ctx, n, "'%s' is empty", key);
        return -1;
    }
    int flat = n->items[0]->type == GF_YN_SCALAR;
    if (flat && !allow_flat) {
        gf_y_error(ctx, n, "'%s' must be a sequence of rows (sequences of numbers)", key);
        return -1;
    }
    size_t R = flat ? 1 : n->n, C = flat ? n->n : n->items[0]->n;
    if (C == 0) {
        gf_y_error(ctx, n, "'%s' has an empty row", key);
        return -1;
    }
    double *v = calloc(R * C, sizeof *v);
    if (!v)
        return -1;
    char what[128];
    int ok = 1;
    for (size_t r = 0; r < R && ok; r++) {
        const gf_ynode *row = flat ? n : n->items[r];
        snprintf(what, sizeof what, "'%s' row %zu", key, r);
        if (!gf_y_node_is_seq(ctx, row, what)) {
            ok = 0;
            break;
        }
        if (row->n != C) {
            gf_y_error(ctx, row, "'%s' row %zu has %zu entries; row 0 has %zu", key, r, row->n, C);
            ok = 0;
            break;
        }
        for (size_t c = 0; c < C; c++) {
            snprintf(what, sizeof what, "'%s' [%zu][%zu]", key, r, c);
            if (gf_y_node_double(ctx, row->items[c], what, &v[r * C + c]) < 0)
                ok = 0;
        }
    }
    if (!ok) {
        free(v);
        return -1;
    }
    *out = v;
    *rows = R;
    *cols = C;
    return 1;
}

void gf_y_strings_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

int gf_y_strings(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, char ***out, size_t *n_out)
{
    void *v = NULL;
    int rc = read_list(ctx, map, key, flags, 0, sizeof **out, entry_string, NULL, drop_strings, &v, n_out);
    if (rc > 0)
        *out = v;
    return rc;
}

void gf_y_check_unknown(gf_cctx *ctx, const gf_ynode *map, const char *where)
{
    if (!map || map->type != GF_YN_MAP)
        return;
    for (size_t i = 0; i < map->n; i++)
        if (!map->used[i])
            gf_y_error(ctx, map->items[2 * i], "unknown key '%s' %s", map->items[2 * i]->value, where);
}

int gf_y_gate(gf_cctx *ctx, const gf_ynode *map, const char *key, gf_gate *out)
{
    *out = gf_gate_default();
    const gf_ynode *g = gf_y_get(ctx, map, key, GF_Y_OPTIONAL);
    if (!g || is_null(g))
        return 0;
    if (!gf_y_node_is_map(ctx, g, "'gate'"))
        return -1;
    int bad = gf_y_double(ctx, g, "abs", 0, &out->abs) < 0;
    bad |= gf_y_double(ctx, g, "ulps", 0, &out->ulps) < 0;
    if (!bad && (!(out->abs >= 0) || !isfinite(out->abs))) {
        gf_y_error(ctx, g, "gate.abs must be a finite number >= 0");
        bad = 1;
    }
    if (!bad && (!(out->ulps >= 0) || !isfinite(out->ulps))) {
        gf_y_error(ctx, g, "gate.ulps must be a finite number >= 0");
        bad = 1;
    }
    gf_y_check_unknown(ctx, g, "in 'gate' (known: abs, ulps)");
    return bad ? -1 : 1;
}
