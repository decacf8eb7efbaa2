/* Encoding, matching Hugging Face tokenizers' Tokenizer::encode:
 *   1. the text must be valid UTF-8;
 *   2. added tokens with normalized=false are cut out of the raw text
 *      (leftmost-longest, as HF's Aho-Corasick with MatchKind::LeftmostLongest,
 *      with HF's single_word / lstrip / rstrip rules);
 *   3. each gap is normalized (tokenizer_normalizer.c), then the added tokens
 *      with normalized=true are cut out of the normalized text;
 *   4. each remaining piece is pre-tokenized (tokenizer_pretok.c) and each
 *      split goes through the BPE model (tokenizer_model.c);
 *   5. with add_special_tokens, the post-processor's template adds its ids.
 * Also the byte alphabet and the map lookups. Loading is in tokenizer_load.c,
 * decoding in tokenizer_decoder.c, UTF-8 helpers in utf8_stream.c.
 * The tokenizer is immutable after loading: all scratch state of an encode
 * call is its own, so one tokenizer may encode on several threads at once. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* ---- GPT-2 bytes_to_unicode ----
 * Printable bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for
 * themselves; the other 68 bytes, in increasing order, get U+0100..U+0143. */
static int printable_byte(uint32_t b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t gf_tok_byte_to_cp(uint8_t b)
{
    if (printable_byte(b))
        return b;
    if (b <= 0x20)
        return 0x100u + b; /* 0x00..0x20: 33 bytes */
    if (b >= 0x7F && b <= 0xA0)
        return 0x100u + 33 + (b - 0x7Fu); /* 0x7F..0xA0: 34 bytes */
    return 0x100u + 67;                   /* 0xAD */
}

int gf_tok_cp_to_byte(uint32_t cp)
{
    if (cp < 0x100)
        return printable_byte(cp) ? (int)cp : -1;
    if (cp > 0x143)
        return -1;
    uint32_t n = cp - 0x100;
    if (n <= 32)
        return (int)n;
    if (n <= 66)
        return (int)(0x7F + n - 33);
    return 0xAD;
}

/* ---- vocab and merge lookups (the maps are built in tokenizer_load.c) ---- */

int32_t gf_tok_strmap_get(const gf_tokenizer *t, const char *s, size_t len)
{
    if (!t->vocab.slots)
        return -1;
    uint32_t i = (uint32_t)gf_tok_hash(s, len) & t->vocab.mask;
    for (;;) {
        int32_t id = t->vocab.slots[i];
        if (id < 0)
            return -1;
        if (t->str_len[id] == len && !memcmp(t->arena + t->str_off[id], s, len))
            return id;
        i = (i + 1) & t->vocab.mask;
    }
}

const gf_tok_merge_slot *gf_tok_merge_get(const gf_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint32_t i = gf_tok_merge_hash(key, t->merges.mask);
    for (;;) {
        const gf_tok_merge_slot *s = &t->merges.slots[i];
        if (s->key == key)
            return s;
        if (s->key == UINT64_MAX)
            return NULL;
        i = (i + 1) & t->merges.mask;
    }
}

typedef struct enc_ctx {
    const gf_tokenizer *t;
    pcre2_match_data *wmd;
    int32_t *ids; /* output */
    size_t n, cap;
    gf_tok_bpe *bpe;
    gf_tok_list pieces;
    gf_tok_buf norm;
} enc_ctx;

static gf_status emit(enc_ctx *c, int32_t id)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        int32_t *n = realloc(c->ids, cap * sizeof *n);
        if (!n)
            return gf_error_set(GF_E_NOMEM, "out of memory while encoding");
        c->ids = n;
        c->cap = cap;
    }
    c->ids[c->n++] = id;
    return GF_OK;
}

/* A piece holding no added token: pre-tokenizer, then the model per split. */
static gf_status encode_plain(enc_ctx *c, const char *s, size_t n, int origin)
{
    gf_status st = gf_tok_pretokenize(c->t, s, n, origin, &c->pieces);
    for (size_t i = 0; !st && i < c->pieces.n; i++)
        st = gf_tok_bpe_word(c->t, c->bpe, c->pieces.text.p + c->pieces.v[i].off, c->pieces.v[i].len, &c->ids, &c->n,
                             &c->cap);
    return st;
}

/* ---- added tokens ---- */

/* Is the character at text[i, i + cl) a Rust-regex \w character? */
static int word_char_at(enc_ctx *c, const char *text, size_t i, size_t cl)
{
    if (!c->wmd && !(c->wmd = pcre2_match_data_create_from_pattern(c->t->word_re, NULL)))
        return 0;
    return pcre2_match(c->t->word_re, (PCRE2_SPTR)text + i, cl, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, c->wmd, NULL) >=
           0;
}

/* Rust regex \w$ on text[a, b): is the last character a word character? */
static int ends_with_word(enc_ctx *c, const char *text, size_t a, size_t b)
{
    if (a == b)
        return 0;
    size_t i = b - 1;
    while (i > a && ((uint8_t)text[i] & 0xC0) == 0x80)
        i--;
    return word_char_at(c, text, i, b - i);
}

/* Rust regex ^\w on text[a, b). */
static int starts_with_word(enc_ctx *c, const char *text, size_t a, size_t b)
{
    if (a == b)
        return 0;
    size_t cl;
    gf_utf8_get((const uint8_t *)text + a, b - a, &cl);
    return word_char_at(c, text, a, cl);
}

/* Start of the run of White_Space ending at b (within [a, b)). */
static size_t space_run_before(const char *text, size_t a, size_t b)
{
    size_t p = b;
    while (p > a) {
        size_t i = p - 1;
        while (i > a && ((uint8_t)text[i] & 0xC0) == 0x80)
            i--;
        size_t cl;
        if (!gf_unicode_is_space(gf_utf8_get((const uint8_t *)text + i, p - i, &cl)))
            break;
        p = i;
    }
    return p;
}

/* End of the run of White_Space starting at a (within [a, b)). */
static size_t space_run_after(const char *text, size_t a, size_t b)
{
    size_t p = a;
    while (p < b) {
        size_t cl;
        if (!gf_unicode_is_space(gf_utf8_get((const uint8_t *)text + p, b - p, &cl)))
            break;
        p += cl;
    }
    return p;
}

/* Leftmost-longest occurrence of a token of `m` in text[from, end). */
static int find_added(const gf_tokenizer *t, const gf_tok_matchset *m, const char *text, size_t from, size_t end,
                      size_t *ms, size_t *me, int32_t *which)
{
    if (m->n == 0)
        return 0;
    for (size_t p = from; p < end; p++) {
        uint8_t b = (uint8_t)text[p];
        for (uint32_t k = m->start[b]; k < m->start[b + 1]; k++) {
            const gf_tok_added *a = &t->added[m->order[k]];
            if (a->len <= end - p && !memcmp(text + p, a->content, a->len)) {
                *ms = p;
                *me = p + a->len;
                *which = m->order[k];
                return 1;
            }
        }
    }
    return 0;
}

/* HF's AddedVocabulary::find_matches over text[a, b): pass 0 is the raw
 * text and the tokens with normalized=false, its gaps are normalized and
 * go to pass 1 (the normalized tokens), whose gaps go to encode_plain.
 * origin: text[a] is byte 0 of the input. */
static gf_status split_added(enc_ctx *c, int pass, const char *text, size_t a, size_t b, int origin);

static gf_status gap(enc_ctx *c, int pass, const char *text, size_t a, size_t b, int origin)
{
    if (pass == 1)
        return encode_plain(c, text + a, b - a, origin && a == 0);
    gf_status st = gf_tok_normalize(c->t, text + a, b - a, &c->norm);
    if (st || c->norm.n == 0)
        return st;
    /* pass 1 reads the normalized copy (c->norm is reused by the next gap) */
    char *copy = malloc(c->norm.n + 1);
    if (!copy)
        return gf_error_set(GF_E_NOMEM, "out of memory while encoding");
    memcpy(copy, c->norm.p, c->norm.n + 1);
    st = split_added(c, 1, copy, 0, c->norm.n, origin && a == 0);
    free(copy);
    return st;
}

static gf_status split_added(enc_ctx *c, int pass, const char *text, size_t a, size_t b, int origin)
{
    const gf_tokenizer *t = c->t;
    const gf_tok_matchset *m = pass == 0 ? &t->match_raw : &t->match_norm;
    size_t start_offset = a, scan = a, ms, me;
    int32_t which;
    while (scan < b && find_added(t, m, text, scan, b, &ms, &me, &which)) {
        const gf_tok_added *tk = &t->added[which];
        scan = me; /* the next search starts after this match, used or not */
        size_t start = ms, stop = me;
        if (tk->single_word) {
            int start_space = start == a || !ends_with_word(c, text, a, start);
            int stop_space = stop == b || !starts_with_word(c, text, stop, b);
            if (!start_space || !stop_space)
                continue;
        }
        if (tk->lstrip) {
            size_t ns = space_run_before(text, a, start);
            start = ns > start_offset ? ns : start_offset;
        }
        if (tk->rstrip)
            stop = space_run_after(text, stop, b);
        if (start_offset < start) {
            gf_status st = gap(c, pass, text, start_offset, start, origin);
            if (st)
                return st;
        }
        if (emit(c, tk->id))
            return GF_E_NOMEM;
        start_offset = stop;
    }
    if (start_offset < b)
        return gap(c, pass, text, start_offset, b, origin);
    return GF_OK;
}

gf_status gf_tokenizer_encode_ex(const gf_tokenizer *tok, const char *text, size_t len, int add_special_tokens,
                                 int32_t **ids_out, size_t *n_out)
{
    if (ids_out)
        *ids_out = NULL;
    if (n_out)
        *n_out = 0;
    if (!tok || !ids_out || !n_out || (!text && len))
        return gf_error_set(GF_E_INVALID_ARG, "gf_tokenizer_encode: NULL argument");
    size_t valid = gf_utf8_valid_prefix((const uint8_t *)text, len);
    if (valid != len)
        return gf_error_set(GF_E_INVALID_ARG, "text is not valid UTF-8 at byte offset %zu (0x%02X)", valid,
                            (uint8_t)text[valid]);
    enc_ctx c = {.t = tok};
    gf_status st = GF_OK;
    if (!(c.bpe = gf_tok_bpe_new()))
        st = GF_E_NOMEM;
    for (size_t i = 0; !st && add_special_tokens && i < tok->n_post_pre; i++)
        st = emit(&c, tok->post_pre[i]);
    if (!st && len)
        st = split_added(&c, 0, text, 0, len, 1);
    for (size_t i = 0; !st && add_special_tokens && i < tok->n_post_post; i++)
        st = emit(&c, tok->post_post[i]);
    pcre2_match_data_free(c.wmd);
    gf_tok_bpe_free(c.bpe);
    gf_tok_list_free(&c.pieces);
    free(c.norm.p);
    if (st) {
        free(c.ids);
        return st;
    }
    if (!c.ids) { /* empty result: still a valid (freeable) pointer */
        c.ids = malloc(sizeof *c.ids);
        if (!c.ids)
            return gf_error_set(GF_E_NOMEM, "out of memory");
    }
    *ids_out = c.ids;
    *n_out = c.n;
    return GF_OK;
}

gf_status gf_tokenizer_encode(const gf_tokenizer *tok, const char *text, size_t len, int32_t **ids_out, size_t *n_out)
{
    return gf_tokenizer_encode_ex(tok, text, len, 0, ids_out, n_out);
}

/* ---- ids -> bytes -> text ---- */

const uint8_t *gf_tokenizer_token_bytes(const gf_tokenizer *tok, int32_t id, size_t *len_out)
{
    if (len_out)
        *len_out = 0;
    if (!tok || id < 0 || id >= tok->n_ids || tok->bytes_off[id] == GF_TOK_NONE)
        return NULL;
    if (len_out)
        *len_out = tok->bytes_len[id];
    return (const uint8_t *)tok->arena + tok->bytes_off[id];
}

int32_t gf_tokenizer_token_id(const gf_tokenizer *tok, const char *token)
{
    if (!tok || !token)
        return -1;
    size_t len = strlen(token);
    for (size_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].len == len && !memcmp(tok->added[i].content, token, len))
            return tok->added[i].id;
    return gf_tok_strmap_get(tok, token, len);
}
