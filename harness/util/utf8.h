/* Text from outside genfence (backend messages and last_error, a child's
 * stderr, case text) made valid UTF-8 before it goes into a report: jansson
 * refuses an invalid string (json_string returns NULL and the field is lost)
 * and an XML parser refuses the whole file.
 *
 * The repair keeps every valid character and writes each byte that is not
 * part of one as the four ASCII characters \xNN (NN: two uppercase hex
 * digits), so "ab\xff" (3 bytes) reads "ab\xFF" (6 characters). Invalid:
 * a stray continuation byte, a lead byte without its continuations, an
 * overlong form, a surrogate (U+D800..U+DFFF), anything above U+10FFFF, and
 * NUL (in counted text). A backslash already in the text is kept as is. */
#ifndef GENFENCE_HARNESS_UTF8_H
#define GENFENCE_HARNESS_UTF8_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* The length (1..4) of the valid UTF-8 sequence at s (n bytes available),
 * its code point in *cp (may be NULL); 0 if the byte at s starts none. */
size_t gf_utf8_seq(const char *s, size_t n, uint32_t *cp);
/* Is s[0..n) valid UTF-8 without NUL? (the grammar: the engine's
 * gf_utf8_valid_prefix, genfence/util.h, which allows NUL) */
int gf_utf8_valid(const char *s, size_t n);
/* Where a tail cut at an arbitrary byte offset starts its first whole
 * character: past at most 3 leading continuation bytes (0 if none). */
size_t gf_utf8_tail_start(const char *s, size_t n);
/* The longest prefix of s[0..n) (n or less) that does not end inside a
 * character: a head cut at an arbitrary byte offset, cut back to a boundary. */
size_t gf_utf8_head_len(const char *s, size_t n);
/* Append s[0..n) repaired (above) to b. */
void gf_utf8_repair_into(gf_buf *b, const char *s, size_t n);
/* s[0..n) repaired, malloc'd and NUL-terminated; NULL when out of memory. */
char *gf_utf8_repair(const char *s, size_t n);

/* A JSON string of the repaired text: never NULL for a non-NULL s (NULL s:
 * JSON null). textn: counted (embedded NUL written as \x00). */
json_t *gf_json_text(const char *s);
json_t *gf_json_textn(const char *s, size_t n);

#endif
