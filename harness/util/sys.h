/* Process and file-system helpers. */
#ifndef GENFENCE_HARNESS_SYS_H
#define GENFENCE_HARNESS_SYS_H

#include <stddef.h>

/* Monotonic seconds. */
double gf_now_s(void);
/* Online CPUs this process may use (affinity), at least 1. */
int gf_cpu_count(void);
/* The CPU's name from /proc/cpuinfo ("model name" on x86, "Hardware" on
 * arm) into buf: 1, or 0 with buf "" when there is none. */
int gf_cpu_model(char *buf, size_t cap);
/* Write data to path atomically (temporary file + rename); 0 ok, -1 with errno. */
int gf_write_atomic(const char *path, const char *data, size_t len);
/* s single-quoted for a POSIX shell when it needs it, into dst (cap bytes). */
void gf_shell_quote(char *dst, size_t cap, const char *s);
/* "^id$" with every '.' escaped: a --filter that selects exactly one case id. */
void gf_id_regex(char *dst, size_t cap, const char *id);

#endif
