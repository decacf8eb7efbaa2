/* Case files, part 1: libyaml -> node tree, and YAML 1.2 core-schema
 * scalars. The only file that includes <yaml.h> (case_schema.c reads the tree
 * against a schema, case_load.c turns files into cases). */
#include "case.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "case_internal.h"

#define MAX_NODES 1000000 /* alias expansion bound (billion laughs) */
#define MAX_DEPTH 64

/* The tree's size in bytes (nodes, item arrays, scalar text), aliases
 * expanded: what the parent allocates for one file. A few short aliases can
 * name a long scalar many times over, so the node count alone does not bound
 * it. $GENFENCE_YAML_MAX_BYTES overrides the default. */
#define GF_YAML_MAX_BYTES_DEFAULT ((size_t)64 << 20)

size_t gf_yaml_max_bytes(void) { return (size_t)gf_env_limit("GENFENCE_YAML_MAX_BYTES", GF_YAML_MAX_BYTES_DEFAULT); }

const char *gf_case_yaml_version(void) { return yaml_get_version_string(); }

/* ---- errors ---- */

static void add_error_str(gf_cctx *ctx, char *msg)
{
    if (!msg)
        return;
    if (ctx->n_errors == ctx->cap) {
        size_t cap = ctx->cap ? 2 * ctx->cap : 8;
        char **grown = realloc(ctx->errors, cap * sizeof *grown);
        if (!grown) {
            free(msg);
            return;
        }
        ctx->errors = grown;
        ctx->cap = cap;
    }
    ctx->errors[ctx->n_errors++] = msg;
}

static void vgf_y_error_at(gf_cctx *ctx, int line, int col, const char *fmt, va_list ap)
{
    char body[1024];
    vsnprintf(body, sizeof body, fmt, ap);
    size_t n = strlen(ctx->file) + strlen(body) + 64;
    char *msg = malloc(n);
    if (msg)
        snprintf(msg, n, "%s:%d:%d: %s", ctx->file, line, col, body);
    add_error_str(ctx, msg);
}

void gf_y_error_at(gf_cctx *ctx, int line, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vgf_y_error_at(ctx, line, col, fmt, ap);
    va_end(ap);
}

void gf_y_error(gf_cctx *ctx, const gf_ynode *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vgf_y_error_at(ctx, n ? n->line : 0, n ? n->col : 0, fmt, ap);
    va_end(ap);
}

/* ---- the node tree ---- */

void gf_ynode_free(gf_ynode *n)
{
    if (!n)
        return;
    size_t m = n->type == GF_YN_MAP ? 2 * n->n : n->type == GF_YN_SEQ ? n->n : 0;
    for (size_t i = 0; i < m; i++)
        gf_ynode_free(n->items[i]);
    free(n->items);
    free(n->used);
    free(n->value);
    free(n->tag);
    free(n);
}

typedef struct anchor {
    char *name;
    gf_ynode *node;
} anchor;

typedef struct build_state {
    yaml_parser_t parser;
    gf_cctx *ctx;
    anchor *anchors;
    size_t n_anchors, cap_anchors;
    size_t nodes;
    size_t bytes, max_bytes; /* the tree so far, aliases expanded; the cap */
    const char *why;         /* why node_copy stopped: "nodes", "bytes", "memory" */
    int failed;
} build_state;

/* Account for a node of the tree (its struct, item array, text): 0 past the cap. */
static int charge(build_state *st, const gf_ynode *n)
{
    size_t m = n->type == GF_YN_MAP ? 2 * n->n : n->type == GF_YN_SEQ ? n->n : 0;
    size_t cost = sizeof *n + m * sizeof(gf_ynode *) + (n->type == GF_YN_MAP ? n->n : 0) + (n->value ? n->len + 1 : 0) +
                  (n->tag ? strlen(n->tag) + 1 : 0);
    st->bytes += cost;
    return st->bytes <= st->max_bytes;
}

static gf_ynode *node_new(gf_ynode_type t, const yaml_mark_t *m)
{
    gf_ynode *n = calloc(1, sizeof *n);
    if (n) {
        n->type = t;
        n->line = (int)m->line + 1;
        n->col = (int)m->column + 1;
    }
    return n;
}

static int ensure_cap(gf_ynode *n, size_t need, size_t *cap)
{
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    gf_ynode **grown = realloc(n->items, c * sizeof *grown);
    if (!grown)
        return 0;
    n->items = grown;
    *cap = c;
    return 1;
}

static char *dup_bytes(const char *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

/* A deep copy of src (an alias's target). NULL when the copy would pass the
 * node or byte cap (st->why says which) or memory ran out. */
static gf_ynode *node_copy(build_state *st, const gf_ynode *src)
{
    if (++st->nodes > MAX_NODES) {
        st->why = "nodes";
        return NULL;
    }
    if (!charge(st, src)) {
        st->why = "bytes";
        return NULL;
    }
    gf_ynode *n = calloc(1, sizeof *n);
    if (!n) {
        st->why = "memory";
        return NULL;
    }
    *n = *src;
    n->items = NULL;
    n->used = NULL;
    n->value = NULL;
    n->tag = NULL;
    size_t m = src->type == GF_YN_MAP ? 2 * src->n : src->type == GF_YN_SEQ ? src->n : 0;
    n->n = 0; /* until the items are in place (gf_ynode_free walks n) */
    if ((src->value && !(n->value = dup_bytes(src->value, src->len))) || (src->tag && !(n->tag = strdup(src->tag))) ||
        (m && !(n->items = calloc(m, sizeof *n->items))) ||
        (src->type == GF_YN_MAP && !(n->used = calloc(src->n ? src->n : 1, 1)))) {
        st->why = "memory";
        gf_ynode_free(n);
        return NULL;
    }
    n->n = src->n; /* the items are NULL until copied: gf_ynode_free skips them */
    for (size_t i = 0; i < m; i++) {
        n->items[i] = node_copy(st, src->items[i]);
        if (!n->items[i]) {
            gf_ynode_free(n);
            return NULL;
        }
    }
    return n;
}

gf_ynode *gf_ynode_clone(const gf_ynode *src)
{
    build_state st;
    memset(&st, 0, sizeof st);
    st.max_bytes = gf_yaml_max_bytes(); /* a tree that was read once fits again */
    return node_copy(&st, src);
}

static void register_anchor(build_state *st, const yaml_char_t *name, gf_ynode *n)
{
    if (!name || !n)
        return;
    for (size_t i = 0; i < st->n_anchors; i++)
        if (!strcmp(st->anchors[i].name, (const char *)name)) {
            st->anchors[i].node = n; /* a later anchor of the same name wins (YAML) */
            return;
        }
    if (st->n_anchors == st->cap_anchors) {
        size_t c = st->cap_anchors ? 2 * st->cap_anchors : 8;
        anchor *grown = realloc(st->anchors, c * sizeof *grown);
        if (!grown)
            return;
        st->anchors = grown;
        st->cap_anchors = c;
    }
    char *copy = strdup((const char *)name);
    if (!copy) {
        gf_y_error_at(st->ctx, n->line, n->col, "out of memory reading YAML (anchor '&%s')", (const char *)name);
        st->failed = 1;
        return;
    }
    st->anchors[st->n_anchors].name = copy;
    st->anchors[st->n_anchors].node = n;
    st->n_anchors++;
}

static int next_event(build_state *st, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&st->parser, ev)) {
        yaml_parser_t *p = &st->parser;
        gf_y_error_at(st->ctx, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
                      "YAML syntax error: %s%s%s", p->problem ? p->problem : "unknown problem", p->context ? " " : "",
                      p->context ? p->context : "");
        st->failed = 1;
        return 0;
    }
    return 1;
}

static int scalar_key_equal(const gf_ynode *a, const gf_ynode *b)
{
    return a->type == GF_YN_SCALAR && b->type == GF_YN_SCALAR && a->len == b->len &&
           !memcmp(a->value, b->value, a->len);
}

/* A scalar genfence can hold: no NUL byte (every value reaches C strings,
 * which would silently cut it there), an integer that fits in 64 bits, and
 * within the byte cap. 0 after recording an error. */
static int scalar_ok(build_state *st, const gf_ynode *n)
{
    const char *nul = memchr(n->value, '\0', n->len);
    if (nul) {
        gf_y_error(st->ctx, n, "a string holds a NUL byte (\\0 at character %zu); case values cannot hold NUL",
                   (size_t)(nul - n->value));
        st->failed = 1;
        return 0;
    }
    gf_yvalue v = gf_yscalar_resolve(n);
    if (v.type == GF_YS_INT && v.overflow) {
        gf_y_error(st->ctx, n, "integer '%s' does not fit in 64 bits (%lld .. %lld)", n->value, LLONG_MIN, LLONG_MAX);
        st->failed = 1;
        return 0;
    }
    if (!charge(st, n)) {
        gf_y_error(st->ctx, n,
                   "the case file expands to more than %zu bytes (GENFENCE_YAML_MAX_BYTES; aliases "
                   "expanded)",
                   st->max_bytes);
        st->failed = 1;
        return 0;
    }
    return 1;
}

/* Build the node whose start event is ev (consumed). */
static gf_ynode *build(build_state *st, yaml_event_t *ev, int depth)
{
    gf_ynode *n = NULL;
    if (depth > MAX_DEPTH) {
        gf_y_error_at(st->ctx, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
                      "nesting deeper than %d levels", MAX_DEPTH);
        st->failed = 1;
        yaml_event_delete(ev);
        return NULL;
    }
    if (++st->nodes > MAX_NODES) {
        gf_y_error_at(st->ctx, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
                      "more than %d nodes (alias expansion?)", MAX_NODES);
        st->failed = 1;
        yaml_event_delete(ev);
        return NULL;
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        n = node_new(GF_YN_SCALAR, &ev->start_mark);
        if (!n) {
            yaml_event_delete(ev);
            break;
        }
        n->len = ev->data.scalar.length;
        n->value = dup_bytes((const char *)ev->data.scalar.value, n->len);
        n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        const char *tag = (const char *)ev->data.scalar.tag;
        int tag_lost = 0;
        if (tag && strcmp(tag, "!"))
            tag_lost = !(n->tag = strdup(tag));
        else if (tag)
            n->plain = 0; /* "!" forces a string */
        if (!n->value || tag_lost) {
            yaml_event_delete(ev);
            gf_ynode_free(n);
            n = NULL;
            break;
        }
        if (!scalar_ok(st, n)) {
            yaml_event_delete(ev);
            gf_ynode_free(n);
            return NULL;
        }
        register_anchor(st, ev->data.scalar.anchor, n);
        yaml_event_delete(ev);
        return n;
    }
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        gf_ynode *target = NULL;
        for (size_t i = 0; i < st->n_anchors; i++)
            if (!strcmp(st->anchors[i].name, name))
                target = st->anchors[i].node;
        if (!target) {
            gf_y_error_at(st->ctx, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1, "unknown alias '*%s'",
                          name);
            st->failed = 1;
            yaml_event_delete(ev);
            return NULL;
        }
        n = node_copy(st, target);
        if (n) {
            n->line = (int)ev->start_mark.line + 1;
            n->col = (int)ev->start_mark.column + 1;
        } else {
            if (st->why && !strcmp(st->why, "bytes"))
                gf_y_error_at(st->ctx, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
                              "alias '*%s' expands the case file past %zu bytes (GENFENCE_YAML_MAX_BYTES)", name,
                              st->max_bytes);
            else if (st->why && !strcmp(st->why, "memory"))
                gf_y_error_at(st->ctx, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
                              "out of memory expanding alias '*%s'", name);
            else
                gf_y_error_at(st->ctx, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
                              "alias '*%s' expands to more than %d nodes", name, MAX_NODES);
            st->failed = 1;
        }
        yaml_event_delete(ev);
        return n;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        int is_map = ev->type == YAML_MAPPING_START_EVENT;
        n = node_new(is_map ? GF_YN_MAP : GF_YN_SEQ, &ev->start_mark);
        char *anchor_name = NULL;
        const yaml_char_t *a = is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
        if (a)
            anchor_name = strdup((const char *)a);
        yaml_event_delete(ev);
        if (!n) {
            free(anchor_name);
            break;
        }
        size_t cap = 0;
        for (;;) {
            yaml_event_t e;
            if (!next_event(st, &e))
                goto fail_collection;
            if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&e);
                break;
            }
            gf_ynode *item = build(st, &e, depth + 1);
            if (!item)
                goto fail_collection;
            if (!is_map) {
                if (!ensure_cap(n, n->n + 1, &cap)) {
                    gf_ynode_free(item);
                    goto fail_collection;
                }
                n->items[n->n++] = item;
                continue;
            }
            /* mapping: item is the key; the value follows */
            if (item->type != GF_YN_SCALAR) {
                gf_y_error(st->ctx, item, "mapping keys must be scalars");
                st->failed = 1;
            } else {
                for (size_t i = 0; i < n->n; i++)
                    if (scalar_key_equal(n->items[2 * i], item)) {
                        gf_y_error(st->ctx, item, "duplicate key '%s' (first at line %d, column %d)", item->value,
                                   n->items[2 * i]->line, n->items[2 * i]->col);
                        st->failed = 1;
                        break;
                    }
            }
            yaml_event_t ve;
            if (!next_event(st, &ve)) {
                gf_ynode_free(item);
                goto fail_collection;
            }
            gf_ynode *val = build(st, &ve, depth + 1);
            if (!val || !ensure_cap(n, 2 * n->n + 2, &cap)) {
                gf_ynode_free(item);
                gf_ynode_free(val);
                goto fail_collection;
            }
            n->items[2 * n->n] = item;
            n->items[2 * n->n + 1] = val;
            n->n++;
        }
        if (is_map && !(n->used = calloc(n->n ? n->n : 1, 1))) {
            gf_y_error(st->ctx, n, "out of memory reading YAML");
            st->failed = 1;
            goto fail_collection;
        }
        if (!charge(st, n)) {
            gf_y_error(st->ctx, n,
                       "the case file expands to more than %zu bytes (GENFENCE_YAML_MAX_BYTES; aliases "
                       "expanded)",
                       st->max_bytes);
            st->failed = 1;
            goto fail_collection;
        }
        register_anchor(st, (const yaml_char_t *)anchor_name, n);
        free(anchor_name);
        return n;
    fail_collection:
        free(anchor_name);
        gf_ynode_free(n);
        return NULL;
    }
    default:
        gf_y_error_at(st->ctx, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1, "unexpected YAML event %d",
                      (int)ev->type);
        st->failed = 1;
        yaml_event_delete(ev);
        return NULL;
    }
    gf_y_error_at(st->ctx, 0, 0, "out of memory reading YAML");
    st->failed = 1;
    return NULL;
}

gf_ynode *gf_yaml_parse(gf_cctx *ctx, const char *text, size_t len)
{
    build_state st = {.ctx = ctx, .max_bytes = gf_yaml_max_bytes()};
    if (!yaml_parser_initialize(&st.parser)) {
        gf_y_error_at(ctx, 0, 0, "cannot initialise libyaml");
        return NULL;
    }
    yaml_parser_set_input_string(&st.parser, (const unsigned char *)text, len);
    gf_ynode *root = NULL;
    int docs = 0;
    yaml_event_t ev;
    for (;;) {
        if (!next_event(&st, &ev))
            break;
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_DOCUMENT_START_EVENT) {
            if (++docs > 1) {
                gf_y_error_at(ctx, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
                              "a case file holds one YAML document");
                st.failed = 1;
                yaml_event_delete(&ev);
                break;
            }
            yaml_event_delete(&ev);
            continue;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        gf_ynode *n = build(&st, &ev, 0);
        if (!n)
            break;
        gf_ynode_free(root);
        root = n;
    }
    yaml_parser_delete(&st.parser);
    for (size_t i = 0; i < st.n_anchors; i++)
        free(st.anchors[i].name);
    free(st.anchors);
    if (st.failed) {
        gf_ynode_free(root);
        return NULL;
    }
    if (!root)
        gf_y_error_at(ctx, 1, 1, "empty file: expected a mapping with `cases:`");
    return root;
}

/* ---- scalars under the core schema ---- */

static int all_digits(const char *s, const char *set)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!strchr(set, *s))
            return 0;
    return 1;
}

static int is_core_float(const char *s)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF"))
        return 1;
    int digits = 0;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            p++, digits++;
        if (!digits)
            return 0;
    } else {
        while (*p >= '0' && *p <= '9')
            p++, digits++;
        if (!digits)
            return 0;
        if (*p == '.') {
            p++;
            while (*p >= '0' && *p <= '9')
                p++;
        }
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        int ed = 0;
        while (*p >= '0' && *p <= '9')
            p++, ed++;
        if (!ed)
            return 0;
    }
    return *p == '\0';
}

static double parse_core_float(const char *s)
{
    const char *p = s;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF"))
        return neg ? -INFINITY : INFINITY;
    if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))
        return NAN;
    return strtod(s, NULL);
}

static int resolve_plain(const char *s, gf_yvalue *v)
{
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")) {
        v->type = GF_YS_NULL;
        return 1;
    }
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
        v->type = GF_YS_BOOL;
        v->b = 1;
        return 1;
    }
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
        v->type = GF_YS_BOOL;
        v->b = 0;
        return 1;
    }
    const char *d = (*s == '+' || *s == '-') ? s + 1 : s;
    if (all_digits(d, "0123456789")) {
        errno = 0;
        v->type = GF_YS_INT;
        v->i = strtoll(s, NULL, 10);
        v->overflow = errno == ERANGE;
        v->d = strtod(s, NULL);
        return 1;
    }
    if (s[0] == '0' && s[1] == 'o' && all_digits(s + 2, "01234567")) {
        v->type = GF_YS_INT;
        errno = 0;
        v->i = strtoll(s + 2, NULL, 8);
        v->overflow = errno == ERANGE;
        v->d = (double)v->i;
        return 1;
    }
    if (s[0] == '0' && s[1] == 'x' && all_digits(s + 2, "0123456789abcdefABCDEF")) {
        v->type = GF_YS_INT;
        errno = 0;
        v->i = strtoll(s + 2, NULL, 16);
        v->overflow = errno == ERANGE;
        v->d = (double)v->i;
        return 1;
    }
    if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN") || is_core_float(s)) {
        v->type = GF_YS_FLOAT;
        v->d = parse_core_float(s);
        return 1;
    }
    return 0;
}

gf_yvalue gf_yscalar_resolve(const gf_ynode *n)
{
    gf_yvalue v = {.type = GF_YS_STR};
    if (!n || n->type != GF_YN_SCALAR)
        return v;
    if (n->tag) {
        const char *t = n->tag;
        const char *pre = "tag:yaml.org,2002:";
        if (!strncmp(t, pre, strlen(pre))) {
            t += strlen(pre);
            gf_yvalue r = {.type = GF_YS_STR};
            if (!strcmp(t, "str"))
                return v;
            if (resolve_plain(n->value, &r)) {
                if ((!strcmp(t, "null") && r.type == GF_YS_NULL) || (!strcmp(t, "bool") && r.type == GF_YS_BOOL) ||
                    (!strcmp(t, "int") && r.type == GF_YS_INT))
                    return r;
                if (!strcmp(t, "float") && (r.type == GF_YS_FLOAT || r.type == GF_YS_INT)) {
                    r.type = GF_YS_FLOAT;
                    return r;
                }
            }
        }
        return v; /* unknown tags: a string */
    }
    if (!n->plain)
        return v;
    if (resolve_plain(n->value, &v))
        return v;
    v.type = GF_YS_STR;
    return v;
}

const char *gf_ynode_type_name(const gf_ynode *n)
{
    if (!n)
        return "nothing";
    if (n->type == GF_YN_MAP)
        return "a mapping";
    if (n->type == GF_YN_SEQ)
        return "a sequence";
    switch (gf_yscalar_resolve(n).type) {
    case GF_YS_NULL: return "null";
    case GF_YS_BOOL: return "a boolean";
    case GF_YS_INT: return "an integer";
    case GF_YS_FLOAT: return "a float";
    default: return "a string";
    }
}
