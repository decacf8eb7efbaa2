/* A token source shared by the tokenizer-only kinds (token_source.c). */
#ifndef GENFENCE_HARNESS_KIT_TOKEN_SOURCE_H
#define GENFENCE_HARNESS_KIT_TOKEN_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "case.h"
#include "record.h"

/* A token source (stream_decode, stop_strings): exactly one of `text`,
 * `tokens` (an id list, checked against the vocabulary at run time) or
 * `sample: {tokens, seed}` (seeded random ids; defaults 48 tokens, seed 1337). */
typedef struct gf_token_source {
    char *text;
    int32_t *tokens;
    size_t n_tokens;
    long long n_sample, sample_seed;
    int sample;
} gf_token_source;
/* Parses the token source of mapping m into *src (sample tokens in
 * [1, max_sample]). Returns 0 read, 1 an error reported (parsing may go on),
 * -1 stop parsing the case. Free with gf_token_source_free either way. */
int gf_y_token_source(gf_cctx *ctx, const gf_ynode *m, long long max_sample, gf_token_source *src);
/* Loads <model>/tokenizer.json into *tok and the ids of src into *ids
 * (malloc'd, n of them). Returns 0, or -1 after recording the error in k
 * (free *tok and *ids either way). */
int gf_token_source_open(const gf_token_source *src, const char *model, gf_krun *k, gf_tokenizer **tok, int32_t **ids,
                         size_t *n);
struct gf_buf;
/* Appends the bytes of the n tokens ids to *bytes; (*ends)[i] (malloc'd, n
 * entries) is the end offset of token i. Returns 0, or -1 after recording
 * the error in k (free *ends and *bytes either way). */
int gf_token_bytes(gf_tokenizer *tok, const int32_t *ids, size_t n, gf_krun *k, struct gf_buf *bytes, size_t **ends);
void gf_token_source_free(gf_token_source *src); /* NULL: no-op */

#endif
