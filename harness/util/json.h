/* JSON output helpers shared by every layer that writes JSON. */
#ifndef GENFENCE_HARNESS_JSON_H
#define GENFENCE_HARNESS_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* JSON string escaping into f. */
void gf_json_write_string(FILE *f, const char *s, size_t len);
/* A finite number with 17 significant digits, or null when not finite. */
void gf_json_write_number(FILE *f, double x);

/* obj[key] = v; a NaN or infinite v becomes null and obj[key + "_reason"] =
 * reason (or "nan" / "+inf" / "-inf" when reason is NULL). */
void gf_json_set_number(json_t *obj, const char *key, double v, const char *reason);
/* A JSON array of the n strings. */
json_t *gf_json_strings(char *const *v, size_t n);
/* A JSON array of doubles, non-finite entries as null. */
json_t *gf_json_doubles(const double *v, size_t n);
json_t *gf_json_ints(const int32_t *v, size_t n);

#endif
