/* UTF-8 decoding with CPython's errors="replace" semantics: fixed vectors
 * (expected outputs taken from CPython 3.11's bytes.decode("utf-8",
 * "replace")), the incremental decoder against the one-shot one on random
 * byte strings fed one byte at a time and in random chunks, strict validation
 * offsets, and the output-capacity bound. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/tokenizer_internal.h"
#include "genfence/tokenizer.h"

typedef struct vec {
    const char *in;
    size_t in_len;
    const char *out;
    size_t out_len;
    size_t valid; /* CPython's UnicodeDecodeError.start (in_len if valid) */
} vec;

#define V(in, out, valid)                               \
    {                                                   \
        in, sizeof(in) - 1, out, sizeof(out) - 1, valid \
    }
#define R "\xef\xbf\xbd" /* U+FFFD */

static const vec k_vectors[] = {
    V("", "", 0),
    V("abc", "abc", 3),
    V("a\x00"
      "b",
      "a\x00"
      "b",
      3),
    V("\xe2\x80", R, 0),        /* truncated em dash: one U+FFFD */
    V("\xe2(\xa1", R "(" R, 0), /* broken after the lead byte */
    V("\xe2\x80\x94", "\xe2\x80\x94", 3),
    V("\xc0\xaf", R R, 0), /* overlong '/' */
    V("\xc1\xbf", R R, 0),
    V("\xe0\x80\xaf", R R R, 0), /* overlong, 3 bytes */
    V("\xe0\x9f\xbf", R R R, 0),
    V("\xe0\xa0\x80", "\xe0\xa0\x80", 3),         /* U+0800 */
    V("\xed\xa0\x80", R R R, 0),                  /* surrogate U+D800 */
    V("\xed\xbf\xbf", R R R, 0),                  /* surrogate U+DFFF */
    V("\xed\x9f\xbf", "\xed\x9f\xbf", 3),         /* U+D7FF */
    V("\xf0\x8f\xbf\xbf", R R R R, 0),            /* overlong, 4 bytes */
    V("\xf0\x90\x80\x80", "\xf0\x90\x80\x80", 4), /* U+10000 */
    V("\xf4\x90\x80\x80", R R R R, 0),            /* > U+10FFFF */
    V("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf", 4), /* U+10FFFF */
    V("\xf0\x9f\x98", R, 0),                      /* truncated emoji */
    V("\xf0\x9f\x98"
      "A",
      R "A", 0),
    V("\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", 4),
    V("\xf5\x80", R R, 0),
    V("\xf8\x88\x80\x80\x80", R R R R R, 0), /* old 5-byte form */
    V("\xff\xfe", R R, 0),
    V("\x80\x80\x80", R R R, 0), /* lone continuation bytes */
    V("a\xc3", "a" R, 1),
    V("\xc3\xa9\xc3", "\xc3\xa9" R, 2),
    V("\xc3\xc3\xa9", R "\xc3\xa9", 0),
    V("\xf1\x80\x80\xe1\x80\xc2", R R R, 0), /* three truncated sequences */
    /* Unicode 15, table 3-8 style example */
    V("a\xf1\x80\x80\xe1\x80\xc2"
      "b\x80"
      "c\x80\xbf"
      "d",
      "a" R R R "b" R "c" R R "d", 1),
    V("\xc2"
      "A\xc2",
      R "A" R, 0),
    V("\xe2\x80\xe2\x80\x94", R "\xe2\x80\x94", 0),
    V("\xef\xbb\xbf", "\xef\xbb\xbf", 3), /* BOM is kept */
    V(R, R, 3),
    V("\xe2\x80\x9c\xe2\x80\x9d", "\xe2\x80\x9c\xe2\x80\x9d", 6), /* curly quotes */
    V("\xc3", R, 0),
};
enum { N_VECTORS = sizeof k_vectors / sizeof k_vectors[0] };

/* Stream-decode `in`, cutting it into pieces at the given cut pattern
 * (cut(i) != 0: a feed ends after byte i). Returns malloc'd output. */
static char *stream_decode(const uint8_t *in, size_t n, int (*cut)(size_t, void *), void *arg, size_t *len_out)
{
    char *acc = malloc(3 * n + 16);
    size_t alen = 0, start = 0;
    gf_utf8_stream s;
    gf_utf8_stream_init(&s);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 == n || cut(i, arg)) {
            size_t len = i + 1 - start, cap = 3 * (len + 4) + 1;
            char *chunk = malloc(cap);
            size_t k = gf_utf8_stream_feed(&s, in + start, len, chunk, cap);
            cr_assert(k < cap);
            cr_assert_eq(chunk[k], '\0');
            cr_assert(s.n_pending >= 0 && s.n_pending <= 3);
            memcpy(acc + alen, chunk, k);
            alen += k;
            free(chunk);
            start = i + 1;
        }
    }
    char tail[16];
    size_t k = gf_utf8_stream_finish(&s, tail, sizeof tail);
    cr_assert(k == 0 || k == 3);
    cr_assert_eq(s.n_pending, 0);
    memcpy(acc + alen, tail, k);
    alen += k;
    *len_out = alen;
    return acc;
}

static int cut_every(size_t i, void *arg)
{
    (void)i, (void)arg;
    return 1;
}

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static int cut_random(size_t i, void *arg)
{
    (void)i, (void)arg;
    return rnd() % 3 == 0;
}

Test(utf8_stream, fixed_vectors_one_shot)
{
    for (int v = 0; v < N_VECTORS; v++) {
        const vec *t = &k_vectors[v];
        char out[128];
        size_t k = gf_utf8_decode_replace((const uint8_t *)t->in, t->in_len, out);
        cr_assert_eq(k, t->out_len, "vector %d: %zu bytes, want %zu", v, k, t->out_len);
        cr_assert(!memcmp(out, t->out, k), "vector %d: wrong output", v);
        cr_assert_eq(out[k], '\0');
        cr_assert_eq(gf_utf8_valid_prefix((const uint8_t *)t->in, t->in_len), t->valid, "vector %d: valid prefix", v);
    }
}

Test(utf8_stream, fixed_vectors_byte_at_a_time)
{
    for (int v = 0; v < N_VECTORS; v++) {
        const vec *t = &k_vectors[v];
        size_t k;
        char *out = stream_decode((const uint8_t *)t->in, t->in_len, cut_every, NULL, &k);
        cr_assert_eq(k, t->out_len, "vector %d: %zu bytes, want %zu", v, k, t->out_len);
        cr_assert(!memcmp(out, t->out, k), "vector %d: wrong output", v);
        free(out);
    }
}

Test(utf8_stream, em_dash_held_back)
{
    gf_utf8_stream s;
    gf_utf8_stream_init(&s);
    char out[32];
    cr_assert_eq(gf_utf8_stream_feed(&s, (const uint8_t *)"\xe2\x80", 2, out, sizeof out), 0);
    cr_assert_str_eq(out, "");
    cr_assert_eq(s.n_pending, 2);
    cr_assert_eq(gf_utf8_stream_feed(&s, (const uint8_t *)"\x94", 1, out, sizeof out), 3);
    cr_assert_str_eq(out, "\xe2\x80\x94");
    cr_assert_eq(gf_utf8_stream_finish(&s, out, sizeof out), 0);
    /* flushed while incomplete: one U+FFFD, as final=True */
    cr_assert_eq(gf_utf8_stream_feed(&s, (const uint8_t *)"ok \xf0\x9f", 5, out, sizeof out), 3);
    cr_assert_str_eq(out, "ok ");
    cr_assert_eq(gf_utf8_stream_finish(&s, out, sizeof out), 3);
    cr_assert_str_eq(out, R);
    /* a held-back prefix broken by the next feed */
    cr_assert_eq(gf_utf8_stream_feed(&s, (const uint8_t *)"\xe2", 1, out, sizeof out), 0);
    cr_assert_eq(gf_utf8_stream_feed(&s, (const uint8_t *)"(", 1, out, sizeof out), 4);
    cr_assert_str_eq(out, R "(");
}

static void random_bytes(uint8_t *b, size_t n)
{
    static const uint8_t pool[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0,
                                   0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf8, 0xfe, 0xff};
    for (size_t i = 0; i < n; i++)
        b[i] = rnd() % 5 ? pool[rnd() % sizeof pool] : (uint8_t)rnd();
}

Test(utf8_stream, random_stream_equals_one_shot)
{
    uint8_t in[64];
    char one[3 * 64 + 1];
    for (int round = 0; round < 20000; round++) {
        size_t n = rnd() % sizeof in;
        random_bytes(in, n);
        size_t k1 = gf_utf8_decode_replace(in, n, one);
        size_t k2, k3;
        char *bytewise = stream_decode(in, n, cut_every, NULL, &k2);
        char *chunked = stream_decode(in, n, cut_random, NULL, &k3);
        cr_assert(k1 == k2 && !memcmp(one, bytewise, k1), "round %d: byte-wise stream differs", round);
        cr_assert(k1 == k3 && !memcmp(one, chunked, k1), "round %d: chunked stream differs", round);
        /* the output is always valid UTF-8, and valid input comes back unchanged */
        cr_assert_eq(gf_utf8_valid_prefix((const uint8_t *)one, k1), k1);
        if (gf_utf8_valid_prefix(in, n) == n)
            cr_assert(k1 == n && !memcmp(one, in, n));
        free(bytewise);
        free(chunked);
    }
}

Test(utf8_stream, random_valid_text_never_replaced)
{
    uint8_t in[256];
    for (int round = 0; round < 2000; round++) {
        size_t n = 0;
        while (n < 200) {
            uint32_t cp;
            do
                cp = (uint32_t)(rnd() % (rnd() % 2 ? 0x800 : 0x110000));
            while (cp >= 0xD800 && cp <= 0xDFFF);
            n += gf_utf8_put(cp, (char *)in + n);
        }
        cr_assert_eq(gf_utf8_valid_prefix(in, n), n);
        size_t k;
        char *out = stream_decode(in, n, cut_every, NULL, &k);
        cr_assert(k == n && !memcmp(out, in, n), "round %d", round);
        free(out);
    }
}

Test(utf8_stream, capacity_bound)
{
    /* worst case: 3 held-back bytes broken by a run of invalid bytes */
    gf_utf8_stream s;
    gf_utf8_stream_init(&s);
    char out[3 * (8 + 4) + 1];
    cr_assert_eq(gf_utf8_stream_feed(&s, (const uint8_t *)"\xf0\x9f\x98", 3, out, sizeof out), 0);
    size_t k = gf_utf8_stream_feed(&s, (const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff", 8, out, sizeof out);
    cr_assert_eq(k, 27); /* one U+FFFD for the prefix, eight for the 0xFF bytes */
    /* a too-small buffer is never overrun: output is cut, NUL-terminated */
    char small[5];
    gf_utf8_stream_init(&s);
    k = gf_utf8_stream_feed(&s, (const uint8_t *)"\xff\xff", 2, small, sizeof small);
    cr_assert_eq(k, 3);
    cr_assert_str_eq(small, R);
}

Test(utf8_stream, whitespace_table)
{
    static const uint32_t yes[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,
                                   0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    static const uint32_t no[] = {0x00,   0x08,   0x0E,   0x1F,   0x21,   0x84,  0x86,
                                  0x180E, 0x200B, 0x200D, 0x2060, 0xFEFF, 0x3001};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        cr_assert(gf_unicode_is_space(yes[i]), "U+%04X", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        cr_assert(!gf_unicode_is_space(no[i]), "U+%04X", no[i]);
}
