/* The tokenizer's normalizers (tokenizer.json "normalizer"), and the small
 * pieces the other components share: growable buffers, string lists, the
 * patterns of Split / Replace (PCRE2) and HF's find_matches.
 *
 * Unicode normalization (NFC, NFD, NFKC, NFKD) and lower-casing are
 * utf8proc's; the patterns PCRE2's. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_internal.h"

/* ---- buffers and lists ---- */

gf_status gf_tok_buf_put(gf_tok_buf *b, const void *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->n + n + 1 > cap)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return gf_error_set(GF_E_NOMEM, "out of memory in the tokenizer");
        b->p = np;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return GF_OK;
}

gf_status gf_tok_list_add(gf_tok_list *l, const void *p, size_t n, int origin)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        gf_tok_piece *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return gf_error_set(GF_E_NOMEM, "out of memory in the tokenizer");
        l->v = nv;
        l->cap = cap;
    }
    size_t off = l->text.n;
    gf_status st = gf_tok_buf_put(&l->text, p, n);
    if (st)
        return st;
    l->v[l->n++] = (gf_tok_piece){off, n, origin};
    return GF_OK;
}

void gf_tok_list_free(gf_tok_list *l)
{
    free(l->text.p);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ---- patterns ---- */

/* Oniguruma's \s is Unicode White_Space; PCRE2's \s under UCP also matches
 * U+180E, so \s and \S are written out (see docs/tokenizer.md). */
#define GF_WS_CLASS                                                                           \
    "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}" \
    "\\x{205F}\\x{3000}"

gf_status gf_tok_regex_compile(const char *pattern, size_t len, uint32_t options, const char *where,
                               pcre2_code **re_out)
{
    gf_tok_buf b = {0};
    gf_status st = GF_OK;
    if (options & PCRE2_LITERAL) {
        st = gf_tok_buf_put(&b, pattern, len);
    } else {
        int in_class = 0;
        for (size_t i = 0; !st && i < len; i++) {
            char ch = pattern[i];
            if (ch == '\\' && i + 1 < len) {
                char e = pattern[++i];
                if (e == 's')
                    st = gf_tok_buf_put(&b, in_class ? GF_WS_CLASS : "[" GF_WS_CLASS "]",
                                        strlen(in_class ? GF_WS_CLASS : "[" GF_WS_CLASS "]"));
                else if (e == 'S' && !in_class)
                    st = gf_tok_buf_put(&b, "[^" GF_WS_CLASS "]", strlen("[^" GF_WS_CLASS "]"));
                else if (e == 'S')
                    st = gf_error_set(GF_E_UNSUPPORTED,
                                      "%s: \\S inside a character class is "
                                      "not supported",
                                      where);
                else {
                    char two[2] = {'\\', e};
                    st = gf_tok_buf_put(&b, two, 2);
                }
                continue;
            }
            if (!in_class && ch == '[') {
                in_class = 1;
                st = gf_tok_buf_put(&b, &ch, 1);
                if (i + 1 < len && pattern[i + 1] == '^')
                    st = st ? st : gf_tok_buf_put(&b, &pattern[++i], 1);
                if (i + 1 < len && pattern[i + 1] == ']') /* a literal ] first */
                    st = st ? st : gf_tok_buf_put(&b, &pattern[++i], 1);
                continue;
            }
            if (in_class && ch == ']')
                in_class = 0;
            st = gf_tok_buf_put(&b, &ch, 1);
        }
    }
    if (st) {
        free(b.p);
        return st;
    }
    int err;
    PCRE2_SIZE eo;
    if (!(options & PCRE2_LITERAL)) /* UCP is not allowed with LITERAL (nor needed) */
        options |= PCRE2_UCP;
    *re_out = pcre2_compile((PCRE2_SPTR)(b.p ? b.p : ""), b.n, options | PCRE2_UTF, &err, &eo, NULL);
    free(b.p);
    if (!*re_out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return gf_error_set(GF_E_UNSUPPORTED, "%s: PCRE2 rejects the pattern '%.*s': %s", where,
                            (int)(len > 200 ? 200 : len), pattern, (const char *)msg);
    }
    (void)pcre2_jit_compile(*re_out, PCRE2_JIT_COMPLETE); /* optional speed-up */
    return GF_OK;
}

gf_status gf_tok_component_type(json_t *j, const char *where, const char **type_out)
{
    *type_out = NULL;
    if (!json_is_object(j))
        return gf_error_set(GF_E_FORMAT, "%s: not an object", where);
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!type)
        return gf_error_set(GF_E_FORMAT, "%s: no \"type\"", where);
    *type_out = type;
    return GF_OK;
}

gf_status gf_tok_sequence(gf_tokenizer *t, json_t *j, const char *where, const char *key, gf_tok_add_fn add)
{
    json_t *list = json_object_get(j, key);
    if (!json_is_array(list))
        return gf_error_set(GF_E_FORMAT, "%s: Sequence without a \"%s\" list", where, key);
    for (size_t i = 0; i < json_array_size(list); i++) {
        char sub[1200];
        snprintf(sub, sizeof sub, "%s.%s[%zu]", where, key, i);
        gf_status st = add(t, json_array_get(list, i), sub);
        if (st != GF_OK)
            return st;
    }
    return GF_OK;
}

gf_status gf_tok_pattern_compile(json_t *pattern, const char *where, pcre2_code **re_out)
{
    json_t *s = json_object_get(pattern, "String"), *r = json_object_get(pattern, "Regex");
    if (json_is_string(s) && !r)
        return gf_tok_regex_compile(json_string_value(s), json_string_length(s), PCRE2_LITERAL, where, re_out);
    if (json_is_string(r) && !s)
        return gf_tok_regex_compile(json_string_value(r), json_string_length(r), 0, where, re_out);
    return gf_error_set(GF_E_FORMAT, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", where);
}

static gf_status range_add(gf_tok_range **v, size_t *nv, size_t *cap, size_t s, size_t e, int m)
{
    if (*nv == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        gf_tok_range *n = realloc(*v, c * sizeof *n);
        if (!n)
            return gf_error_set(GF_E_NOMEM, "out of memory in the tokenizer");
        *v = n;
        *cap = c;
    }
    (*v)[(*nv)++] = (gf_tok_range){s, e, m};
    return GF_OK;
}

/* HF's find_matches over Oniguruma's find_iter: the matches and the gaps
 * between them, in order; an empty match right after the previous match is
 * skipped (the search moves on one character). An empty pattern (String "")
 * matches nothing. */
gf_status gf_tok_find_matches(const pcre2_code *re, const char *s, size_t n, gf_tok_range **v, size_t *nv, size_t *cap)
{
    *nv = 0;
    if (n == 0)
        return range_add(v, nv, cap, 0, 0, 0);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return gf_error_set(GF_E_NOMEM, "out of memory in the tokenizer");
    size_t prev = 0, from = 0, last_end = (size_t)-1;
    gf_status st = GF_OK;
    while (!st && from <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = gf_error_set(GF_E_INTERNAL, "pattern match failed at byte %zu: %s", from, (const char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms == me && last_end == me) {
            if (from >= n)
                break;
            size_t cl;
            gf_utf8_get((const uint8_t *)s + from, n - from, &cl);
            from += cl;
            continue;
        }
        if (ms == me && me == n && prev == n)
            break; /* an empty match at the very end adds nothing HF keeps */
        if (prev != ms)
            st = range_add(v, nv, cap, prev, ms, 0);
        if (!st)
            st = range_add(v, nv, cap, ms, me, 1);
        prev = me;
        from = me;
        last_end = me;
    }
    pcre2_match_data_free(md);
    if (!st && prev != n)
        st = range_add(v, nv, cap, prev, n, 0);
    return st;
}

gf_status gf_tok_replace_all(const pcre2_code *re, const char *s, size_t n, const char *rep, size_t rep_len,
                             gf_tok_buf *out)
{
    out->n = 0;
    gf_tok_range *v = NULL;
    size_t nv = 0, cap = 0;
    gf_status st = gf_tok_find_matches(re, s, n, &v, &nv, &cap);
    for (size_t i = 0; !st && i < nv; i++) {
        if (v[i].match)
            st = gf_tok_buf_put(out, rep, rep_len);
        else
            st = gf_tok_buf_put(out, s + v[i].s, v[i].e - v[i].s);
    }
    if (!st && !out->p)
        st = gf_tok_buf_put(out, "", 0);
    free(v);
    return st;
}

/* ---- normalizers ---- */

/* clang-format off */
#define GF_NORM_TYPES(X)              \
    X("NFC", GF_NORM_NFC)             \
    X("NFD", GF_NORM_NFD)             \
    X("NFKC", GF_NORM_NFKC)           \
    X("NFKD", GF_NORM_NFKD)           \
    X("Lowercase", GF_NORM_LOWERCASE) \
    X("Prepend", GF_NORM_PREPEND)     \
    X("Replace", GF_NORM_REPLACE)     \
    X("Strip", GF_NORM_STRIP)
/* clang-format on */

static gf_status norm_add(gf_tokenizer *t, json_t *j, const char *where)
{
    const char *type;
    gf_status st0 = gf_tok_component_type(j, where, &type);
    if (st0 != GF_OK)
        return st0;
    if (!strcmp(type, "Sequence"))
        return gf_tok_sequence(t, j, where, "normalizers", norm_add);
    int kind = -1;
#define X(name, k)           \
    if (!strcmp(type, name)) \
        kind = k;
    GF_NORM_TYPES(X)
#undef X
    if (kind < 0)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: type '%s' is not supported", where, type);
    gf_tok_norm *nv = realloc(t->norm, (t->n_norm + 1) * sizeof *nv);
    if (!nv)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    t->norm = nv;
    gf_tok_norm *n = &t->norm[t->n_norm++];
    memset(n, 0, sizeof *n);
    n->kind = (gf_tok_norm_kind)kind;
    if (kind == GF_NORM_PREPEND || kind == GF_NORM_REPLACE) {
        json_t *s = json_object_get(j, kind == GF_NORM_PREPEND ? "prepend" : "content");
        if (!json_is_string(s))
            return gf_error_set(GF_E_FORMAT, "%s: %s needs a string \"%s\"", where, type,
                                kind == GF_NORM_PREPEND ? "prepend" : "content");
        n->len = json_string_length(s);
        n->str = malloc(n->len + 1);
        if (!n->str)
            return gf_error_set(GF_E_NOMEM, "out of memory");
        memcpy(n->str, json_string_value(s), n->len + 1);
    }
    if (kind == GF_NORM_REPLACE)
        return gf_tok_pattern_compile(json_object_get(j, "pattern"), where, &n->re);
    if (kind == GF_NORM_STRIP) {
        json_t *l = json_object_get(j, "strip_left"), *r = json_object_get(j, "strip_right");
        n->left = json_is_boolean(l) ? json_is_true(l) : 1;
        n->right = json_is_boolean(r) ? json_is_true(r) : 1;
    }
    return GF_OK;
}

gf_status gf_tok_normalizer_parse(gf_tokenizer *t, json_t *j, const char *path)
{
    if (!j || json_is_null(j))
        return GF_OK;
    char where[1100];
    snprintf(where, sizeof where, "%s: normalizer", path);
    return norm_add(t, j, where);
}

/* Rust's char::to_lowercase: utf8proc's simple mapping, plus the one
 * unconditional multi-character lowercase of SpecialCasing.txt (U+0130). */
static gf_status lowercase(const char *s, size_t n, gf_tok_buf *out)
{
    gf_status st = GF_OK;
    for (size_t i = 0; !st && i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t cl = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (cl <= 0)
            return gf_error_set(GF_E_INTERNAL, "lowercase: invalid UTF-8 at byte %zu", i);
        i += (size_t)cl;
        if (cp == 0x130) {
            st = gf_tok_buf_put(out, "i\xcc\x87", 3);
            continue;
        }
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t el = utf8proc_encode_char(utf8proc_tolower(cp), enc);
        st = gf_tok_buf_put(out, enc, (size_t)el);
    }
    return st;
}

static gf_status unicode_normalize(gf_tok_norm_kind kind, const char *s, size_t n, gf_tok_buf *out)
{
    static const utf8proc_option_t opts[] = {
        [GF_NORM_NFC] = UTF8PROC_STABLE | UTF8PROC_COMPOSE,
        [GF_NORM_NFD] = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,
        [GF_NORM_NFKC] = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
        [GF_NORM_NFKD] = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
    };
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t rl = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r, opts[kind]);
    if (rl < 0)
        return gf_error_set(rl == UTF8PROC_ERROR_NOMEM ? GF_E_NOMEM : GF_E_INTERNAL, "Unicode normalization failed: %s",
                            utf8proc_errmsg(rl));
    gf_status st = gf_tok_buf_put(out, r, (size_t)rl);
    free(r);
    return st;
}

static gf_status strip(const gf_tok_norm *nm, const char *s, size_t n, gf_tok_buf *out)
{
    size_t a = 0, b = n;
    while (nm->left && a < b) {
        size_t cl;
        if (!gf_unicode_is_space(gf_utf8_get((const uint8_t *)s + a, b - a, &cl)))
            break;
        a += cl;
    }
    while (nm->right && b > a) {
        size_t i = b - 1, cl;
        while (i > a && ((uint8_t)s[i] & 0xC0) == 0x80)
            i--;
        if (!gf_unicode_is_space(gf_utf8_get((const uint8_t *)s + i, b - i, &cl)))
            break;
        b = i;
    }
    return gf_tok_buf_put(out, s + a, b - a);
}

gf_status gf_tok_normalize(const gf_tokenizer *t, const char *s, size_t n, gf_tok_buf *out)
{
    out->n = 0;
    gf_status st = gf_tok_buf_put(out, s, n);
    gf_tok_buf tmp = {0};
    for (size_t k = 0; !st && k < t->n_norm; k++) {
        const gf_tok_norm *nm = &t->norm[k];
        tmp.n = 0;
        switch (nm->kind) {
        case GF_NORM_NFC:
        case GF_NORM_NFD:
        case GF_NORM_NFKC:
        case GF_NORM_NFKD: st = unicode_normalize(nm->kind, out->p, out->n, &tmp); break;
        case GF_NORM_LOWERCASE: st = lowercase(out->p, out->n, &tmp); break;
        case GF_NORM_PREPEND:
            if (out->n) /* HF prepends to a non-empty string only */
                st = gf_tok_buf_put(&tmp, nm->str, nm->len);
            st = st ? st : gf_tok_buf_put(&tmp, out->p, out->n);
            break;
        case GF_NORM_REPLACE: st = gf_tok_replace_all(nm->re, out->p, out->n, nm->str, nm->len, &tmp); break;
        case GF_NORM_STRIP: st = strip(nm, out->p, out->n, &tmp); break;
        }
        if (!st && !tmp.p)
            st = gf_tok_buf_put(&tmp, "", 0);
        if (!st) {
            gf_tok_buf sw = *out;
            *out = tmp;
            tmp = sw;
        }
    }
    free(tmp.p);
    return st;
}
