/* stream_decode: the incremental UTF-8 stream of token bytes (of a text, an
 * explicit token-id list, or seeded random ids) equals decode of the whole
 * sequence and holds no U+FFFD where the bytes are valid UTF-8. Uses the
 * model directory's tokenizer only (no backend). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/tokenizer.h"
#include "buf.h"
#include "hash.h"
#include "kept_list.h"
#include "krun.h"

/* the most bytes of decoded text a record shows */
#define STREAM_SHOWN_BYTES 4096

typedef struct stream_spec {
    char *text;
    int32_t *tokens; /* an explicit token-id list (checked against the vocabulary at run time) */
    size_t n_tokens;
    long long n_sample, seed;
    int sample;
    int per_token; /* decoder: per_token (the naive, wrong way; for detection cases) */
    int expect_split;
} stream_spec;

static void stream_free(void *p)
{
    stream_spec *s = p;
    if (s) {
        free(s->text);
        free(s->tokens);
    }
    free(s);
}

static const char *const k_decoders[] = {"incremental", "per_token", NULL};

static int parse_stream(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    stream_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->n_sample = 48;
    s->seed = 1337;
    int rt = gf_y_string(ctx, m, "text", 0, &s->text);
    int bad = rt < 0;
    int ri = gf_y_ints(ctx, m, "tokens", 0, 0, 2147483647LL, 1, &s->tokens, &s->n_tokens);
    bad |= ri < 0;
    const gf_ynode *sm = gf_y_get(ctx, m, "sample", 0);
    if ((rt > 0) + (ri > 0) + (sm != NULL) > 1) {
        gf_y_error(ctx, sm ? sm : gf_y_get(ctx, m, "tokens", 0), "give one of 'text', 'tokens' or 'sample'");
        bad = 1;
    } else if (sm) {
        if (!gf_y_node_is_map(ctx, sm, "'sample'"))
            return -1;
        s->sample = 1;
        bad |= gf_y_int(ctx, sm, "tokens", 0, 1, 1 << 20, &s->n_sample) < 0;
        bad |= gf_y_int(ctx, sm, "seed", 0, 0, 0x7fffffffffffffffLL, &s->seed) < 0;
        gf_y_check_unknown(ctx, sm, "in 'sample' (known: tokens, seed)");
    } else if (rt == 0 && ri == 0 && !bad) {
        gf_y_error(ctx, m, "missing required key 'text' (or 'tokens' or 'sample')");
        bad = 1;
    }
    bad |= gf_y_enum(ctx, m, "decoder", 0, k_decoders, &s->per_token) < 0;
    bad |= gf_y_bool(ctx, m, "expect_split", 0, &s->expect_split) < 0;
    return bad ? -1 : 0;
}

static size_t count_fffd(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i + 2 < n; i++)
        if ((unsigned char)s[i] == 0xEF && (unsigned char)s[i + 1] == 0xBF && (unsigned char)s[i + 2] == 0xBD)
            c++;
    return c;
}

/* Strict UTF-8 validity (no overlongs, surrogates or > U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            if (c == 0xF4)
                hi = 0x8F;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t j = 2; j < len; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xBF)
                return 0;
        i += len;
    }
    return 1;
}

static void run_stream(const gf_case *c, gf_krun *k)
{
    const stream_spec *s = c->spec;
    gf_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    gf_buf stream = {0}, bytes = {0}, naive = {0};
    char *full = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", c->model);
    gf_status st = gf_tokenizer_load(path, &tok);
    if (st != GF_OK) {
        gf_k_error(k, "tokenizer: %s", gf_error_msg());
        goto done;
    }
    const int32_t V = gf_tokenizer_vocab_size(tok);
    if (s->sample) {
        gf_k_seed(k, "sample", (uint64_t)s->seed);
        n = (size_t)s->n_sample;
        ids = malloc(n * sizeof *ids);
        for (size_t i = 0; ids && i < n; i++) {
            double u = gf_rng_uniform((uint64_t)s->seed, 0x73747265ULL, 0, (uint32_t)i);
            int32_t id = (int32_t)(u * V);
            ids[i] = id >= V ? V - 1 : id;
        }
    } else if (s->tokens) {
        for (size_t i = 0; i < s->n_tokens; i++)
            if (s->tokens[i] >= V) {
                gf_k_error(k, "'tokens' entry %zu is %d; the tokenizer has %d ids", i, s->tokens[i], V);
                goto done;
            }
        n = s->n_tokens;
        ids = malloc(n * sizeof *ids);
        if (ids)
            memcpy(ids, s->tokens, n * sizeof *ids);
    } else {
        st = gf_tokenizer_encode(tok, s->text, strlen(s->text), &ids, &n);
        if (st != GF_OK) {
            gf_k_error(k, "encode: %s", gf_error_msg());
            goto done;
        }
    }
    if (!ids) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    /* at most GF_KEPT_SHOWN ids in the record (a sampled stream may be 1M tokens), with their count and a
     * hash of all of them (kept_list.h) */
    char ids_hex[65];
    gf_ids_sha256(ids, n, ids_hex);
    gf_k_metric_json(k, "tokens", gf_json_ints(ids, n < GF_KEPT_SHOWN ? n : GF_KEPT_SHOWN));
    gf_k_metric_int(k, "tokens_shown", (long long)(n < GF_KEPT_SHOWN ? n : GF_KEPT_SHOWN));
    gf_k_metric_json(k, "tokens_sha256", json_string(ids_hex));
    gf_k_metric_json(k, "decoder", json_string(k_decoders[s->per_token]));
    /* the stream, and the naive per-token decode for comparison */
    gf_utf8_stream u8;
    gf_utf8_stream_init(&u8);
    int pieces = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const uint8_t *tb = gf_tokenizer_token_bytes(tok, ids[i], &len);
        if (!tb) {
            gf_k_error(k, "token %d has no bytes", ids[i]);
            goto done;
        }
        gf_buf_put(&bytes, tb, len);
        char *one = NULL;
        size_t one_len = 0;
        if (gf_tokenizer_decode(tok, &ids[i], 1, &one, &one_len) == GF_OK)
            gf_buf_put(&naive, one, one_len);
        if (s->per_token) {
            gf_buf_put(&stream, one, one_len);
            pieces += one_len > 0;
        } else {
            for (size_t off = 0; off < len; off += 64) {
                char out[3 * (64 + 4) + 1];
                size_t m = len - off < 64 ? len - off : 64;
                size_t w = gf_utf8_stream_feed(&u8, tb + off, m, out, sizeof out);
                gf_buf_put(&stream, out, w);
                pieces += w > 0;
            }
        }
        free(one);
    }
    if (!s->per_token) {
        char tail[32];
        size_t w = gf_utf8_stream_finish(&u8, tail, sizeof tail);
        gf_buf_put(&stream, tail, w);
    }
    size_t full_len = 0;
    st = gf_tokenizer_decode(tok, ids, n, &full, &full_len);
    if (st != GF_OK) {
        gf_k_fail(k, "decode: %s", gf_error_msg());
        goto done;
    }
    int valid = valid_utf8((const unsigned char *)bytes.p, bytes.n);
    size_t repl_stream = count_fffd(stream.p ? stream.p : "", stream.n);
    size_t repl_naive = count_fffd(naive.p ? naive.p : "", naive.n);
    int equal = stream.n == full_len && (full_len == 0 || !memcmp(stream.p, full, full_len));
    gf_k_check(k, equal, "stream equals decode", "%zu stream bytes, %zu decode bytes%s", stream.n, full_len,
               equal ? "" : ": they differ");
    if (valid)
        gf_k_check(k, repl_stream == 0, "no U+FFFD for valid UTF-8", "%zu replacement characters in the stream",
                   repl_stream);
    if (s->expect_split)
        gf_k_check(k, repl_naive > 0, "a character spans tokens",
                   "per-token decoding shows %zu U+FFFD (the case must split a character)", repl_naive);
    gf_k_metric_int(k, "token_count", (long long)n);
    gf_k_metric_int(k, "bytes", (long long)bytes.n);
    gf_k_metric_json(k, "valid_utf8", json_boolean(valid));
    gf_k_metric_int(k, "stream_replacements", (long long)repl_stream);
    gf_k_metric_int(k, "per_token_replacements", (long long)repl_naive);
    gf_k_metric_int(k, "pieces", pieces);
    /* the decoded text up to STREAM_SHOWN_BYTES, cut at a character boundary, with its length and hash */
    size_t shown = full_len;
    if (shown > STREAM_SHOWN_BYTES) {
        shown = STREAM_SHOWN_BYTES;
        while (shown > 0 && ((unsigned char)full[shown] & 0xC0) == 0x80)
            shown--;
    }
    char text_hex[65];
    gf_sha256_of(full, full_len, text_hex);
    /* a U+0000 in the text (a sampled byte-0 token) is shown as U+2400: a record with \u0000 in it is
     * rejected by the parent's JSON parser, and the case then read as a crash */
    gf_buf shown_text = {0};
    long long nul = 0;
    for (size_t i = 0; i < shown; i++) {
        if (full[i])
            gf_buf_put(&shown_text, &full[i], 1);
        else
            gf_buf_put(&shown_text, "\xe2\x90\x80", 3), nul++;
    }
    gf_k_metric_json(k, "decoded", json_stringn(shown_text.p ? shown_text.p : "", shown_text.n));
    gf_buf_free(&shown_text);
    if (nul)
        gf_k_metric_int(k, "decoded_nul_shown_as_u2400", nul);
    gf_k_metric_int(k, "decoded_bytes_shown", (long long)shown);
    gf_k_metric_int(k, "decoded_bytes_total", (long long)full_len);
    gf_k_metric_json(k, "decoded_sha256", json_string(text_hex));
done:
    gf_tokenizer_free(tok);
    free(ids);
    free(full);
    gf_buf_free(&stream);
    gf_buf_free(&bytes);
    gf_buf_free(&naive);
}

const gf_kind_def gf_kind_stream_decode = {
    .name = "stream_decode",
    .summary = "streamed token bytes equal decode, with no U+FFFD for valid UTF-8",
    .uses_backend = 0,
    .model = GF_KIND_MODEL_TOKENIZER,
    .keys = "text, tokens, sample, decoder, expect_split",
    .parse = parse_stream,
    .free_spec = stream_free,
    .run = run_stream,
};
