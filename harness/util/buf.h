/* A growable byte buffer, always NUL-terminated (for text built piece by
 * piece: canonical JSON, JUnit XML, decoded streams). After a failed
 * allocation it stops growing and sets oom; the caller checks once at the end. */
#ifndef GENFENCE_HARNESS_BUF_H
#define GENFENCE_HARNESS_BUF_H

#include <stddef.h>

typedef struct gf_buf {
    char *p; /* NULL until the first byte */
    size_t n, cap;
    int oom;
} gf_buf;

void gf_buf_put(gf_buf *b, const void *data, size_t n);
void gf_buf_puts(gf_buf *b, const char *s);
void gf_buf_printf(gf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gf_buf_free(gf_buf *b); /* frees p and clears b */

/* A malloc'd string printed by fmt; NULL on OOM. */
char *gf_str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
