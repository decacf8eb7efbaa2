/* safetensors: a tensor's data converted to F32, and the writer. The format,
 * the reader (mmap, the header validated before use) and the dtype table are
 * in safetensors.c.
 *
 * Tensor data is little-endian; like safetensors.c, this file assumes a
 * little-endian host for the element conversions and for the bytes the writer
 * copies; the 8-byte header length is encoded byte by byte. */
#include "genfence/safetensors.h"
#include "model_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "genfence's safetensors code assumes a little-endian host"
#endif

/* -------------------------------------------------------------- conversion */

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary16 -> binary32, exact (every half is a float). */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf / NaN: keep the payload, quiet bit included */
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: man x 2^-24, exact in float */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13)); /* 127 - 15 = 112 */
}

gf_status gf_st_tensor_to_f32(const gf_safetensors *st, const gf_st_tensor *t, float *dst)
{
    const char *path = st ? gf_safetensors_path(st) : "safetensors";
    if (!t || (!dst && t->nbytes))
        return gf_error_set(GF_E_INVALID_ARG, "gf_st_tensor_to_f32: NULL argument");
    int64_t n = gf_st_tensor_numel(t);
    const unsigned char *src = t->data;
    switch (t->dtype) {
    case GF_DT_F32:
        if (n)
            memcpy(dst, src, (size_t)n * sizeof(float));
        return GF_OK;
    case GF_DT_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = f16_to_f32(h);
        }
        return GF_OK;
    case GF_DT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = f32_from_bits((uint32_t)h << 16);
        }
        return GF_OK;
    case GF_DT_F64:
        for (int64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            /* round to nearest even; beyond the float range -> +-inf (IEEE) */
            if (d != d)
                dst[i] = (float)d;
            else if (d > (double)FLT_MAX || d < -(double)FLT_MAX) {
                /* values within half an ulp above FLT_MAX round down to it */
                const double lim = 0x1.ffffffp+127; /* FLT_MAX + ulp/2 */
                if (d >= lim)
                    dst[i] = (float)__builtin_inf();
                else if (d <= -lim)
                    dst[i] = -(float)__builtin_inf();
                else
                    dst[i] = d > 0 ? FLT_MAX : -FLT_MAX;
            } else
                dst[i] = (float)d;
        }
        return GF_OK;
    default:
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: tensor '%.200s' has dtype %s; only F32, F16, BF16 and F64 "
                            "convert to F32",
                            path, t->name ? t->name : "?", gf_dtype_name(t->dtype));
    }
}

/* ------------------------------------------------------------------ writer */

static gf_status write_all(int fd, const void *buf, size_t len, const char *tmp)
{
    const unsigned char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return gf_error_set(GF_E_IO, "%s: write failed: %s", tmp, strerror(errno));
        }
        p += w;
        len -= (size_t)w;
    }
    return GF_OK;
}

gf_status gf_safetensors_write(const char *path, const gf_st_write_tensor *tensors, size_t n,
                               const char *const *meta_keys, const char *const *meta_values, size_t n_meta)
{
    if (!path || (n && !tensors) || (n_meta && (!meta_keys || !meta_values)))
        return gf_error_set(GF_E_INVALID_ARG, "gf_safetensors_write: NULL argument");

    gf_status s = GF_OK;
    json_t *root = json_object();
    char *hdr = NULL;
    uint64_t *sizes = calloc(n ? n : 1, sizeof *sizes);
    char *tmp = NULL;
    int fd = -1;
    if (!root || !sizes) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if (n_meta) {
        json_t *meta = json_object();
        if (!meta || json_object_set_new(root, "__metadata__", meta)) {
            s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
            goto out;
        }
        for (size_t i = 0; i < n_meta; i++) {
            if (!meta_keys[i] || !meta_values[i]) {
                s = gf_error_set(GF_E_INVALID_ARG, "%s: metadata entry %zu is NULL", path, i);
                goto out;
            }
            json_t *v = json_string(meta_values[i]);
            if (!v || json_object_set_new(meta, meta_keys[i], v)) {
                s = gf_error_set(GF_E_INVALID_ARG, "%s: metadata '%.200s' is not valid UTF-8 (or out of memory)", path,
                                 meta_keys[i]);
                goto out;
            }
        }
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const gf_st_write_tensor *t = &tensors[i];
        if (!t->name || !strcmp(t->name, "__metadata__")) {
            s = gf_error_set(GF_E_INVALID_ARG, "%s: tensor %zu: %s", path, i,
                             t->name ? "the name '__metadata__' is reserved" : "NULL name");
            goto out;
        }
        if (json_object_get(root, t->name)) {
            s = gf_error_set(GF_E_INVALID_ARG, "%s: tensor '%.200s' given twice", path, t->name);
            goto out;
        }
        size_t esz = gf_dtype_size(t->dtype);
        if (!esz) {
            s = gf_error_set(GF_E_INVALID_ARG, "%s: tensor '%.200s': unknown dtype %d", path, t->name, (int)t->dtype);
            goto out;
        }
        if (t->ndim < 0 || t->ndim > GF_ST_MAX_DIMS) {
            s = gf_error_set(GF_E_INVALID_ARG, "%s: tensor '%.200s': ndim %d outside [0, %d]", path, t->name,
                             (int)t->ndim, GF_ST_MAX_DIMS);
            goto out;
        }
        uint64_t nb = esz;
        json_t *shape = json_array();
        json_t *ent = json_object();
        json_t *offs = json_array();
        if (!shape || !ent || !offs) {
            json_decref(shape);
            json_decref(ent);
            json_decref(offs);
            s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
            goto out;
        }
        json_object_set_new(ent, "dtype", json_string(gf_dtype_name(t->dtype)));
        json_object_set_new(ent, "shape", shape);
        json_object_set_new(ent, "data_offsets", offs);
        if (json_object_set_new(root, t->name, ent)) {
            s = gf_error_set(GF_E_INVALID_ARG, "%s: tensor %zu: name is not valid UTF-8 (or out of memory)", path, i);
            goto out;
        }
        for (int32_t d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || __builtin_mul_overflow(nb, (uint64_t)t->shape[d], &nb)) {
                s = gf_error_set(GF_E_INVALID_ARG, "%s: tensor '%.200s': bad dimension %d (%" PRId64 ")", path, t->name,
                                 (int)d, t->shape[d]);
                goto out;
            }
            json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
        }
        if (nb && !t->data) {
            s = gf_error_set(GF_E_INVALID_ARG, "%s: tensor '%.200s': NULL data", path, t->name);
            goto out;
        }
        if (nb > (uint64_t)INT64_MAX || off + nb < off || off + nb > (uint64_t)INT64_MAX) {
            s = gf_error_set(GF_E_INVALID_ARG, "%s: tensor '%.200s': too large", path, t->name);
            goto out;
        }
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + nb)));
        sizes[i] = nb;
        off += nb;
    }

    hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!hdr) {
        s = gf_error_set(GF_E_NOMEM, "%s: cannot serialize the header", path);
        goto out;
    }
    size_t hlen = strlen(hdr);
    size_t padded = (hlen + 7) / 8 * 8; /* pad with spaces so the data starts 8-aligned */
    char *h2 = realloc(hdr, padded + 1);
    if (!h2) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    hdr = h2;
    memset(hdr + hlen, ' ', padded - hlen);
    hdr[padded] = '\0';

    size_t tlen = strlen(path) + 32;
    if (!(tmp = malloc(tlen))) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", path);
        goto out;
    }
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        s = gf_error_set(GF_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)(((uint64_t)padded >> (8 * i)) & 0xff);
    if ((s = write_all(fd, lenbuf, 8, tmp)) != GF_OK || (s = write_all(fd, hdr, padded, tmp)) != GF_OK)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (sizes[i] && (s = write_all(fd, tensors[i].data, (size_t)sizes[i], tmp)) != GF_OK)
            goto out;
    if (fsync(fd) != 0) {
        s = gf_error_set(GF_E_IO, "%s: fsync failed: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        s = gf_error_set(GF_E_IO, "%s: close failed: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        s = gf_error_set(GF_E_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        goto out;
    }
out:
    if (fd >= 0)
        close(fd);
    if (s != GF_OK && tmp)
        unlink(tmp);
    free(tmp);
    free(hdr);
    free(sizes);
    json_decref(root);
    return s;
}
