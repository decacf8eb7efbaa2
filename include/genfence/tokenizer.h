/* Byte-level BPE tokenizer (GPT-2 family), compatible with Hugging Face's.
 *
 * Loaded from a tokenizer.json (model type BPE, ByteLevel pre-tokenizer;
 * merges as "a b" strings or ["a", "b"] pairs; added tokens matched before
 * pre-tokenization) or from a directory holding vocab.json + merges.txt (plain
 * BPE, no special-token matching). Pre-tokenization: GPT-2's split regex, run
 * by PCRE2 in UTF mode. */
#ifndef GENFENCE_TOKENIZER_H
#define GENFENCE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_tokenizer gf_tokenizer;

/* path: a tokenizer.json file, a directory containing tokenizer.json, or a
 * directory containing vocab.json + merges.txt. */
gf_status gf_tokenizer_load(const char *path, gf_tokenizer **tok_out);
void gf_tokenizer_free(gf_tokenizer *tok);                /* NULL-safe */
int32_t gf_tokenizer_vocab_size(const gf_tokenizer *tok);

/* Encode len bytes of UTF-8 text. *ids_out is malloc'd (caller frees), NULL on
 * failure. Invalid UTF-8 input is GF_E_INVALID_ARG with its byte offset. */
gf_status gf_tokenizer_encode(const gf_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids_out, size_t *n_out);

/* The raw bytes of one token (not NUL-terminated); NULL if id is out of range. */
const uint8_t *gf_tokenizer_token_bytes(const gf_tokenizer *tok, int32_t id, size_t *len_out);

/* id of an exact token string (e.g. "<|endoftext|>"), -1 if absent. */
int32_t gf_tokenizer_token_id(const gf_tokenizer *tok, const char *token);

/* Decode ids to UTF-8 (invalid byte sequences replaced by U+FFFD as Python's
 * errors="replace" does). *text_out malloc'd, NUL-terminated. Out-of-range
 * ids are GF_E_INVALID_ARG. */
gf_status gf_tokenizer_decode(const gf_tokenizer *tok, const int32_t *ids, size_t n,
                              char **text_out, size_t *len_out);

/* Incremental UTF-8 decoder with Python's errors="replace" semantics:
 * incomplete trailing sequences are held back until completed or flushed. */
typedef struct gf_utf8_stream {
    uint8_t pending[4];
    int32_t n_pending;
} gf_utf8_stream;

void gf_utf8_stream_init(gf_utf8_stream *s);
/* Feed bytes; appends decoded UTF-8 to out (capacity out_cap, needs at most
 * 3 * (len + 4) + 1 bytes); returns bytes written (NUL-terminated). */
size_t gf_utf8_stream_feed(gf_utf8_stream *s, const uint8_t *bytes, size_t len,
                           char *out, size_t out_cap);
/* Flush: pending bytes become U+FFFD as Python's final=True does. */
size_t gf_utf8_stream_finish(gf_utf8_stream *s, char *out, size_t out_cap);

#ifdef __cplusplus
}
#endif
#endif
