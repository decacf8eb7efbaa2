/* Small helpers the engine defines once and the harness calls too (in-tree,
 * not installed): a path joined, a size cap read from the environment, and
 * strict UTF-8 validity. */
#ifndef GENFENCE_UTIL_H
#define GENFENCE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "dir/file", malloc'd (NULL when out of memory); engine/util.c */
char *gf_path_join(const char *dir, const char *file);

/* $name as a positive decimal integer, else dflt: the loaders' and the case
 * reader's caps (GENFENCE_MAX_VOCAB, GENFENCE_MAX_TENSOR_BYTES,
 * GENFENCE_YAML_MAX_BYTES, GENFENCE_MAX_CASES, GENFENCE_CASE_MAX_BYTES, ...);
 * engine/util.c */
uint64_t gf_env_limit(const char *name, uint64_t dflt);

/* Length of the longest valid (strict: no overlongs, surrogates or > U+10FFFF)
 * UTF-8 prefix of s; n when all of s is valid (a NUL byte is valid UTF-8);
 * engine/utf8_stream.c, the one UTF-8 grammar */
size_t gf_utf8_valid_prefix(const uint8_t *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
