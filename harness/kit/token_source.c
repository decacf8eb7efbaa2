/* A token source shared by the tokenizer-only kinds (stream_decode,
 * stop_strings): exactly one of `text`, `tokens` (an id list) or
 * `sample: {tokens, seed}` (seeded random ids), the id list it gives
 * through a model directory's tokenizer, and the token bytes of that list
 * (their UTF-8 validity: gf_utf8_valid_prefix, genfence/util.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/sampler.h"
#include "genfence/tokenizer.h"
#include "buf.h"
#include "token_source.h"

int gf_y_token_source(gf_cctx *ctx, const gf_ynode *m, long long max_sample, gf_token_source *src)
{
    memset(src, 0, sizeof *src);
    src->n_sample = 48;
    src->sample_seed = 1337;
    int rt = gf_y_string(ctx, m, "text", 0, &src->text);
    int bad = rt < 0;
    int ri = gf_y_ints(ctx, m, "tokens", 0, 0, 2147483647LL, 1, &src->tokens, &src->n_tokens);
    bad |= ri < 0;
    const gf_ynode *sm = gf_y_get(ctx, m, "sample", 0);
    if ((rt > 0) + (ri > 0) + (sm != NULL) > 1) {
        gf_y_error(ctx, sm ? sm : gf_y_get(ctx, m, "tokens", 0), "give one of 'text', 'tokens' or 'sample'");
        bad = 1;
    } else if (sm) {
        if (!gf_y_node_is_map(ctx, sm, "'sample'"))
            return -1;
        src->sample = 1;
        bad |= gf_y_int(ctx, sm, "tokens", 0, 1, max_sample, &src->n_sample) < 0;
        bad |= gf_y_int(ctx, sm, "seed", 0, 0, 0x7fffffffffffffffLL, &src->sample_seed) < 0;
        gf_y_check_unknown(ctx, sm, "in 'sample' (known: tokens, seed)");
    } else if (rt == 0 && ri == 0 && !bad) {
        gf_y_error(ctx, m, "missing required key 'text' (or 'tokens' or 'sample')");
        bad = 1;
    }
    return bad;
}

/* The ids of src through tok, malloc'd (NULL with no error recorded only when
 * out of memory); -1 after recording an error in k. */
static int source_ids(const gf_token_source *src, gf_tokenizer *tok, gf_krun *k, int32_t **ids_out, size_t *n_out)
{
    int32_t *ids = NULL;
    size_t n = 0;
    *ids_out = NULL;
    *n_out = 0;
    const int32_t V = gf_tokenizer_vocab_size(tok);
    if (src->sample) {
        gf_k_seed(k, "sample", (uint64_t)src->sample_seed);
        n = (size_t)src->n_sample;
        ids = malloc(n * sizeof *ids);
        for (size_t i = 0; ids && i < n; i++) {
            int32_t id = (int32_t)(gf_rng_uniform((uint64_t)src->sample_seed, 0x73747265ULL, 0, (uint32_t)i) * V);
            ids[i] = id >= V ? V - 1 : id;
        }
    } else if (src->tokens) {
        for (size_t i = 0; i < src->n_tokens; i++)
            if (src->tokens[i] >= V) {
                gf_k_error(k, "'tokens' entry %zu is %d; the tokenizer has %d ids", i, src->tokens[i], V);
                return -1;
            }
        n = src->n_tokens;
        ids = malloc(n * sizeof *ids);
        if (ids)
            memcpy(ids, src->tokens, n * sizeof *ids);
    } else if (gf_tokenizer_encode(tok, src->text, strlen(src->text), &ids, &n) != GF_OK) {
        gf_k_error(k, "encode: %s", gf_error_msg());
        return -1;
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

int gf_token_source_open(const gf_token_source *src, const char *model, gf_krun *k, gf_tokenizer **tok_out,
                         int32_t **ids_out, size_t *n_out)
{
    char path[4096];
    *tok_out = NULL;
    *ids_out = NULL;
    *n_out = 0;
    snprintf(path, sizeof path, "%s/tokenizer.json", model);
    if (gf_tokenizer_load(path, tok_out) != GF_OK) {
        gf_k_error(k, "tokenizer: %s", gf_error_msg());
        return -1;
    }
    if (source_ids(src, *tok_out, k, ids_out, n_out) < 0)
        return -1;
    if (!*ids_out) {
        gf_k_fail(k, "out of memory");
        return -1;
    }
    return 0;
}

int gf_token_bytes(gf_tokenizer *tok, const int32_t *ids, size_t n, gf_krun *k, gf_buf *bytes, size_t **ends_out)
{
    size_t *ends = malloc((n ? n : 1) * sizeof *ends);
    *ends_out = ends;
    if (!ends) {
        gf_k_fail(k, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const uint8_t *tb = gf_tokenizer_token_bytes(tok, ids[i], &len);
        if (!tb) {
            gf_k_error(k, "token %d has no bytes", ids[i]);
            return -1;
        }
        gf_buf_put(bytes, tb, len);
        ends[i] = bytes->n;
    }
    if (bytes->oom) {
        gf_k_fail(k, "out of memory");
        return -1;
    }
    return 0;
}

void gf_token_source_free(gf_token_source *src)
{
    if (!src)
        return;
    free(src->text);
    free(src->tokens);
    src->text = NULL;
    src->tokens = NULL;
    src->n_tokens = 0;
}
