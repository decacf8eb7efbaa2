/* The tokenizer's pre-tokenizers (tokenizer.json "pre_tokenizer"): ByteLevel
 * (GPT-2's split regex and the byte alphabet), Split, Digits, Metaspace,
 * Punctuation, Whitespace, WhitespaceSplit and Sequence, each as Hugging Face
 * tokenizers runs it over the list of splits. The patterns run on PCRE2. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define GF_WS \
    "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
/* GPT-2's pre-tokenization regex (ByteLevel with use_regex), \s written as
 * White_Space by gf_tok_regex_compile. */
static const char k_bytelevel_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Whitespace: \w+|[^\w\s]+ with Oniguruma's Unicode \w (letters, marks,
 * numbers, connector punctuation), kept by an inverted Removed split. */
static const char k_whitespace_pattern[] = "[\\p{L}\\p{M}\\p{N}\\p{Pc}]+|[^\\p{L}\\p{M}\\p{N}\\p{Pc}" GF_WS "]+";
/* WhitespaceSplit: char::is_whitespace, one character at a time. */
static const char k_wsplit_pattern[] = "[" GF_WS "]";
/* Digits: char::is_numeric (Nd, Nl, No), one character at a time. */
static const char k_digits_pattern[] = "\\p{N}";
/* Punctuation: char::is_ascii_punctuation || is_punctuation (the P categories). */
static const char k_punct_pattern[] = "[\\p{P}!-/:-@\\[-`{-~]";

static const char *const k_behaviors[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};

static gf_status parse_behavior(json_t *j, const char *where, gf_tok_split_behavior dflt, gf_tok_split_behavior *out)
{
    json_t *b = json_object_get(j, "behavior");
    *out = dflt;
    if (!b)
        return GF_OK;
    const char *s = json_string_value(b);
    for (int i = 0; s && i < 5; i++)
        if (!strcmp(s, k_behaviors[i])) {
            *out = (gf_tok_split_behavior)i;
            return GF_OK;
        }
    return gf_error_set(GF_E_UNSUPPORTED, "%s: behavior '%s' is not supported", where, s ? s : "?");
}

static int get_bool(json_t *j, const char *key, int dflt)
{
    json_t *v = json_object_get(j, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static gf_status pre_add(gf_tokenizer *t, json_t *j, const char *where)
{
    const char *type;
    gf_status st0 = gf_tok_component_type(j, where, &type);
    if (st0 != GF_OK)
        return st0;
    if (!strcmp(type, "Sequence"))
        return gf_tok_sequence(t, j, where, "pretokenizers", pre_add);
    gf_tok_pre p = {.behavior = GF_SPLIT_ISOLATED};
    gf_status st = GF_OK;
    if (!strcmp(type, "ByteLevel")) {
        p.kind = GF_PRE_BYTELEVEL;
        p.add_prefix_space = get_bool(j, "add_prefix_space", 1);
        if (get_bool(j, "use_regex", 1))
            st = gf_tok_regex_compile(k_bytelevel_pattern, strlen(k_bytelevel_pattern), 0, where, &p.re);
        t->byte_level = 1;
    } else if (!strcmp(type, "Split")) {
        p.kind = GF_PRE_SPLIT;
        p.invert = get_bool(j, "invert", 0);
        st = parse_behavior(j, where, GF_SPLIT_ISOLATED, &p.behavior);
        if (!st)
            st = gf_tok_pattern_compile(json_object_get(j, "pattern"), where, &p.re);
    } else if (!strcmp(type, "Digits")) {
        p.kind = GF_PRE_DIGITS;
        p.behavior = get_bool(j, "individual_digits", 0) ? GF_SPLIT_ISOLATED : GF_SPLIT_CONTIGUOUS;
        st = gf_tok_regex_compile(k_digits_pattern, strlen(k_digits_pattern), 0, where, &p.re);
    } else if (!strcmp(type, "Punctuation")) {
        p.kind = GF_PRE_PUNCTUATION;
        st = parse_behavior(j, where, GF_SPLIT_ISOLATED, &p.behavior);
        if (!st)
            st = gf_tok_regex_compile(k_punct_pattern, strlen(k_punct_pattern), 0, where, &p.re);
    } else if (!strcmp(type, "Whitespace")) {
        p.kind = GF_PRE_WHITESPACE;
        p.behavior = GF_SPLIT_REMOVED;
        p.invert = 1;
        st = gf_tok_regex_compile(k_whitespace_pattern, strlen(k_whitespace_pattern), 0, where, &p.re);
    } else if (!strcmp(type, "WhitespaceSplit")) {
        p.kind = GF_PRE_WHITESPACE_SPLIT;
        p.behavior = GF_SPLIT_REMOVED;
        st = gf_tok_regex_compile(k_wsplit_pattern, strlen(k_wsplit_pattern), 0, where, &p.re);
    } else if (!strcmp(type, "Metaspace")) {
        p.kind = GF_PRE_METASPACE;
        p.behavior = GF_SPLIT_MERGED_NEXT;
        json_t *r = json_object_get(j, "replacement");
        const char *rs = json_string_value(r);
        size_t cl;
        if (!rs || !json_string_length(r) || json_string_length(r) > 4 ||
            (gf_utf8_get((const uint8_t *)rs, json_string_length(r), &cl), cl) != json_string_length(r))
            return gf_error_set(GF_E_FORMAT, "%s: Metaspace needs a one-character \"replacement\"", where);
        memcpy(p.rep, rs, json_string_length(r));
        p.rep_len = json_string_length(r);
        p.split = get_bool(j, "split", 1);
        const char *scheme = json_string_value(json_object_get(j, "prepend_scheme"));
        if (!scheme)
            p.prepend = get_bool(j, "add_prefix_space", 1) ? GF_PREPEND_ALWAYS : GF_PREPEND_NEVER;
        else if (!strcmp(scheme, "always"))
            p.prepend = GF_PREPEND_ALWAYS;
        else if (!strcmp(scheme, "first"))
            p.prepend = GF_PREPEND_FIRST;
        else if (!strcmp(scheme, "never"))
            p.prepend = GF_PREPEND_NEVER;
        else
            return gf_error_set(GF_E_UNSUPPORTED, "%s: prepend_scheme '%s' is not supported", where, scheme);
        st = gf_tok_regex_compile(p.rep, p.rep_len, PCRE2_LITERAL, where, &p.re);
    } else {
        return gf_error_set(GF_E_UNSUPPORTED, "%s: type '%s' is not supported", where, type);
    }
    if (st) {
        pcre2_code_free(p.re);
        return st;
    }
    gf_tok_pre *nv = realloc(t->pre, (t->n_pre + 1) * sizeof *nv);
    if (!nv) {
        pcre2_code_free(p.re);
        return gf_error_set(GF_E_NOMEM, "out of memory");
    }
    t->pre = nv;
    t->pre[t->n_pre++] = p;
    return GF_OK;
}

gf_status gf_tok_pretokenizer_parse(gf_tokenizer *t, json_t *j, const char *path)
{
    if (!j || json_is_null(j))
        return GF_OK;
    char where[1100];
    snprintf(where, sizeof where, "%s: pre_tokenizer", path);
    return pre_add(t, j, where);
}

/* ---- running ---- */

typedef struct scratch {
    gf_tok_range *r;
    size_t nr, cap;
    gf_tok_buf buf;
} scratch;

/* HF's NormalizedString::split: the ranges of s[0, n) to keep under the
 * behaviour, empty ones dropped, into out. */
static gf_status split_by(const gf_tok_pre *p, const char *s, size_t n, int origin, scratch *k, gf_tok_list *out)
{
    gf_status st = gf_tok_find_matches(p->re, s, n, &k->r, &k->nr, &k->cap);
    if (st)
        return st;
    gf_tok_range *r = k->r;
    size_t nr = k->nr, m = 0;
    if (p->invert)
        for (size_t i = 0; i < nr; i++)
            r[i].match = !r[i].match;
    /* r[i].match becomes "remove" after this pass; ranges merged in place */
    switch (p->behavior) {
    case GF_SPLIT_REMOVED: break;
    case GF_SPLIT_ISOLATED:
        for (size_t i = 0; i < nr; i++)
            r[i].match = 0;
        break;
    case GF_SPLIT_MERGED_PREV:
    case GF_SPLIT_CONTIGUOUS: {
        int prev_match = 0;
        for (size_t i = 0; i < nr; i++) {
            int merge = p->behavior == GF_SPLIT_MERGED_PREV ? r[i].match && !prev_match : r[i].match == prev_match;
            prev_match = r[i].match;
            if (merge && m > 0)
                r[m - 1].e = r[i].e;
            else
                r[m++] = (gf_tok_range){r[i].s, r[i].e, 0};
        }
        nr = m;
        break;
    }
    case GF_SPLIT_MERGED_NEXT: {
        int prev_match = 0;
        m = nr; /* filled from the end */
        for (size_t i = nr; i-- > 0;) {
            int merge = r[i].match && !prev_match;
            prev_match = r[i].match;
            if (merge && m < nr)
                r[m].s = r[i].s;
            else
                r[--m] = (gf_tok_range){r[i].s, r[i].e, 0};
        }
        memmove(r, r + m, (nr - m) * sizeof *r);
        nr -= m;
        break;
    }
    }
    for (size_t i = 0; !st && i < nr; i++)
        if (!r[i].match && r[i].e > r[i].s)
            st = gf_tok_list_add(out, s + r[i].s, r[i].e - r[i].s, origin && r[i].s == 0);
    return st;
}

static gf_status bytelevel(const gf_tok_pre *p, const char *s, size_t n, int origin, scratch *k, gf_tok_list *out)
{
    size_t first = out->n;
    gf_status st;
    char *tmp = NULL;
    if (p->add_prefix_space && s[0] != ' ') {
        if (!(tmp = malloc(n + 1)))
            return gf_error_set(GF_E_NOMEM, "out of memory while encoding");
        tmp[0] = ' ';
        memcpy(tmp + 1, s, n);
        s = tmp;
        n++;
    }
    if (p->re)
        st = split_by(p, s, n, origin, k, out);
    else
        st = gf_tok_list_add(out, s, n, origin);
    free(tmp);
    /* map every new split's bytes to the byte-level alphabet */
    for (size_t i = first; !st && i < out->n; i++) {
        gf_tok_piece *pc = &out->v[i];
        k->buf.n = 0;
        for (size_t j = 0; !st && j < pc->len; j++) {
            char enc[4];
            size_t el = gf_utf8_put(gf_tok_byte_to_cp((uint8_t)out->text.p[pc->off + j]), enc);
            st = gf_tok_buf_put(&k->buf, enc, el);
        }
        if (st)
            break;
        /* the mapped split replaces the original at the end of the text */
        size_t off = out->text.n;
        st = gf_tok_buf_put(&out->text, k->buf.p, k->buf.n);
        pc = &out->v[i];
        pc->off = off;
        pc->len = k->buf.n;
    }
    return st;
}

static gf_status metaspace(const gf_tok_pre *p, const char *s, size_t n, int origin, scratch *k, gf_tok_list *out)
{
    gf_tok_buf *b = &k->buf;
    b->n = 0;
    gf_status st = GF_OK;
    int starts = n >= p->rep_len && !memcmp(s, p->rep, p->rep_len);
    if (s[0] == ' ') /* the replacement of ' ' below */
        starts = 1;
    if (!starts && (p->prepend == GF_PREPEND_ALWAYS || (p->prepend == GF_PREPEND_FIRST && origin)))
        st = gf_tok_buf_put(b, p->rep, p->rep_len);
    for (size_t i = 0; !st && i < n; i++)
        st = s[i] == ' ' ? gf_tok_buf_put(b, p->rep, p->rep_len) : gf_tok_buf_put(b, s + i, 1);
    if (st)
        return st;
    if (!p->split)
        return gf_tok_list_add(out, b->p, b->n, origin);
    char *copy = malloc(b->n + 1);
    if (!copy)
        return gf_error_set(GF_E_NOMEM, "out of memory while encoding");
    memcpy(copy, b->p, b->n);
    st = split_by(p, copy, b->n, origin, k, out);
    free(copy);
    return st;
}

gf_status gf_tok_pretokenize(const gf_tokenizer *t, const char *s, size_t n, int origin, gf_tok_list *l)
{
    l->n = 0;
    l->text.n = 0;
    gf_status st = gf_tok_list_add(l, s, n, origin);
    gf_tok_list next = {0};
    scratch k = {0};
    for (size_t step = 0; !st && step < t->n_pre; step++) {
        const gf_tok_pre *p = &t->pre[step];
        next.n = 0;
        next.text.n = 0;
        for (size_t i = 0; !st && i < l->n; i++) {
            const char *ps = l->text.p + l->v[i].off;
            size_t pn = l->v[i].len;
            int po = l->v[i].origin;
            if (pn == 0)
                continue;
            if (p->kind == GF_PRE_BYTELEVEL)
                st = bytelevel(p, ps, pn, po, &k, &next);
            else if (p->kind == GF_PRE_METASPACE)
                st = metaspace(p, ps, pn, po, &k, &next);
            else
                st = split_by(p, ps, pn, po, &k, &next);
        }
        gf_tok_list sw = *l;
        *l = next;
        next = sw;
    }
    gf_tok_list_free(&next);
    free(k.r);
    free(k.buf.p);
    return st;
}
