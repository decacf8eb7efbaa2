/* stream_decode: the incremental UTF-8 stream of token bytes (of a text, an
 * explicit token-id list, or seeded random ids) equals decode of the whole
 * sequence and holds no U+FFFD where the bytes are valid UTF-8. Uses the
 * model directory's tokenizer only (no backend). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/tokenizer.h"
#include "genfence/util.h"
#include "buf.h"
#include "hash.h"
#include "kept_list.h"
#include "token_source.h"

/* the most bytes of decoded text a record shows */
#define STREAM_SHOWN_BYTES 4096

typedef struct stream_spec {
    gf_token_source src; /* text, tokens or sample: up to 1 << 20 tokens */
    int decoder;         /* DEC_*: incremental, or a wrong way for detection cases */
    int expect_split;
    long long expect_replacements; /* -1: not checked; else the U+FFFD count decode must give */
} stream_spec;

static void stream_free(void *p)
{
    stream_spec *s = p;
    if (s)
        gf_token_source_free(&s->src);
    free(s);
}

/* per_token: each token decoded alone (the naive way); no_finish: the
 * incremental stream never flushed at the end, so a stream that ends inside
 * a character loses its U+FFFD (both wrong, for must-fail cases) */
enum { DEC_INCREMENTAL, DEC_PER_TOKEN, DEC_NO_FINISH };
static const char *const k_decoders[] = {"incremental", "per_token", "no_finish", NULL};

static int parse_stream(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    stream_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    int bad = gf_y_token_source(ctx, m, 1 << 20, &s->src);
    if (bad < 0)
        return -1;
    bad |= gf_y_enum(ctx, m, "decoder", 0, k_decoders, &s->decoder) < 0;
    bad |= gf_y_bool(ctx, m, "expect_split", 0, &s->expect_split) < 0;
    s->expect_replacements = -1;
    bad |= gf_y_int(ctx, m, "expect_replacements", 0, 0, 1 << 30, &s->expect_replacements) < 0;
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

static void run_stream(const gf_case *c, gf_krun *k)
{
    const stream_spec *s = c->spec;
    gf_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    gf_buf stream = {0}, bytes = {0}, naive = {0};
    char *full = NULL;
    size_t *ends = NULL;
    gf_status st;
    if (gf_token_source_open(&s->src, c->model, k, &tok, &ids, &n) < 0)
        goto done;
    /* at most GF_KEPT_SHOWN ids in the record (a sampled stream may be 1M tokens), with their count and a
     * hash of all of them (kept_list.h) */
    char ids_hex[65];
    gf_ids_sha256(ids, n, ids_hex);
    gf_k_metric_json(k, "tokens", gf_json_ints(ids, n < GF_KEPT_SHOWN ? n : GF_KEPT_SHOWN));
    gf_k_metric_int(k, "tokens_shown", (long long)(n < GF_KEPT_SHOWN ? n : GF_KEPT_SHOWN));
    gf_k_metric_json(k, "tokens_sha256", json_string(ids_hex));
    gf_k_metric_json(k, "decoder", json_string(k_decoders[s->decoder]));
    /* the stream, and the naive per-token decode for comparison */
    gf_utf8_stream u8;
    gf_utf8_stream_init(&u8);
    int pieces = 0;
    if (gf_token_bytes(tok, ids, n, k, &bytes, &ends) < 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        const size_t at = i ? ends[i - 1] : 0, len = ends[i] - at;
        const uint8_t *tb = (const uint8_t *)(bytes.p ? bytes.p + at : ""); /* bytes.p: NULL while empty */
        char *one = NULL;
        size_t one_len = 0;
        if (gf_tokenizer_decode(tok, &ids[i], 1, &one, &one_len) == GF_OK)
            gf_buf_put(&naive, one, one_len);
        if (s->decoder == DEC_PER_TOKEN) {
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
    if (s->decoder == DEC_INCREMENTAL) {
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
    int valid = gf_utf8_valid_prefix((const uint8_t *)bytes.p, bytes.n) == bytes.n;
    size_t repl_stream = count_fffd(stream.p ? stream.p : "", stream.n);
    size_t repl_naive = count_fffd(naive.p ? naive.p : "", naive.n);
    int equal = stream.n == full_len && (full_len == 0 || !memcmp(stream.p, full, full_len));
    gf_k_check(k, equal, "stream equals decode", "%zu stream bytes, %zu decode bytes%s", stream.n, full_len,
               equal ? "" : ": they differ");
    if (valid)
        gf_k_check(k, repl_stream == 0, "no U+FFFD for valid UTF-8", "%zu replacement characters in the stream",
                   repl_stream);
    if (s->expect_replacements >= 0) { /* an independent count: the stream and decode share one lead table */
        const size_t repl_full = count_fffd(full ? full : "", full_len);
        gf_k_check(k, repl_full == (size_t)s->expect_replacements, "decode replaces as expected",
                   "%zu U+FFFD in decode, the case expects %lld (one per maximal invalid subpart, Unicode's "
                   "recommended practice)",
                   repl_full, s->expect_replacements);
    }
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
    free(ends);
    free(full);
    gf_buf_free(&stream);
    gf_buf_free(&bytes);
    gf_buf_free(&naive);
}

const gf_kind_def gf_kind_stream_decode = {
    .name = "stream_decode",
    .summary = "streamed token bytes equal decode, with no U+FFFD for valid UTF-8",
    .needs = GF_KIND_NEEDS_TOKENIZER,
    .reaches = GF_KIND_REACHES_NONE,
    .parse = parse_stream,
    .free_spec = stream_free,
    .run = run_stream,
};
