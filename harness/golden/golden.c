/* Goldens: reading (validated, data_sha256 checked) and writing. */
#include "golden.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "genfence/sampler_fields.h"
#include "hash.h"

static const char *const k_required_meta[] = {"format",  "generator", "generator_version", "model_hash",
                                              "case_id", "case_hash", "created",           "sampler",
                                              "seed",    "rows",      "data_sha256",       NULL};

void gf_golden_free(gf_golden *g)
{
    if (!g)
        return;
    for (int32_t b = 0; g->row && b < g->rows; b++) {
        free(g->row[b].tokens);
        free(g->row[b].logits);
        free(g->row[b].margins);
    }
    free(g->row);
    for (size_t i = 0; i < g->n_meta; i++) {
        free(g->meta_keys[i]);
        free(g->meta_values[i]);
    }
    free(g->meta_keys);
    free(g->meta_values);
    free(g->path);
    free(g);
}

const char *gf_golden_meta(const gf_golden *g, const char *key)
{
    for (size_t i = 0; g && i < g->n_meta; i++)
        if (!strcmp(g->meta_keys[i], key))
            return g->meta_values[i];
    return NULL;
}

static int cmp_tensor_names(const void *a, const void *b)
{
    const gf_st_tensor *x = *(const gf_st_tensor *const *)a, *y = *(const gf_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

gf_status gf_golden_data_sha256(const gf_safetensors *st, char hex[65])
{
    size_t n = gf_safetensors_count(st);
    const gf_st_tensor **v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = gf_safetensors_at(st, i);
    qsort(v, n, sizeof *v, cmp_tensor_names);
    gf_sha256 s;
    gf_sha256_init(&s);
    for (size_t i = 0; i < n; i++)
        gf_sha256_update(&s, v[i]->data, v[i]->nbytes);
    gf_sha256_hex(&s, hex);
    free(v);
    return GF_OK;
}

static int parse_count(const char *s, long *out)
{
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 1 << 20)
        return 0;
    *out = v;
    return 1;
}

/* The tensor "<what>.<b>" or an error. */
static const gf_st_tensor *need(const gf_safetensors *st, const char *path, const char *what, int32_t b, gf_dtype dt,
                                int32_t ndim, gf_status *err)
{
    char name[64];
    snprintf(name, sizeof name, "%s.%d", what, b);
    const gf_st_tensor *t = gf_safetensors_find(st, name);
    if (!t) {
        *err = gf_error_set(GF_E_FORMAT, "golden %s: no tensor '%s'", path, name);
        return NULL;
    }
    if (t->dtype != dt || t->ndim != ndim) {
        *err = gf_error_set(GF_E_FORMAT, "golden %s: tensor '%s' is %s with %d dimension%s, expected %s with %d", path,
                            name, gf_dtype_name(t->dtype), t->ndim, t->ndim == 1 ? "" : "s", gf_dtype_name(dt), ndim);
        return NULL;
    }
    return t;
}

gf_status gf_golden_read(const char *path, gf_golden **out)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return gf_error_set(errno == ENOENT ? GF_E_NOT_FOUND : GF_E_IO, "golden %s: %s", path, strerror(errno));
    gf_safetensors *st = NULL;
    gf_status err = gf_safetensors_open(path, &st);
    if (err != GF_OK)
        return gf_error_prefix(err == GF_E_IO ? GF_E_IO : GF_E_FORMAT, "golden");
    gf_golden *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        err = gf_error_set(GF_E_NOMEM, "out of memory");
        goto fail;
    }
    /* metadata */
    size_t nm = gf_safetensors_meta_count(st);
    g->meta_keys = calloc(nm ? nm : 1, sizeof *g->meta_keys);
    g->meta_values = calloc(nm ? nm : 1, sizeof *g->meta_values);
    if (!g->meta_keys || !g->meta_values) {
        err = gf_error_set(GF_E_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < nm; i++) {
        const char *k, *v;
        gf_safetensors_meta_at(st, i, &k, &v);
        g->meta_keys[i] = strdup(k);
        g->meta_values[i] = strdup(v);
        g->n_meta++;
        if (!g->meta_keys[i] || !g->meta_values[i]) {
            err = gf_error_set(GF_E_NOMEM, "out of memory");
            goto fail;
        }
    }
    const char *fmt = gf_golden_meta(g, "format");
    if (!fmt || strcmp(fmt, GF_GOLDEN_FORMAT)) {
        err = gf_error_set(GF_E_FORMAT, "golden %s: format %s%s%s, expected \"" GF_GOLDEN_FORMAT "\"", path,
                           fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
        goto fail;
    }
    for (int i = 0; k_required_meta[i]; i++)
        if (!gf_golden_meta(g, k_required_meta[i])) {
            err = gf_error_set(GF_E_FORMAT, "golden %s: no '%s' in the metadata", path, k_required_meta[i]);
            goto fail;
        }
    /* integrity: before anything of the data is believed */
    err = gf_golden_data_sha256(st, g->data_sha256);
    if (err != GF_OK)
        goto fail;
    const char *want = gf_golden_meta(g, "data_sha256");
    if (strcmp(want, g->data_sha256)) {
        err = gf_error_set(GF_E_FORMAT,
                           "golden %s: data_sha256 mismatch: the metadata says %s, the tensor data hashes to %s "
                           "(the file was changed after it was written)",
                           path, want, g->data_sha256);
        goto fail;
    }
    /* structure */
    long rows;
    if (!parse_count(gf_golden_meta(g, "rows"), &rows) || rows < 1) {
        err = gf_error_set(GF_E_FORMAT, "golden %s: rows '%s' is not a positive integer", path,
                           gf_golden_meta(g, "rows"));
        goto fail;
    }
    {
        for (size_t i = 0; i < gf_safetensors_count(st); i++) {
            const char *nm_i = gf_safetensors_at(st, i)->name;
            int ok = 0;
            for (const char *const *w = (const char *const[]){"tokens.", "logits.", "margins.", NULL}; *w; w++) {
                long b;
                if (!strncmp(nm_i, *w, strlen(*w)) && parse_count(nm_i + strlen(*w), &b) && b < rows)
                    ok = 1;
            }
            if (!ok) {
                err = gf_error_set(GF_E_FORMAT, "golden %s: unexpected tensor '%s' (rows %ld)", path, nm_i, rows);
                goto fail;
            }
        }
    }
    if (gf_safetensors_count(st) != (size_t)rows * 3) {
        err = gf_error_set(GF_E_FORMAT, "golden %s: %zu tensors for %ld rows, expected %ld", path,
                           gf_safetensors_count(st), rows, rows * 3);
        goto fail;
    }
    g->rows = (int32_t)rows;
    g->row = calloc((size_t)rows, sizeof *g->row);
    if (!g->row) {
        err = gf_error_set(GF_E_NOMEM, "out of memory");
        goto fail;
    }
    g->V = -1;
    for (int32_t b = 0; b < g->rows; b++) {
        const gf_st_tensor *tt = need(st, path, "tokens", b, GF_DT_I64, 1, &err);
        const gf_st_tensor *lt = tt ? need(st, path, "logits", b, GF_DT_F32, 2, &err) : NULL;
        const gf_st_tensor *mt = lt ? need(st, path, "margins", b, GF_DT_F64, 1, &err) : NULL;
        if (!mt)
            goto fail;
        int64_t N = lt->shape[0], V = lt->shape[1], T = tt->shape[0];
        if (N < 1 || V < 2 || V > INT32_MAX || mt->shape[0] != N || T <= N || T > INT32_MAX) {
            err = gf_error_set(GF_E_FORMAT,
                               "golden %s: row %d: shapes do not fit: tokens (%" PRId64 "), logits (%" PRId64
                               ", %" PRId64 "), margins (%" PRId64 "); expected (P + N), (N, V), (N) with P, N >= 1",
                               path, b, T, N, V, mt->shape[0]);
            goto fail;
        }
        if (g->V >= 0 && V != g->V) {
            err = gf_error_set(GF_E_FORMAT, "golden %s: row %d has %" PRId64 " logits per step, row 0 %d", path, b, V,
                               g->V);
            goto fail;
        }
        g->V = (int32_t)V;
        gf_golden_row *r = &g->row[b];
        r->n_tokens = (int32_t)T;
        r->steps = (int32_t)N;
        r->prompt_len = (int32_t)(T - N);
        r->tokens = malloc((size_t)T * sizeof *r->tokens);
        r->logits = malloc((size_t)(N * V) * sizeof *r->logits);
        r->margins = malloc((size_t)N * sizeof *r->margins);
        if (!r->tokens || !r->logits || !r->margins) {
            err = gf_error_set(GF_E_NOMEM, "out of memory");
            goto fail;
        }
        for (int64_t i = 0; i < T; i++) {
            int64_t x;
            memcpy(&x, (const char *)tt->data + i * 8, 8);
            if (x < 0 || x >= V) {
                err = gf_error_set(GF_E_FORMAT,
                                   "golden %s: tokens.%d[%" PRId64 "] = %" PRId64 " is outside [0, %" PRId64 ")", path,
                                   b, i, x, V);
                goto fail;
            }
            r->tokens[i] = (int32_t)x;
        }
        memcpy(r->logits, lt->data, (size_t)(N * V) * sizeof(float));
        memcpy(r->margins, mt->data, (size_t)N * sizeof(double));
    }
    gf_safetensors_close(st);
    *out = g;
    return GF_OK;
fail:
    gf_safetensors_close(st);
    gf_golden_free(g);
    return err;
}

/* ---- writing ---- */

typedef struct named {
    char name[64];
    gf_st_write_tensor t;
    size_t nbytes;
} named;

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

gf_status gf_golden_write(const char *path, const gf_golden_row *rows, int32_t n_rows, int32_t V,
                          const char *const *keys, const char *const *values, size_t n_meta)
{
    if (n_rows < 1 || V < 1)
        return gf_error_set(GF_E_INVALID_ARG, "golden %s: %d rows of %d logits", path, n_rows, V);
    size_t nt = (size_t)n_rows * 3;
    named *t = calloc(nt, sizeof *t);
    int64_t **tok64 = calloc((size_t)n_rows, sizeof *tok64);
    const char **mk = calloc(n_meta + 4, sizeof *mk), **mv = calloc(n_meta + 4, sizeof *mv);
    gf_status st = GF_OK;
    if (!t || !tok64 || !mk || !mv) {
        st = gf_error_set(GF_E_NOMEM, "out of memory");
        goto out;
    }
    int same_steps = 1;
    for (int32_t b = 0; b < n_rows; b++) {
        const gf_golden_row *r = &rows[b];
        if (r->steps < 1 || r->n_tokens <= r->steps) {
            st = gf_error_set(GF_E_INVALID_ARG, "golden %s: row %d: %d tokens for %d steps", path, b, r->n_tokens,
                              r->steps);
            goto out;
        }
        same_steps &= r->steps == rows[0].steps;
        tok64[b] = malloc((size_t)r->n_tokens * sizeof **tok64);
        if (!tok64[b]) {
            st = gf_error_set(GF_E_NOMEM, "out of memory");
            goto out;
        }
        for (int32_t i = 0; i < r->n_tokens; i++)
            tok64[b][i] = r->tokens[i];
        named *x = &t[3 * b];
        snprintf(x[0].name, sizeof x[0].name, "tokens.%d", b);
        x[0].t = (gf_st_write_tensor){.dtype = GF_DT_I64, .ndim = 1, .shape = {r->n_tokens}, .data = tok64[b]};
        x[0].nbytes = (size_t)r->n_tokens * 8;
        snprintf(x[1].name, sizeof x[1].name, "logits.%d", b);
        x[1].t = (gf_st_write_tensor){.dtype = GF_DT_F32, .ndim = 2, .shape = {r->steps, V}, .data = r->logits};
        x[1].nbytes = (size_t)r->steps * (size_t)V * 4;
        snprintf(x[2].name, sizeof x[2].name, "margins.%d", b);
        x[2].t = (gf_st_write_tensor){.dtype = GF_DT_F64, .ndim = 1, .shape = {r->steps}, .data = r->margins};
        x[2].nbytes = (size_t)r->steps * 8;
    }
    /* the data in name order, hashed in that order */
    qsort(t, nt, sizeof *t, cmp_named);
    gf_st_write_tensor *wt = calloc(nt, sizeof *wt);
    if (!wt) {
        st = gf_error_set(GF_E_NOMEM, "out of memory");
        goto out;
    }
    gf_sha256 s;
    gf_sha256_init(&s);
    for (size_t i = 0; i < nt; i++) {
        wt[i] = t[i].t;
        wt[i].name = t[i].name;
        gf_sha256_update(&s, t[i].t.data, t[i].nbytes);
    }
    char data_hex[65], rows_s[32], steps_s[32];
    gf_sha256_hex(&s, data_hex);
    snprintf(rows_s, sizeof rows_s, "%d", n_rows);
    snprintf(steps_s, sizeof steps_s, "%d", rows[0].steps);
    size_t m = 0;
    mk[m] = "format", mv[m++] = GF_GOLDEN_FORMAT;
    for (size_t i = 0; i < n_meta; i++)
        if (strcmp(keys[i], "format") && strcmp(keys[i], "rows") && strcmp(keys[i], "data_sha256") &&
            strcmp(keys[i], "steps"))
            mk[m] = keys[i], mv[m++] = values[i];
    mk[m] = "rows", mv[m++] = rows_s;
    if (same_steps)
        mk[m] = "steps", mv[m++] = steps_s;
    mk[m] = "data_sha256", mv[m++] = data_hex;
    st = gf_safetensors_write(path, wt, nt, mk, mv, m);
    free(wt);
out:
    for (int32_t b = 0; tok64 && b < n_rows; b++)
        free(tok64[b]);
    free(tok64);
    free(t);
    free(mk);
    free(mv);
    return st;
}

/* a real, or the canonical JSON's {"$float": ...} for a non-finite one
 * (json_real refuses those) */
static json_t *num(double x)
{
    if (isfinite(x))
        return json_real(x);
    return json_pack("{s:s}", "$float", isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity");
}

static json_t *ids(const int32_t *v, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; v && i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* One field of the table, whatever its value: disabled optionals are null,
 * empty lists empty (the record of goldens keeps every field). */
static json_t *field_json(const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e)
{
    const void *v = gf_sf_cat(f, p, e, f->off);
    const int32_t n = gf_sf_count(f, p, e);
    const int32_t *use = f->type == GF_SF_REAL_OPT || f->type == GF_SF_INT_OPT ? gf_sf_cat(f, p, e, f->aux) : NULL;
    switch (f->type) {
    case GF_SF_REAL: return num(*(const double *)v);
    case GF_SF_REAL_OPT: return *use ? num(*(const double *)v) : json_null();
    case GF_SF_INT_OPT: return *use ? json_integer(*(const int32_t *)v) : json_null();
    case GF_SF_INT:
    case GF_SF_PROMPT_LEN: return json_integer(*(const int32_t *)v);
    case GF_SF_SEED: return json_integer((json_int_t) * (const uint64_t *)v);
    case GF_SF_PROFILE: {
        const char *pn = gf_sampler_profile_name(*(const int32_t *)v);
        return pn ? json_string(pn) : json_integer(*(const int32_t *)v);
    }
    case GF_SF_CHAIN: {
        json_t *chain = json_array();
        for (int32_t i = 0; i < n && i < GF_SAMPLER_MAX_CHAIN; i++) {
            const char *sn = gf_sampler_stage_name(((const int32_t *)v)[i]);
            json_array_append_new(chain, sn ? json_string(sn) : json_integer(((const int32_t *)v)[i]));
        }
        return chain;
    }
    case GF_SF_BIAS: {
        const gf_logit_bias *b = *(const gf_logit_bias *const *)v;
        json_t *bias = json_object();
        for (int32_t i = 0; b && i < n; i++) {
            char key[16];
            snprintf(key, sizeof key, "%d", (int)b[i].token);
            json_object_set_new(bias, key, num(b[i].bias));
        }
        return bias;
    }
    case GF_SF_IDS: return ids(*(const int32_t *const *)v, n);
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: { /* [[id, ...], ...] or [[[id, ...], bias], ...] */
        const gf_token_seq *q = *(const gf_token_seq *const *)v;
        json_t *a = json_array();
        for (int32_t i = 0; q && i < n; i++) {
            json_t *e1 = ids(q[i].ids, q[i].n);
            if (f->type == GF_SF_SEQ_BIAS) {
                json_t *pair = json_array();
                json_array_append_new(pair, e1);
                json_array_append_new(pair, num(q[i].bias));
                e1 = pair;
            }
            json_array_append_new(a, e1);
        }
        return a;
    }
    }
    return json_null();
}

char *gf_golden_sampler_json(const gf_sampler_params *p)
{
    json_t *o = json_object();
    for (int k = 0; k < GF_SF_COUNT; k++) /* a NULL ext writes none of its fields: the four of every older golden */
        if (!gf_sampler_fields[k].in_ext || p->ext)
            json_object_set_new(o, gf_sampler_fields[k].name, field_json(&gf_sampler_fields[k], p, p->ext));
    char *s = gf_canonical_json(o);
    json_decref(o);
    return s;
}

/* Canonical JSON (docs/goldens.md) into jansson: its bare NaN / Infinity /
 * -Infinity (which JSON lacks) become {"$float": ...} as in a case tree,
 * then json_loads. NULL unless s is an object whose canonical form is s. */
static json_t *canonical_load(const char *s)
{
    static const char *const words[] = {"-Infinity", "Infinity", "NaN"};
    size_t len = strlen(s), cap = len * 4 + 1, o = 0;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    int in_str = 0;
    for (size_t i = 0; i < len;) {
        if (in_str) {
            if (s[i] == '\\' && s[i + 1])
                t[o++] = s[i++];
            else if (s[i] == '"')
                in_str = 0;
            t[o++] = s[i++];
            continue;
        }
        size_t w = 0;
        while (w < 3 && strncmp(s + i, words[w], strlen(words[w])))
            w++;
        if (w < 3) {
            o += (size_t)snprintf(t + o, cap - o, "{\"$float\":\"%s\"}", words[w]);
            i += strlen(words[w]);
            continue;
        }
        in_str = s[i] == '"';
        t[o++] = s[i++];
    }
    t[o] = '\0';
    json_t *v = json_loads(t, 0, NULL);
    free(t);
    char *back = json_is_object(v) ? gf_canonical_json(v) : NULL;
    int ok = back && !strcmp(back, s);
    free(back);
    if (!ok) {
        json_decref(v);
        return NULL;
    }
    return v;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* at most 200 bytes of a value's canonical text */
static void value_text(const json_t *v, char *buf, size_t cap)
{
    char *s = gf_canonical_json(v);
    snprintf(buf, cap, "%.200s", s ? s : "?");
    free(s);
}

int gf_golden_sampler_diff(const char *stored, const char *now, char *diff, size_t cap)
{
    json_t *a = canonical_load(stored), *b = canonical_load(now);
    int rc = a && b ? 0 : -1;
    size_t n = rc ? 0 : json_object_size(a) + json_object_size(b), k = 0;
    const char **keys = rc ? NULL : malloc((n ? n : 1) * sizeof *keys);
    if (!rc && !keys)
        rc = -1;
    const char *key;
    json_t *val;
    if (!rc) {
        json_object_foreach(a, key, val) keys[k++] = key;
        json_object_foreach(b, key, val) if (!json_object_get(a, key)) keys[k++] = key;
        qsort(keys, k, sizeof *keys, cmp_str);
    }
    for (size_t i = 0; !rc && i < k; i++) { /* the first field, in key order, where they differ */
        const json_t *va = json_object_get(a, keys[i]), *vb = json_object_get(b, keys[i]);
        char ta[256] = "", tb[256] = "";
        if (va)
            value_text(va, ta, sizeof ta);
        if (vb)
            value_text(vb, tb, sizeof tb);
        if (va && vb && !strcmp(ta, tb))
            continue;
        if (!vb)
            snprintf(diff, cap, "'%s' is %s in the golden, absent in the case's sampler", keys[i], ta);
        else if (!va)
            snprintf(diff, cap, "'%s' is absent in the golden, %s in the case's sampler", keys[i], tb);
        else
            snprintf(diff, cap, "'%s' is %s in the golden, %s in the case's sampler", keys[i], ta, tb);
        rc = 1;
    }
    free(keys);
    json_decref(a);
    json_decref(b);
    return rc;
}
