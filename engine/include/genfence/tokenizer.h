/* BPE tokenizer, id-for-id with Hugging Face tokenizers (docs/tokenizer.md).
 *
 * Loaded from a tokenizer.json (model type BPE with its normalizer,
 * pre-tokenizer, post-processor and decoder: the layouts of GPT-2, Llama 2/3,
 * Mistral, Qwen2, SmolLM2) or from a directory holding vocab.json +
 * merges.txt (plain byte-level BPE, no special-token matching). */
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
void gf_tokenizer_free(gf_tokenizer *tok); /* NULL-safe */
int32_t gf_tokenizer_vocab_size(const gf_tokenizer *tok);

/* Encode len bytes of UTF-8 text (HF's encode(text, add_special_tokens=False)).
 * *ids_out is malloc'd (caller frees), NULL on failure. Invalid UTF-8 input is
 * GF_E_INVALID_ARG with its byte offset. */
gf_status gf_tokenizer_encode(const gf_tokenizer *tok, const char *text, size_t len, int32_t **ids_out, size_t *n_out);
/* The same; add_special_tokens = 1 also applies the post-processor's
 * template (e.g. Llama 3's BOS), as HF's encode(text) does by default. */
gf_status gf_tokenizer_encode_ex(const gf_tokenizer *tok, const char *text, size_t len, int add_special_tokens,
                                 int32_t **ids_out, size_t *n_out);

/* The bytes one token stands for in the middle of a text (not NUL-terminated):
 * the decoder's per-token steps (byte alphabet, <0xXX> byte fallback, the
 * Metaspace/Replace mapping); NULL if id is out of range. */
const uint8_t *gf_tokenizer_token_bytes(const gf_tokenizer *tok, int32_t id, size_t *len_out);

/* id of an exact token string (e.g. "<|endoftext|>"), -1 if absent. */
int32_t gf_tokenizer_token_id(const gf_tokenizer *tok, const char *token);

/* Decode ids to UTF-8 through the tokenizer's decoder, as HF's
 * decode(ids, skip_special_tokens=False) (ByteLevel: invalid byte sequences
 * replaced by U+FFFD as Python's errors="replace" does). *text_out malloc'd,
 * NUL-terminated. Out-of-range ids are GF_E_INVALID_ARG. */
gf_status gf_tokenizer_decode(const gf_tokenizer *tok, const int32_t *ids, size_t n, char **text_out, size_t *len_out);

/* Incremental UTF-8 decoder with Python's errors="replace" semantics:
 * incomplete trailing sequences are held back until completed or flushed. */
typedef struct gf_utf8_stream {
    uint8_t pending[4];
    int32_t n_pending;
} gf_utf8_stream;

void gf_utf8_stream_init(gf_utf8_stream *s);
/* Feed bytes; appends decoded UTF-8 to out (capacity out_cap, needs at most
 * 3 * (len + 4) + 1 bytes); returns bytes written (NUL-terminated). */
size_t gf_utf8_stream_feed(gf_utf8_stream *s, const uint8_t *bytes, size_t len, char *out, size_t out_cap);
/* Flush: pending bytes become U+FFFD as Python's final=True does. */
size_t gf_utf8_stream_finish(gf_utf8_stream *s, char *out, size_t out_cap);

#ifdef __cplusplus
}
#endif
#endif
