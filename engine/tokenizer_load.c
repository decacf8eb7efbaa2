/* Loading a BPE tokenizer: tokenizer.json (Hugging Face) or vocab.json +
 * merges.txt (GPT-2 release layout); the file's size cap; building the vocab
 * and merge hash maps and the added tokens (with HF's id rules); the
 * components are parsed by their own files (tokenizer_normalizer.c,
 * tokenizer_pretok.c, tokenizer_decoder.c). Encoding, the byte<->unicode
 * alphabet and the map lookups live in tokenizer.c. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_internal.h"
#include "tokenizer_internal.h"

#define GF_TOK_MAX_IDS (1 << 24) /* refuse vocabularies beyond 16M ids */

/* tokenizer.json's size cap: jansson needs about 50 times the file's size
 * (a 200 MB file took 10 GB), so a file over the cap is refused before it is
 * read. Real tokenizers are 2-35 MB. */
#define GF_TOK_MAX_FILE_DEFAULT ((uint64_t)64 << 20)
/* Rust regex's Unicode \w (used by HF for single_word added tokens). */
static const char k_word_pattern[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
static const char k_word_pattern_fallback[] = "[\\p{L}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";

/* ---- small helpers ---- */

static uint32_t pow2_at_least(size_t n)
{
    uint32_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static gf_status arena_add(gf_tokenizer *t, const void *p, size_t len, uint32_t *off_out)
{
    if (t->arena_len + len + 1 > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 1 << 16;
        while (t->arena_len + len + 1 > cap)
            cap *= 2;
        if (cap > UINT32_MAX)
            return gf_error_set(GF_E_NOMEM, "tokenizer strings exceed 4 GiB");
        char *a = realloc(t->arena, cap);
        if (!a)
            return gf_error_set(GF_E_NOMEM, "out of memory for tokenizer strings");
        t->arena = a;
        t->arena_cap = cap;
    }
    *off_out = (uint32_t)t->arena_len;
    if (len)
        memcpy(t->arena + t->arena_len, p, len);
    t->arena[t->arena_len + len] = '\0';
    t->arena_len += len + 1;
    return GF_OK;
}

static gf_status alloc_ids(gf_tokenizer *t, int32_t n_ids)
{
    t->n_ids = n_ids;
    size_t n = (size_t)n_ids;
    t->str_off = malloc(n * sizeof *t->str_off);
    t->str_len = calloc(n, sizeof *t->str_len);
    t->bytes_off = malloc(n * sizeof *t->bytes_off);
    t->bytes_len = calloc(n, sizeof *t->bytes_len);
    if (!t->str_off || !t->str_len || !t->bytes_off || !t->bytes_len)
        return gf_error_set(GF_E_NOMEM, "out of memory for %d token ids", n_ids);
    for (size_t i = 0; i < n; i++)
        t->str_off[i] = t->bytes_off[i] = GF_TOK_NONE;
    return GF_OK;
}

/* ---- vocab: string -> id ---- */

static gf_status build_strmap(gf_tokenizer *t, size_t count)
{
    uint32_t cap = pow2_at_least(count * 2);
    t->vocab.slots = malloc((size_t)cap * sizeof *t->vocab.slots);
    if (!t->vocab.slots)
        return gf_error_set(GF_E_NOMEM, "out of memory for the vocabulary map");
    memset(t->vocab.slots, 0xFF, (size_t)cap * sizeof *t->vocab.slots); /* -1 */
    t->vocab.mask = cap - 1;
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (t->str_off[id] == GF_TOK_NONE)
            continue;
        uint32_t i = (uint32_t)gf_tok_hash(t->arena + t->str_off[id], t->str_len[id]) & t->vocab.mask;
        while (t->vocab.slots[i] >= 0)
            i = (i + 1) & t->vocab.mask;
        t->vocab.slots[i] = id;
    }
    return GF_OK;
}

static gf_status add_vocab_entry(gf_tokenizer *t, const char *s, size_t len, int32_t id, const char *where)
{
    if (t->str_off[id] != GF_TOK_NONE)
        return gf_error_set(GF_E_FORMAT, "%s: id %d is used by both '%s' and '%s'", where, id,
                            t->arena + t->str_off[id], s);
    if (gf_utf8_valid_prefix((const uint8_t *)s, len) != len)
        return gf_error_set(GF_E_FORMAT, "%s: token %d is not valid UTF-8", where, id);
    gf_status st = arena_add(t, s, len, &t->str_off[id]);
    if (st)
        return st;
    t->str_len[id] = (uint32_t)len;
    return GF_OK;
}

/* Iterate a JSON object's keys with their lengths (keys may hold "\u0000"). */
static size_t key_len(void *iter, const char *key)
{
#if JANSSON_VERSION_HEX >= 0x020e00
    (void)key;
    return json_object_iter_key_len(iter);
#else
    (void)iter;
    return strlen(key);
#endif
}

/* First pass over a vocab object: ids valid, returns max id and count. */
static gf_status scan_vocab(json_t *vocab, const char *where, int32_t *max_id, size_t *count)
{
    *max_id = -1;
    *count = 0;
    for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
        const char *key = json_object_iter_key(it);
        json_t *v = json_object_iter_value(it);
        if (!json_is_integer(v))
            return gf_error_set(GF_E_FORMAT, "%s: the id of token '%s' is not an integer", where, key);
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= GF_TOK_MAX_IDS)
            return gf_error_set(GF_E_FORMAT, "%s: token '%s' has id %lld (outside 0..%d)", where, key, (long long)id,
                                GF_TOK_MAX_IDS - 1);
        if (id > *max_id)
            *max_id = (int32_t)id;
        (*count)++;
    }
    return GF_OK;
}

static gf_status fill_vocab(gf_tokenizer *t, json_t *vocab, size_t count, const char *where)
{
    for (void *it = json_object_iter(vocab); it; it = json_object_iter_next(vocab, it)) {
        const char *key = json_object_iter_key(it);
        int32_t id = (int32_t)json_integer_value(json_object_iter_value(it));
        gf_status st = add_vocab_entry(t, key, key_len(it, key), id, where);
        if (st)
            return st;
    }
    t->n_model_vocab = (int32_t)count;
    return build_strmap(t, count);
}

/* ---- merges: (a, b) -> (rank, merged id) ---- */

static gf_status merges_init(gf_tokenizer *t, size_t n)
{
    uint32_t cap = pow2_at_least(n * 2 + 1);
    t->merges.slots = malloc((size_t)cap * sizeof *t->merges.slots);
    if (!t->merges.slots)
        return gf_error_set(GF_E_NOMEM, "out of memory for %zu merges", n);
    for (uint32_t i = 0; i < cap; i++)
        t->merges.slots[i].key = UINT64_MAX;
    t->merges.mask = cap - 1;
    t->merges.count = 0;
    return GF_OK;
}

/* Add merge `rank` (a, b); a later duplicate pair overwrites an earlier one,
 * as HF's HashMap collect does. `where` names the location for errors. */
static gf_status merges_add(gf_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, int32_t rank,
                            const char *where)
{
    int32_t ia = gf_tok_strmap_get(t, a, alen), ib = gf_tok_strmap_get(t, b, blen);
    if (ia < 0 || ib < 0)
        return gf_error_set(GF_E_FORMAT, "%s: merge token '%.*s' is not in the vocabulary", where,
                            (int)(ia < 0 ? alen : blen), ia < 0 ? a : b);
    char stackbuf[512];
    char *ab = alen + blen <= sizeof stackbuf ? stackbuf : malloc(alen + blen);
    if (!ab)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    memcpy(ab, a, alen);
    memcpy(ab + alen, b, blen);
    int32_t inew = gf_tok_strmap_get(t, ab, alen + blen);
    gf_status st = GF_OK;
    if (inew < 0)
        st = gf_error_set(GF_E_FORMAT, "%s: merged token '%.*s' is not in the vocabulary", where, (int)(alen + blen),
                          ab);
    if (ab != stackbuf)
        free(ab);
    if (st)
        return st;
    uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
    uint32_t i = gf_tok_merge_hash(key, t->merges.mask);
    while (t->merges.slots[i].key != UINT64_MAX && t->merges.slots[i].key != key)
        i = (i + 1) & t->merges.mask;
    if (t->merges.slots[i].key == UINT64_MAX)
        t->merges.count++;
    t->merges.slots[i] = (gf_tok_merge_slot){key, rank, inew};
    return GF_OK;
}

/* "a b": exactly one space (HF splits on ' ' and wants two parts). */
static int split_merge_line(const char *s, size_t len, size_t *sp)
{
    const char *p = memchr(s, ' ', len);
    if (!p || memchr(p + 1, ' ', len - (size_t)(p - s) - 1))
        return 0;
    *sp = (size_t)(p - s);
    return 1;
}

static gf_status load_merges_txt(gf_tokenizer *t, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(GF_E_IO, "cannot open '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 1 << 20;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return gf_error_set(GF_E_NOMEM, "out of memory reading '%s'", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return gf_error_set(GF_E_IO, "error reading '%s'", path);
    }
    size_t n_lines = 0;
    for (size_t i = 0; i < len; i++)
        n_lines += buf[i] == '\n';
    gf_status st = merges_init(t, n_lines + 1);
    size_t pos = 0, line_no = 0;
    int32_t rank = 0;
    char where[1100];
    while (!st && pos < len) { /* like Rust's lines(): no empty line after a final \n */
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl ? 1 : 0);
        line_no++;
        if (ll && line[ll - 1] == '\r')
            ll--;
        if (ll >= 8 && !memcmp(line, "#version", 8))
            continue;
        snprintf(where, sizeof where, "%s: line %zu", path, line_no);
        size_t sp;
        if (!split_merge_line(line, ll, &sp)) {
            st = gf_error_set(GF_E_FORMAT, "%s: expected two tokens separated by one space, got '%.*s'", where,
                              (int)(ll > 60 ? 60 : ll), line);
            break;
        }
        st = merges_add(t, line, sp, line + sp + 1, ll - sp - 1, rank++, where);
    }
    free(buf);
    return st;
}

static gf_status load_merges_json(gf_tokenizer *t, json_t *merges, const char *path)
{
    size_t n = json_array_size(merges);
    gf_status st = merges_init(t, n);
    char where[1100];
    for (size_t i = 0; !st && i < n; i++) {
        json_t *m = json_array_get(merges, i);
        snprintf(where, sizeof where, "%s: model.merges[%zu]", path, i);
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            size_t len = json_string_length(m), sp;
            if (!split_merge_line(s, len, &sp))
                return gf_error_set(GF_E_FORMAT, "%s: expected \"LEFT RIGHT\" with one space, got '%s'", where, s);
            st = merges_add(t, s, sp, s + sp + 1, len - sp - 1, (int32_t)i, where);
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
            st = merges_add(t, json_string_value(a), json_string_length(a), json_string_value(b), json_string_length(b),
                            (int32_t)i, where);
        } else {
            return gf_error_set(GF_E_FORMAT, "%s: expected \"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"]", where);
        }
    }
    return st;
}

/* ---- added tokens ---- */

static int get_bool(json_t *obj, const char *key, int dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static gf_status check_added(json_t *added, const char *path, int32_t *max_id)
{
    if (!json_is_array(added))
        return gf_error_set(GF_E_FORMAT, "%s: \"added_tokens\" is not a list", path);
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        json_t *id = json_object_get(a, "id"), *c = json_object_get(a, "content");
        if (!json_is_object(a) || !json_is_integer(id) || !json_is_string(c))
            return gf_error_set(GF_E_FORMAT,
                                "%s: added_tokens[%zu] needs an integer \"id\" and a "
                                "string \"content\"",
                                path, i);
        json_int_t v = json_integer_value(id);
        if (v < 0 || v >= GF_TOK_MAX_IDS)
            return gf_error_set(GF_E_FORMAT, "%s: added_tokens[%zu] has id %lld", path, i, (long long)v);
        if (v > *max_id)
            *max_id = (int32_t)v;
    }
    return GF_OK;
}

static gf_status matchset_build(gf_tokenizer *t, gf_tok_matchset *m, int normalized)
{
    memset(m->start, 0, sizeof m->start);
    m->n = 0;
    m->order = malloc((t->n_added ? t->n_added : 1) * sizeof *m->order);
    if (!m->order)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    uint32_t count[256] = {0};
    for (size_t i = 0; i < t->n_added; i++)
        if (!t->added[i].normalized == !normalized)
            count[(uint8_t)t->added[i].content[0]]++;
    for (int b = 0; b < 256; b++)
        m->start[b + 1] = m->start[b] + count[b];
    uint32_t fill[256];
    memcpy(fill, m->start, sizeof fill);
    for (size_t i = 0; i < t->n_added; i++) {
        if (!t->added[i].normalized != !normalized)
            continue;
        uint8_t b = (uint8_t)t->added[i].content[0];
        /* insertion keeping each group sorted longest first */
        uint32_t j = fill[b]++;
        while (j > m->start[b] && t->added[m->order[j - 1]].len < t->added[i].len) {
            m->order[j] = m->order[j - 1];
            j--;
        }
        m->order[j] = (int32_t)i;
        m->n++;
    }
    return GF_OK;
}

/* Replays HF's AddedVocabulary::add_tokens (tokenizer.json's added_tokens are
 * added one at a time, in order) and insists that the id HF would give each
 * token is the id the file declares (HF only warns; we refuse the file). */
static gf_status load_added(gf_tokenizer *t, json_t *added, const char *path)
{
    size_t n = json_array_size(added);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    int need_word_re = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(added, i);
        json_t *c = json_object_get(a, "content");
        const char *content = json_string_value(c);
        size_t len = json_string_length(c);
        int32_t declared = (int32_t)json_integer_value(json_object_get(a, "id"));
        gf_tok_added tk = {
            .len = len,
            .id = declared,
            .special = get_bool(a, "special", 0),
            .normalized = get_bool(a, "normalized", 1),
            .lstrip = get_bool(a, "lstrip", 0),
            .rstrip = get_bool(a, "rstrip", 0),
            .single_word = get_bool(a, "single_word", 0),
        };
        if (len == 0)
            continue; /* HF ignores empty tokens */
        if (gf_utf8_valid_prefix((const uint8_t *)content, len) != len)
            return gf_error_set(GF_E_FORMAT, "%s: added_tokens[%zu] is not valid UTF-8", path, i);
        gf_tok_added *same = NULL;
        int32_t max_added = -1;
        for (size_t j = 0; j < t->n_added; j++) {
            if (t->added[j].len == len && !memcmp(t->added[j].content, content, len))
                same = &t->added[j];
            if (t->added[j].id > max_added)
                max_added = t->added[j].id;
        }
        int32_t hf_id;
        if (same)
            hf_id = same->id;
        else if ((hf_id = gf_tok_strmap_get(t, content, len)) < 0)
            hf_id = max_added < 0                                              ? t->n_model_vocab
                    : (max_added >= t->n_model_vocab || t->n_model_vocab == 0) ? max_added + 1
                                                                               : t->n_model_vocab;
        if (hf_id != declared)
            return gf_error_set(GF_E_FORMAT,
                                "%s: added token '%s' is declared with id %d, but "
                                "Hugging Face tokenizers would give it id %d",
                                path, content, declared, hf_id);
        if (same) { /* same content again: HF keeps the id, takes the new flags */
            char *keep = same->content;
            size_t keep_len = same->len;
            *same = tk;
            same->content = keep;
            same->len = keep_len;
        } else {
            tk.content = malloc(len + 1);
            if (!tk.content)
                return gf_error_set(GF_E_NOMEM, "out of memory");
            memcpy(tk.content, content, len + 1);
            t->added[t->n_added++] = tk;
            if (t->str_off[declared] == GF_TOK_NONE) { /* the string decode reads */
                gf_status st = arena_add(t, content, len, &t->str_off[declared]);
                if (st)
                    return st;
                t->str_len[declared] = (uint32_t)len;
            }
        }
        need_word_re |= tk.single_word;
    }
    /* HF matches normalized=true tokens in the normalized text, by their
     * normalized content */
    gf_tok_buf nb = {0};
    for (size_t i = 0; i < t->n_added && t->n_norm; i++) {
        gf_tok_added *a = &t->added[i];
        if (!a->normalized)
            continue;
        gf_status st = gf_tok_normalize(t, a->content, a->len, &nb);
        char *c = st ? NULL : malloc(nb.n + 1);
        if (!c) {
            free(nb.p);
            return st ? st : gf_error_set(GF_E_NOMEM, "out of memory");
        }
        memcpy(c, nb.p, nb.n + 1);
        free(a->content);
        a->content = c;
        a->len = nb.n;
    }
    free(nb.p);
    size_t kept = 0; /* a token that normalizes to "" can never match */
    for (size_t i = 0; i < t->n_added; i++) {
        if (t->added[i].len)
            t->added[kept++] = t->added[i];
        else
            free(t->added[i].content);
    }
    t->n_added = kept;
    gf_status st = matchset_build(t, &t->match_raw, 0);
    if (!st)
        st = matchset_build(t, &t->match_norm, 1);
    if (!st && need_word_re) {
        int err;
        PCRE2_SIZE eo;
        t->word_re =
            pcre2_compile((PCRE2_SPTR)k_word_pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eo, NULL);
        if (!t->word_re)
            t->word_re = pcre2_compile((PCRE2_SPTR)k_word_pattern_fallback, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP, &err, &eo, NULL);
        if (!t->word_re)
            return gf_error_set(GF_E_INTERNAL, "cannot compile the word-character pattern");
    }
    return st;
}

/* ---- finishing ---- */

static gf_status finish(gf_tokenizer *t)
{
    for (uint32_t cp = 0; cp < GF_TOK_CHAR_TABLE; cp++) {
        char s[4];
        size_t n = gf_utf8_put(cp, s);
        t->char_id[cp] = gf_tok_strmap_get(t, s, n);
    }
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_fb_id[b] = gf_tok_strmap_get(t, s, 6);
    }
    if (!t->match_raw.order) { /* no added tokens (vocab.json + merges.txt) */
        gf_status st = matchset_build(t, &t->match_raw, 0);
        if (!st)
            st = matchset_build(t, &t->match_norm, 1);
        if (st)
            return st;
    }
    return gf_tok_token_bytes_build(t);
}

/* Read and parse a JSON file under the tokenizer's size cap, with a reason
 * for every failure (jansson's own message is empty when it runs out of
 * memory). */
/* Set when an allocation of jansson's failed during the tokenizer parse
 * (the parse runs on one thread; the wrapper is installed only around it). */
static _Thread_local int tok_oom;
static json_malloc_t tok_prev_malloc = malloc;
static void *tok_json_malloc(size_t n)
{
    void *p = tok_prev_malloc(n);
    if (!p)
        tok_oom = 1;
    return p;
}

static gf_status load_json_file(const char *path, json_t **root)
{
    *root = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(GF_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return gf_error_set(GF_E_IO, "cannot read '%s': not a regular file", path);
    }
    uint64_t cap = gf_env_limit("GENFENCE_MAX_TOKENIZER_BYTES", GF_TOK_MAX_FILE_DEFAULT);
    if ((uint64_t)sb.st_size > cap) {
        fclose(f);
        return gf_error_set(GF_E_FORMAT,
                            "%s: %lld bytes, over the limit of %llu for a tokenizer "
                            "file (GENFENCE_MAX_TOKENIZER_BYTES; set it higher to load it)",
                            path, (long long)sb.st_size, (unsigned long long)cap);
    }
    size_t size = (size_t)sb.st_size;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return gf_error_set(GF_E_NOMEM, "cannot read '%s': out of memory for its %zu bytes", path, size);
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(buf);
        return gf_error_set(GF_E_IO, "cannot read '%s': %s", path,
                            err ? strerror(errno) : "the file changed size while it was read");
    }
    json_error_t je;
    tok_oom = 0;
    json_malloc_t prev_malloc;
    json_free_t prev_free;
    json_get_alloc_funcs(&prev_malloc, &prev_free);
    if (prev_malloc != tok_json_malloc)
        tok_prev_malloc = prev_malloc;
    json_set_alloc_funcs(tok_json_malloc, prev_free);
    *root = json_loadb(buf, size, 0, &je);
    json_set_alloc_funcs(prev_malloc, prev_free);
    free(buf);
    if (*root)
        return GF_OK;
    /* jansson's lexer reports a failed allocation inside a string as an
     * "invalid token", so a malloc that failed during the parse decides */
    if (tok_oom || json_error_code(&je) == json_error_out_of_memory || !je.text[0])
        return gf_error_set(GF_E_NOMEM,
                            "%s: out of memory parsing its %zu bytes of JSON (the "
                            "parser needs about 50 times the file's size)",
                            path, size);
    if (je.line < 0)
        return gf_error_set(GF_E_FORMAT, "%s: %s", path, je.text);
    return gf_error_set(GF_E_FORMAT, "%s: line %d, column %d: %s", path, je.line, je.column, je.text);
}

static gf_status parse_tokenizer_json(gf_tokenizer *t, json_t *root, const char *path)
{
    if (!json_is_object(root))
        return gf_error_set(GF_E_FORMAT, "%s: the top level is not a JSON object", path);
    json_t *ver = json_object_get(root, "version");
    if (json_is_string(ver) && strcmp(json_string_value(ver), "1.0"))
        return gf_error_set(GF_E_UNSUPPORTED, "%s: unknown tokenizer version '%s'", path, json_string_value(ver));
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return gf_error_set(GF_E_FORMAT, "%s: missing \"model\" object", path);
    json_t *type = json_object_get(model, "type");
    if (type && !json_is_string(type))
        return gf_error_set(GF_E_FORMAT, "%s: model.type is not a string", path);
    if (type && strcmp(json_string_value(type), "BPE"))
        return gf_error_set(GF_E_UNSUPPORTED, "%s: model type '%s' is not supported (only BPE)", path,
                            json_string_value(type));
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab))
        return gf_error_set(GF_E_FORMAT, "%s: model.vocab is missing or not an object", path);
    if (merges && !json_is_array(merges))
        return gf_error_set(GF_E_FORMAT, "%s: model.merges is not a list", path);
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0.0)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: BPE dropout is not supported", path);
    static const char *const k_affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *s = json_string_value(json_object_get(model, k_affixes[i]));
        if (s && *s)
            return gf_error_set(GF_E_UNSUPPORTED, "%s: model.%s is not supported", path, k_affixes[i]);
    }
    t->ignore_merges = get_bool(model, "ignore_merges", 0);
    t->byte_fallback = get_bool(model, "byte_fallback", 0);
    t->fuse_unk = get_bool(model, "fuse_unk", 0);
    json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk) && !json_is_string(unk))
        return gf_error_set(GF_E_FORMAT, "%s: model.unk_token is not a string", path);

    /* every component is checked before the vocabulary is built */
    gf_status st = gf_tok_normalizer_parse(t, json_object_get(root, "normalizer"), path);
    if (!st)
        st = gf_tok_pretokenizer_parse(t, json_object_get(root, "pre_tokenizer"), path);
    if (!st)
        st = gf_tok_decoder_parse(t, json_object_get(root, "decoder"), path);
    if (st)
        return st;

    json_t *added = json_object_get(root, "added_tokens");
    json_t *no_added = NULL;
    if (!added || json_is_null(added))
        added = no_added = json_array();
    int32_t max_id;
    size_t count;
    char where[1100];
    snprintf(where, sizeof where, "%s: model.vocab", path);
    st = scan_vocab(vocab, where, &max_id, &count);
    if (!st)
        st = check_added(added, path, &max_id);
    if (!st)
        st = alloc_ids(t, max_id + 1);
    if (!st)
        st = fill_vocab(t, vocab, count, where);
    if (!st) {
        if (merges)
            st = load_merges_json(t, merges, path);
        else
            st = merges_init(t, 0);
    }
    if (!st)
        st = load_added(t, added, path);
    json_decref(no_added);
    t->unk_id = -1;
    if (!st && json_is_string(unk)) {
        t->unk_id = gf_tok_strmap_get(t, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0)
            st = gf_error_set(GF_E_FORMAT, "%s: model.unk_token '%s' is not in the vocabulary", path,
                              json_string_value(unk));
    }
    if (!st) /* its template names ids, so after the vocabulary */
        st = gf_tok_post_parse(t, json_object_get(root, "post_processor"), path);
    return st;
}

static gf_status load_vocab_merges(gf_tokenizer *t, const char *vocab_path, const char *merges_path)
{
    json_t *vocab;
    gf_status st = load_json_file(vocab_path, &vocab);
    if (st)
        return st;
    int32_t max_id;
    size_t count;
    if (!json_is_object(vocab))
        st = gf_error_set(GF_E_FORMAT, "%s: not a JSON object of token -> id", vocab_path);
    if (!st)
        st = scan_vocab(vocab, vocab_path, &max_id, &count);
    if (!st)
        st = alloc_ids(t, max_id + 1);
    if (!st)
        st = fill_vocab(t, vocab, count, vocab_path);
    json_decref(vocab);
    if (!st)
        st = load_merges_txt(t, merges_path);
    /* HF's BPE.from_file + ByteLevel(add_prefix_space=False) + its decoder */
    json_t *pre = json_pack("{s:s, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 1);
    json_t *dec = json_pack("{s:s}", "type", "ByteLevel");
    if (!st && (!pre || !dec))
        st = gf_error_set(GF_E_NOMEM, "out of memory");
    if (!st)
        st = gf_tok_pretokenizer_parse(t, pre, merges_path);
    if (!st)
        st = gf_tok_decoder_parse(t, dec, merges_path);
    json_decref(pre);
    json_decref(dec);
    t->unk_id = -1;
    return st;
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

gf_status gf_tokenizer_load(const char *path, gf_tokenizer **tok_out)
{
    if (!tok_out)
        return gf_error_set(GF_E_INVALID_ARG, "gf_tokenizer_load: tok_out is NULL");
    *tok_out = NULL;
    if (!path || !*path)
        return gf_error_set(GF_E_INVALID_ARG, "gf_tokenizer_load: empty path");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return gf_error_set(GF_E_IO, "cannot open tokenizer '%s': %s", path, strerror(errno));
    gf_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    gf_status st;
    if (S_ISDIR(sb.st_mode)) {
        size_t pl = strlen(path);
        char *a = malloc(pl + 32), *b = malloc(pl + 32);
        if (!a || !b) {
            free(a);
            free(b);
            gf_tokenizer_free(t);
            return gf_error_set(GF_E_NOMEM, "out of memory");
        }
        snprintf(a, pl + 32, "%s/tokenizer.json", path);
        if (is_file(a)) {
            json_t *root;
            st = load_json_file(a, &root);
            if (!st) {
                st = parse_tokenizer_json(t, root, a);
                json_decref(root);
            }
        } else {
            snprintf(a, pl + 32, "%s/vocab.json", path);
            snprintf(b, pl + 32, "%s/merges.txt", path);
            if (is_file(a) && is_file(b))
                st = load_vocab_merges(t, a, b);
            else
                st = gf_error_set(GF_E_NOT_FOUND,
                                  "'%s' holds neither tokenizer.json nor "
                                  "vocab.json + merges.txt",
                                  path);
        }
        free(a);
        free(b);
    } else {
        json_t *root;
        st = load_json_file(path, &root);
        if (!st) {
            st = parse_tokenizer_json(t, root, path);
            json_decref(root);
        }
    }
    if (!st)
        st = finish(t);
    if (st) {
        gf_tokenizer_free(t);
        return st;
    }
    *tok_out = t;
    return GF_OK;
}

void gf_tokenizer_free(gf_tokenizer *t)
{
    if (!t)
        return;
    free(t->arena);
    free(t->str_off);
    free(t->str_len);
    free(t->bytes_off);
    free(t->bytes_len);
    free(t->vocab.slots);
    free(t->merges.slots);
    for (size_t i = 0; i < t->n_added; i++)
        free(t->added[i].content);
    free(t->added);
    free(t->match_raw.order);
    free(t->match_norm.order);
    gf_tok_components_free(t);
    pcre2_code_free(t->word_re);
    free(t);
}

int32_t gf_tokenizer_vocab_size(const gf_tokenizer *t) { return t ? t->n_ids : 0; }
