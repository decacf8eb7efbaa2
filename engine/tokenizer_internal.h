/* Internals of the byte-level BPE tokenizer, shared by tokenizer_load.c
 * (loading), tokenizer.c (encode/decode) and utf8_stream.c (UTF-8 helpers).
 * Not part of the public API. */
#ifndef GENFENCE_TOKENIZER_INTERNAL_H
#define GENFENCE_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "genfence/tokenizer.h"

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
    char *content; /* UTF-8, NUL-terminated */
    size_t len;
    int32_t id;
    int special, normalized, lstrip, rstrip, single_word;
} gf_tok_added;

/* Added tokens of one kind (normalized or not), grouped by first byte and
 * sorted longest first within a group, for leftmost-longest matching. */
typedef struct gf_tok_matchset {
    int32_t *order;       /* indices into gf_tokenizer.added */
    uint32_t start[257];  /* order[start[b] .. start[b+1]) begin with byte b */
    uint32_t n;
} gf_tok_matchset;

struct gf_tokenizer {
    int32_t n_ids;         /* max id + 1 (model vocab and added tokens) */
    int32_t n_model_vocab; /* number of model vocab entries */

    char *arena; /* all strings and byte sequences */
    size_t arena_len, arena_cap;
    uint32_t *str_off, *str_len;   /* per id: model vocab string (byte-level alphabet) */
    uint32_t *bytes_off, *bytes_len; /* per id: raw bytes (what decode emits) */

    gf_tok_strmap vocab;     /* model vocab string -> id */
    gf_tok_mergemap merges;  /* (a, b) -> (rank, merged id) */
    int32_t byte_id[256];    /* id of each single-byte symbol, -1 if absent */

    gf_tok_added *added;
    size_t n_added;
    gf_tok_matchset match_raw;  /* added tokens with normalized=false */
    gf_tok_matchset match_norm; /* normalized=true (no normalizer: matched in the gaps) */

    int add_prefix_space;
    int use_regex;
    int ignore_merges;

    pcre2_code *split_re;  /* GPT-2 pre-tokenization pattern */
    pcre2_code *word_re;   /* Rust regex's \w, for single_word added tokens (or NULL) */
};

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

/* Length of the longest valid (strict: no overlongs, surrogates or > U+10FFFF)
 * UTF-8 prefix of s; n when all of s is valid. */
size_t gf_utf8_valid_prefix(const uint8_t *s, size_t n);
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
