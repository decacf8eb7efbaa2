/* The exec backend's wire layer: one protocol client as a child process
 * (docs/protocol.md).
 *
 * The child's stdin and stdout are one end of a Unix socketpair (so writing
 * to a dead child is EPIPE, never SIGPIPE in genfence: send(MSG_NOSIGNAL));
 * its stderr is a pipe that every wait drains into a tail buffer (for error
 * messages) and copies to genfence's stderr. The child leads its own process
 * group and gets SIGKILL if the thread that spawned it dies
 * (PR_SET_PDEATHSIG); gx_close kills the whole group.
 *
 * Every reply is awaited with a deadline (gx_conn.timeout_s). Any failure of
 * the wire itself (the child died, hung, wrote garbage or a wrong length)
 * marks the connection dead: the child is killed, the reason is kept in
 * gx_conn.why, and every later call fails at once with that reason. */
#ifndef GENFENCE_EXEC_WIRE_H
#define GENFENCE_EXEC_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "genfence/status.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the exec backend sends arrays in host order: little-endian hosts only"
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GX_PROTOCOL_VERSION = 1,
    GX_MAGIC = 0x50434647u,  /* "GFCP" as LE bytes */
    GX_MAX_FRAME = 1u << 30, /* largest body either side may send */
    GX_FEATURE_SAMPLE = 1u,
    GX_FEATURE_TRACE = 2u,      /* forward_trace (12): the trace slot (docs/protocol.md) */
    GX_FEATURE_INVARIANCE = 4u, /* info's reply ends with str invariance (gf_backend_info.invariance) */
    GX_FEATURE_PROBES = 8u,     /* then str probes (gf_backend_info.probes) */
    GX_FEATURE_SPECULATE = 16u, /* speculate (13): the speculate slot (docs/protocol.md) */
    GX_FEATURE_TRACE_KV = 32u,  /* forward_trace's reply ends with each block's keys and values */
    GX_FEATURE_LOGPROBS = 64u,  /* logprobs (14): the logprobs slot, plain sampler params (docs/protocol.md) */
};

/* request ops (docs/protocol.md, "Messages") */
typedef enum gx_op {
    GX_HELLO = 1,
    GX_PROBE = 2,
    GX_INFO = 3,
    GX_MODEL_LOAD = 4,
    GX_CACHE_CREATE = 5,
    GX_CACHE_RESET = 6,
    GX_CACHE_FREE = 7,
    GX_CACHE_LENGTH = 8,
    GX_CACHE_BYTES = 9,
    GX_FORWARD = 10,
    GX_SAMPLE = 11,
    GX_FORWARD_TRACE = 12,
    GX_SPECULATE = 13,
    GX_LOGPROBS = 14,
} gx_op;

typedef struct gx_conn {
    pid_t pid;        /* the child, leader of its process group; 0 when none */
    int sock;         /* our end: the child's stdin and stdout; -1 when closed */
    int err_fd;       /* read end of the child's stderr; -1 when closed */
    double timeout_s; /* deadline for each reply */
    int dead;         /* the wire failed: why says how */
    char why[1024];
    char prog[128];      /* argv[0], for messages */
    char what[32];       /* the request in flight, for messages */
    char err_tail[2048]; /* the child's last stderr bytes (ring) */
    size_t err_pos, err_used;
    uint8_t *buf; /* request/reply scratch */
    size_t buf_cap;
} gx_conn;

/* Split a command line into words: blanks separate words; '...' is literal;
 * "..." keeps blanks and takes \" \\ as escapes; a backslash outside quotes
 * escapes the next character. No expansion of any kind. *argv_out is one
 * allocation (free it with free), NULL-terminated; *argc_out >= 1. */
gf_status gx_split_argv(const char *line, char ***argv_out, int *argc_out);

/* Start argv as a protocol client. timeout_s <= 0: the default
 * ($GENFENCE_EXEC_TIMEOUT seconds, else 60). On failure c is closed and the
 * message says why (e.g. the exec error). */
gf_status gx_spawn(gx_conn *c, char *const *argv, double timeout_s);

/* End the child: close our end (the client sees EOF), give it grace_s to
 * exit, then SIGKILL its process group; reap it; free buffers. NULL-safe and
 * idempotent. */
void gx_close(gx_conn *c, double grace_s);

/* Scratch for building a request body of n bytes (valid until the next call). */
uint8_t *gx_body(gx_conn *c, size_t n);

/* Send op with body (len bytes; body may be gx_body's buffer) and read the
 * reply header. GF_OK: an ok reply whose body of *len_out bytes is still to
 * be read (gx_read_body / gx_read_into; read all of it). A client error
 * reply: its status, with the client's message recorded (gf_error_set);
 * the connection stays usable. A wire failure: GF_E_BACKEND with the
 * reason, and the connection is dead (gx_fail). */
gf_status gx_request(gx_conn *c, uint32_t op, const void *body, size_t len, uint32_t *len_out);

/* Read n body bytes into dst (or into the scratch when dst is NULL, returned
 * through *out). */
gf_status gx_read_into(gx_conn *c, void *dst, size_t n);
gf_status gx_read_body(gx_conn *c, size_t n, const uint8_t **out);

/* Mark the connection dead with a reason (kills the child); returns GF_E_BACKEND
 * with the message recorded through gf_error_set. */
gf_status gx_fail(gx_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* little-endian scalar helpers (p advances) */
void gx_put_u32(uint8_t **p, uint32_t v);
void gx_put_u64(uint8_t **p, uint64_t v);
void gx_put_f32(uint8_t **p, float v);
void gx_put_f64(uint8_t **p, double v);
void gx_put_str(uint8_t **p, const char *s); /* u32 length + bytes */
uint32_t gx_get_u32(const uint8_t **p);
uint64_t gx_get_u64(const uint8_t **p);

#ifdef __cplusplus
}
#endif
#endif
