/* The BPE model (tokenizer.json "model"): one pre-tokenized word -> ids, as
 * Hugging Face's BPE::tokenize does it:
 *   - ignore_merges: a word that is itself a vocab token is that token;
 *   - each character is its vocab token; a character without one becomes its
 *     UTF-8 bytes as "<0xXX>" tokens (byte_fallback, when all exist), else
 *     the unk_token (consecutive ones fused with fuse_unk), else an error
 *     (HF would drop the character silently);
 *   - then Word::merge_all: a min-heap of candidate pairs ordered by (merge
 *     rank, position), the lowest rank first and the leftmost on ties; an
 *     entry whose pair no longer yields its merged id is stale and skipped.
 * Each encode call has its own scratch and word cache (gf_tok_bpe), so one
 * tokenizer can encode on several threads at once. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define GF_TOK_CACHE_MAX_WORD 128 /* longer words are not cached */

typedef struct heap_item {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
} heap_item;

typedef struct cache_slot {
    uint64_t hash;
    uint32_t key_off, key_len; /* in keys */
    uint32_t ids_off, ids_n;   /* in cids */
    int used;
} cache_slot;

struct gf_tok_bpe {
    int32_t *sym, *prev, *next;
    size_t sym_cap;
    heap_item *heap;
    size_t heap_n, heap_cap;
    cache_slot *cache;
    uint32_t cache_mask, cache_used;
    uint8_t *keys;
    size_t keys_len, keys_cap;
    int32_t *cids;
    size_t cids_len, cids_cap;
};

gf_tok_bpe *gf_tok_bpe_new(void)
{
    gf_tok_bpe *b = calloc(1, sizeof *b);
    if (!b)
        gf_error_set(GF_E_NOMEM, "out of memory while encoding");
    return b;
}

void gf_tok_bpe_free(gf_tok_bpe *b)
{
    if (!b)
        return;
    free(b->sym);
    free(b->prev);
    free(b->next);
    free(b->heap);
    free(b->cache);
    free(b->keys);
    free(b->cids);
    free(b);
}

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

typedef struct out_ids {
    int32_t **ids;
    size_t *n, *cap;
} out_ids;

static gf_status emit(out_ids *o, int32_t id)
{
    if (*o->n == *o->cap && grow((void **)o->ids, o->cap, *o->n + 1, sizeof **o->ids))
        return GF_E_NOMEM;
    (*o->ids)[(*o->n)++] = id;
    return GF_OK;
}

/* ---- the min-heap of candidate merges, ordered by (rank, pos) ---- */

static int heap_less(const heap_item *a, const heap_item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static gf_status heap_push(gf_tok_bpe *c, heap_item it)
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

static heap_item heap_pop(gf_tok_bpe *c)
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

static gf_status push_pair(const gf_tokenizer *t, gf_tok_bpe *c, int32_t pos)
{
    const gf_tok_merge_slot *m = gf_tok_merge_get(t, c->sym[pos], c->sym[c->next[pos]]);
    return m ? heap_push(c, (heap_item){m->rank, pos, m->new_id}) : GF_OK;
}

/* HF's Word::merge_all, without dropout. sym[] holds n symbols; afterwards
 * the live ones are linked through next[] from 0 (removed ones: sym = -1). */
static gf_status bpe_merge(const gf_tokenizer *t, gf_tok_bpe *c, int32_t n)
{
    c->heap_n = 0;
    for (int32_t i = 0; i < n; i++) {
        c->prev[i] = i - 1;
        c->next[i] = i + 1 < n ? i + 1 : -1;
    }
    for (int32_t i = 0; i + 1 < n; i++)
        if (push_pair(t, c, i))
            return GF_E_NOMEM;
    while (c->heap_n) {
        heap_item top = heap_pop(c);
        int32_t p = top.pos;
        if (c->sym[p] < 0 || c->next[p] < 0)
            continue; /* removed, or now the last symbol */
        int32_t q = c->next[p];
        const gf_tok_merge_slot *m = gf_tok_merge_get(t, c->sym[p], c->sym[q]);
        if (!m || m->new_id != top.new_id)
            continue; /* stale entry */
        c->sym[p] = top.new_id;
        c->sym[q] = -1;
        c->next[p] = c->next[q];
        if (c->next[p] >= 0)
            c->prev[c->next[p]] = p;
        if (c->prev[p] >= 0 && push_pair(t, c, c->prev[p]))
            return GF_E_NOMEM;
        if (c->next[p] >= 0 && push_pair(t, c, p))
            return GF_E_NOMEM;
    }
    return GF_OK;
}

static cache_slot *cache_find(gf_tok_bpe *c, const char *w, size_t n, uint64_t h)
{
    uint32_t i = (uint32_t)h & c->cache_mask;
    for (;;) {
        cache_slot *s = &c->cache[i];
        if (!s->used || (s->hash == h && s->key_len == n && !memcmp(c->keys + s->key_off, w, n)))
            return s;
        i = (i + 1) & c->cache_mask;
    }
}

static gf_status cache_rehash(gf_tok_bpe *c)
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

static gf_status missing_char(const gf_tokenizer *t, uint32_t cp, const char *s, size_t cl)
{
    int b = t->byte_level ? gf_tok_cp_to_byte(cp) : -1;
    if (b >= 0)
        return gf_error_set(GF_E_FORMAT,
                            "the tokenizer's vocabulary has no symbol for byte "
                            "0x%02X ('%.*s'), so this text cannot be encoded",
                            b, (int)cl, s);
    return gf_error_set(GF_E_FORMAT,
                        "the tokenizer's vocabulary has no token for '%.*s' "
                        "(U+%04X) and the model has no unk_token or byte fallback for it, so "
                        "this text cannot be encoded",
                        (int)cl, s, cp);
}

static int32_t char_id(const gf_tokenizer *t, uint32_t cp, const char *s, size_t cl)
{
    if (cp < GF_TOK_CHAR_TABLE)
        return t->char_id[cp];
    return gf_tok_strmap_get(t, s, cl);
}

/* The word's characters as symbols (HF's BPE::merge_word before merging). */
static gf_status word_symbols(const gf_tokenizer *t, gf_tok_bpe *c, const char *w, size_t n, int32_t *n_sym)
{
    int32_t k = 0;
    int32_t unk_pending = 0; /* a pending unk (fuse_unk extends it) */
    for (size_t i = 0; i < n;) {
        size_t cl;
        uint32_t cp = gf_utf8_get((const uint8_t *)w + i, n - i, &cl);
        int32_t id = char_id(t, cp, w + i, cl);
        if (id >= 0) {
            if (unk_pending)
                c->sym[k++] = t->unk_id;
            unk_pending = 0;
            c->sym[k++] = id;
        } else {
            int fb = t->byte_fallback;
            for (size_t j = 0; fb && j < cl; j++)
                fb = t->byte_fb_id[(uint8_t)w[i + j]] >= 0;
            if (fb) { /* HF adds the byte tokens before a pending unk */
                for (size_t j = 0; j < cl; j++)
                    c->sym[k++] = t->byte_fb_id[(uint8_t)w[i + j]];
            } else if (t->unk_id >= 0) {
                if (unk_pending && !t->fuse_unk)
                    c->sym[k++] = t->unk_id;
                unk_pending = 1;
            } else {
                return missing_char(t, cp, w + i, cl);
            }
        }
        i += cl;
    }
    if (unk_pending)
        c->sym[k++] = t->unk_id;
    *n_sym = k;
    return GF_OK;
}

gf_status gf_tok_bpe_word(const gf_tokenizer *t, gf_tok_bpe *c, const char *w, size_t n, int32_t **ids, size_t *n_ids,
                          size_t *cap)
{
    out_ids o = {ids, n_ids, cap};
    if (n == 0)
        return GF_OK;
    if (t->ignore_merges) { /* HF: a word that is itself a token skips merging */
        int32_t id = gf_tok_strmap_get(t, w, n);
        if (id >= 0)
            return emit(&o, id);
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
                if (emit(&o, c->cids[slot->ids_off + i]))
                    return GF_E_NOMEM;
            return GF_OK;
        }
    }
    if (n > INT32_MAX / 8)
        return gf_error_set(GF_E_INVALID_ARG, "a pre-token of %zu bytes is too long", n);
    if (c->sym_cap < n) { /* at most one symbol per byte */
        size_t cap1 = c->sym_cap;
        if (grow((void **)&c->sym, &cap1, n, sizeof *c->sym))
            return GF_E_NOMEM;
        cap1 = c->sym_cap;
        if (grow((void **)&c->prev, &cap1, n, sizeof *c->prev))
            return GF_E_NOMEM;
        cap1 = c->sym_cap;
        if (grow((void **)&c->next, &cap1, n, sizeof *c->next))
            return GF_E_NOMEM;
        c->sym_cap = cap1;
    }
    int32_t n_sym = 0;
    gf_status st = word_symbols(t, c, w, n, &n_sym);
    if (st)
        return st;
    size_t first = *n_ids;
    if (n_sym > 0 && bpe_merge(t, c, n_sym))
        return GF_E_NOMEM;
    for (int32_t i = n_sym > 0 ? 0 : -1; i >= 0; i = c->next[i])
        if (emit(&o, c->sym[i]))
            return GF_E_NOMEM;
    if (cacheable) {
        size_t k = *n_ids - first;
        if (grow((void **)&c->keys, &c->keys_cap, c->keys_len + n, 1) ||
            grow((void **)&c->cids, &c->cids_cap, c->cids_len + k, sizeof *c->cids))
            return GF_E_NOMEM;
        memcpy(c->keys + c->keys_len, w, n);
        memcpy(c->cids + c->cids_len, *ids + first, k * sizeof **ids);
        *slot = (cache_slot){h, (uint32_t)c->keys_len, (uint32_t)n, (uint32_t)c->cids_len, (uint32_t)k, 1};
        c->keys_len += n;
        c->cids_len += k;
        if (++c->cache_used * 2 > c->cache_mask + 1 && cache_rehash(c))
            return GF_E_NOMEM;
    }
    return GF_OK;
}
