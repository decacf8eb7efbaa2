/* Byte-level BPE encoding and decoding, matching Hugging Face tokenizers.
 *
 * encode(text):
 *   1. the text must be valid UTF-8;
 *   2. added tokens are cut out of the raw text first (leftmost-longest, as
 *      HF's Aho-Corasick with MatchKind::LeftmostLongest; tokens with
 *      normalized=false first, then normalized=true ones in the gaps, with
 *      HF's single_word / lstrip / rstrip rules);
 *   3. each remaining segment is split by the GPT-2 regex (PCRE2), every gap
 *      between matches being a piece as well (HF's Isolated split);
 *   4. each piece's bytes start as single-byte symbols and are merged by HF's
 *      algorithm (a heap of (rank, position); lowest rank first, leftmost
 *      on ties; stale entries skipped).
 * Loading is in tokenizer_load.c, UTF-8 helpers in utf8_stream.c.
 * The tokenizer is immutable after loading: all scratch state of an encode
 * call is its own, so one tokenizer may encode on several threads at once. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define GF_TOK_CACHE_MAX_WORD 128 /* longer pieces are not cached */

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
        return 0x100u + b;               /* 0x00..0x20: 33 bytes */
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

typedef struct heap_item {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
} heap_item;

/* Cache of piece bytes -> ids for one encode call (no shared mutable state,
 * so one tokenizer can encode on several threads at once). */
typedef struct cache_slot {
    uint64_t hash;
    uint32_t key_off, key_len; /* in cache_keys */
    uint32_t ids_off, ids_n;   /* in cache_ids */
    int used;
} cache_slot;

typedef struct enc_ctx {
    const gf_tokenizer *t;
    const char *text;
    pcre2_match_data *md, *wmd;
    /* output */
    int32_t *ids;
    size_t n, cap;
    /* BPE scratch */
    int32_t *sym, *prev, *next;
    size_t sym_cap;
    heap_item *heap;
    size_t heap_n, heap_cap;
    /* cache */
    cache_slot *cache;
    uint32_t cache_mask, cache_used;
    uint8_t *cache_keys;
    size_t keys_len, keys_cap;
    int32_t *cache_ids;
    size_t cids_len, cids_cap;
    /* for ignore_merges */
    char *tmp;
    size_t tmp_cap;
} enc_ctx;

static gf_status grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return GF_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np)
        return gf_error_set(GF_E_NOMEM, "out of memory while encoding");
    *p = np;
    *cap = c;
    return GF_OK;
}

static gf_status emit(enc_ctx *c, int32_t id)
{
    if (c->n == c->cap && grow((void **)&c->ids, &c->cap, c->n + 1, sizeof *c->ids))
        return GF_E_NOMEM;
    c->ids[c->n++] = id;
    return GF_OK;
}

/* ---- the min-heap of candidate merges, ordered by (rank, pos) ---- */

static int heap_less(const heap_item *a, const heap_item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static gf_status heap_push(enc_ctx *c, heap_item it)
{
    if (grow((void **)&c->heap, &c->heap_cap, c->heap_n + 1, sizeof *c->heap))
        return GF_E_NOMEM;
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &c->heap[p]))
            break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = it;
    return GF_OK;
}

static heap_item heap_pop(enc_ctx *c)
{
    heap_item top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const heap_item *best = &last;
        if (l < n && heap_less(&c->heap[l], best)) {
            m = l;
            best = &c->heap[l];
        }
        if (l + 1 < n && heap_less(&c->heap[l + 1], best))
            m = l + 1;
        if (m == i)
            break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n)
        c->heap[i] = last;
    return top;
}

static gf_status push_pair(enc_ctx *c, int32_t pos)
{
    const gf_tok_merge_slot *m = gf_tok_merge_get(c->t, c->sym[pos], c->sym[c->next[pos]]);
    return m ? heap_push(c, (heap_item){m->rank, pos, m->new_id}) : GF_OK;
}

/* HF's Word::merge_all, without dropout. sym[] holds n symbols; afterwards
 * the live ones are linked through next[] from 0 (removed ones: sym = -1). */
static gf_status bpe_merge(enc_ctx *c, int32_t n)
{
    c->heap_n = 0;
    for (int32_t i = 0; i < n; i++) {
        c->prev[i] = i - 1;
        c->next[i] = i + 1 < n ? i + 1 : -1;
    }
    for (int32_t i = 0; i + 1 < n; i++)
        if (push_pair(c, i))
            return GF_E_NOMEM;
    while (c->heap_n) {
        heap_item top = heap_pop(c);
        int32_t p = top.pos;
        if (c->sym[p] < 0 || c->next[p] < 0)
            continue; /* removed, or now the last symbol */
        int32_t q = c->next[p];
        const gf_tok_merge_slot *m = gf_tok_merge_get(c->t, c->sym[p], c->sym[q]);
        if (!m || m->new_id != top.new_id)
            continue; /* stale entry */
        c->sym[p] = top.new_id;
        c->sym[q] = -1;
        c->next[p] = c->next[q];
        if (c->next[p] >= 0)
            c->prev[c->next[p]] = p;
        if (c->prev[p] >= 0 && push_pair(c, c->prev[p]))
            return GF_E_NOMEM;
        if (c->next[p] >= 0 && push_pair(c, p))
            return GF_E_NOMEM;
    }
    return GF_OK;
}

static cache_slot *cache_find(enc_ctx *c, const uint8_t *w, size_t n, uint64_t h)
{
    uint32_t i = (uint32_t)h & c->cache_mask;
    for (;;) {
        cache_slot *s = &c->cache[i];
        if (!s->used || (s->hash == h && s->key_len == n &&
                         !memcmp(c->cache_keys + s->key_off, w, n)))
            return s;
        i = (i + 1) & c->cache_mask;
    }
}

static gf_status cache_rehash(enc_ctx *c)
{
    uint32_t cap = c->cache ? (c->cache_mask + 1) * 2 : 4096;
    cache_slot *old = c->cache;
    uint32_t old_cap = c->cache ? c->cache_mask + 1 : 0;
    c->cache = calloc(cap, sizeof *c->cache);
    if (!c->cache) {
        c->cache = old;
        return gf_error_set(GF_E_NOMEM, "out of memory while encoding");
    }
    c->cache_mask = cap - 1;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (!old[i].used)
            continue;
        uint32_t j = (uint32_t)old[i].hash & c->cache_mask;
        while (c->cache[j].used)
            j = (j + 1) & c->cache_mask;
        c->cache[j] = old[i];
    }
    free(old);
    return GF_OK;
}

static gf_status missing_byte(const gf_tokenizer *t, uint8_t b)
{
    char s[5] = {0};
    gf_utf8_put(gf_tok_byte_to_cp(b), s);
    (void)t;
    return gf_error_set(GF_E_FORMAT, "the tokenizer's vocabulary has no symbol for byte 0x%02X "
                        "('%s'), so this text cannot be encoded", b, s);
}

/* Encode one pre-tokenized piece. */
static gf_status bpe_piece(enc_ctx *c, const uint8_t *w, size_t n)
{
    const gf_tokenizer *t = c->t;
    if (n == 1) {
        if (t->byte_id[w[0]] < 0)
            return missing_byte(t, w[0]);
        return emit(c, t->byte_id[w[0]]);
    }
    int cacheable = n <= GF_TOK_CACHE_MAX_WORD;
    uint64_t h = 0;
    cache_slot *slot = NULL;
    if (cacheable) {
        if (!c->cache && cache_rehash(c))
            return GF_E_NOMEM;
        h = gf_tok_hash(w, n);
        slot = cache_find(c, w, n, h);
        if (slot->used) {
            for (uint32_t i = 0; i < slot->ids_n; i++)
                if (emit(c, c->cache_ids[slot->ids_off + i]))
                    return GF_E_NOMEM;
            return GF_OK;
        }
    }
    size_t first = c->n;
    if (t->ignore_merges) { /* HF: a piece that is itself a token skips merging */
        if (grow((void **)&c->tmp, &c->tmp_cap, 2 * n, 1))
            return GF_E_NOMEM;
        size_t len = 0;
        for (size_t i = 0; i < n; i++)
            len += gf_utf8_put(gf_tok_byte_to_cp(w[i]), c->tmp + len);
        int32_t id = gf_tok_strmap_get(t, c->tmp, len);
        if (id >= 0 && emit(c, id))
            return GF_E_NOMEM;
        if (id >= 0)
            goto store;
    }
    if (n > INT32_MAX / 2)
        return gf_error_set(GF_E_INVALID_ARG, "a pre-token of %zu bytes is too long", n);
    if (c->sym_cap < n) {
        size_t cap = c->sym_cap;
        if (grow((void **)&c->sym, &cap, n, sizeof *c->sym))
            return GF_E_NOMEM;
        cap = c->sym_cap;
        if (grow((void **)&c->prev, &cap, n, sizeof *c->prev))
            return GF_E_NOMEM;
        cap = c->sym_cap;
        if (grow((void **)&c->next, &cap, n, sizeof *c->next))
            return GF_E_NOMEM;
        c->sym_cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        if ((c->sym[i] = t->byte_id[w[i]]) < 0)
            return missing_byte(t, w[i]);
    }
    if (bpe_merge(c, (int32_t)n))
        return GF_E_NOMEM;
    for (int32_t i = 0; i >= 0; i = c->next[i])
        if (emit(c, c->sym[i]))
            return GF_E_NOMEM;
store:
    if (cacheable) {
        size_t k = c->n - first;
        if (grow((void **)&c->cache_keys, &c->keys_cap, c->keys_len + n, 1) ||
            grow((void **)&c->cache_ids, &c->cids_cap, c->cids_len + k, sizeof *c->cache_ids))
            return GF_E_NOMEM;
        memcpy(c->cache_keys + c->keys_len, w, n);
        memcpy(c->cache_ids + c->cids_len, c->ids + first, k * sizeof *c->ids);
        *slot = (cache_slot){h, (uint32_t)c->keys_len, (uint32_t)n, (uint32_t)c->cids_len,
                             (uint32_t)k, 1};
        c->keys_len += n;
        c->cids_len += k;
        if (++c->cache_used * 2 > c->cache_mask + 1 && cache_rehash(c))
            return GF_E_NOMEM;
    }
    return GF_OK;
}

/* The GPT-2 regex over s[0, n) (HF's Isolated split: the matches and any gaps
 * between them are the pieces), each piece through BPE. */
static gf_status split_regex(enc_ctx *c, const char *s, size_t n, size_t base)
{
    const gf_tokenizer *t = c->t;
    if (!t->use_regex)
        return bpe_piece(c, (const uint8_t *)s, n);
    size_t off = 0;
    while (off < n) {
        int rc = pcre2_match(t->split_re, (PCRE2_SPTR)s, n, off, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            return bpe_piece(c, (const uint8_t *)s + off, n - off);
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return gf_error_set(GF_E_INTERNAL, "pre-tokenization failed at byte %zu: %s",
                                base + off, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        if (ov[1] <= off) /* cannot happen: no alternative matches the empty string */
            return gf_error_set(GF_E_INTERNAL, "empty pre-token at byte %zu", base + off);
        gf_status st = GF_OK;
        if (ov[0] > off)
            st = bpe_piece(c, (const uint8_t *)s + off, ov[0] - off);
        if (!st)
            st = bpe_piece(c, (const uint8_t *)s + ov[0], ov[1] - ov[0]);
        if (st)
            return st;
        off = ov[1];
    }
    return GF_OK;
}

/* ByteLevel pre-tokenizer + BPE over one non-empty segment holding no added
 * token. add_prefix_space: HF prepends ' ' to a segment not starting with one. */
static gf_status encode_plain(enc_ctx *c, size_t start, size_t end)
{
    const char *s = c->text + start;
    size_t n = end - start;
    if (!c->t->add_prefix_space || s[0] == ' ')
        return split_regex(c, s, n, start);
    char *buf = malloc(n + 1);
    if (!buf)
        return gf_error_set(GF_E_NOMEM, "out of memory while encoding");
    buf[0] = ' ';
    memcpy(buf + 1, s, n);
    gf_status st = split_regex(c, buf, n + 1, start);
    free(buf);
    return st;
}

/* ---- added tokens ---- */

/* Is the character at text[i, i + cl) a Rust-regex \w character? */
static int word_char_at(enc_ctx *c, size_t i, size_t cl)
{
    if (!c->wmd && !(c->wmd = pcre2_match_data_create_from_pattern(c->t->word_re, NULL)))
        return 0;
    return pcre2_match(c->t->word_re, (PCRE2_SPTR)c->text + i, cl, 0,
                       PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, c->wmd, NULL) >= 0;
}

/* Rust regex \w$ on text[a, b): is the last character a word character? */
static int ends_with_word(enc_ctx *c, size_t a, size_t b)
{
    if (a == b)
        return 0;
    size_t i = b - 1;
    while (i > a && ((uint8_t)c->text[i] & 0xC0) == 0x80)
        i--;
    return word_char_at(c, i, b - i);
}

/* Rust regex ^\w on text[a, b). */
static int starts_with_word(enc_ctx *c, size_t a, size_t b)
{
    if (a == b)
        return 0;
    size_t cl;
    gf_utf8_get((const uint8_t *)c->text + a, b - a, &cl);
    return word_char_at(c, a, cl);
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
static int find_added(const gf_tokenizer *t, const gf_tok_matchset *m, const char *text,
                      size_t from, size_t end, size_t *ms, size_t *me, int32_t *which)
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

/* HF's AddedVocabulary::find_matches over the segment [a, b); the gaps go to
 * the next pass (normalized added tokens), then to encode_plain. */
static gf_status split_added(enc_ctx *c, int pass, size_t a, size_t b)
{
    const gf_tokenizer *t = c->t;
    if (pass == 2)
        return encode_plain(c, a, b);
    const gf_tok_matchset *m = pass == 0 ? &t->match_raw : &t->match_norm;
    size_t start_offset = a, scan = a, ms, me;
    int32_t which;
    while (scan < b && find_added(t, m, c->text, scan, b, &ms, &me, &which)) {
        const gf_tok_added *tk = &t->added[which];
        scan = me; /* the next search starts after this match, used or not */
        size_t start = ms, stop = me;
        if (tk->single_word) {
            int start_space = start == a || !ends_with_word(c, a, start);
            int stop_space = stop == b || !starts_with_word(c, stop, b);
            if (!start_space || !stop_space)
                continue;
        }
        if (tk->lstrip) {
            size_t ns = space_run_before(c->text, a, start);
            start = ns > start_offset ? ns : start_offset;
        }
        if (tk->rstrip)
            stop = space_run_after(c->text, stop, b);
        if (start_offset < start) {
            gf_status st = split_added(c, pass + 1, start_offset, start);
            if (st)
                return st;
        }
        if (emit(c, tk->id))
            return GF_E_NOMEM;
        start_offset = stop;
    }
    if (start_offset < b)
        return split_added(c, pass + 1, start_offset, b);
    return GF_OK;
}

gf_status gf_tokenizer_encode(const gf_tokenizer *tok, const char *text, size_t len,
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
        return gf_error_set(GF_E_INVALID_ARG, "text is not valid UTF-8 at byte offset %zu (0x%02X)",
                            valid, (uint8_t)text[valid]);
    enc_ctx c = {.t = tok, .text = text};
    gf_status st = GF_OK;
    if (len) {
        c.md = pcre2_match_data_create_from_pattern(tok->split_re, NULL);
        if (!c.md)
            st = gf_error_set(GF_E_NOMEM, "out of memory while encoding");
        if (!st)
            st = split_added(&c, 0, 0, len);
    }
    pcre2_match_data_free(c.md);
    pcre2_match_data_free(c.wmd);
    free(c.sym);
    free(c.prev);
    free(c.next);
    free(c.heap);
    free(c.cache);
    free(c.cache_keys);
    free(c.cache_ids);
    free(c.tmp);
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

gf_status gf_tokenizer_decode(const gf_tokenizer *tok, const int32_t *ids, size_t n,
                              char **text_out, size_t *len_out)
{
    if (text_out)
        *text_out = NULL;
    if (len_out)
        *len_out = 0;
    if (!tok || !text_out || (!ids && n))
        return gf_error_set(GF_E_INVALID_ARG, "gf_tokenizer_decode: NULL argument");
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t bl;
        if (!gf_tokenizer_token_bytes(tok, ids[i], &bl))
            return gf_error_set(GF_E_INVALID_ARG, "token id %d (at index %zu) is not in the "
                                "vocabulary (size %d)", ids[i], i, tok->n_ids);
        total += bl;
    }
    uint8_t *raw = malloc(total ? total : 1);
    char *out = malloc(3 * total + 1);
    if (!raw || !out) {
        free(raw);
        free(out);
        return gf_error_set(GF_E_NOMEM, "out of memory decoding %zu tokens", n);
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t bl;
        const uint8_t *b = gf_tokenizer_token_bytes(tok, ids[i], &bl);
        memcpy(raw + o, b, bl);
        o += bl;
    }
    size_t len = gf_utf8_decode_replace(raw, total, out);
    free(raw);
    *text_out = out;
    if (len_out)
        *len_out = len;
    return GF_OK;
}
