/* genfence status codes and error messages.
 *
 * Every fallible function returns a gf_status. On failure it also leaves a
 * human-readable message (naming the file, tensor, offset, ... it could) in a
 * thread-local buffer, read with gf_error_msg(). Callers that add context use
 * gf_error_prefix(). */
#ifndef GENFENCE_STATUS_H
#define GENFENCE_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, text) -- the one list all codes come from. */
#define GF_STATUS_LIST(X)                                 \
    X(GF_OK, 0, "ok")                                     \
    X(GF_E_INVALID_ARG, 1, "invalid argument")            \
    X(GF_E_NOMEM, 2, "out of memory")                     \
    X(GF_E_IO, 3, "I/O error")                            \
    X(GF_E_FORMAT, 4, "malformed input")                  \
    X(GF_E_UNSUPPORTED, 5, "unsupported")                 \
    X(GF_E_UNAVAILABLE, 6, "unavailable on this machine") \
    X(GF_E_CONTEXT_LIMIT, 7, "context limit reached")     \
    X(GF_E_ABI, 8, "backend ABI mismatch")                \
    X(GF_E_BACKEND, 9, "backend failure")                 \
    X(GF_E_NOT_FOUND, 10, "not found")                    \
    X(GF_E_INTERNAL, 11, "internal error")

typedef enum gf_status {
#define GF_X_ENUM(name, value, text) name = value,
    GF_STATUS_LIST(GF_X_ENUM)
#undef GF_X_ENUM
} gf_status;

/* "ok", "malformed input", ...; "unknown status" for values outside the list. */
const char *gf_status_str(gf_status s);

/* Record a message for the current thread and return `s` (so: return gf_error_set(...)). */
gf_status gf_error_set(gf_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepend "context: " to the current message; returns `s`. The context's
 * first segment is said once: "generate: step 3" before "generate: prefill
 * ..." gives "generate: step 3: prefill ...". */
gf_status gf_error_prefix(gf_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* msg past any leading "SEG: " where SEG is prefix's first segment (the text
 * before its first ": ", or all of it). */
const char *gf_error_unprefixed(const char *msg, const char *prefix);
/* The current thread's last message ("" if none). Valid until the next set. */
const char *gf_error_msg(void);
void gf_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
