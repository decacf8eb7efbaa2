/* The exec backend's wire layer (exec_wire.h, docs/protocol.md). */
#define _GNU_SOURCE
#include "exec_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { GX_ERR_MSG_MAX = 65536 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- command line ---- */

gf_status gx_split_argv(const char *line, char ***argv_out, int *argc_out)
{
    *argv_out = NULL;
    *argc_out = 0;
    if (!line)
        return gf_error_set(GF_E_INVALID_ARG, "exec: no command (use --backend 'exec:PROGRAM ARGS...')");
    size_t n = strlen(line);
    /* at most n/2 + 1 words; their characters and NULs fit in n + 1 + words */
    size_t max_words = n / 2 + 2;
    char **argv = malloc(max_words * sizeof *argv + 2 * n + 2);
    if (!argv)
        return gf_error_set(GF_E_NOMEM, "exec: out of memory");
    char *out = (char *)(argv + max_words);
    int argc = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        argv[argc++] = out;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
            if (*p == '\'') {
                const char *q = strchr(p + 1, '\'');
                if (!q) {
                    free(argv);
                    return gf_error_set(GF_E_INVALID_ARG, "exec: unterminated ' in the command '%s'", line);
                }
                memcpy(out, p + 1, (size_t)(q - p - 1));
                out += q - p - 1;
                p = q + 1;
            } else if (*p == '"') {
                p++;
                while (*p && *p != '"') {
                    if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                        p++;
                    *out++ = *p++;
                }
                if (*p != '"') {
                    free(argv);
                    return gf_error_set(GF_E_INVALID_ARG, "exec: unterminated \" in the command '%s'", line);
                }
                p++;
            } else if (*p == '\\') {
                if (!p[1]) {
                    free(argv);
                    return gf_error_set(GF_E_INVALID_ARG, "exec: trailing backslash in the command '%s'", line);
                }
                *out++ = p[1];
                p += 2;
            } else {
                *out++ = *p++;
            }
        }
        *out++ = '\0';
    }
    if (argc == 0) {
        free(argv);
        return gf_error_set(GF_E_INVALID_ARG, "exec: empty command (use --backend 'exec:PROGRAM ARGS...')");
    }
    argv[argc] = NULL;
    *argv_out = argv;
    *argc_out = argc;
    return GF_OK;
}

/* ---- the child ---- */

static void drain_stderr(gx_conn *c)
{
    char tmp[4096];
    while (c->err_fd >= 0) {
        ssize_t r = read(c->err_fd, tmp, sizeof tmp);
        if (r > 0) {
            ssize_t w = write(STDERR_FILENO, tmp, (size_t)r); /* pass it through */
            (void)w;
            for (ssize_t i = 0; i < r; i++) {
                c->err_tail[c->err_pos] = tmp[i];
                c->err_pos = (c->err_pos + 1) % sizeof c->err_tail;
                if (c->err_used < sizeof c->err_tail)
                    c->err_used++;
            }
        } else if (r == 0) {
            close(c->err_fd);
            c->err_fd = -1;
        } else if (errno != EINTR) {
            break; /* EAGAIN: nothing more now */
        }
    }
}

/* The last line(s) of the child's stderr, at most cap - 1 bytes, newlines as " | ". */
static void stderr_tail(const gx_conn *c, char *out, size_t cap)
{
    char lin[sizeof c->err_tail + 1];
    size_t n = c->err_used, start = (c->err_pos + sizeof c->err_tail - n) % sizeof c->err_tail;
    for (size_t i = 0; i < n; i++)
        lin[i] = c->err_tail[(start + i) % sizeof c->err_tail];
    while (n && (lin[n - 1] == '\n' || lin[n - 1] == ' ' || lin[n - 1] == '\r'))
        n--;
    lin[n] = '\0';
    size_t keep = cap > 1 ? cap - 1 : 0, from = n > keep ? n - keep : 0;
    size_t j = 0;
    for (size_t i = from; i < n && j + 3 < cap; i++) {
        if (lin[i] == '\n') {
            memcpy(out + j, " | ", 3);
            j += 3;
        } else if (lin[i] != '\r') {
            out[j++] = lin[i];
        }
    }
    if (cap)
        out[j < cap ? j : cap - 1] = '\0';
}

gf_status gx_spawn(gx_conn *c, char *const *argv, double timeout_s)
{
    memset(c, 0, sizeof *c);
    c->sock = c->err_fd = -1;
    /* for messages: the basenames of the first two words ("python transformers_backend.py") */
    const char *a0 = strrchr(argv[0], '/'), *a1 = argv[1] ? strrchr(argv[1], '/') : NULL;
    a0 = a0 ? a0 + 1 : argv[0];
    a1 = a1 ? a1 + 1 : argv[1];
    snprintf(c->prog, sizeof c->prog, "%.60s%s%.60s", a0, a1 ? " " : "", a1 ? a1 : "");
    if (timeout_s <= 0) {
        const char *env = getenv("GENFENCE_EXEC_TIMEOUT");
        char *end = NULL;
        double t = env && env[0] ? strtod(env, &end) : 0.0;
        timeout_s = end && *end == '\0' && t > 0 && isfinite(t) ? t : 60.0;
    }
    c->timeout_s = timeout_s;
    int sv[2] = {-1, -1}, ep[2] = {-1, -1}, xp[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(ep, O_CLOEXEC) != 0 ||
        pipe2(xp, O_CLOEXEC) != 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (sv[i] >= 0)
                close(sv[i]);
            if (ep[i] >= 0)
                close(ep[i]);
            if (xp[i] >= 0)
                close(xp[i]);
        }
        return gf_error_set(GF_E_UNAVAILABLE, "exec: cannot make pipes: %s", strerror(e));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* the child: own process group, dies with us, fds 0/1 the socket, 2 the pipe */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0 || dup2(ep[1], 2) < 0)
            _exit(127);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(xp[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    int fork_errno = errno;
    close(sv[1]);
    close(ep[1]);
    close(xp[1]);
    if (pid < 0) {
        close(sv[0]);
        close(ep[0]);
        close(xp[0]);
        return gf_error_set(GF_E_UNAVAILABLE, "exec: fork: %s", strerror(fork_errno));
    }
    setpgid(pid, pid); /* as the child does, whoever runs first */
    c->pid = pid;
    c->sock = sv[0];
    c->err_fd = ep[0];
    fcntl(c->err_fd, F_SETFL, fcntl(c->err_fd, F_GETFL) | O_NONBLOCK);
    int exec_errno = 0;
    ssize_t r;
    do
        r = read(xp[0], &exec_errno, sizeof exec_errno);
    while (r < 0 && errno == EINTR);
    close(xp[0]);
    if (r == (ssize_t)sizeof exec_errno) {
        gx_close(c, 0);
        return gf_error_set(GF_E_UNAVAILABLE, "exec: cannot run '%s': %s", argv[0], strerror(exec_errno));
    }
    return GF_OK;
}

static void kill_child(gx_conn *c, double grace_s)
{
    if (grace_s <= 0 && c->pid > 0) { /* at once: before it sees EOF and has its say on stderr */
        kill(-c->pid, SIGKILL);
        kill(c->pid, SIGKILL);
    }
    if (c->sock >= 0) {
        close(c->sock);
        c->sock = -1;
    }
    if (c->pid <= 0)
        return;
    /* give it grace_s to leave on its own (EOF on stdin), not reaping yet so
     * the process group id stays ours until the group is killed */
    double until = now_s() + grace_s;
    siginfo_t si;
    for (;;) {
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == c->pid)
            break;
        if (now_s() >= until)
            break;
        drain_stderr(c);
        usleep(5000);
    }
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
    while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    c->pid = 0;
    drain_stderr(c);
}

void gx_close(gx_conn *c, double grace_s)
{
    if (!c)
        return;
    kill_child(c, grace_s);
    if (c->err_fd >= 0) {
        close(c->err_fd);
        c->err_fd = -1;
    }
    free(c->buf);
    c->buf = NULL;
    c->buf_cap = 0;
}

gf_status gx_fail(gx_conn *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!c->dead) {
        c->dead = 1;
        drain_stderr(c); /* what it said before we gave up on it */
        char tail[300];
        stderr_tail(c, tail, sizeof tail);
        kill_child(c, 0);
        snprintf(c->why, sizeof c->why, "exec client '%.100s': %.360s%s%.290s", c->prog, msg,
                 tail[0] ? "; its stderr ended: " : "", tail);
    }
    return gf_error_set(GF_E_BACKEND, "%s", c->why);
}

/* Why the stream ended: wait up to 1 s for the child to exit and say how
 * (not reaping it: gx_fail kills its process group first). */
static gf_status fail_eof(gx_conn *c, const char *what)
{
    double until = now_s() + 1.0;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    while (c->pid > 0) {
        memset(&si, 0, sizeof si);
        int r = waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if ((r == 0 && si.si_pid == c->pid) || (r < 0 && errno != EINTR) || now_s() >= until)
            break;
        drain_stderr(c);
        usleep(5000);
    }
    drain_stderr(c);
    if (si.si_pid == c->pid && c->pid > 0) {
        if (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED)
            return gx_fail(c, "%s: the client was killed by signal %d (%s)", what, si.si_status,
                           strsignal(si.si_status));
        return gx_fail(c, "%s: the client exited with status %d", what, si.si_status);
    }
    return gx_fail(c, "%s: the client closed its stdout", what);
}

/* Wait until the socket is readable (or writable), draining stderr meanwhile. */
static gf_status wait_sock(gx_conn *c, short events, double deadline, const char *what)
{
    for (;;) {
        struct pollfd fds[2] = {{.fd = c->sock, .events = events}, {.fd = c->err_fd, .events = POLLIN}};
        double left = deadline - now_s();
        if (left <= 0)
            return gx_fail(c, "%s: no reply within %.3g s (the client hangs?; GENFENCE_EXEC_TIMEOUT sets the deadline)",
                           what, c->timeout_s);
        int ms = left > 1e6 ? 1000000000 : (int)ceil(left * 1000.0);
        int r = poll(fds, c->err_fd >= 0 ? 2 : 1, ms);
        if (r < 0 && errno != EINTR)
            return gx_fail(c, "%s: poll: %s", what, strerror(errno));
        if (r > 0 && c->err_fd >= 0 && fds[1].revents)
            drain_stderr(c);
        if (r > 0 && fds[0].revents)
            return GF_OK;
    }
}

static gf_status send_all(gx_conn *c, const void *data, size_t n, double deadline, const char *what)
{
    const uint8_t *p = data;
    while (n) {
        gf_status st = wait_sock(c, POLLOUT, deadline, what);
        if (st != GF_OK)
            return st;
        ssize_t w = send(c->sock, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            if (errno == EPIPE || errno == ECONNRESET)
                return fail_eof(c, what);
            return gx_fail(c, "%s: send: %s", what, strerror(errno));
        }
    }
    return GF_OK;
}

static gf_status recv_all(gx_conn *c, void *dst, size_t n, double deadline, const char *what)
{
    uint8_t *p = dst;
    while (n) {
        gf_status st = wait_sock(c, POLLIN, deadline, what);
        if (st != GF_OK)
            return st;
        ssize_t r = recv(c->sock, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r == 0 || (r < 0 && errno == ECONNRESET)) {
            return fail_eof(c, what);
        } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return gx_fail(c, "%s: recv: %s", what, strerror(errno));
        }
    }
    return GF_OK;
}

static const char *op_name(uint32_t op)
{
    static const char *const names[] = {
        "?",          "hello",        "probe",       "info",    "model_load", "cache_create",  "cache_reset",
        "cache_free", "cache_length", "cache_bytes", "forward", "sample",     "forward_trace", "speculate",
        "logprobs"};
    return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

static gf_status grow(gx_conn *c, size_t n)
{
    if (n <= c->buf_cap)
        return GF_OK;
    size_t cap = c->buf_cap ? c->buf_cap : 4096;
    while (cap < n)
        cap *= 2;
    uint8_t *b = realloc(c->buf, cap);
    if (!b)
        return gf_error_set(GF_E_NOMEM, "exec: out of memory for a %zu-byte message", n);
    c->buf = b;
    c->buf_cap = cap;
    return GF_OK;
}

uint8_t *gx_body(gx_conn *c, size_t n) { return grow(c, n ? n : 1) == GF_OK ? c->buf : NULL; }

gf_status gx_request(gx_conn *c, uint32_t op, const void *body, size_t len, uint32_t *len_out)
{
    *len_out = 0;
    if (c->dead)
        return gf_error_set(GF_E_BACKEND, "%s", c->why);
    if (c->sock < 0)
        return gf_error_set(GF_E_BACKEND, "exec client '%s': not running", c->prog);
    if (len > GX_MAX_FRAME)
        return gf_error_set(GF_E_INVALID_ARG, "exec: a %zu-byte %s request exceeds the %u-byte frame limit", len,
                            op_name(op), (unsigned)GX_MAX_FRAME);
    snprintf(c->what, sizeof c->what, "%s", op_name(op));
    uint8_t hdr[8], *p = hdr;
    gx_put_u32(&p, op);
    gx_put_u32(&p, (uint32_t)len);
    double deadline = now_s() + c->timeout_s;
    gf_status st = send_all(c, hdr, sizeof hdr, deadline, c->what);
    if (st == GF_OK && len)
        st = send_all(c, body, len, deadline, c->what);
    if (st == GF_OK)
        st = recv_all(c, hdr, sizeof hdr, deadline, c->what);
    if (st != GF_OK)
        return st;
    const uint8_t *q = hdr;
    uint32_t status = gx_get_u32(&q), n = gx_get_u32(&q);
    if (status > (uint32_t)GF_E_INTERNAL) {
        int text = 1;
        for (size_t i = 0; i < sizeof hdr; i++)
            text &= hdr[i] >= 0x20 && hdr[i] < 0x7f;
        if (text)
            return gx_fail(c,
                           "%s: the client wrote text to stdout (\"%.8s...\") where a reply belongs; "
                           "stdout is the protocol, logs go to stderr",
                           c->what, (const char *)hdr);
        return gx_fail(c, "%s: reply header 0x%08x 0x%08x is not a status and a length (garbage on stdout?)", c->what,
                       status, n);
    }
    if (status != GF_OK) {
        if (n > GX_ERR_MSG_MAX)
            return gx_fail(c, "%s: error reply of %u bytes (at most %u; garbage on stdout?)", c->what, n,
                           (unsigned)GX_ERR_MSG_MAX);
        char *msg = malloc((size_t)n + 1);
        if (!msg)
            return gx_fail(c, "%s: out of memory for the error message", c->what);
        st = recv_all(c, msg, n, now_s() + c->timeout_s, c->what);
        if (st != GF_OK) {
            free(msg);
            return st;
        }
        msg[n] = '\0';
        gf_error_set((gf_status)status, "exec client '%s' (%s): %s", c->prog, c->what,
                     n ? msg : gf_status_str((gf_status)status));
        free(msg);
        return (gf_status)status;
    }
    if (n > GX_MAX_FRAME)
        return gx_fail(c, "%s: reply of %u bytes exceeds the frame limit (garbage on stdout?)", c->what, n);
    *len_out = n;
    return GF_OK;
}

gf_status gx_read_into(gx_conn *c, void *dst, size_t n) { return recv_all(c, dst, n, now_s() + c->timeout_s, c->what); }

gf_status gx_read_body(gx_conn *c, size_t n, const uint8_t **out)
{
    *out = NULL;
    gf_status st = grow(c, n ? n : 1);
    if (st != GF_OK)
        return gx_fail(c, "%s: out of memory for a %zu-byte reply", c->what, n);
    st = gx_read_into(c, c->buf, n);
    if (st == GF_OK)
        *out = c->buf;
    return st;
}

/* ---- little-endian scalars ---- */

void gx_put_u32(uint8_t **p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        (*p)[i] = (uint8_t)(v >> (8 * i));
    *p += 4;
}

void gx_put_u64(uint8_t **p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        (*p)[i] = (uint8_t)(v >> (8 * i));
    *p += 8;
}

void gx_put_f32(uint8_t **p, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    gx_put_u32(p, u);
}

void gx_put_f64(uint8_t **p, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    gx_put_u64(p, u);
}

void gx_put_str(uint8_t **p, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    gx_put_u32(p, (uint32_t)n);
    if (n)
        memcpy(*p, s, n);
    *p += n;
}

uint32_t gx_get_u32(const uint8_t **p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)(*p)[i] << (8 * i);
    *p += 4;
    return v;
}

uint64_t gx_get_u64(const uint8_t **p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)(*p)[i] << (8 * i);
    *p += 8;
    return v;
}
