/* Byte-level BPE tokenizer: byte<->unicode alphabet, loading (both merge
 * formats, vocab.json + merges.txt, errors), added tokens, encoding against
 * Hugging Face ids, decoding and streaming.
 *
 * Expected ids were produced with Hugging Face tokenizers 0.21.0
 * (tools/reference/tokenizer_reference.py) and are written here as literals. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../engine/tokenizer_internal.h"
#include "genfence/tokenizer.h"

#define GPT2_DIR GF_TEST_SHARED_DIR "/data/gpt2-tokenizer"
#define CORPUS   GF_TEST_SHARED_DIR "/data/sherlock-holmes-canon.txt"

/* ---- temp dir per test ---- */

static char g_dir[512];

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/gf-tok-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(g_dir) != NULL, "mkdtemp %s failed", g_dir);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void teardown(void) { nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

TestSuite(tokenizer, .init = setup, .fini = teardown);

static const char *tpath(const char *name)
{
    static char p[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

static const char *write_file(const char *name, const char *content)
{
    const char *p = tpath(name);
    FILE *f = fopen(p, "wb");
    cr_assert(f, "cannot write %s", p);
    fputs(content, f);
    fclose(f);
    return p;
}

/* s with the first `from` replaced by `to` (malloc'd). */
static char *replace_once(const char *s, const char *from, const char *to)
{
    const char *p = strstr(s, from);
    cr_assert(p, "'%s' not found", from);
    size_t a = (size_t)(p - s), fl = strlen(from), tl = strlen(to), sl = strlen(s);
    char *r = malloc(sl - fl + tl + 1);
    memcpy(r, s, a);
    memcpy(r + a, to, tl);
    memcpy(r + a + tl, p + fl, sl - a - fl + 1);
    return r;
}

static gf_tokenizer *load_ok(const char *path)
{
    gf_tokenizer *t = NULL;
    gf_status st = gf_tokenizer_load(path, &t);
    cr_assert_eq(st, GF_OK, "loading %s: %s", path, gf_error_msg());
    cr_assert(t);
    return t;
}

static void expect_ids(const gf_tokenizer *t, const char *text, size_t len, const int32_t *want, size_t n_want)
{
    int32_t *ids;
    size_t n;
    gf_status st = gf_tokenizer_encode(t, text, len, &ids, &n);
    cr_assert_eq(st, GF_OK, "encode '%s': %s", text, gf_error_msg());
    cr_assert_eq(n, n_want, "encode '%s': %zu ids, want %zu", text, n, n_want);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ids[i], want[i], "encode '%s': id %zu is %d, want %d", text, i, ids[i], want[i]);
    free(ids);
}

#define EXPECT(t, text, ...)                                                              \
    do {                                                                                  \
        static const int32_t want_[] = {__VA_ARGS__};                                     \
        expect_ids((t), (text), sizeof(text) - 1, want_, sizeof want_ / sizeof want_[0]); \
    } while (0)

static char *decode_ok(const gf_tokenizer *t, const int32_t *ids, size_t n, size_t *len)
{
    char *s;
    gf_status st = gf_tokenizer_decode(t, ids, n, &s, len);
    cr_assert_eq(st, GF_OK, "decode: %s", gf_error_msg());
    return s;
}

/* A tiny tokenizer.json: few symbols, three merges, four added tokens with
 * HF's id assignment ("bc" is already in the vocab, so it keeps id 5). */
#define TINY_HEAD                                                                              \
    "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"                        \
    " \"added_tokens\": [\n"                                                                   \
    "  {\"id\": 13, \"content\": \"<x>\", \"single_word\": false, \"lstrip\": false, "         \
    "\"rstrip\": false, \"normalized\": false, \"special\": true},\n"                          \
    "  {\"id\": 14, \"content\": \"<x>>\", \"single_word\": false, \"lstrip\": false, "        \
    "\"rstrip\": false, \"normalized\": false, \"special\": false},\n"                         \
    "  {\"id\": 5, \"content\": \"bc\", \"single_word\": false, \"lstrip\": false, "           \
    "\"rstrip\": false, \"normalized\": true, \"special\": false},\n"                          \
    "  {\"id\": 15, \"content\": \"xx\", \"single_word\": true, \"lstrip\": true, "            \
    "\"rstrip\": true, \"normalized\": false, \"special\": false}],\n"                         \
    " \"normalizer\": null,\n"                                                                 \
    " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "              \
    "\"trim_offsets\": true, \"use_regex\": true},\n"                                          \
    " \"post_processor\": null,\n"                                                             \
    " \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "                     \
    "\"trim_offsets\": true, \"use_regex\": true},\n"                                          \
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "                 \
    "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, " \
    "\"byte_fallback\": false, \"ignore_merges\": false,\n"                                    \
    "  \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"\\u0120\": 3, \"ab\": 4, \"bc\": 5, "       \
    "\"abc\": 6, \"\\u0120a\": 7, \"<\": 8, \">\": 9, \"x\": 10, \"|\": 11, \"d\": 12},\n"

static const char k_tiny_strings[] = TINY_HEAD "  \"merges\": [\"a b\", \"ab c\", \"\\u0120 a\"]}}\n";
static const char k_tiny_pairs[] =
    TINY_HEAD "  \"merges\": [[\"a\", \"b\"], [\"ab\", \"c\"], [\"\\u0120\", \"a\"]]}}\n";

/* ---- the GPT-2 byte <-> unicode alphabet ---- */

Test(tokenizer, byte_unicode_mapping)
{
    static const struct {
        uint8_t b;
        uint32_t cp;
    } fixed[] = {{0x00, 0x100}, {0x09, 0x109}, {0x0A, 0x10A}, {0x0D, 0x10D}, {0x20, 0x120}, {0x21, 0x21},
                 {0x41, 0x41},  {0x7E, 0x7E},  {0x7F, 0x121}, {0x80, 0x122}, {0xA0, 0x142}, {0xA1, 0xA1},
                 {0xAC, 0xAC},  {0xAD, 0x143}, {0xAE, 0xAE},  {0xFF, 0xFF}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        cr_assert_eq(gf_tok_byte_to_cp(fixed[i].b), fixed[i].cp, "byte 0x%02X", fixed[i].b);
    int seen[0x144] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t cp = gf_tok_byte_to_cp((uint8_t)b);
        cr_assert(cp < 0x144, "byte 0x%02X -> U+%04X", b, cp);
        cr_assert(!seen[cp], "U+%04X used twice", cp);
        seen[cp] = 1;
        cr_assert_eq(gf_tok_cp_to_byte(cp), b, "U+%04X back", cp);
    }
    cr_assert_eq(gf_tok_cp_to_byte(0x20), -1);
    cr_assert_eq(gf_tok_cp_to_byte(0xAD), -1);
    cr_assert_eq(gf_tok_cp_to_byte(0x144), -1);
    cr_assert_eq(gf_tok_cp_to_byte(0x4E2D), -1);
}

Test(tokenizer, gpt2_symbols_and_token_bytes)
{
    gf_tokenizer *t = load_ok(GPT2_DIR);
    cr_assert_eq(gf_tokenizer_vocab_size(t), 50257);
    cr_assert_eq(gf_tokenizer_token_id(t, "\xc4\xa0"), 220); /* "Ġ" is the space byte */
    cr_assert_eq(gf_tokenizer_token_id(t, "\xc4\x8a"), 198); /* "Ċ" is "\n" */
    cr_assert_eq(gf_tokenizer_token_id(t, "\xc4\xa0the"), 262);
    cr_assert_eq(gf_tokenizer_token_id(t, "<|endoftext|>"), 50256);
    cr_assert_eq(gf_tokenizer_token_id(t, "no such token here"), -1);
    size_t len;
    const uint8_t *b = gf_tokenizer_token_bytes(t, 220, &len);
    cr_assert(b && len == 1 && b[0] == ' ');
    b = gf_tokenizer_token_bytes(t, 262, &len);
    cr_assert(b && len == 4 && !memcmp(b, " the", 4));
    b = gf_tokenizer_token_bytes(t, 447, &len); /* "âĢ" */
    cr_assert(b && len == 2 && b[0] == 0xE2 && b[1] == 0x80);
    b = gf_tokenizer_token_bytes(t, 242, &len); /* "Ķ" */
    cr_assert(b && len == 1 && b[0] == 0x94);
    b = gf_tokenizer_token_bytes(t, 50256, &len);
    cr_assert(b && len == 13 && !memcmp(b, "<|endoftext|>", 13));
    cr_assert_null(gf_tokenizer_token_bytes(t, 50257, &len));
    cr_assert_eq(len, 0);
    cr_assert_null(gf_tokenizer_token_bytes(t, -1, NULL));
    /* every single byte is a token, and its bytes are that byte */
    for (int i = 0; i < 256; i++) {
        char s[4] = {0};
        gf_utf8_put(gf_tok_byte_to_cp((uint8_t)i), s);
        int32_t id = gf_tokenizer_token_id(t, s);
        cr_assert(id >= 0, "byte 0x%02X has no token", i);
        b = gf_tokenizer_token_bytes(t, id, &len);
        cr_assert(len == 1 && b[0] == i);
    }
    gf_tokenizer_free(t);
}

/* ---- encoding against Hugging Face (GPT-2) ---- */

Test(tokenizer, gpt2_encode_matches_hf)
{
    gf_tokenizer *t = load_ok(GPT2_DIR);
    EXPECT(t, "Hello world", 15496, 995);
    EXPECT(t, "It's HOLMES'S case; we'll see, they'd've gone.", 1026, 338, 49707, 44, 1546, 6, 50, 1339, 26, 356, 1183,
           766, 11, 484, 1549, 1053, 3750, 13);
    EXPECT(t, "a  b\t\tc\n\n  d   ", 64, 220, 275, 197, 197, 66, 628, 220, 288, 220, 220, 220);
    EXPECT(t, "\xe2\x80\x9cQuoted,\xe2\x80\x9d she said \xe2\x80\x94 \xe2\x80\x98single\xe2\x80\x99", 447, 250, 4507,
           5191, 11, 447, 251, 673, 531, 851, 564, 246, 29762, 447, 247);
    /* U+00A0 and U+3000 are whitespace; U+180E is not (HF's \s) */
    EXPECT(t, "\xc2\xa0x\xe3\x80\x80y\xe1\xa0\x8ez", 1849, 87, 5099, 222, 88, 157, 254, 236, 89);
    EXPECT(t, "12345678 \xc2\xbd", 10163, 2231, 30924, 25208);
    /* ZWJ family and a flag */
    EXPECT(t,
           "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "
           "\xf0\x9f\x87\xac\xf0\x9f\x87\xa7",
           41840, 101, 447, 235, 41840, 102, 447, 235, 41840, 100, 12520, 229, 105, 8582, 229, 100);
    /* vocab.json + merges.txt has no special-token matching */
    EXPECT(t, "<|endoftext|>", 27, 91, 437, 1659, 5239, 91, 29);
    int32_t *ids = (int32_t *)1;
    size_t n = 99;
    cr_assert_eq(gf_tokenizer_encode(t, "", 0, &ids, &n), GF_OK);
    cr_assert_eq(n, 0);
    free(ids);
    gf_tokenizer_free(t);
}

static uint64_t fnv_ids(const int32_t *ids, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)ids[i];
        h *= 1099511628211ull;
    }
    return h;
}

Test(tokenizer, gpt2_whole_corpus_matches_hf, .timeout = 120)
{
    FILE *f = fopen(CORPUS, "rb");
    cr_assert(f, "cannot open %s", CORPUS);
    char *text = malloc(4 << 20);
    size_t len = fread(text, 1, 4 << 20, f);
    fclose(f);
    cr_assert_eq(len, 3377860);
    gf_tokenizer *t = load_ok(GPT2_DIR);
    int32_t *ids;
    size_t n;
    cr_assert_eq(gf_tokenizer_encode(t, text, len, &ids, &n), GF_OK, "%s", gf_error_msg());
    /* HF: 986271 ids, FNV-1a over the ids 0xdf43b9ef1874f828 */
    cr_assert_eq(n, 986271);
    cr_assert_eq(fnv_ids(ids, n), 0xdf43b9ef1874f828ull, "ids differ from HF's");
    char *back;
    size_t blen;
    cr_assert_eq(gf_tokenizer_decode(t, ids, n, &back, &blen), GF_OK);
    cr_assert(blen == len && !memcmp(back, text, len), "decode(encode(corpus)) != corpus");
    free(back);
    free(ids);
    free(text);
    gf_tokenizer_free(t);
}

Test(tokenizer, encode_rejects_invalid_utf8)
{
    gf_tokenizer *t = load_ok(GPT2_DIR);
    int32_t *ids = (int32_t *)1;
    size_t n = 7;
    gf_status st = gf_tokenizer_encode(t, "abc\xe2\x80xyz", 8, &ids, &n);
    cr_assert_eq(st, GF_E_INVALID_ARG);
    cr_assert_null(ids);
    cr_assert_eq(n, 0);
    cr_assert(strstr(gf_error_msg(), "offset 3"), "message: %s", gf_error_msg());
    cr_assert_eq(gf_tokenizer_encode(t, "\xed\xa0\x80", 3, &ids, &n), GF_E_INVALID_ARG); /* surrogate */
    cr_assert_eq(gf_tokenizer_encode(t, "\xc0\xaf", 2, &ids, &n), GF_E_INVALID_ARG);     /* overlong */
    cr_assert_eq(gf_tokenizer_encode(t, NULL, 1, &ids, &n), GF_E_INVALID_ARG);
    gf_tokenizer_free(t);
}

/* ---- merges, both formats; vocab.json + merges.txt ---- */

Test(tokenizer, merges_as_strings_and_pairs_agree)
{
    gf_tokenizer *ts = load_ok(write_file("strings.json", k_tiny_strings));
    gf_tokenizer *tp = load_ok(write_file("pairs.json", k_tiny_pairs));
    gf_tokenizer *both[2] = {ts, tp};
    for (int i = 0; i < 2; i++) {
        gf_tokenizer *t = both[i];
        cr_assert_eq(gf_tokenizer_vocab_size(t), 16);
        EXPECT(t, "ab", 4);
        EXPECT(t, "a ab", 0, 3, 4); /* (a,b) ranks before (Ġ,a) */
        EXPECT(t, "<x", 8, 10);
    }
    gf_tokenizer_free(ts);
    gf_tokenizer_free(tp);
}

Test(tokenizer, vocab_and_merges_txt_rank_order)
{
    static const char vocab[] = "{\"a\": 0, \"b\": 1, \"c\": 2, \"ab\": 3, \"bc\": 4, \"abc\": 5, \"\\u0120\": 6}";
    mkdir(tpath("v1"), 0700);
    mkdir(tpath("v2"), 0700);
    write_file("v1/vocab.json", vocab);
    write_file("v2/vocab.json", vocab);
    /* "#version" comment, CRLF line ends: (b c) ranks first */
    write_file("v1/merges.txt", "#version: 0.2\r\nb c\r\na b\r\nab c\r\n");
    /* no final newline: (a b) ranks first */
    write_file("v2/merges.txt", "#version: 0.2\na b\nb c\nab c");
    gf_tokenizer *t1 = load_ok(tpath("v1")), *t2 = load_ok(tpath("v2"));
    EXPECT(t1, "abc", 0, 4);
    EXPECT(t1, "abcab", 0, 4, 3);
    EXPECT(t1, "cab abc", 2, 3, 6, 0, 4);
    EXPECT(t2, "abc", 5);
    EXPECT(t2, "abcab", 5, 3);
    EXPECT(t2, "cab abc", 2, 3, 6, 5);
    gf_tokenizer_free(t1);
    gf_tokenizer_free(t2);
}

/* ---- added tokens ---- */

Test(tokenizer, added_tokens_before_pretokenization)
{
    gf_tokenizer *t = load_ok(write_file("tokenizer.json", k_tiny_strings));
    /* loading a directory finds tokenizer.json */
    gf_tokenizer *td = load_ok(g_dir);
    cr_assert_eq(gf_tokenizer_vocab_size(td), 16);
    gf_tokenizer_free(td);

    EXPECT(t, "a<x>b", 0, 13, 1);
    EXPECT(t, "b<x>>c", 1, 14, 2); /* longest match wins */
    EXPECT(t, "a<x>>>", 0, 14, 9);
    EXPECT(t, "<x>bc<x>>", 13, 5, 14);
    /* "bc" (an added token) is cut out of "abc" before BPE could make "abc" */
    EXPECT(t, "abc", 0, 5);
    EXPECT(t, "abcabc", 0, 5, 0, 5);
    /* single_word + lstrip + rstrip */
    EXPECT(t, "a xx b", 0, 15, 1);
    EXPECT(t, "a\txx\tb", 0, 15, 1);
    EXPECT(t, " xx ", 15);
    EXPECT(t, "axx b", 0, 10, 10, 3, 1); /* not a single word: plain BPE */
    EXPECT(t, "xxa", 10, 10, 0);

    cr_assert_eq(gf_tokenizer_token_id(t, "<x>"), 13);
    cr_assert_eq(gf_tokenizer_token_id(t, "<x>>"), 14);
    cr_assert_eq(gf_tokenizer_token_id(t, "abc"), 6);
    size_t len;
    const uint8_t *b = gf_tokenizer_token_bytes(t, 14, &len);
    cr_assert(b && len == 4 && !memcmp(b, "<x>>", 4));
    gf_tokenizer_free(t);
}

Test(tokenizer, add_prefix_space_and_ignore_merges)
{
    /* add_prefix_space: HF prepends ' ' to each segment between added tokens */
    char *s = replace_once(k_tiny_strings, "\"add_prefix_space\": false", "\"add_prefix_space\": true");
    gf_tokenizer *t = load_ok(write_file("aps.json", s));
    free(s);
    EXPECT(t, "ab", 3, 4);
    EXPECT(t, " ab", 3, 4);
    EXPECT(t, "a<x>b", 7, 13, 3, 1);
    EXPECT(t, "abc abc", 7, 5, 7, 5);
    EXPECT(t, "<x>ab", 13, 3, 4);
    gf_tokenizer_free(t);

    /* ignore_merges: a piece that is itself in the vocab is taken whole */
    char *base = replace_once(k_tiny_strings, "\"merges\": [\"a b\", \"ab c\", \"\\u0120 a\"]",
                              "\"merges\": [\"b c\", \"a b\", \"ab c\", \"\\u0120 a\"]");
    char *noadd = malloc(strlen(base) + 1);
    /* drop the added tokens */
    const char *a = strstr(base, "\"added_tokens\": [");
    const char *b = strstr(a, "}],");
    size_t pre = (size_t)(a - base) + strlen("\"added_tokens\": [");
    memcpy(noadd, base, pre);
    strcpy(noadd + pre, b + 1);
    s = replace_once(noadd, "\"ignore_merges\": false", "\"ignore_merges\": true");
    gf_tokenizer *ti = load_ok(write_file("im.json", s));
    gf_tokenizer *tn = load_ok(write_file("noim.json", noadd));
    free(s);
    free(noadd);
    free(base);
    EXPECT(ti, "abc", 6);
    EXPECT(ti, "abc abc", 6, 7, 5);
    EXPECT(ti, "ab", 4);
    EXPECT(tn, "abc", 0, 5);
    EXPECT(tn, "abc abc", 0, 5, 7, 5);
    EXPECT(tn, "a<x>b", 0, 8, 10, 9, 1); /* no added tokens left */
    gf_tokenizer_free(ti);
    gf_tokenizer_free(tn);
}

Test(tokenizer, added_token_id_must_match_hf)
{
    char *bad = replace_once(k_tiny_strings, "\"id\": 14", "\"id\": 17"); /* HF gives 14 */
    gf_tokenizer *t = (gf_tokenizer *)1;
    cr_assert_eq(gf_tokenizer_load(write_file("bad.json", bad), &t), GF_E_FORMAT);
    cr_assert_null(t);
    cr_assert(strstr(gf_error_msg(), "id 17") && strstr(gf_error_msg(), "id 14"), "%s", gf_error_msg());
    free(bad);
}

Test(tokenizer, missing_byte_symbol_is_an_error)
{
    gf_tokenizer *t = load_ok(write_file("tokenizer.json", k_tiny_strings));
    int32_t *ids;
    size_t n;
    cr_assert_eq(gf_tokenizer_encode(t, "abz", 3, &ids, &n), GF_E_FORMAT);
    cr_assert(strstr(gf_error_msg(), "0x7A"), "%s", gf_error_msg());
    gf_tokenizer_free(t);
}

/* ---- decoding and streaming ---- */

static const char k_fffd[] = "\xef\xbf\xbd";

Test(tokenizer, em_dash_split_across_tokens)
{
    gf_tokenizer *t = load_ok(GPT2_DIR);
    int32_t ids[2] = {447, 242}; /* E2 80 | 94 */
    size_t len;
    char *s = decode_ok(t, ids, 2, &len);
    cr_assert_str_eq(s, "\xe2\x80\x94");
    free(s);
    /* per-token decoding shows U+FFFD for each half */
    s = decode_ok(t, &ids[0], 1, &len);
    cr_assert_str_eq(s, k_fffd);
    free(s);
    s = decode_ok(t, &ids[1], 1, &len);
    cr_assert_str_eq(s, k_fffd);
    free(s);
    /* the stream holds the first half back */
    gf_utf8_stream st;
    gf_utf8_stream_init(&st);
    char out[64];
    size_t bl;
    const uint8_t *b = gf_tokenizer_token_bytes(t, 447, &bl);
    cr_assert_eq(gf_utf8_stream_feed(&st, b, bl, out, sizeof out), 0);
    cr_assert_str_eq(out, "");
    b = gf_tokenizer_token_bytes(t, 242, &bl);
    cr_assert_eq(gf_utf8_stream_feed(&st, b, bl, out, sizeof out), 3);
    cr_assert_str_eq(out, "\xe2\x80\x94");
    cr_assert_eq(gf_utf8_stream_finish(&st, out, sizeof out), 0);
    /* reversed, the bytes are invalid: one U+FFFD each (HF: '\ufffd\ufffd') */
    int32_t rev[2] = {242, 447};
    s = decode_ok(t, rev, 2, &len);
    cr_assert_str_eq(s, "\xef\xbf\xbd\xef\xbf\xbd");
    cr_assert_eq(len, 6);
    free(s);
    gf_tokenizer_free(t);
}

/* Stream-decode ids token by token; the concatenation must equal decode(ids). */
static void stream_equals_decode(const gf_tokenizer *t, const int32_t *ids, size_t n, int expect_no_fffd)
{
    size_t len, cap = 16;
    for (size_t i = 0; i < n; i++) {
        size_t bl;
        cr_assert(gf_tokenizer_token_bytes(t, ids[i], &bl));
        cap += 3 * (bl + 4) + 1;
    }
    char *whole = decode_ok(t, ids, n, &len);
    char *acc = malloc(cap), *chunk = malloc(cap);
    size_t alen = 0;
    int per_token_fffd = 0;
    gf_utf8_stream st;
    gf_utf8_stream_init(&st);
    for (size_t i = 0; i < n; i++) {
        size_t bl;
        const uint8_t *b = gf_tokenizer_token_bytes(t, ids[i], &bl);
        size_t k = gf_utf8_stream_feed(&st, b, bl, chunk, 3 * (bl + 4) + 1);
        cr_assert(k <= 3 * (bl + 4));
        memcpy(acc + alen, chunk, k);
        alen += k;
        size_t pl;
        char *piece = decode_ok(t, &ids[i], 1, &pl);
        per_token_fffd |= strstr(piece, k_fffd) != NULL;
        free(piece);
    }
    alen += gf_utf8_stream_finish(&st, acc + alen, cap - alen);
    cr_assert_eq(alen, len);
    cr_assert(!memcmp(acc, whole, len), "stream != decode");
    if (expect_no_fffd) {
        acc[alen] = '\0';
        cr_assert_null(strstr(acc, k_fffd), "U+FFFD in the stream of valid text");
        cr_assert(per_token_fffd, "expected a token that is not valid UTF-8 alone");
    }
    free(chunk);
    free(acc);
    free(whole);
}

Test(tokenizer, curly_quotes_stream)
{
    gf_tokenizer *t = load_ok(GPT2_DIR);
    static const char text[] = "\xe2\x80\x9cYou see, but you do not observe,\xe2\x80\x9d said "
                               "Holmes \xe2\x80\x94 \xe2\x80\x98quite so\xe2\x80\x99. "
                               "Caf\xc3\xa9 \xf0\x9f\x95\xb5\xef\xb8\x8f \xe7\xa6\x8f\xe5\xb0\x94";
    int32_t *ids;
    size_t n;
    cr_assert_eq(gf_tokenizer_encode(t, text, sizeof text - 1, &ids, &n), GF_OK);
    size_t len;
    char *back = decode_ok(t, ids, n, &len);
    cr_assert_str_eq(back, text);
    free(back);
    stream_equals_decode(t, ids, n, 1);
    free(ids);
    gf_tokenizer_free(t);
}

Test(tokenizer, random_ids_stream_equals_decode)
{
    gf_tokenizer *t = load_ok(GPT2_DIR);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int32_t ids[48];
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 48; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* favour the byte-ish tokens (ids < 512) that split characters */
            ids[i] = (int32_t)(x % (round % 2 ? 50257 : 512));
        }
        stream_equals_decode(t, ids, 48, 0);
    }
    gf_tokenizer_free(t);
}

Test(tokenizer, decode_errors)
{
    gf_tokenizer *t = load_ok(GPT2_DIR);
    int32_t ids[3] = {15496, 50257, 995};
    char *s = (char *)1;
    size_t len = 5;
    cr_assert_eq(gf_tokenizer_decode(t, ids, 3, &s, &len), GF_E_INVALID_ARG);
    cr_assert_null(s);
    cr_assert(strstr(gf_error_msg(), "50257") && strstr(gf_error_msg(), "index 1"), "%s", gf_error_msg());
    ids[1] = -4;
    cr_assert_eq(gf_tokenizer_decode(t, ids, 3, &s, &len), GF_E_INVALID_ARG);
    s = decode_ok(t, ids, 0, &len);
    cr_assert_str_eq(s, "");
    cr_assert_eq(len, 0);
    free(s);
    gf_tokenizer_free(t);
}

/* ---- load errors ---- */

static void expect_load_error(const char *path, gf_status want, const char *const *needles)
{
    gf_tokenizer *t = (gf_tokenizer *)1;
    gf_status st = gf_tokenizer_load(path, &t);
    cr_assert_eq(st, want, "loading %s: status %d (%s), want %d", path, st, gf_error_msg(), want);
    cr_assert_null(t);
    for (; *needles; needles++)
        cr_assert(strstr(gf_error_msg(), *needles), "message '%s' lacks '%s'", gf_error_msg(), *needles);
}

#define LOAD_ERROR(path, want, ...)                                \
    do {                                                           \
        static const char *const needles_[] = {__VA_ARGS__, NULL}; \
        expect_load_error((path), (want), needles_);               \
    } while (0)

Test(tokenizer, malformed_json_reports_line_and_column)
{
    const char *p = write_file("broken.json", "{\n  \"model\": {\n    \"type\": \"BPE\",\n"
                                              "    \"vocab\": {\"a\": 0,}\n  }\n}\n");
    LOAD_ERROR(p, GF_E_FORMAT, "broken.json", "line 4", "column");
}

Test(tokenizer, missing_model)
{
    const char *p = write_file("nomodel.json", "{\"version\": \"1.0\", \"added_tokens\": []}");
    LOAD_ERROR(p, GF_E_FORMAT, "nomodel.json", "model");
}

Test(tokenizer, unknown_model_type)
{
    const char *p = write_file("wp.json", "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}");
    LOAD_ERROR(p, GF_E_UNSUPPORTED, "wp.json", "WordPiece");
}

Test(tokenizer, unsupported_components)
{
    /* components whose effect genfence does not reproduce are refused, not
     * ignored, naming the component's place and its type */
    char *s = replace_once(k_tiny_strings, "\"normalizer\": null",
                           "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": "
                           "[{\"type\": \"NFC\"}, {\"type\": \"Foo\"}]}");
    LOAD_ERROR(write_file("norm.json", s), GF_E_UNSUPPORTED,
               "norm.json: normalizer.normalizers[1]: type 'Foo' is not supported");
    free(s);
    s = replace_once(k_tiny_strings, "\"type\": \"ByteLevel\", \"add_prefix_space\": false",
                     "\"type\": \"BertPreTokenizer\"");
    LOAD_ERROR(write_file("pre.json", s), GF_E_UNSUPPORTED, "pre_tokenizer: type 'BertPreTokenizer'");
    free(s);
    s = replace_once(k_tiny_strings, "\"post_processor\": null",
                     "\"post_processor\": {\"type\": \"RobertaProcessing\"}");
    LOAD_ERROR(write_file("post.json", s), GF_E_UNSUPPORTED, "post_processor: type 'RobertaProcessing'");
    free(s);
    s = replace_once(k_tiny_strings, "\"decoder\": {\"type\": \"ByteLevel\"", "\"decoder\": {\"type\": \"WordPiece\"");
    LOAD_ERROR(write_file("dec.json", s), GF_E_UNSUPPORTED, "decoder: type 'WordPiece'");
    free(s);
    s = replace_once(k_tiny_strings, "\"dropout\": null", "\"dropout\": 0.1");
    LOAD_ERROR(write_file("drop.json", s), GF_E_UNSUPPORTED, "dropout");
    free(s);
}

/* ---- a SentencePiece-style pipeline (Llama 2 layout), ids from HF 0.21.0 ---- */

static const char k_sp_json[] =
    "{\"version\": \"1.0\", \"added_tokens\": [\n"
    "  {\"id\": 0, \"content\": \"<unk>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
    "\"normalized\": false, \"special\": true},\n"
    "  {\"id\": 1, \"content\": \"<s>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": "
    "false, \"special\": true}],\n"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"}, "
    "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}]},\n"
    " \"pre_tokenizer\": null,\n"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
    "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {\"<s>\": "
    "{\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},\n"
    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
    "\"\\u2581\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": \"Strip\", "
    "\"content\": \" \", \"start\": 1, \"stop\": 0}]},\n"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", \"continuing_subword_prefix\": null, "
    "\"end_of_word_suffix\": null, \"fuse_unk\": true, \"byte_fallback\": true, \"ignore_merges\": false,\n"
    "  \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"<0x0A>\": 2, \"<0xE2>\": 3, \"<0x80>\": 4, \"<0x94>\": 5, \"\\u2581\": "
    "6, \"a\": 7, \"b\": 8, \"\\u2581a\": 9, \"ab\": 10, \"\\u2581ab\": 11},\n"
    "  \"merges\": [[\"a\", \"b\"], [\"\\u2581\", \"a\"], [\"\\u2581\", \"ab\"]]}}\n";

static void expect_ids_ex(const gf_tokenizer *t, const char *text, int special, const int32_t *want, size_t n_want)
{
    int32_t *ids;
    size_t n;
    cr_assert_eq(gf_tokenizer_encode_ex(t, text, strlen(text), special, &ids, &n), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(n, n_want, "encode '%s' (special %d): %zu ids, want %zu", text, special, n, n_want);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ids[i], want[i], "encode '%s': id %zu is %d, want %d", text, i, ids[i], want[i]);
    free(ids);
}

#define EXPECT_EX(t, text, special, ...)                                              \
    do {                                                                              \
        static const int32_t want_[] = {__VA_ARGS__};                                 \
        expect_ids_ex((t), (text), (special), want_, sizeof want_ / sizeof want_[0]); \
    } while (0)

static void expect_decode(const gf_tokenizer *t, const int32_t *ids, size_t n, const char *want)
{
    size_t len;
    char *s = decode_ok(t, ids, n, &len);
    cr_assert_str_eq(s, want);
    cr_assert_eq(len, strlen(want));
    free(s);
}

Test(tokenizer, sentencepiece_pipeline_matches_hf)
{
    gf_tokenizer *t = load_ok(write_file("sp.json", k_sp_json));
    /* Prepend + Replace normalizer, the whole text one word, byte fallback
     * for the em dash, fused unk for "xyz", the normalized gap after <s> */
    EXPECT_EX(t, "ab ab", 0, 11, 11);
    EXPECT_EX(t, "a\nb", 0, 9, 2, 8);
    EXPECT_EX(t,
              "ab\xe2\x80\x94"
              "a",
              0, 11, 3, 4, 5, 7);
    EXPECT_EX(t, "xyz ab", 0, 6, 0, 11);
    EXPECT_EX(t, "ab<s>ab", 0, 11, 1, 11);
    /* TemplateProcessing adds the BOS with add_special_tokens, even to "" */
    EXPECT_EX(t, "ab ab", 1, 1, 11, 11);
    EXPECT_EX(t, "", 1, 1);
    int32_t *ids;
    size_t n;
    cr_assert_eq(gf_tokenizer_encode(t, "", 0, &ids, &n), GF_OK);
    cr_assert_eq(n, 0);
    free(ids);
    /* the decoder: Replace, ByteFallback (an invalid run is one U+FFFD per
     * byte), Fuse, Strip one leading space */
    expect_decode(t, (const int32_t[]){11, 6, 7}, 3, "ab a");
    expect_decode(t, (const int32_t[]){9, 2, 8}, 3, "a\nb");
    expect_decode(t, (const int32_t[]){3, 4}, 2, "\xef\xbf\xbd\xef\xbf\xbd");
    expect_decode(t, (const int32_t[]){3, 4, 5, 7}, 4,
                  "\xe2\x80\x94"
                  "a");
    expect_decode(t, (const int32_t[]){1, 11}, 2, "<s> ab");
    expect_decode(t, (const int32_t[]){6, 6, 11}, 3, "  ab");
    /* token bytes (streaming): <0x0A> is the byte, the metaspace a space */
    size_t bl;
    const uint8_t *b = gf_tokenizer_token_bytes(t, 2, &bl);
    cr_assert(b && bl == 1 && b[0] == '\n');
    b = gf_tokenizer_token_bytes(t, 11, &bl);
    cr_assert(b && bl == 3 && !memcmp(b, " ab", 3));
    gf_tokenizer_free(t);
}

Test(tokenizer, file_size_cap)
{
    const char *p = write_file("tokenizer.json", k_tiny_strings);
    setenv("GENFENCE_MAX_TOKENIZER_BYTES", "100", 1);
    LOAD_ERROR(p, GF_E_FORMAT, "tokenizer.json", "over the limit of 100", "GENFENCE_MAX_TOKENIZER_BYTES");
    unsetenv("GENFENCE_MAX_TOKENIZER_BYTES");
    gf_tokenizer_free(load_ok(p));
}

Test(tokenizer, component_errors_name_the_place)
{
    char *s = replace_once(k_tiny_strings, "\"type\": \"ByteLevel\", \"add_prefix_space\": false",
                           "\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\"}, "
                           "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, "
                           "\"behavior\": \"Isolated\"}], \"x\": false");
    LOAD_ERROR(write_file("re.json", s), GF_E_UNSUPPORTED, "pre_tokenizer.pretokenizers[1]",
               "PCRE2 rejects the pattern '('");
    free(s);
    s = replace_once(k_tiny_strings, "\"unk_token\": null", "\"unk_token\": \"<nope>\"");
    LOAD_ERROR(write_file("unk.json", s), GF_E_FORMAT, "model.unk_token '<nope>'");
    free(s);
}

Test(tokenizer, bad_merge_entries)
{
    char *s = replace_once(k_tiny_strings, "\"ab c\"", "\"abc \"");
    LOAD_ERROR(write_file("m1.json", s), GF_E_FORMAT, "m1.json", "model.merges[1]");
    free(s);
    s = replace_once(k_tiny_strings, "\"ab c\"", "\"a  c\"");
    LOAD_ERROR(write_file("m2.json", s), GF_E_FORMAT, "model.merges[1]", "one space");
    free(s);
    s = replace_once(k_tiny_strings, "\"ab c\"", "\"a c\"");
    LOAD_ERROR(write_file("m3.json", s), GF_E_FORMAT, "model.merges[1]", "'ac'");
    free(s);
}

Test(tokenizer, bad_merges_txt_line)
{
    mkdir(tpath("bad"), 0700);
    write_file("bad/vocab.json", "{\"a\": 0, \"b\": 1, \"ab\": 2}");
    write_file("bad/merges.txt", "#version: 0.2\na b\nab\n");
    LOAD_ERROR(tpath("bad"), GF_E_FORMAT, "merges.txt", "line 3", "'ab'");
    write_file("bad/merges.txt", "#version: 0.2\na b\n\na b\n");
    LOAD_ERROR(tpath("bad"), GF_E_FORMAT, "merges.txt", "line 3");
    write_file("bad/merges.txt", "a b\nb q\n");
    LOAD_ERROR(tpath("bad"), GF_E_FORMAT, "merges.txt", "line 2", "'q'");
    write_file("bad/vocab.json", "{\"a\": 0, \"b\": \"one\"}");
    LOAD_ERROR(tpath("bad"), GF_E_FORMAT, "vocab.json", "'b'");
}

Test(tokenizer, bad_paths)
{
    LOAD_ERROR(tpath("does-not-exist"), GF_E_IO, "does-not-exist");
    mkdir(tpath("empty"), 0700);
    LOAD_ERROR(tpath("empty"), GF_E_NOT_FOUND, "empty");
    gf_tokenizer *t = (gf_tokenizer *)1;
    cr_assert_eq(gf_tokenizer_load(NULL, &t), GF_E_INVALID_ARG);
    cr_assert_null(t);
    gf_tokenizer_free(NULL);
    cr_assert_eq(gf_tokenizer_vocab_size(NULL), 0);
}
