/* Internals of the tokenizer, shared by tokenizer_load.c (loading: vocab,
 * merges, added tokens), tokenizer_normalizer.c, tokenizer_pretok.c,
 * tokenizer_model.c (BPE), tokenizer_decoder.c (decoders, post-processor,
 * token bytes), tokenizer.c (encode/decode) and utf8_stream.c (UTF-8).
 * Not part of the public API. */
#ifndef GENFENCE_TOKENIZER_INTERNAL_H
#define GENFENCE_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "genfence/tokenizer.h"
#include "genfence/util.h"

#define GF_TOK_NONE UINT32_MAX /* "absent" offset in the per-id tables */

/* Hash map: byte-level token string -> model vocab id. Open addressing; a
 * slot holds an id (or -1); keys are read back from the tokenizer's arena. */
typedef struct gf_tok_strmap {
    int32_t *slots;
    uint32_t mask;
} gf_tok_strmap;

/* Hash map: (left id, right id) -> (rank, merged id). */
typedef struct gf_tok_merge_slot {
    uint64_t key; /* (uint64_t)left << 32 | right; UINT64_MAX when empty */
    int32_t rank;
    int32_t new_id;
} gf_tok_merge_slot;

typedef struct gf_tok_mergemap {
    gf_tok_merge_slot *slots;
    uint32_t mask;
    uint32_t count;
} gf_tok_mergemap;

typedef struct gf_tok_added {
    char *content; /* UTF-8, NUL-terminated (normalized=true: the normalized content) */
    size_t len;
    int32_t id;
    int special, normalized, lstrip, rstrip, single_word;
} gf_tok_added;

/* Added tokens of one kind (normalized or not), grouped by first byte and
 * sorted longest first within a group, for leftmost-longest matching. */
typedef struct gf_tok_matchset {
    int32_t *order;      /* indices into gf_tokenizer.added */
    uint32_t start[257]; /* order[start[b] .. start[b+1]) begin with byte b */
    uint32_t n;
} gf_tok_matchset;

/* A growable byte string. */
typedef struct gf_tok_buf {
    char *p;
    size_t n, cap;
} gf_tok_buf;

/* A list of strings held in one buffer: the pre-tokenizer's splits, the
 * decoder's tokens. origin: the split starts at byte 0 of the input (HF's
 * offsets_original().0 == 0, which Metaspace's prepend_scheme "first" reads). */
typedef struct gf_tok_piece {
    size_t off, len;
    int origin;
} gf_tok_piece;

typedef struct gf_tok_list {
    gf_tok_buf text;
    gf_tok_piece *v;
    size_t n, cap;
} gf_tok_list;

/* HF's SplitDelimiterBehavior. */
typedef enum {
    GF_SPLIT_REMOVED,
    GF_SPLIT_ISOLATED,
    GF_SPLIT_MERGED_PREV,
    GF_SPLIT_MERGED_NEXT,
    GF_SPLIT_CONTIGUOUS
} gf_tok_split_behavior;

/* One step of the normalizer (a Sequence is flattened into its steps). */
typedef enum {
    GF_NORM_NFC,
    GF_NORM_NFD,
    GF_NORM_NFKC,
    GF_NORM_NFKD,
    GF_NORM_LOWERCASE,
    GF_NORM_PREPEND,
    GF_NORM_REPLACE,
    GF_NORM_STRIP
} gf_tok_norm_kind;

typedef struct gf_tok_norm {
    gf_tok_norm_kind kind;
    char *str; /* Prepend: the prefix; Replace: the content */
    size_t len;
    pcre2_code *re;  /* Replace: the pattern */
    int left, right; /* Strip */
} gf_tok_norm;

/* One step of the pre-tokenizer. */
typedef enum {
    GF_PRE_BYTELEVEL,
    GF_PRE_SPLIT,
    GF_PRE_DIGITS,
    GF_PRE_METASPACE,
    GF_PRE_PUNCTUATION,
    GF_PRE_WHITESPACE,
    GF_PRE_WHITESPACE_SPLIT
} gf_tok_pre_kind;

typedef enum { GF_PREPEND_NEVER, GF_PREPEND_FIRST, GF_PREPEND_ALWAYS } gf_tok_prepend;

typedef struct gf_tok_pre {
    gf_tok_pre_kind kind;
    pcre2_code *re; /* the split pattern (ByteLevel: GPT-2's, or NULL without use_regex) */
    gf_tok_split_behavior behavior;
    int invert;
    int add_prefix_space; /* ByteLevel */
    char rep[5];          /* Metaspace: the replacement character (UTF-8) */
    size_t rep_len;
    gf_tok_prepend prepend; /* Metaspace */
    int split;              /* Metaspace: split on the replacement */
} gf_tok_pre;

/* One step of the decoder. */
typedef enum {
    GF_DEC_BYTELEVEL,
    GF_DEC_METASPACE,
    GF_DEC_BYTEFALLBACK,
    GF_DEC_FUSE,
    GF_DEC_STRIP,
    GF_DEC_REPLACE
} gf_tok_dec_kind;

typedef struct gf_tok_dec {
    gf_tok_dec_kind kind;
    pcre2_code *re; /* Replace: the pattern */
    char *str;      /* Replace: the content */
    size_t len;
    char rep[5]; /* Metaspace: the replacement; Strip: the content character */
    size_t rep_len;
    gf_tok_prepend prepend;
    int start, stop; /* Strip */
} gf_tok_dec;

#define GF_TOK_CHAR_TABLE 0x800 /* ids of single-character tokens below U+0800, direct */

struct gf_tokenizer {
    int32_t n_ids;         /* max id + 1 (model vocab and added tokens) */
    int32_t n_model_vocab; /* number of model vocab entries */

    char *arena; /* all strings and byte sequences */
    size_t arena_len, arena_cap;
    uint32_t *str_off, *str_len;     /* per id: the token string (vocab, else added content) */
    uint32_t *bytes_off, *bytes_len; /* per id: the bytes a token stands for (streaming) */

    gf_tok_strmap vocab;                /* model vocab string -> id */
    gf_tok_mergemap merges;             /* (a, b) -> (rank, merged id) */
    int32_t char_id[GF_TOK_CHAR_TABLE]; /* single-character vocab tokens, -1 if absent */
    int32_t byte_fb_id[256];            /* "<0xXX>" tokens (byte fallback), -1 if absent */
    int32_t unk_id;                     /* model.unk_token's id, -1 without one */
    int byte_fallback, fuse_unk, ignore_merges;
    int byte_level; /* a ByteLevel pre-tokenizer: missing symbols name the byte */

    gf_tok_added *added;
    size_t n_added;
    gf_tok_matchset match_raw;  /* added tokens with normalized=false */
    gf_tok_matchset match_norm; /* normalized=true: matched in the normalized text */

    gf_tok_norm *norm;
    size_t n_norm;
    gf_tok_pre *pre;
    size_t n_pre;
    gf_tok_dec *dec;
    size_t n_dec;
    int has_decoder;               /* decoder null: tokens are joined with ' ', as HF does */
    int32_t *post_pre, *post_post; /* TemplateProcessing's single: ids before and after */
    size_t n_post_pre, n_post_post;
    int has_template;

    pcre2_code *word_re; /* Rust regex's \w, for single_word added tokens (or NULL) */
};

/* ---- buffers and lists (tokenizer_normalizer.c) ---- */
gf_status gf_tok_buf_put(gf_tok_buf *b, const void *p, size_t n);
gf_status gf_tok_list_add(gf_tok_list *l, const void *p, size_t n, int origin);
void gf_tok_list_free(gf_tok_list *l);

/* Compile a tokenizer.json pattern ({"String": s} or {"Regex": r}); Oniguruma's
 * \s / \S are rewritten as Unicode White_Space. where names it for errors. */
struct json_t;
gf_status gf_tok_pattern_compile(struct json_t *pattern, const char *where, pcre2_code **re_out);
gf_status gf_tok_regex_compile(const char *pattern, size_t len, uint32_t options, const char *where,
                               pcre2_code **re_out);
/* HF's find_matches: the ranges of s[0, n) that match re and those between. */
typedef struct gf_tok_range {
    size_t s, e;
    int match;
} gf_tok_range;
gf_status gf_tok_find_matches(const pcre2_code *re, const char *s, size_t n, gf_tok_range **v, size_t *nv, size_t *cap);
/* Replace every match of re in s[0, n) with rep; into out (reset first). */
gf_status gf_tok_replace_all(const pcre2_code *re, const char *s, size_t n, const char *rep, size_t rep_len,
                             gf_tok_buf *out);

/* ---- components: parsing (each file) and running ---- */
/* A pipeline component's "type" (tokenizer_normalizer.c): j must be an object
 * with a string "type" ("WHERE: not an object", "WHERE: no \"type\""). */
gf_status gf_tok_component_type(struct json_t *j, const char *where, const char **type_out);
/* A Sequence component: each member of its list under `key` handed to add,
 * named WHERE.key[i] ("WHERE: Sequence without a \"key\" list"). */
typedef gf_status (*gf_tok_add_fn)(gf_tokenizer *t, struct json_t *j, const char *where);
gf_status gf_tok_sequence(gf_tokenizer *t, struct json_t *j, const char *where, const char *key, gf_tok_add_fn add);
gf_status gf_tok_normalizer_parse(gf_tokenizer *t, struct json_t *j, const char *path);
gf_status gf_tok_normalize(const gf_tokenizer *t, const char *s, size_t n, gf_tok_buf *out);
gf_status gf_tok_pretokenizer_parse(gf_tokenizer *t, struct json_t *j, const char *path);
/* Pre-tokenize s[0, n) into l (reset first). */
gf_status gf_tok_pretokenize(const gf_tokenizer *t, const char *s, size_t n, int origin, gf_tok_list *l);
gf_status gf_tok_decoder_parse(gf_tokenizer *t, struct json_t *j, const char *path);
gf_status gf_tok_post_parse(gf_tokenizer *t, struct json_t *j, const char *path);
/* Per id: the bytes it stands for in the middle of a text (after the
 * decoder's per-token steps); fills bytes_off / bytes_len. */
gf_status gf_tok_token_bytes_build(gf_tokenizer *t);
void gf_tok_components_free(gf_tokenizer *t);

/* The BPE model (tokenizer_model.c): one pre-tokenized word -> ids. */
typedef struct gf_tok_bpe gf_tok_bpe; /* per-call scratch and cache */
gf_tok_bpe *gf_tok_bpe_new(void);
void gf_tok_bpe_free(gf_tok_bpe *b);
gf_status gf_tok_bpe_word(const gf_tokenizer *t, gf_tok_bpe *b, const char *w, size_t n, int32_t **ids, size_t *n_ids,
                          size_t *cap);

/* GPT-2's bytes_to_unicode: the code point standing for byte b, and back
 * (-1 for a code point outside the 256-symbol alphabet). */
uint32_t gf_tok_byte_to_cp(uint8_t b);
int gf_tok_cp_to_byte(uint32_t cp);

/* FNV-1a, for the vocab map (and the encoder's per-call cache). */
static inline uint64_t gf_tok_hash(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static inline uint32_t gf_tok_merge_hash(uint64_t key, uint32_t mask)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

int32_t gf_tok_strmap_get(const gf_tokenizer *tok, const char *s, size_t len);
const gf_tok_merge_slot *gf_tok_merge_get(const gf_tokenizer *tok, int32_t a, int32_t b);

/* --- UTF-8 helpers (utf8_stream.c) --- */

/* gf_utf8_valid_prefix, the one UTF-8 grammar: defined in utf8_stream.c,
 * declared in genfence/util.h for the harness too */

/* One-shot decode with CPython's errors="replace" semantics (each maximal
 * invalid subpart becomes one U+FFFD). out needs 3 * n + 1 bytes; it is
 * NUL-terminated; returns the number of bytes written before the NUL. */
size_t gf_utf8_decode_replace(const uint8_t *s, size_t n, char *out);
/* Encode one code point (<= U+10FFFF); returns 1..4. */
size_t gf_utf8_put(uint32_t cp, char *out);
/* Decode one code point from valid UTF-8 at s (n > 0 bytes); *len_out its length. */
uint32_t gf_utf8_get(const uint8_t *s, size_t n, size_t *len_out);
/* Unicode White_Space (what both Oniguruma's and Rust regex's \s match). */
int gf_unicode_is_space(uint32_t cp);

#endif
