/* safetensors reader (mmap, validated before use); the conversion of a
 * tensor's data to F32 and the writer are in safetensors_data.c.
 *
 * Format (https://github.com/huggingface/safetensors):
 *   bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
 *   bytes [8, 8+N)      the header: a UTF-8 JSON object
 *                         {"__metadata__": {"k": "v", ...},            (optional)
 *                          "name": {"dtype": "F32", "shape": [2, 3],
 *                                   "data_offsets": [begin, end]}, ...}
 *   bytes [8+N, EOF)    the data section; offsets are relative to its start
 *
 * Tensor data is little-endian. This file assumes a little-endian host for
 * the element conversions (gf_st_tensor_to_f32) and for the bytes the writer
 * copies; the 8-byte header length is decoded/encoded byte by byte. */
#include "genfence/safetensors.h"
#include "model_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "genfence's safetensors code assumes a little-endian host"
#endif

/* Same bound as the reference implementation (safetensors' MAX_HEADER_SIZE). */
#define GF_ST_MAX_HEADER ((uint64_t)100000000)

/* One tensor's bytes (as stored): at most $GENFENCE_MAX_TENSOR_BYTES, default
 * 16 GiB (a 128k x 8192 F32 embedding is 4 GiB). The data must lie in the
 * file anyway; the cap bounds what one claimed tensor makes the loader map,
 * convert and allocate. */
#define GF_ST_MAX_TENSOR_BYTES_DEFAULT ((uint64_t)1 << 34)

struct gf_safetensors {
    char *path;
    void *map; /* NULL when the file is empty of data and not mapped */
    size_t map_size;
    uint64_t header_len;
    uint64_t data_start; /* 8 + N */
    uint64_t data_size;
    gf_st_tensor *tensors;
    size_t n_tensors;
    const gf_st_tensor **by_name; /* sorted by name, for bsearch */
    char **meta_keys;
    char **meta_values;
    size_t n_meta;
};

/* ------------------------------------------------------------------ dtypes */

static const struct {
    gf_dtype dt;
    const char *name;
    size_t size;
} k_dtypes[] = {
    {GF_DT_BOOL, "BOOL", 1}, {GF_DT_U8, "U8", 1},   {GF_DT_I8, "I8", 1},   {GF_DT_I16, "I16", 2}, {GF_DT_U16, "U16", 2},
    {GF_DT_I32, "I32", 4},   {GF_DT_U32, "U32", 4}, {GF_DT_I64, "I64", 8}, {GF_DT_U64, "U64", 8}, {GF_DT_F16, "F16", 2},
    {GF_DT_BF16, "BF16", 2}, {GF_DT_F32, "F32", 4}, {GF_DT_F64, "F64", 8},
};
enum { N_DTYPES = sizeof k_dtypes / sizeof k_dtypes[0] };
#define GF_DTYPE_LIST "BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64"

const char *gf_dtype_name(gf_dtype dt)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (k_dtypes[i].dt == dt)
            return k_dtypes[i].name;
    return "?";
}

size_t gf_dtype_size(gf_dtype dt)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (k_dtypes[i].dt == dt)
            return k_dtypes[i].size;
    return 0;
}

static int dtype_from_name(const char *s, gf_dtype *out)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (!strcmp(k_dtypes[i].name, s)) {
            *out = k_dtypes[i].dt;
            return 1;
        }
    return 0;
}

int64_t gf_st_tensor_numel(const gf_st_tensor *t)
{
    int64_t n = 1;
    for (int32_t i = 0; i < t->ndim; i++)
        n *= t->shape[i]; /* validated not to overflow at open */
    return n;
}

/* "[2, 3]" into buf */
static const char *shape_str(char *buf, size_t cap, int32_t ndim, const int64_t *shape)
{
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, cap - len, "[");
    for (int32_t i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* ------------------------------------------------------------------ reader */

void gf_st_tensor_drop_pages(const gf_st_tensor *t)
{
    long ps = sysconf(_SC_PAGESIZE);
    if (!t || !t->data || !t->nbytes || ps <= 0)
        return;
    uintptr_t lo = ((uintptr_t)t->data + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps;
    uintptr_t hi = ((uintptr_t)t->data + t->nbytes) / (uintptr_t)ps * (uintptr_t)ps;
    if (hi > lo) /* a private mapping of the file: the pages re-fault from it if read again */
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void gf_safetensors_close(gf_safetensors *st)
{
    if (!st)
        return;
    if (st->map)
        munmap(st->map, st->map_size);
    for (size_t i = 0; i < st->n_tensors; i++)
        free((char *)st->tensors[i].name);
    free(st->tensors);
    free(st->by_name);
    for (size_t i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    free(st->path);
    free(st);
}

static int cmp_by_name(const void *a, const void *b)
{
    const gf_st_tensor *x = *(const gf_st_tensor *const *)a, *y = *(const gf_st_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const gf_st_tensor *x = *(const gf_st_tensor *const *)a, *y = *(const gf_st_tensor *const *)b;
    uint64_t xe = x->offset + x->nbytes, ye = y->offset + y->nbytes;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (xe != ye)
        return xe < ye ? -1 : 1;
    return strcmp(x->name, y->name);
}

static gf_status parse_metadata(gf_safetensors *st, json_t *meta)
{
    const char *path = st->path;
    if (!json_is_object(meta))
        return gf_error_set(GF_E_FORMAT,
                            "%s: header: '__metadata__' is %s, expected an object of string "
                            "values (header at file offset 8, %" PRIu64 " bytes)",
                            path, json_type_name(meta), st->header_len);
    size_t n = json_object_size(meta);
    st->meta_keys = calloc(n ? n : 1, sizeof *st->meta_keys);
    st->meta_values = calloc(n ? n : 1, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values)
        return gf_error_set(GF_E_NOMEM, "%s: out of memory reading __metadata__", path);
    const char *key;
    json_t *val;
    json_object_foreach(meta, key, val)
    {
        if (!json_is_string(val))
            return gf_error_set(GF_E_FORMAT,
                                "%s: header: '__metadata__' value for key '%.200s' is %s, "
                                "expected a string (safetensors metadata is string -> string)",
                                path, key, json_type_name(val));
        st->meta_keys[st->n_meta] = strdup(key);
        st->meta_values[st->n_meta] = strdup(json_string_value(val));
        if (!st->meta_keys[st->n_meta] || !st->meta_values[st->n_meta]) {
            free(st->meta_keys[st->n_meta]);
            free(st->meta_values[st->n_meta]);
            return gf_error_set(GF_E_NOMEM, "%s: out of memory reading __metadata__", path);
        }
        st->n_meta++;
    }
    return GF_OK;
}

/* Read a JSON integer >= 0 that fits in int64. */
static int get_nonneg_int(const json_t *v, int64_t *out)
{
    if (!json_is_integer(v))
        return 0;
    json_int_t x = json_integer_value(v);
    if (x < 0)
        return 0;
    *out = (int64_t)x;
    return 1;
}

static gf_status parse_tensor(gf_safetensors *st, const char *name, json_t *entry, gf_st_tensor *t)
{
    const char *path = st->path;
    char sbuf[256];
    if (!json_is_object(entry))
        return gf_error_set(GF_E_FORMAT,
                            "%s: tensor '%.200s': header entry is %s, expected an object with "
                            "\"dtype\", \"shape\" and \"data_offsets\"",
                            path, name, json_type_name(entry));

    /* dtype */
    json_t *jdt = json_object_get(entry, "dtype");
    if (!jdt)
        return gf_error_set(GF_E_FORMAT, "%s: tensor '%.200s': missing \"dtype\"", path, name);
    if (!json_is_string(jdt))
        return gf_error_set(GF_E_FORMAT, "%s: tensor '%.200s': \"dtype\" is %s, expected a string", path, name,
                            json_type_name(jdt));
    if (!dtype_from_name(json_string_value(jdt), &t->dtype))
        return gf_error_set(GF_E_FORMAT, "%s: tensor '%.200s': unknown dtype '%.64s' (known: " GF_DTYPE_LIST ")", path,
                            name, json_string_value(jdt));

    /* shape */
    json_t *jsh = json_object_get(entry, "shape");
    if (!jsh)
        return gf_error_set(GF_E_FORMAT, "%s: tensor '%.200s': missing \"shape\"", path, name);
    if (!json_is_array(jsh))
        return gf_error_set(GF_E_FORMAT,
                            "%s: tensor '%.200s': \"shape\" is %s, expected an array of "
                            "non-negative integers",
                            path, name, json_type_name(jsh));
    size_t ndim = json_array_size(jsh);
    if (ndim > GF_ST_MAX_DIMS)
        return gf_error_set(GF_E_FORMAT,
                            "%s: tensor '%.200s': \"shape\" has %zu dimensions, at most %d "
                            "are supported",
                            path, name, ndim, GF_ST_MAX_DIMS);
    t->ndim = (int32_t)ndim;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < ndim; i++) {
        json_t *d = json_array_get(jsh, i);
        int64_t v;
        if (!get_nonneg_int(d, &v)) {
            if (json_is_integer(d))
                return gf_error_set(GF_E_FORMAT,
                                    "%s: tensor '%.200s': \"shape\"[%zu] is %" JSON_INTEGER_FORMAT
                                    ", dimensions must be non-negative",
                                    path, name, i, json_integer_value(d));
            return gf_error_set(GF_E_FORMAT,
                                "%s: tensor '%.200s': \"shape\"[%zu] is %s, expected a "
                                "non-negative integer",
                                path, name, i, json_type_name(d));
        }
        t->shape[i] = v;
        if (__builtin_mul_overflow(numel, (uint64_t)v, &numel))
            overflow = 1;
    }
    uint64_t nbytes = 0;
    size_t esz = gf_dtype_size(t->dtype);
    if (overflow || numel > (uint64_t)INT64_MAX || __builtin_mul_overflow(numel, (uint64_t)esz, &nbytes))
        return gf_error_set(GF_E_FORMAT,
                            "%s: tensor '%.200s': shape %s has too many elements (the byte "
                            "size overflows 64 bits)",
                            path, name, shape_str(sbuf, sizeof sbuf, t->ndim, t->shape));
    uint64_t cap = gf_env_limit("GENFENCE_MAX_TENSOR_BYTES", GF_ST_MAX_TENSOR_BYTES_DEFAULT);
    if (nbytes > cap)
        return gf_error_set(GF_E_FORMAT,
                            "%s: tensor '%.200s': shape %s is %" PRIu64 " bytes, over the limit of %" PRIu64
                            " (GENFENCE_MAX_TENSOR_BYTES; set it higher to load this model)",
                            path, name, shape_str(sbuf, sizeof sbuf, t->ndim, t->shape), nbytes, cap);

    /* data_offsets */
    json_t *jof = json_object_get(entry, "data_offsets");
    if (!jof)
        return gf_error_set(GF_E_FORMAT, "%s: tensor '%.200s': missing \"data_offsets\"", path, name);
    int64_t b, e;
    if (!json_is_array(jof) || json_array_size(jof) != 2 || !get_nonneg_int(json_array_get(jof, 0), &b) ||
        !get_nonneg_int(json_array_get(jof, 1), &e)) {
        char *txt = json_dumps(jof, JSON_COMPACT | JSON_ENCODE_ANY);
        gf_status s = gf_error_set(GF_E_FORMAT,
                                   "%s: tensor '%.200s': \"data_offsets\" is %.100s, expected "
                                   "[begin, end] with non-negative integers",
                                   path, name, txt ? txt : json_type_name(jof));
        free(txt);
        return s;
    }
    uint64_t ub = (uint64_t)b, ue = (uint64_t)e;
    if (ub > ue)
        return gf_error_set(GF_E_FORMAT,
                            "%s: tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64 "] have begin > end", path, name,
                            ub, ue);
    if (ue > st->data_size)
        return gf_error_set(
            GF_E_FORMAT,
            "%s: tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64 "] end past the data section (%" PRIu64
            " bytes, file offsets 8+%" PRIu64 "=%" PRIu64 " .. %" PRIu64 "); the file is truncated or the offsets "
            "are wrong",
            path, name, ub, ue, st->data_size, st->header_len, st->data_start, st->data_start + st->data_size);
    if (ue - ub != nbytes)
        return gf_error_set(GF_E_FORMAT,
                            "%s: tensor '%.200s': dtype %s x shape %s = %" PRIu64 " bytes, but data_offsets [%" PRIu64
                            ", %" PRIu64 "] span %" PRIu64 " bytes (file offset %" PRIu64 ")",
                            path, name, gf_dtype_name(t->dtype), shape_str(sbuf, sizeof sbuf, t->ndim, t->shape),
                            nbytes, ub, ue, ue - ub, st->data_start + ub);
    t->offset = st->data_start + ub;
    t->nbytes = (size_t)nbytes;
    t->data = (const unsigned char *)st->map + t->offset;
    return GF_OK;
}

static gf_status parse_header(gf_safetensors *st, const char *hdr)
{
    const char *path = st->path;
    json_error_t err;
    json_t *root = json_loadb(hdr, (size_t)st->header_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (!root)
        return gf_error_set(GF_E_FORMAT,
                            "%s: header (file offsets 8 .. %" PRIu64 ") is not valid JSON: %s "
                            "(header line %d, column %d, file offset %" PRIu64 ")",
                            path, st->data_start, err.text, err.line, err.column,
                            (uint64_t)8 + (uint64_t)(err.position > 0 ? err.position : 0));
    gf_status s = GF_OK;
    if (!json_is_object(root)) {
        s = gf_error_set(GF_E_FORMAT, "%s: header (file offset 8) is %s, expected a JSON object", path,
                         json_type_name(root));
        goto out;
    }
    size_t n = json_object_size(root);
    st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
    st->by_name = calloc(n ? n : 1, sizeof *st->by_name);
    if (!st->tensors || !st->by_name) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory reading the header", path);
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!strcmp(key, "__metadata__")) {
            if ((s = parse_metadata(st, val)) != GF_OK)
                goto out;
            continue;
        }
        gf_st_tensor *t = &st->tensors[st->n_tensors];
        memset(t, 0, sizeof *t);
        if ((s = parse_tensor(st, key, val, t)) != GF_OK)
            goto out;
        if (!(t->name = strdup(key))) {
            s = gf_error_set(GF_E_NOMEM, "%s: out of memory reading the header", path);
            goto out;
        }
        st->by_name[st->n_tensors] = t;
        st->n_tensors++;
    }

    /* No two tensors may share bytes. Zero-byte tensors occupy nothing. */
    if (st->n_tensors > 1) {
        const gf_st_tensor **ord = malloc(st->n_tensors * sizeof *ord);
        if (!ord) {
            s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
            goto out;
        }
        size_t m = 0;
        for (size_t i = 0; i < st->n_tensors; i++)
            if (st->tensors[i].nbytes)
                ord[m++] = &st->tensors[i];
        qsort(ord, m, sizeof *ord, cmp_by_offset);
        for (size_t i = 1; i < m; i++) {
            const gf_st_tensor *a = ord[i - 1], *b = ord[i];
            uint64_t a_end = a->offset + a->nbytes;
            if (a_end > b->offset) {
                uint64_t ov_end = a_end < b->offset + b->nbytes ? a_end : b->offset + b->nbytes;
                s = gf_error_set(GF_E_FORMAT,
                                 "%s: tensors '%.200s' (data_offsets [%" PRIu64 ", %" PRIu64
                                 "]) and '%.200s' (data_offsets [%" PRIu64 ", %" PRIu64
                                 "]) overlap in data bytes [%" PRIu64 ", %" PRIu64 ") (file offsets %" PRIu64
                                 " .. %" PRIu64 ")",
                                 path, a->name, a->offset - st->data_start, a_end - st->data_start, b->name,
                                 b->offset - st->data_start, b->offset + b->nbytes - st->data_start,
                                 b->offset - st->data_start, ov_end - st->data_start, b->offset, ov_end);
                free(ord);
                goto out;
            }
        }
        free(ord);
    }
    qsort(st->by_name, st->n_tensors, sizeof *st->by_name, cmp_by_name);
out:
    json_decref(root);
    return s;
}

gf_status gf_safetensors_open(const char *path, gf_safetensors **st_out)
{
    if (!path || !st_out)
        return gf_error_set(GF_E_INVALID_ARG, "gf_safetensors_open: NULL argument");
    *st_out = NULL;
    gf_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
    }
    gf_status s = GF_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block us */
    if (fd < 0) {
        s = gf_error_set(GF_E_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        s = gf_error_set(GF_E_IO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        s = gf_error_set(GF_E_IO, "%s: not a regular file", path);
        close(fd);
        goto fail;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    if (fsize < 8) {
        s = gf_error_set(GF_E_FORMAT,
                         "%s: file is %" PRIu64 " bytes, too short for a safetensors file (it "
                         "starts with an 8-byte header length)",
                         path, fsize);
        close(fd);
        goto fail;
    }
    if (fsize > (uint64_t)SIZE_MAX) {
        s = gf_error_set(GF_E_UNSUPPORTED, "%s: file of %" PRIu64 " bytes is too large to map", path, fsize);
        close(fd);
        goto fail;
    }
    st->map_size = (size_t)fsize;
    /* private and writable: the loader hands F32 tensors to backends as views,
     * and a backend that writes into one (the caller's read-only weights)
     * changes only its process's copy-on-write page, which the model_load
     * guard reports (engine/guard.c); the file is never written */
    void *map = mmap(NULL, st->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        s = gf_error_set(GF_E_IO, "%s: cannot mmap %zu bytes: %s", path, st->map_size, strerror(map_errno));
        goto fail;
    }
    st->map = map;

    const unsigned char *p = map;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | p[i];
    st->header_len = n;
    if (n > GF_ST_MAX_HEADER) {
        s = gf_error_set(GF_E_FORMAT,
                         "%s: header length %" PRIu64 " (u64 little-endian at file offset 0) "
                         "exceeds the %" PRIu64 "-byte limit; not a safetensors file?",
                         path, n, GF_ST_MAX_HEADER);
        goto fail;
    }
    if (n > fsize - 8) {
        s = gf_error_set(GF_E_FORMAT,
                         "%s: header length %" PRIu64 " (u64 little-endian at file offset 0) "
                         "runs past the end of the file: 8 + %" PRIu64 " = %" PRIu64 " > file size %" PRIu64
                         " (truncated file?)",
                         path, n, n, 8 + n, fsize);
        goto fail;
    }
    st->data_start = 8 + n;
    st->data_size = fsize - 8 - n;
    if ((s = parse_header(st, (const char *)p + 8)) != GF_OK)
        goto fail;
    *st_out = st;
    return GF_OK;
fail:
    gf_safetensors_close(st);
    return s;
}

const char *gf_safetensors_path(const gf_safetensors *st) { return st ? st->path : NULL; }

size_t gf_safetensors_count(const gf_safetensors *st) { return st ? st->n_tensors : 0; }

const gf_st_tensor *gf_safetensors_at(const gf_safetensors *st, size_t i)
{
    return st && i < st->n_tensors ? &st->tensors[i] : NULL;
}

const gf_st_tensor *gf_safetensors_find(const gf_safetensors *st, const char *name)
{
    if (!st || !name)
        return NULL;
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->by_name[mid]->name);
        if (!c)
            return st->by_name[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *gf_safetensors_meta(const gf_safetensors *st, const char *key)
{
    if (!st || !key)
        return NULL;
    for (size_t i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta_keys[i], key))
            return st->meta_values[i];
    return NULL;
}

size_t gf_safetensors_meta_count(const gf_safetensors *st) { return st ? st->n_meta : 0; }

void gf_safetensors_meta_at(const gf_safetensors *st, size_t i, const char **key, const char **value)
{
    const char *k = NULL, *v = NULL;
    if (st && i < st->n_meta) {
        k = st->meta_keys[i];
        v = st->meta_values[i];
    }
    if (key)
        *key = k;
    if (value)
        *value = v;
}
