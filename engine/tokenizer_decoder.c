/* The tokenizer's decoders (tokenizer.json "decoder": ByteLevel, Metaspace,
 * ByteFallback, Fuse, Strip, Replace, Sequence) and post-processor
 * ("post_processor": TemplateProcessing, ByteLevel, Sequence), the bytes each
 * token stands for (for streaming), and gf_tokenizer_decode. Each decoder
 * step works on the list of token strings as HF's decode_chain does. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static const char k_fffd[] = "\xef\xbf\xbd";

/* ---- parsing ---- */

static gf_status one_char(json_t *j, const char *key, const char *where, char rep[5], size_t *len)
{
    json_t *r = json_object_get(j, key);
    const char *s = json_string_value(r);
    size_t n = json_string_length(r), cl = 0;
    if (s && n && n <= 4)
        gf_utf8_get((const uint8_t *)s, n, &cl);
    if (!s || !n || cl != n)
        return gf_error_set(GF_E_FORMAT, "%s: needs a one-character \"%s\"", where, key);
    memcpy(rep, s, n);
    *len = n;
    return GF_OK;
}

static gf_status dec_add(gf_tokenizer *t, json_t *j, const char *where)
{
    const char *type;
    gf_status st0 = gf_tok_component_type(j, where, &type);
    if (st0 != GF_OK)
        return st0;
    if (!strcmp(type, "Sequence"))
        return gf_tok_sequence(t, j, where, "decoders", dec_add);
    gf_tok_dec d = {0};
    gf_status st = GF_OK;
    if (!strcmp(type, "ByteLevel")) {
        d.kind = GF_DEC_BYTELEVEL;
    } else if (!strcmp(type, "ByteFallback")) {
        d.kind = GF_DEC_BYTEFALLBACK;
    } else if (!strcmp(type, "Fuse")) {
        d.kind = GF_DEC_FUSE;
    } else if (!strcmp(type, "Metaspace")) {
        d.kind = GF_DEC_METASPACE;
        st = one_char(j, "replacement", where, d.rep, &d.rep_len);
        const char *scheme = json_string_value(json_object_get(j, "prepend_scheme"));
        json_t *aps = json_object_get(j, "add_prefix_space");
        if (!scheme)
            d.prepend = json_is_false(aps) ? GF_PREPEND_NEVER : GF_PREPEND_ALWAYS;
        else if (!strcmp(scheme, "always"))
            d.prepend = GF_PREPEND_ALWAYS;
        else if (!strcmp(scheme, "first"))
            d.prepend = GF_PREPEND_FIRST;
        else if (!strcmp(scheme, "never"))
            d.prepend = GF_PREPEND_NEVER;
        else if (!st)
            st = gf_error_set(GF_E_UNSUPPORTED, "%s: prepend_scheme '%s' is not supported", where, scheme);
    } else if (!strcmp(type, "Strip")) {
        d.kind = GF_DEC_STRIP;
        st = one_char(j, "content", where, d.rep, &d.rep_len);
        json_t *a = json_object_get(j, "start"), *b = json_object_get(j, "stop");
        if (!st && (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 ||
                    json_integer_value(b) < 0 || json_integer_value(a) > 1 << 20 || json_integer_value(b) > 1 << 20))
            st = gf_error_set(GF_E_FORMAT, "%s: Strip needs integer \"start\" and \"stop\"", where);
        d.start = (int)json_integer_value(a);
        d.stop = (int)json_integer_value(b);
    } else if (!strcmp(type, "Replace")) {
        d.kind = GF_DEC_REPLACE;
        json_t *c = json_object_get(j, "content");
        if (!json_is_string(c))
            return gf_error_set(GF_E_FORMAT, "%s: Replace needs a string \"content\"", where);
        d.len = json_string_length(c);
        if (!(d.str = malloc(d.len + 1)))
            return gf_error_set(GF_E_NOMEM, "out of memory");
        memcpy(d.str, json_string_value(c), d.len + 1);
        st = gf_tok_pattern_compile(json_object_get(j, "pattern"), where, &d.re);
    } else {
        return gf_error_set(GF_E_UNSUPPORTED, "%s: type '%s' is not supported", where, type);
    }
    gf_tok_dec *nv = st ? NULL : realloc(t->dec, (t->n_dec + 1) * sizeof *nv);
    if (!nv) {
        free(d.str);
        pcre2_code_free(d.re);
        return st ? st : gf_error_set(GF_E_NOMEM, "out of memory");
    }
    t->dec = nv;
    t->dec[t->n_dec++] = d;
    return GF_OK;
}

gf_status gf_tok_decoder_parse(gf_tokenizer *t, json_t *j, const char *path)
{
    if (!j || json_is_null(j))
        return GF_OK;
    t->has_decoder = 1;
    char where[1100];
    snprintf(where, sizeof where, "%s: decoder", path);
    return dec_add(t, j, where);
}

/* TemplateProcessing's "single": the ids of the special tokens before and
 * after the sequence $A. */
static gf_status template_parse(gf_tokenizer *t, json_t *j, const char *where)
{
    if (t->has_template)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: a second TemplateProcessing is not supported", where);
    json_t *single = json_object_get(j, "single"), *specials = json_object_get(j, "special_tokens");
    if (!json_is_array(single))
        return gf_error_set(GF_E_FORMAT, "%s: TemplateProcessing needs a \"single\" list", where);
    size_t seen_a = 0;
    t->has_template = 1;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *p = json_array_get(single, i), *sp = json_object_get(p, "SpecialToken");
        if (json_object_get(p, "Sequence")) {
            const char *id = json_string_value(json_object_get(json_object_get(p, "Sequence"), "id"));
            if (!id || strcmp(id, "A") || seen_a++)
                return gf_error_set(GF_E_UNSUPPORTED,
                                    "%s: single[%zu]: only one Sequence A is "
                                    "supported in the single template",
                                    where, i);
            continue;
        }
        const char *name = json_string_value(json_object_get(sp, "id"));
        json_t *entry = name ? json_object_get(specials, name) : NULL;
        json_t *ids = json_object_get(entry, "ids");
        if (!name || !json_is_array(ids))
            return gf_error_set(GF_E_FORMAT,
                                "%s: single[%zu]: a SpecialToken with no ids in "
                                "\"special_tokens\"",
                                where, i);
        for (size_t k = 0; k < json_array_size(ids); k++) {
            json_t *v = json_array_get(ids, k);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= t->n_ids)
                return gf_error_set(GF_E_FORMAT,
                                    "%s: special token '%s' has an id outside the "
                                    "vocabulary",
                                    where, name);
            int32_t **arr = seen_a ? &t->post_post : &t->post_pre;
            size_t *n = seen_a ? &t->n_post_post : &t->n_post_pre;
            int32_t *na = realloc(*arr, (*n + 1) * sizeof *na);
            if (!na)
                return gf_error_set(GF_E_NOMEM, "out of memory");
            *arr = na;
            na[(*n)++] = (int32_t)json_integer_value(v);
        }
    }
    if (!seen_a)
        return gf_error_set(GF_E_FORMAT, "%s: the single template has no Sequence A", where);
    return GF_OK;
}

static gf_status post_add(gf_tokenizer *t, json_t *j, const char *where)
{
    const char *type = json_string_value(json_object_get(j, "type"));
    if (!json_is_object(j) || !type)
        return gf_error_set(GF_E_FORMAT, "%s: not an object with a \"type\"", where);
    if (!strcmp(type, "ByteLevel"))
        return GF_OK; /* it only trims offsets */
    if (!strcmp(type, "TemplateProcessing"))
        return template_parse(t, j, where);
    if (!strcmp(type, "Sequence"))
        return gf_tok_sequence(t, j, where, "processors", post_add);
    return gf_error_set(GF_E_UNSUPPORTED, "%s: type '%s' is not supported", where, type);
}

gf_status gf_tok_post_parse(gf_tokenizer *t, json_t *j, const char *path)
{
    if (!j || json_is_null(j))
        return GF_OK;
    char where[1100];
    snprintf(where, sizeof where, "%s: post_processor", path);
    return post_add(t, j, where);
}

void gf_tok_components_free(gf_tokenizer *t)
{
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].str);
        pcre2_code_free(t->norm[i].re);
    }
    free(t->norm);
    for (size_t i = 0; i < t->n_pre; i++)
        pcre2_code_free(t->pre[i].re);
    free(t->pre);
    for (size_t i = 0; i < t->n_dec; i++) {
        free(t->dec[i].str);
        pcre2_code_free(t->dec[i].re);
    }
    free(t->dec);
    free(t->post_pre);
    free(t->post_post);
}

/* ---- the per-token steps ---- */

/* ByteLevel: the bytes a token string stands for; a string with a character
 * outside the alphabet stands for its own UTF-8 bytes (HF's CHAR_BYTES). */
static gf_status bytelevel_bytes(const char *s, size_t n, gf_tok_buf *out)
{
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t cl;
        int b = gf_tok_cp_to_byte(gf_utf8_get((const uint8_t *)s + i, n - i, &cl));
        if (b < 0) {
            out->n = start;
            return gf_tok_buf_put(out, s, n);
        }
        uint8_t c = (uint8_t)b;
        gf_status st = gf_tok_buf_put(out, &c, 1);
        if (st)
            return st;
        i += cl;
    }
    return gf_tok_buf_put(out, "", 0);
}

/* "<0xXX>" -> the byte, else -1 (HF: six bytes, u8::from_str_radix). */
static int fallback_byte(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Metaspace: the replacement becomes ' ' (dropped in the first token when
 * the scheme prepends one; all of them, as HF does). */
static gf_status metaspace_map(const gf_tok_dec *d, const char *s, size_t n, int first, gf_tok_buf *out)
{
    gf_status st = gf_tok_buf_put(out, "", 0);
    for (size_t i = 0; !st && i < n;) {
        if (n - i >= d->rep_len && !memcmp(s + i, d->rep, d->rep_len)) {
            if (!(first && d->prepend != GF_PREPEND_NEVER))
                st = gf_tok_buf_put(out, " ", 1);
            i += d->rep_len;
        } else {
            st = gf_tok_buf_put(out, s + i, 1);
            i++;
        }
    }
    return st;
}

static gf_status strip_map(const gf_tok_dec *d, const char *s, size_t n, gf_tok_buf *out)
{
    size_t a = 0, b = n;
    for (int k = 0; k < d->start && b - a >= d->rep_len && !memcmp(s + a, d->rep, d->rep_len); k++)
        a += d->rep_len;
    for (int k = 0; k < d->stop && b - a >= d->rep_len && !memcmp(s + b - d->rep_len, d->rep, d->rep_len); k++)
        b -= d->rep_len;
    return gf_tok_buf_put(out, s + a, b - a);
}

/* Token bytes (streaming): the per-token steps in order, in bytes; Fuse,
 * Strip and Metaspace's first-token rule depend on the position and are
 * left to gf_tokenizer_decode. */
gf_status gf_tok_token_bytes_build(gf_tokenizer *t)
{
    gf_tok_buf a = {0}, b = {0};
    gf_status st = GF_OK;
    for (int32_t id = 0; !st && id < t->n_ids; id++) {
        if (t->str_off[id] == GF_TOK_NONE)
            continue;
        a.n = 0;
        st = gf_tok_buf_put(&a, t->arena + t->str_off[id], t->str_len[id]);
        for (size_t k = 0; !st && k < t->n_dec; k++) {
            const gf_tok_dec *d = &t->dec[k];
            b.n = 0;
            int fb;
            switch (d->kind) {
            case GF_DEC_BYTELEVEL: st = bytelevel_bytes(a.p, a.n, &b); break;
            case GF_DEC_BYTEFALLBACK:
                fb = fallback_byte(a.p, a.n);
                if (fb >= 0) {
                    uint8_t c = (uint8_t)fb;
                    st = gf_tok_buf_put(&b, &c, 1);
                } else {
                    st = gf_tok_buf_put(&b, a.p, a.n);
                }
                break;
            case GF_DEC_METASPACE: st = metaspace_map(d, a.p, a.n, 0, &b); break;
            case GF_DEC_REPLACE:
                if (gf_utf8_valid_prefix((const uint8_t *)a.p, a.n) == a.n)
                    st = gf_tok_replace_all(d->re, a.p, a.n, d->str, d->len, &b);
                else
                    st = gf_tok_buf_put(&b, a.p, a.n);
                break;
            case GF_DEC_FUSE:
            case GF_DEC_STRIP: st = gf_tok_buf_put(&b, a.p, a.n); break;
            }
            gf_tok_buf sw = a;
            a = b;
            b = sw;
        }
        if (!st) {
            uint32_t off = 0;
            size_t need = t->arena_len + a.n + 1;
            if (need > t->arena_cap) {
                size_t cap = t->arena_cap ? t->arena_cap : 1 << 16;
                while (need > cap)
                    cap *= 2;
                char *na = cap > UINT32_MAX ? NULL : realloc(t->arena, cap);
                if (!na) {
                    st = gf_error_set(GF_E_NOMEM, "out of memory for the token bytes");
                    break;
                }
                t->arena = na;
                t->arena_cap = cap;
            }
            off = (uint32_t)t->arena_len;
            memcpy(t->arena + off, a.p, a.n);
            t->arena[off + a.n] = '\0';
            t->arena_len += a.n + 1;
            t->bytes_off[id] = off;
            t->bytes_len[id] = (uint32_t)a.n;
        }
    }
    free(a.p);
    free(b.p);
    return st;
}

/* ---- decode: HF's Tokenizer::decode (every id, special ones included) ---- */

static gf_status dec_step(const gf_tok_dec *d, const gf_tok_list *in, gf_tok_list *out, gf_tok_buf *tmp)
{
    gf_status st = GF_OK;
    if (d->kind == GF_DEC_BYTELEVEL || d->kind == GF_DEC_FUSE) {
        tmp->n = 0;
        for (size_t i = 0; !st && i < in->n; i++)
            st = d->kind == GF_DEC_FUSE ? gf_tok_buf_put(tmp, in->text.p + in->v[i].off, in->v[i].len)
                                        : bytelevel_bytes(in->text.p + in->v[i].off, in->v[i].len, tmp);
        if (st)
            return st;
        if (d->kind == GF_DEC_FUSE)
            return gf_tok_list_add(out, tmp->p, tmp->n, 0);
        char *s = malloc(3 * tmp->n + 1);
        if (!s)
            return gf_error_set(GF_E_NOMEM, "out of memory while decoding");
        size_t n = gf_utf8_decode_replace((const uint8_t *)tmp->p, tmp->n, s);
        st = gf_tok_list_add(out, s, n, 0);
        free(s);
        return st;
    }
    if (d->kind == GF_DEC_BYTEFALLBACK) {
        tmp->n = 0; /* the pending run of byte tokens */
        for (size_t i = 0; !st && i <= in->n; i++) {
            int b = i < in->n ? fallback_byte(in->text.p + in->v[i].off, in->v[i].len) : -1;
            if (b >= 0) {
                uint8_t c = (uint8_t)b;
                st = gf_tok_buf_put(tmp, &c, 1);
                continue;
            }
            if (tmp->n) { /* the run as one string if valid, else one U+FFFD per byte */
                if (gf_utf8_valid_prefix((const uint8_t *)tmp->p, tmp->n) == tmp->n)
                    st = gf_tok_list_add(out, tmp->p, tmp->n, 0);
                else
                    for (size_t k = 0; !st && k < tmp->n; k++)
                        st = gf_tok_list_add(out, k_fffd, 3, 0);
                tmp->n = 0;
            }
            if (!st && i < in->n)
                st = gf_tok_list_add(out, in->text.p + in->v[i].off, in->v[i].len, 0);
        }
        return st;
    }
    for (size_t i = 0; !st && i < in->n; i++) {
        const char *s = in->text.p + in->v[i].off;
        size_t n = in->v[i].len;
        tmp->n = 0;
        if (d->kind == GF_DEC_METASPACE)
            st = metaspace_map(d, s, n, i == 0, tmp);
        else if (d->kind == GF_DEC_STRIP)
            st = strip_map(d, s, n, tmp);
        else
            st = gf_tok_replace_all(d->re, s, n, d->str, d->len, tmp);
        if (!st)
            st = gf_tok_list_add(out, tmp->p ? tmp->p : "", tmp->n, 0);
    }
    return st;
}

gf_status gf_tokenizer_decode(const gf_tokenizer *tok, const int32_t *ids, size_t n, char **text_out, size_t *len_out)
{
    if (text_out)
        *text_out = NULL;
    if (len_out)
        *len_out = 0;
    if (!tok || !text_out || (!ids && n))
        return gf_error_set(GF_E_INVALID_ARG, "gf_tokenizer_decode: NULL argument");
    gf_tok_list a = {0}, b = {0};
    gf_tok_buf tmp = {0};
    gf_status st = GF_OK;
    for (size_t i = 0; !st && i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n_ids || tok->str_off[ids[i]] == GF_TOK_NONE) {
            st = gf_error_set(GF_E_INVALID_ARG,
                              "token id %d (at index %zu) is not in the "
                              "vocabulary (size %d)",
                              ids[i], i, tok->n_ids);
            break;
        }
        if (!tok->has_decoder && i > 0) /* no decoder: HF joins the tokens with ' ' */
            st = gf_tok_list_add(&a, " ", 1, 0);
        if (!st)
            st = gf_tok_list_add(&a, tok->arena + tok->str_off[ids[i]], tok->str_len[ids[i]], 0);
    }
    for (size_t k = 0; !st && k < tok->n_dec; k++) {
        b.n = 0;
        b.text.n = 0;
        st = dec_step(&tok->dec[k], &a, &b, &tmp);
        gf_tok_list sw = a;
        a = b;
        b = sw;
    }
    gf_tok_buf out = {0};
    for (size_t i = 0; !st && i < a.n; i++)
        st = gf_tok_buf_put(&out, a.text.p + a.v[i].off, a.v[i].len);
    if (!st && !out.p)
        st = gf_tok_buf_put(&out, "", 0);
    gf_tok_list_free(&a);
    gf_tok_list_free(&b);
    free(tmp.p);
    if (st) {
        free(out.p);
        return st;
    }
    *text_out = out.p;
    if (len_out)
        *len_out = out.n;
    return GF_OK;
}
