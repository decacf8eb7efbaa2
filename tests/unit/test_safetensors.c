/* safetensors reader validation, writer round trip, dtype conversion. */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>

#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "genfence/safetensors.h"

#include "support_files.h"

/* ---- temp dir per test ---- */

static void setup(void) { tf_tmpdir_make("gf-st"); }
static void teardown(void) { tf_tmpdir_remove(); }

TestSuite(safetensors, .init = setup, .fini = teardown);

/* Raw file: u64 LE length `hlen`, `hdr_bytes` of header, `data_len` data bytes (0..). */
static const char *write_raw(const char *name, uint64_t hlen, const char *hdr, size_t hdr_bytes, size_t data_len)
{
    const char *p = tf_path(name);
    FILE *f = fopen(p, "wb");
    cr_assert(f, "cannot create %s", p);
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)(hlen >> (8 * i));
    fwrite(lb, 1, 8, f);
    if (hdr_bytes)
        fwrite(hdr, 1, hdr_bytes, f);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)(i & 0xff), f);
    fclose(f);
    return p;
}

/* Header text + data section of data_len bytes. */
static const char *write_hdr(const char *hdr, size_t data_len)
{
    return write_raw("t.safetensors", strlen(hdr), hdr, strlen(hdr), data_len);
}

/* Open must fail with `want` and a message containing every given substring. */
static void expect_open_fail(const char *path, gf_status want, ...)
{
    gf_safetensors *st = (gf_safetensors *)0x1;
    gf_error_clear();
    gf_status s = gf_safetensors_open(path, &st);
    const char *msg = gf_error_msg();
    cr_assert(s == want, "status %s (%d), want %s; message: %s", gf_status_str(s), s, gf_status_str(want), msg);
    cr_assert(st == NULL, "st_out must be NULL on failure");
    cr_assert(strstr(msg, path) != NULL, "message must name the file: %s", msg);
    va_list ap;
    va_start(ap, want);
    for (const char *sub; (sub = va_arg(ap, const char *)) != NULL;)
        cr_assert(strstr(msg, sub) != NULL, "message lacks \"%s\": %s", sub, msg);
    va_end(ap);
}

static gf_safetensors *open_ok(const char *path)
{
    gf_safetensors *st = NULL;
    gf_status s = gf_safetensors_open(path, &st);
    cr_assert(s == GF_OK, "open %s: %s: %s", path, gf_status_str(s), gf_error_msg());
    cr_assert(st != NULL);
    return st;
}

/* ---- dtype table ---- */

Test(safetensors, dtype_names_and_sizes)
{
    cr_assert_str_eq(gf_dtype_name(GF_DT_BF16), "BF16");
    cr_assert_str_eq(gf_dtype_name(GF_DT_BOOL), "BOOL");
    cr_assert_eq(gf_dtype_size(GF_DT_F64), 8);
    cr_assert_eq(gf_dtype_size(GF_DT_F16), 2);
    cr_assert_eq(gf_dtype_size(GF_DT_BOOL), 1);
    cr_assert_eq(gf_dtype_size((gf_dtype)0), 0);
    cr_assert_eq(gf_dtype_size((gf_dtype)99), 0);
}

/* ---- writer round trip ---- */

Test(safetensors, writer_round_trip_all_dtypes_and_metadata)
{
    static const gf_dtype dts[] = {GF_DT_BOOL, GF_DT_U8,  GF_DT_I8,  GF_DT_I16,  GF_DT_U16, GF_DT_I32, GF_DT_U32,
                                   GF_DT_I64,  GF_DT_U64, GF_DT_F16, GF_DT_BF16, GF_DT_F32, GF_DT_F64};
    enum { N = sizeof dts / sizeof dts[0] };
    gf_st_write_tensor w[N + 2];
    unsigned char buf[N][64];
    char names[N][32];
    memset(w, 0, sizeof w);
    for (int i = 0; i < N; i++) {
        /* names in non-alphabetical order to check the order is kept */
        snprintf(names[i], sizeof names[i], "z%02d.%s", N - i, gf_dtype_name(dts[i]));
        for (int j = 0; j < 64; j++)
            buf[i][j] = (unsigned char)(i * 31 + j * 7);
        w[i].name = names[i];
        w[i].dtype = dts[i];
        w[i].ndim = 2;
        w[i].shape[0] = 2;
        w[i].shape[1] = (int64_t)(8 / gf_dtype_size(dts[i])) * 2; /* 16 bytes per row pair */
        w[i].data = buf[i];
    }
    /* a scalar and an empty tensor */
    static const float one = 1.0f;
    w[N] = (gf_st_write_tensor){.name = "scalar", .dtype = GF_DT_F32, .ndim = 0, .data = &one};
    w[N + 1] = (gf_st_write_tensor){.name = "empty", .dtype = GF_DT_F32, .ndim = 2, .shape = {0, 5}, .data = NULL};
    const char *mk[] = {"format", "note"}, *mv[] = {"pt", "h\xc3\xa9llo \"quoted\""};
    const char *p = tf_path("rt.safetensors");
    gf_status s = gf_safetensors_write(p, w, N + 2, mk, mv, 2);
    cr_assert(s == GF_OK, "write: %s", gf_error_msg());

    /* no temporary left behind */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    cr_assert(access(tmp, F_OK) != 0, "temporary %s left behind", tmp);

    /* raw layout: N multiple of 8, header starts with __metadata__, space padded */
    FILE *f = fopen(p, "rb");
    cr_assert(f);
    unsigned char lb[8];
    cr_assert(fread(lb, 1, 8, f) == 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = (hl << 8) | lb[i];
    cr_assert(hl % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hl);
    char *hdr = calloc(1, hl + 1);
    cr_assert(fread(hdr, 1, hl, f) == hl);
    fclose(f);
    cr_assert(!strncmp(hdr, "{\"__metadata__\":{\"format\":\"pt\",", 31), "header: %s", hdr);
    cr_assert(strstr(hdr, "\"z13.BOOL\":{\"dtype\":\"BOOL\",\"shape\":[2,16],\"data_offsets\":[0,32]}"), "header: %s",
              hdr);
    size_t len = strlen(hdr);
    while (len && hdr[len - 1] == ' ')
        len--;
    cr_assert(hdr[len - 1] == '}', "header must end in '}' then spaces: %s", hdr);
    cr_assert(hl - len < 8);
    free(hdr);

    gf_safetensors *st = open_ok(p);
    cr_assert_str_eq(gf_safetensors_path(st), p);
    cr_assert_eq(gf_safetensors_count(st), N + 2);
    for (int i = 0; i < N; i++) {
        const gf_st_tensor *t = gf_safetensors_at(st, i);
        cr_assert_str_eq(t->name, names[i], "tensor order kept");
        cr_assert(gf_safetensors_find(st, names[i]) == t);
        cr_assert_eq(t->dtype, dts[i]);
        cr_assert_eq(t->ndim, 2);
        cr_assert_eq(t->shape[0], 2);
        cr_assert_eq(t->shape[1], w[i].shape[1]);
        cr_assert_eq(t->nbytes, 32);
        cr_assert_eq(t->offset, 8 + hl + 32 * (uint64_t)i);
        cr_assert_eq(gf_st_tensor_numel(t), 2 * w[i].shape[1]);
        cr_assert(!memcmp(t->data, buf[i], 32), "data of %s", names[i]);
    }
    const gf_st_tensor *sc = gf_safetensors_find(st, "scalar");
    cr_assert(sc && sc->ndim == 0 && sc->nbytes == 4 && gf_st_tensor_numel(sc) == 1);
    float got;
    cr_assert(gf_st_tensor_to_f32(st, sc, &got) == GF_OK);
    cr_assert(got == 1.0f);
    const gf_st_tensor *em = gf_safetensors_find(st, "empty");
    cr_assert(em && em->nbytes == 0 && gf_st_tensor_numel(em) == 0);
    cr_assert(gf_safetensors_find(st, "nope") == NULL);
    cr_assert(gf_safetensors_at(st, N + 2) == NULL);

    cr_assert_eq(gf_safetensors_meta_count(st), 2);
    cr_assert_str_eq(gf_safetensors_meta(st, "format"), "pt");
    cr_assert_str_eq(gf_safetensors_meta(st, "note"), mv[1]);
    cr_assert(gf_safetensors_meta(st, "absent") == NULL);
    const char *k, *v;
    gf_safetensors_meta_at(st, 1, &k, &v);
    cr_assert_str_eq(k, "note");
    cr_assert_str_eq(v, mv[1]);
    gf_safetensors_meta_at(st, 2, &k, &v);
    cr_assert(k == NULL && v == NULL);
    gf_safetensors_close(st);
    gf_safetensors_close(NULL);
}

Test(safetensors, writer_no_metadata_and_overwrite)
{
    const float a[3] = {1, 2, 3}, b[2] = {4, 5};
    gf_st_write_tensor w = {.name = "a", .dtype = GF_DT_F32, .ndim = 1, .shape = {3}, .data = a};
    const char *p = tf_path("o.safetensors");
    cr_assert(gf_safetensors_write(p, &w, 1, NULL, NULL, 0) == GF_OK, "%s", gf_error_msg());
    w = (gf_st_write_tensor){.name = "b", .dtype = GF_DT_F32, .ndim = 1, .shape = {2}, .data = b};
    cr_assert(gf_safetensors_write(p, &w, 1, NULL, NULL, 0) == GF_OK, "%s", gf_error_msg());
    gf_safetensors *st = open_ok(p);
    cr_assert_eq(gf_safetensors_count(st), 1);
    cr_assert_eq(gf_safetensors_meta_count(st), 0);
    cr_assert(gf_safetensors_find(st, "a") == NULL);
    const gf_st_tensor *t = gf_safetensors_find(st, "b");
    cr_assert(t && t->offset % 8 == 0);
    float out[2];
    cr_assert(gf_st_tensor_to_f32(st, t, out) == GF_OK);
    cr_assert(out[0] == 4 && out[1] == 5);
    gf_safetensors_close(st);
}

Test(safetensors, writer_zero_tensors)
{
    const char *p = tf_path("z.safetensors");
    cr_assert(gf_safetensors_write(p, NULL, 0, NULL, NULL, 0) == GF_OK, "%s", gf_error_msg());
    gf_safetensors *st = open_ok(p);
    cr_assert_eq(gf_safetensors_count(st), 0);
    gf_safetensors_close(st);
}

Test(safetensors, writer_rejects_bad_input)
{
    const float a[2] = {1, 2};
    const char *p = tf_path("bad.safetensors");
    gf_st_write_tensor w[2] = {
        {.name = "x", .dtype = GF_DT_F32, .ndim = 1, .shape = {2}, .data = a},
        {.name = "x", .dtype = GF_DT_F32, .ndim = 1, .shape = {2}, .data = a},
    };
    gf_status s = gf_safetensors_write(p, w, 2, NULL, NULL, 0);
    cr_assert(s == GF_E_INVALID_ARG && strstr(gf_error_msg(), "'x' given twice"), "%s", gf_error_msg());
    w[1].name = "__metadata__";
    s = gf_safetensors_write(p, w, 2, NULL, NULL, 0);
    cr_assert(s == GF_E_INVALID_ARG && strstr(gf_error_msg(), "reserved"), "%s", gf_error_msg());
    w[1].name = "y";
    w[1].dtype = (gf_dtype)77;
    s = gf_safetensors_write(p, w, 2, NULL, NULL, 0);
    cr_assert(s == GF_E_INVALID_ARG && strstr(gf_error_msg(), "'y': unknown dtype"), "%s", gf_error_msg());
    w[1].dtype = GF_DT_F32;
    w[1].shape[0] = -1;
    s = gf_safetensors_write(p, w, 2, NULL, NULL, 0);
    cr_assert(s == GF_E_INVALID_ARG && strstr(gf_error_msg(), "'y'"), "%s", gf_error_msg());
    w[1].shape[0] = 2;
    w[1].data = NULL;
    s = gf_safetensors_write(p, w, 2, NULL, NULL, 0);
    cr_assert(s == GF_E_INVALID_ARG && strstr(gf_error_msg(), "NULL data"), "%s", gf_error_msg());
    cr_assert(access(p, F_OK) != 0, "nothing written on error");
}

Test(safetensors, writer_io_error_names_path)
{
    const float a[1] = {1};
    gf_st_write_tensor w = {.name = "a", .dtype = GF_DT_F32, .ndim = 1, .shape = {1}, .data = a};
    const char *p = tf_path("no/such/dir/x.safetensors");
    gf_status s = gf_safetensors_write(p, &w, 1, NULL, NULL, 0);
    cr_assert(s == GF_E_IO, "%s", gf_error_msg());
    cr_assert(strstr(gf_error_msg(), "no/such/dir/x.safetensors") && strstr(gf_error_msg(), "No such file"), "%s",
              gf_error_msg());
}

/* ---- reader: file-level errors ---- */

Test(safetensors, missing_file_is_io_error)
{
    expect_open_fail(tf_path("absent.safetensors"), GF_E_IO, "cannot open", "No such file", NULL);
}

Test(safetensors, directory_is_io_error) { expect_open_fail(tf_tmpdir(), GF_E_IO, "not a regular file", NULL); }

Test(safetensors, empty_file)
{
    const char *p = tf_path("e.safetensors");
    FILE *f = fopen(p, "wb");
    cr_assert(f);
    fclose(f);
    expect_open_fail(p, GF_E_FORMAT, "file is 0 bytes", "too short", NULL);
}

Test(safetensors, truncated_below_8_bytes)
{
    const char *p = tf_path("short.safetensors");
    FILE *f = fopen(p, "wb");
    fwrite("\x10\0\0\0\0", 1, 5, f);
    fclose(f);
    expect_open_fail(p, GF_E_FORMAT, "file is 5 bytes", "8-byte header length", NULL);
}

Test(safetensors, header_length_past_eof)
{
    const char *h = "{}";
    const char *p = write_raw("t.safetensors", 1000, h, 2, 10);
    expect_open_fail(p, GF_E_FORMAT, "header length 1000", "runs past the end of the file",
                     "8 + 1000 = 1008 > file size 20", NULL);
}

Test(safetensors, header_length_oversized)
{
    const char *p = write_raw("t.safetensors", 200000000ull, "{}", 2, 0);
    expect_open_fail(p, GF_E_FORMAT, "header length 200000000", "exceeds the 100000000-byte limit", NULL);
    p = write_raw("t2.safetensors", UINT64_MAX, "{}", 2, 0);
    expect_open_fail(p, GF_E_FORMAT, "header length 18446744073709551615", "exceeds", NULL);
}

Test(safetensors, invalid_json)
{
    const char *h = "{\"a\": {\"dtype\": \"F32\",\n \"shape\": [1], }";
    const char *p = write_hdr(h, 4);
    expect_open_fail(p, GF_E_FORMAT, "not valid JSON", "header line 2", "file offset", NULL);
}

Test(safetensors, header_not_an_object)
{
    expect_open_fail(write_hdr("[1, 2, 3]", 0), GF_E_FORMAT, "header (file offset 8) is an array",
                     "expected a JSON object", NULL);
    expect_open_fail(write_hdr("\"str\"", 0), GF_E_FORMAT, "is a string", NULL);
}

Test(safetensors, duplicate_tensor_name)
{
    const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}";
    expect_open_fail(write_hdr(h, 2), GF_E_FORMAT, "not valid JSON", "duplicate", NULL);
}

/* ---- reader: per-tensor errors ---- */

Test(safetensors, entry_not_an_object)
{
    expect_open_fail(write_hdr("{\"w\": [1, 2]}", 0), GF_E_FORMAT, "tensor 'w'", "header entry is an array", NULL);
}

Test(safetensors, unknown_dtype)
{
    const char *h = "{\"h.0.attn.c_attn.weight\":{\"dtype\":\"Q4_K\",\"shape\":[2],"
                    "\"data_offsets\":[0,2]}}";
    expect_open_fail(write_hdr(h, 2), GF_E_FORMAT, "tensor 'h.0.attn.c_attn.weight'", "unknown dtype 'Q4_K'",
                     "known: BOOL", NULL);
    h = "{\"w\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,2]}}";
    expect_open_fail(write_hdr(h, 2), GF_E_FORMAT, "tensor 'w'", "\"dtype\" is an integer", NULL);
    h = "{\"w\":{\"shape\":[2],\"data_offsets\":[0,2]}}";
    expect_open_fail(write_hdr(h, 2), GF_E_FORMAT, "tensor 'w'", "missing \"dtype\"", NULL);
}

Test(safetensors, shape_wrong_type)
{
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":\"2x2\",\"data_offsets\":[0,16]}}";
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "tensor 'w'", "\"shape\" is a string", NULL);
    h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,\"2\"],\"data_offsets\":[0,16]}}";
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "tensor 'w'", "\"shape\"[1] is a string", NULL);
    h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0,2],\"data_offsets\":[0,16]}}";
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "\"shape\"[0] is a real number", NULL);
    h = "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}";
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "tensor 'w'", "missing \"shape\"", NULL);
}

Test(safetensors, shape_negative)
{
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,16]}}";
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "tensor 'w'", "\"shape\"[1] is -3", "non-negative", NULL);
}

Test(safetensors, shape_too_many_dims)
{
    const char *h = "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                    "\"data_offsets\":[0,1]}}";
    expect_open_fail(write_hdr(h, 1), GF_E_FORMAT, "tensor 'w'", "9 dimensions", "at most 8", NULL);
}

Test(safetensors, shape_product_overflow)
{
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                    "\"data_offsets\":[0,16]}}";
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "tensor 'w'", "overflows", NULL);
    /* numel fits but x 8 bytes does not */
    h = "{\"w\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,16]}}";
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "tensor 'w'", "overflows", NULL);
}

Test(safetensors, offsets_past_end)
{
    const char *h = "{\"h.0.attn.c_attn.weight\":{\"dtype\":\"F32\",\"shape\":[4],"
                    "\"data_offsets\":[8,24]}}";
    size_t n = strlen(h);
    char want[128];
    snprintf(want, sizeof want, "(16 bytes, file offsets 8+%zu=%zu .. %zu)", n, 8 + n, 8 + n + 16);
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "tensor 'h.0.attn.c_attn.weight'",
                     "data_offsets [8, 24] end past the data section", want, NULL);
}

Test(safetensors, offsets_begin_after_end)
{
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,0]}}";
    expect_open_fail(write_hdr(h, 16), GF_E_FORMAT, "tensor 'w'", "data_offsets [16, 0] have begin > end", NULL);
}

Test(safetensors, offsets_malformed)
{
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}";
    expect_open_fail(write_hdr(h, 4), GF_E_FORMAT, "tensor 'w'", "\"data_offsets\" is [0]", "expected [begin, end]",
                     NULL);
    h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}";
    expect_open_fail(write_hdr(h, 4), GF_E_FORMAT, "tensor 'w'", "[-4,0]", NULL);
    h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}";
    expect_open_fail(write_hdr(h, 4), GF_E_FORMAT, "tensor 'w'", "missing \"data_offsets\"", NULL);
}

Test(safetensors, overlapping_tensors)
{
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                    "\"wte.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                    "\"wpe.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}";
    size_t n = strlen(h);
    char want[128];
    snprintf(want, sizeof want, "file offsets %zu .. %zu", 8 + n + 8, 8 + n + 16);
    expect_open_fail(write_hdr(h, 24), GF_E_FORMAT,
                     "tensors 'wte.weight' (data_offsets [0, 16]) and 'wpe.weight' "
                     "(data_offsets [8, 24]) overlap",
                     "data bytes [8, 16)", want, NULL);
}

Test(safetensors, identical_offsets_overlap)
{
    const char *h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
    expect_open_fail(write_hdr(h, 4), GF_E_FORMAT, "'a'", "'b'", "overlap", NULL);
}

Test(safetensors, empty_tensors_do_not_overlap)
{
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
                    "\"g\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[20,22]}}";
    gf_safetensors *st = open_ok(write_hdr(h, 24)); /* gaps and trailing bytes are allowed */
    cr_assert_eq(gf_safetensors_count(st), 3);
    gf_safetensors_close(st);
}

Test(safetensors, wrong_byte_length_for_dtype_and_shape)
{
    const char *h = "{\"h.1.mlp.c_fc.bias\":{\"dtype\":\"F16\",\"shape\":[2,3],"
                    "\"data_offsets\":[4,20]}}";
    size_t n = strlen(h);
    char want[64];
    snprintf(want, sizeof want, "(file offset %zu)", 8 + n + 4);
    expect_open_fail(write_hdr(h, 24), GF_E_FORMAT, "tensor 'h.1.mlp.c_fc.bias'", "dtype F16 x shape [2, 3] = 12 bytes",
                     "data_offsets [4, 20] span 16 bytes", want, NULL);
}

Test(safetensors, metadata_errors)
{
    expect_open_fail(write_hdr("{\"__metadata__\": [\"x\"]}", 0), GF_E_FORMAT, "'__metadata__' is an array", NULL);
    expect_open_fail(write_hdr("{\"__metadata__\": {\"format\": \"pt\", \"step\": 100}}", 0), GF_E_FORMAT,
                     "'__metadata__' value for key 'step' is an integer", NULL);
}

Test(safetensors, metadata_only_and_header_padding_accepted)
{
    const char *h = "{\"__metadata__\":{\"k\":\"v\"}}     \n\t ";
    gf_safetensors *st = open_ok(write_hdr(h, 0));
    cr_assert_eq(gf_safetensors_count(st), 0);
    cr_assert_str_eq(gf_safetensors_meta(st, "k"), "v");
    gf_safetensors_close(st);
}

/* ---- conversion ---- */

static gf_safetensors *one_tensor(gf_dtype dt, const void *data, int64_t n)
{
    gf_st_write_tensor w = {.name = "t", .dtype = dt, .ndim = 1, .shape = {n}, .data = data};
    const char *p = tf_path("conv.safetensors");
    cr_assert(gf_safetensors_write(p, &w, 1, NULL, NULL, 0) == GF_OK, "%s", gf_error_msg());
    return open_ok(p);
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

Test(safetensors, f16_to_f32_exact)
{
    const uint16_t h[] = {0x3C00, 0xC100, 0x7BFF, 0x0001, 0x03FF, 0x0400, 0x8000,
                          0x0000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x8001, 0x3555};
    const float want[] = {1.0f, -2.5f,    65504.0f,  0x1p-24f, 0x3ffp-24f, 0x1p-14f,  -0.0f,
                          0.0f, INFINITY, -INFINITY, NAN,      NAN,        -0x1p-24f, 0x1.554p-2f};
    enum { N = sizeof h / sizeof h[0] };
    gf_safetensors *st = one_tensor(GF_DT_F16, h, N);
    float out[N];
    cr_assert(gf_st_tensor_to_f32(st, gf_safetensors_find(st, "t"), out) == GF_OK);
    for (int i = 0; i < N; i++) {
        if (isnan(want[i]))
            cr_assert(isnan(out[i]), "[%d] %04x -> %a, want NaN", i, h[i], (double)out[i]);
        else
            cr_assert(bits(out[i]) == bits(want[i]), "[%d] %04x -> %a, want %a", i, h[i], (double)out[i],
                      (double)want[i]);
    }
    cr_assert(signbit(out[11]), "NaN sign kept");
    cr_assert_eq(bits(out[10]), 0x7FC00000u, "quiet NaN bits");
    cr_assert_eq(bits(out[11]), 0xFFC02000u, "NaN payload kept");
    gf_safetensors_close(st);
}

Test(safetensors, bf16_to_f32_exact)
{
    const uint16_t h[] = {0x3F80, 0xC020, 0x477F, 0x7F7F, 0x0001, 0x0080, 0x8000, 0x7F80, 0xFF80, 0x7FC0};
    const float want[] = {1.0f, -2.5f, 65280.0f, 0x1.fep+127f, 0x1p-133f, 0x1p-126f, -0.0f, INFINITY, -INFINITY, NAN};
    enum { N = sizeof h / sizeof h[0] };
    gf_safetensors *st = one_tensor(GF_DT_BF16, h, N);
    float out[N];
    cr_assert(gf_st_tensor_to_f32(st, gf_safetensors_find(st, "t"), out) == GF_OK);
    for (int i = 0; i < N; i++) {
        if (isnan(want[i]))
            cr_assert(isnan(out[i]), "[%d] %04x -> %a, want NaN", i, h[i], (double)out[i]);
        else
            cr_assert(bits(out[i]) == bits(want[i]), "[%d] %04x -> %a, want %a", i, h[i], (double)out[i],
                      (double)want[i]);
    }
    gf_safetensors_close(st);
}

Test(safetensors, f64_to_f32_rounded)
{
    const double d[] = {0.1,
                        -2.5,
                        1.0 + 0x1p-24,
                        1.0 + 3 * 0x1p-24,
                        1e300,
                        -1e300,
                        (double)FLT_MAX,
                        0x1.fffffefp+127,
                        0x1.ffffffp+127,
                        1e-50,
                        NAN};
    const float want[] = {0.1f,     -2.5f, 1.0f, 1.0f + 0x1p-22f, INFINITY, -INFINITY, FLT_MAX, FLT_MAX,
                          INFINITY, 0.0f,  NAN};
    enum { N = sizeof d / sizeof d[0] };
    gf_safetensors *st = one_tensor(GF_DT_F64, d, N);
    float out[N];
    cr_assert(gf_st_tensor_to_f32(st, gf_safetensors_find(st, "t"), out) == GF_OK);
    for (int i = 0; i < N; i++) {
        if (isnan(want[i]))
            cr_assert(isnan(out[i]), "[%d] %a -> %a, want NaN", i, d[i], (double)out[i]);
        else
            cr_assert(bits(out[i]) == bits(want[i]), "[%d] %a -> %a, want %a", i, d[i], (double)out[i],
                      (double)want[i]);
    }
    gf_safetensors_close(st);
}

Test(safetensors, f32_unaligned_copy)
{
    /* an F32 tensor at an odd data offset */
    unsigned char u8[3] = {1, 2, 3};
    const float f[3] = {1.5f, -0.25f, 3e38f};
    gf_st_write_tensor w[2] = {
        {.name = "pad", .dtype = GF_DT_U8, .ndim = 1, .shape = {3}, .data = u8},
        {.name = "f", .dtype = GF_DT_F32, .ndim = 1, .shape = {3}, .data = f},
    };
    const char *p = tf_path("u.safetensors");
    cr_assert(gf_safetensors_write(p, w, 2, NULL, NULL, 0) == GF_OK);
    gf_safetensors *st = open_ok(p);
    const gf_st_tensor *t = gf_safetensors_find(st, "f");
    cr_assert(t->offset % 4 == 3);
    float out[3];
    cr_assert(gf_st_tensor_to_f32(st, t, out) == GF_OK);
    cr_assert(!memcmp(out, f, sizeof f));
    gf_safetensors_close(st);
}

Test(safetensors, to_f32_rejects_integer_dtypes)
{
    const int32_t v[2] = {1, 2};
    gf_safetensors *st = one_tensor(GF_DT_I32, v, 2);
    float out[2];
    gf_status s = gf_st_tensor_to_f32(st, gf_safetensors_find(st, "t"), out);
    cr_assert(s == GF_E_UNSUPPORTED, "%s", gf_error_msg());
    cr_assert(strstr(gf_error_msg(), "tensor 't' has dtype I32"), "%s", gf_error_msg());
    gf_safetensors_close(st);
}
