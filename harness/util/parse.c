/* Strict parsers for command-line values. */
#include "parse.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int gf_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

int gf_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return 0;
    *out = v;
    return 1;
}

gf_status gf_parse_ids(const char *s, int32_t **ids_out, size_t *n_out)
{
    *ids_out = NULL;
    *n_out = 0;
    size_t cap = 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            free(ids);
            return gf_error_set(GF_E_INVALID_ARG,
                                "bad token id list '%s' at character %td: expected "
                                "non-negative integers separated by commas",
                                s, p - s);
        }
        if (n == cap) {
            int32_t *grown = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!grown) {
                free(ids);
                return gf_error_set(GF_E_NOMEM, "out of memory");
            }
            ids = grown;
        }
        ids[n++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (n == 0) {
        free(ids);
        return gf_error_set(GF_E_INVALID_ARG, "empty token id list");
    }
    *ids_out = ids;
    *n_out = n;
    return GF_OK;
}

int gf_parse_size(const char *s, unsigned long long *out)
{
    if (!strcmp(s, "none") || !strcmp(s, "0")) {
        *out = 0;
        return 1;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0))
        return 0;
    double mul = 1;
    if (!*end || !strcmp(end, "B"))
        mul = 1;
    else if (!strcmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "k"))
        mul = 1024.0;
    else if (!strcmp(end, "M") || !strcmp(end, "MiB"))
        mul = 1024.0 * 1024;
    else if (!strcmp(end, "G") || !strcmp(end, "GiB"))
        mul = 1024.0 * 1024 * 1024;
    else if (!strcmp(end, "T") || !strcmp(end, "TiB"))
        mul = 1024.0 * 1024 * 1024 * 1024;
    else
        return 0;
    *out = (unsigned long long)(v * mul);
    return 1;
}
