/* sha256 (FIPS 180-4), canonical JSON and the golden hashes. */
#include "hash.h"
#include "buf.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(gf_sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

void gf_sha256_init(gf_sha256 *s)
{
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, H0, sizeof H0);
    s->len = 0;
    s->n = 0;
}

void gf_sha256_update(gf_sha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->len += len;
    while (len) {
        if (s->n == 0 && len >= 64) { /* whole blocks straight from the input */
            block(s, p);
            p += 64;
            len -= 64;
            continue;
        }
        size_t take = 64 - s->n < len ? 64 - s->n : len;
        memcpy(s->buf + s->n, p, take);
        s->n += take;
        p += take;
        len -= take;
        if (s->n == 64) {
            block(s, s->buf);
            s->n = 0;
        }
    }
}

void gf_sha256_hex(gf_sha256 *s, char hex[65])
{
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80, zero = 0, lenb[8];
    gf_sha256_update(s, &pad, 1);
    while (s->n != 56)
        gf_sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    gf_sha256_update(s, lenb, 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", s->h[i]);
}

void gf_sha256_of(const void *data, size_t len, char hex[65])
{
    gf_sha256 s;
    gf_sha256_init(&s);
    gf_sha256_update(&s, data, len);
    gf_sha256_hex(&s, hex);
}

/* gf_sha256_file's memo: a file is hashed once per process and reused while
 * it is the same file, unchanged: device, inode, size, and modification and
 * change times to the nanosecond, read from the open file (fstat) before it is
 * read. The runner warms it in the parent for the models its children hash
 * (a kind's hashes_model), so a forked child inherits the hashes instead of
 * reading a model's weights once per (case, backend). */
typedef struct sha_memo {
    char *path;
    struct stat st;
    char hex[65];
} sha_memo;
static sha_memo *memo;
static size_t memo_n, memo_cap;
static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int memo_get(const char *path, const struct stat *st, char hex[65])
{
    int hit = 0;
    pthread_mutex_lock(&memo_mu);
    for (size_t i = 0; i < memo_n && !hit; i++)
        if (!strcmp(memo[i].path, path) && same_file(&memo[i].st, st)) {
            memcpy(hex, memo[i].hex, 65);
            hit = 1;
        }
    pthread_mutex_unlock(&memo_mu);
    return hit;
}

static void memo_put(const char *path, const struct stat *st, const char hex[65])
{
    pthread_mutex_lock(&memo_mu);
    size_t i = 0;
    while (i < memo_n && strcmp(memo[i].path, path))
        i++;
    if (i == memo_n && memo_n == memo_cap) {
        size_t cap = memo_cap ? 2 * memo_cap : 16;
        sha_memo *m = realloc(memo, cap * sizeof *m);
        if (m) {
            memo = m;
            memo_cap = cap;
        }
    }
    if (i < memo_n || memo_n < memo_cap) {
        char *dup = i < memo_n ? memo[i].path : strdup(path);
        if (dup) {
            memo[i].path = dup;
            memo[i].st = *st;
            memcpy(memo[i].hex, hex, 65);
            if (i == memo_n)
                memo_n++;
        }
    }
    pthread_mutex_unlock(&memo_mu);
}

gf_status gf_sha256_file(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(GF_E_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    const int have_st = fstat(fileno(f), &st) == 0;
    if (have_st && memo_get(path, &st, hex)) {
        fclose(f);
        return GF_OK;
    }
    gf_sha256 s;
    gf_sha256_init(&s);
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        gf_sha256_update(&s, buf, n);
    int err = ferror(f);
    fclose(f);
    if (err)
        return gf_error_set(GF_E_IO, "%s: read error", path);
    gf_sha256_hex(&s, hex);
    if (have_st)
        memo_put(path, &st, hex);
    return GF_OK;
}

/* ---- canonical JSON ---- */

static void put_string(gf_buf *b, const char *s, size_t len)
{
    gf_buf_puts(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"')
            gf_buf_puts(b, "\\\"");
        else if (c == '\\')
            gf_buf_puts(b, "\\\\");
        else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            gf_buf_puts(b, esc);
        } else
            gf_buf_put(b, (const char *)&s[i], 1);
    }
    gf_buf_puts(b, "\"");
}

static void put_real(gf_buf *b, double x)
{
    char s[40];
    if (isnan(x)) {
        gf_buf_puts(b, "NaN");
        return;
    }
    if (isinf(x)) {
        gf_buf_puts(b, x > 0 ? "Infinity" : "-Infinity");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(s, sizeof s, "%.*g", p, x);
        if (strtod(s, NULL) == x)
            break;
    }
    gf_buf_puts(b, s);
    if (!strpbrk(s, ".en"))
        gf_buf_puts(b, ".0");
}

const char *gf_json_nonfinite(const json_t *v)
{
    if (!json_is_object(v) || json_object_size(v) != 1)
        return NULL;
    const char *s = json_string_value(json_object_get(v, "$float"));
    if (s && (!strcmp(s, "NaN") || !strcmp(s, "Infinity") || !strcmp(s, "-Infinity")))
        return s;
    return NULL;
}

static int cmp_keys(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void put_value(gf_buf *b, const json_t *v, int top)
{
    char num[32];
    switch (json_typeof(v)) {
    case JSON_NULL: gf_buf_puts(b, "null"); break;
    case JSON_TRUE: gf_buf_puts(b, "true"); break;
    case JSON_FALSE: gf_buf_puts(b, "false"); break;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        gf_buf_puts(b, num);
        break;
    case JSON_REAL: put_real(b, json_real_value(v)); break;
    case JSON_STRING: put_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY:
        gf_buf_puts(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                gf_buf_puts(b, ",");
            put_value(b, json_array_get(v, i), 0);
        }
        gf_buf_puts(b, "]");
        break;
    case JSON_OBJECT: {
        const char *nf = gf_json_nonfinite(v);
        if (nf) { /* {"$float": "NaN"}: a non-finite float, written bare */
            gf_buf_puts(b, nf);
            break;
        }
        size_t n = json_object_size(v), k = 0;
        const char **keys = malloc((n ? n : 1) * sizeof *keys);
        if (!keys) {
            b->oom = 1;
            return;
        }
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val)
        {
            if (!(top && gf_hash_key_excluded(key)))
                keys[k++] = key;
        }
        qsort(keys, k, sizeof *keys, cmp_keys); /* strcmp orders by bytes, as UTF-8 */
        gf_buf_puts(b, "{");
        for (size_t i = 0; i < k; i++) {
            if (i)
                gf_buf_puts(b, ",");
            put_string(b, keys[i], strlen(keys[i]));
            gf_buf_puts(b, ":");
            put_value(b, json_object_get(v, keys[i]), 0);
        }
        gf_buf_puts(b, "}");
        free(keys);
        break;
    }
    }
}

char *gf_canonical_json(const json_t *v)
{
    gf_buf b = {0};
    put_value(&b, v, 0);
    if (b.oom) {
        gf_buf_free(&b);
        return NULL;
    }
    return b.p;
}

int gf_hash_key_excluded(const char *key)
{
    static const char *const excluded[] = {"atol",   "gate",        "tags",          "backends",
                                           "golden", "description", "expect_verdict"};
    for (size_t i = 0; i < sizeof excluded / sizeof excluded[0]; i++)
        if (!strcmp(key, excluded[i]))
            return 1;
    return 0;
}

gf_status gf_case_hash(const json_t *case_obj, char hex[65])
{
    gf_buf b = {0};
    put_value(&b, case_obj, 1);
    if (b.oom) {
        gf_buf_free(&b);
        return gf_error_set(GF_E_NOMEM, "out of memory");
    }
    gf_sha256_of(b.p, b.n, hex);
    gf_buf_free(&b);
    return GF_OK;
}

/* The weights' line of the model hash: sha256(model.safetensors); for a
 * sharded checkpoint (no model.safetensors, a model.safetensors.index.json),
 * sha256 of "<sha256(index)>\n" then "<sha256(shard)>\n" for each shard the
 * index's weight_map names, in byte order of their names (golden.py: the same). */
static gf_status weights_hash(const char *dir, char hex[65])
{
    char path[4096], h[65];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "rb");
    if (f || errno != ENOENT) {
        if (f)
            fclose(f);
        return gf_sha256_file(path, hex);
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    json_error_t je;
    json_t *idx = json_load_file(path, 0, &je);
    if (!idx) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        return gf_sha256_file(path, hex); /* the error names the single file */
    }
    gf_status st = gf_sha256_file(path, h);
    json_t *wm = json_object_get(idx, "weight_map");
    size_t n = 0;
    const char **names = calloc(json_object_size(wm) + 1, sizeof *names);
    const char *k;
    json_t *v;
    json_object_foreach(wm, k, v)
    {
        const char *s = json_string_value(v);
        size_t i;
        for (i = 0; s && i < n && strcmp(names[i], s); i++)
            ;
        if (s && i == n && names)
            names[n++] = s;
    }
    if (st == GF_OK && (!names || !json_is_object(wm) || !n))
        st = gf_error_set(GF_E_FORMAT, "%s: no weight_map naming the shards", path);
    for (size_t i = 1; i < n; i++) /* byte order */
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    gf_sha256 s;
    gf_sha256_init(&s);
    gf_sha256_update(&s, h, 64);
    gf_sha256_update(&s, "\n", 1);
    for (size_t i = 0; st == GF_OK && i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if ((st = gf_sha256_file(path, h)) == GF_OK) {
            gf_sha256_update(&s, h, 64);
            gf_sha256_update(&s, "\n", 1);
        }
    }
    gf_sha256_hex(&s, hex);
    free(names);
    json_decref(idx);
    return st;
}

gf_status gf_model_hash(const char *dir, char hex[65])
{
    static const char *const files[3] = {"config.json", NULL, "tokenizer.json"};
    char cat[3 * 65 + 1] = "", path[4096], h[65];
    for (int i = 0; i < 3; i++) {
        gf_status st;
        if (files[i]) {
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            st = gf_sha256_file(path, h);
        } else
            st = weights_hash(dir, h);
        if (st != GF_OK)
            return st;
        strcat(cat, h);
        strcat(cat, "\n");
    }
    gf_sha256_of(cat, strlen(cat), hex);
    return GF_OK;
}
