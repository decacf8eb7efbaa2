/* Fuzz target: tokenizer.json load + encode / decode / streaming decode.
 *
 * Input: if it starts with '{', the bytes up to the first NUL are a
 * tokenizer.json and the bytes after it the text (default text if there is no
 * NUL); otherwise the whole input is text for holmes-gpt's tokenizer (loaded
 * once). Properties: decode(encode(t)) == t for valid UTF-8 t on holmes-gpt's
 * byte-level tokenizer; on any tokenizer, whatever encode returns decodes, and
 * feeding the ids' bytes through gf_utf8_stream gives the same text as decode. */
#include <string.h>

#include "fuzz_common.h"
#include "genfence/tokenizer.h"

#ifndef GF_FUZZ_SOURCE_DIR
#define GF_FUZZ_SOURCE_DIR "."
#endif

static gf_tokenizer *holmes;

static int valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n)
            return 0;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

static void exercise(const gf_tokenizer *tok, const uint8_t *text, size_t len, int lossless)
{
    int32_t *ids = NULL;
    size_t n = 0;
    gf_status s = gf_tokenizer_encode(tok, (const char *)text, len, &ids, &n);
    if (s != GF_OK) {
        GF_FUZZ_ASSERT(ids == NULL, "ids_out not cleared");
        GF_FUZZ_ASSERT(!lossless || !valid_utf8(text, len), "valid UTF-8 refused: %s", gf_status_str(s));
        return;
    }
    int32_t V = gf_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < n; i++)
        GF_FUZZ_ASSERT(ids[i] >= 0 && ids[i] < V, "id %d outside [0, %d)", ids[i], V);
    char *dec = NULL;
    size_t dec_len = 0;
    s = gf_tokenizer_decode(tok, ids, n, &dec, &dec_len);
    GF_FUZZ_ASSERT(s == GF_OK, "encode's ids do not decode: %s", gf_status_str(s));
    if (lossless)
        GF_FUZZ_ASSERT(dec_len == len && !memcmp(dec, text, len), "round trip changed the text (%zu -> %zu bytes)", len,
                       dec_len);
    /* the same bytes through the streaming decoder, one token at a time */
    size_t cap = 3 * (dec_len + 64) + 64, used = 0;
    char *out = malloc(cap);
    gf_utf8_stream st;
    gf_utf8_stream_init(&st);
    for (size_t i = 0; out && i < n; i++) {
        size_t bl = 0;
        const uint8_t *b = gf_tokenizer_token_bytes(tok, ids[i], &bl);
        GF_FUZZ_ASSERT(b, "id %d has no bytes", ids[i]);
        if (used + 3 * (bl + 4) + 1 > cap) {
            cap = 2 * (used + 3 * (bl + 4) + 1);
            char *g = realloc(out, cap);
            if (!g)
                break;
            out = g;
        }
        used += gf_utf8_stream_feed(&st, b, bl, out + used, cap - used);
    }
    if (out && used + 16 <= cap) {
        used += gf_utf8_stream_finish(&st, out + used, cap - used);
        GF_FUZZ_ASSERT(used == dec_len && !memcmp(out, dec, used), "stream (%zu bytes) != decode (%zu bytes)", used,
                       dec_len);
    }
    free(out);
    free(dec);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size && data[0] == '{') {
        const uint8_t *nul = memchr(data, 0, size);
        size_t jlen = nul ? (size_t)(nul - data) : size;
        static const char dflt[] = "Holmes and Watson <|endoftext|> caf\xc3\xa9 \xf0\x9f\x94\x8d  x";
        const uint8_t *text = nul ? nul + 1 : (const uint8_t *)dflt;
        size_t tlen = nul ? size - jlen - 1 : sizeof dflt - 1;
        const char *path = gf_fuzz_path(0, "tokenizer.json");
        gf_fuzz_write(path, data, jlen);
        gf_tokenizer *tok = NULL;
        if (gf_tokenizer_load(path, &tok) != GF_OK) {
            GF_FUZZ_ASSERT(tok == NULL, "tok_out not cleared");
            return 0;
        }
        exercise(tok, text, tlen, 0);
        gf_tokenizer_free(tok);
        return 0;
    }
    if (!holmes && gf_tokenizer_load(GF_FUZZ_SOURCE_DIR "/models/holmes-gpt/tokenizer.json", &holmes) != GF_OK) {
        fprintf(stderr, "cannot load holmes-gpt's tokenizer: %s\n", gf_error_msg());
        abort();
    }
    exercise(holmes, data, size, 1);
    return 0;
}
