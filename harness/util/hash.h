/* Hashes for goldens (docs/goldens.md), identical to tools/reference/golden.py:
 *   case hash  = sha256(canonical JSON of the case without comparison-only keys)
 *   model hash = sha256("<sha256 config.json>\n<sha256 model.safetensors>\n<sha256 tokenizer.json>\n") */
#ifndef GENFENCE_HASH_H
#define GENFENCE_HASH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "genfence/status.h"

typedef struct gf_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t n;
} gf_sha256;

void gf_sha256_init(gf_sha256 *s);
void gf_sha256_update(gf_sha256 *s, const void *data, size_t len);
void gf_sha256_hex(gf_sha256 *s, char hex_out[65]); /* finalises */
void gf_sha256_of(const void *data, size_t len, char hex_out[65]);
gf_status gf_sha256_file(const char *path, char hex_out[65]);

/* Canonical JSON: keys sorted by bytes, no whitespace, integers in decimal,
 * reals as the shortest %.{p}g that round-trips (".0" appended when it reads
 * as an integer), NaN / Infinity / -Infinity, strings with only '"', '\\' and
 * control characters escaped; {"$float": "NaN"} objects as bare tokens (below).
 * malloc'd result. */
char *gf_canonical_json(const json_t *v);

/* A case tree holds a non-finite float (which JSON cannot) as the object
 * {"$float": "NaN" | "Infinity" | "-Infinity"}; the canonical JSON writes it
 * as that bare token, as it writes a non-finite real. Returns the token, or
 * NULL when v is not such an object. */
const char *gf_json_nonfinite(const json_t *v);

/* The keys a case hash leaves out: comparing, not generating. */
int gf_hash_key_excluded(const char *key);

/* hex digests (65 bytes with NUL) */
gf_status gf_case_hash(const json_t *case_obj, char hex_out[65]);
gf_status gf_model_hash(const char *model_dir, char hex_out[65]);

#endif
