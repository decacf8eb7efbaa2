/* Strict parsers for command-line values: the whole string must parse. */
#ifndef GENFENCE_HARNESS_PARSE_H
#define GENFENCE_HARNESS_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/status.h"

/* 1 when s is an integer in [lo, hi] (stored in *out), else 0. */
int gf_parse_int(const char *s, long lo, long hi, long *out);
/* 1 when s is a number (stored in *out), else 0. */
int gf_parse_double(const char *s, double *out);
/* "1,2,3" into a malloc'd array; GF_E_INVALID_ARG naming the bad item. */
gf_status gf_parse_ids(const char *s, int32_t **ids_out, size_t *n_out);
/* "8G", "512M", "1.5GiB", "0" / "none" (no limit) into bytes: 1, or 0 when s is not a size. */
int gf_parse_size(const char *s, unsigned long long *out);

#endif
