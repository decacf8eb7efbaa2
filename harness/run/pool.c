/* The process pool: each task runs in its own child (fork), its own process
 * group, with a watchdog and a memory cap, and answers with one JSON record
 * over a pipe, carrying the random nonce the parent gave it. The parent
 * kills the child's whole group when it exits, times out or the run is
 * interrupted, drains the pipes with a deadline (a helper still holding them
 * cannot hang it), and reads the child's last backend call from a shared
 * page (crash context). docs/harness.md "Isolation", docs/backends.md. */
#define _GNU_SOURCE
#include "runner.h"
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "record.h"
#include "registry.h"
#include "sys.h"

#if defined(__SANITIZE_ADDRESS__)
#define GF_NO_RLIMIT_AS 1 /* AddressSanitizer reserves terabytes of shadow memory */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GF_NO_RLIMIT_AS 1
#endif
#endif

#define ERR_TAIL_MAX 8192
#define RECORD_MAX   (64u << 20)
#define KILL_GRACE_S 5.0
#define DRAIN_S      2.0 /* after the child is gone: how long its pipes may stay open */

/* ---- run-wide state: interruption, the in-process mode ---- */

static volatile sig_atomic_t g_interrupt; /* the signal that interrupted the run, 0: none */
static int g_in_process;
static int g_stop_starting; /* gf_pool_stop_starting: the running finish, nothing more starts */

void gf_pool_stop_starting(int on) { g_stop_starting = on; }

/* The task's whole cap: total_s, or timeout_s when it sets none. */
static double task_total_s(const gf_task *t) { return t->total_s > t->timeout_s ? t->total_s : t->timeout_s; }

static void on_interrupt(int sig)
{
    if (!g_interrupt)
        g_interrupt = sig;
}

int gf_runner_interrupted(void) { return (int)g_interrupt; }
void gf_runner_in_process(int on) { g_in_process = on; }
int gf_runner_is_in_process(void) { return g_in_process; }

const char *gf_signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "signal";
    }
}

/* ---- the crash context (genfence/engine.h gf_call_trace) ---- */

void gf_task_trace_text(const gf_task *t, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!t->has_trace)
        return;
    const gf_call_trace *c = &t->trace;
    char parts[160] = "";
    size_t n = 0;
#define PART(...)                                                                    \
    do {                                                                             \
        if (n < sizeof parts)                                                        \
            n += (size_t)snprintf(parts + n, sizeof parts - n, "%s", n ? ", " : ""); \
        if (n < sizeof parts)                                                        \
            n += (size_t)snprintf(parts + n, sizeof parts - n, __VA_ARGS__);         \
    } while (0)
    if (c->step >= 0)
        PART("step %lld", c->step);
    if (c->B > 0 || c->T > 0)
        PART("B %d, T %d", (int)c->B, (int)c->T);
    if (!strcmp(c->slot, "forward"))
        PART(c->cache_length >= 0 ? "cache length %d" : "uncached", (int)c->cache_length);
#undef PART
    char shapes[180] = "";
    if (parts[0])
        snprintf(shapes, sizeof shapes, " (%s)", parts);
    /* a fault on a guard page of one of forward's buffers: which, how far, the logits mode */
    char hit[400] = "";
    for (int32_t i = 0; c->in_call && c->fault_sig && i < c->n_bufs && i < 4; i++) {
        uintptr_t a = c->fault_addr, lo = c->bufs[i].map_lo, hi = c->bufs[i].map_hi, d = c->bufs[i].data;
        if (a < lo || a >= hi)
            continue;
        if (a >= d + c->bufs[i].n)
            snprintf(hit, sizeof hit, ": a write %llu bytes past %s (%s) hit its guard page; logits mode %s",
                     (unsigned long long)(a - (d + c->bufs[i].n)), c->bufs[i].name, c->bufs[i].shape,
                     c->logits_mode[0] ? c->logits_mode : "?");
        else if (a < d)
            snprintf(hit, sizeof hit, ": a write %llu bytes before %s (%s) hit its guard page; logits mode %s",
                     (unsigned long long)(d - a), c->bufs[i].name, c->bufs[i].shape,
                     c->logits_mode[0] ? c->logits_mode : "?");
        break;
    }
    /* a fault inside a description model_load was given, poisoned once it returned (engine/desc_copy.h) */
    for (int32_t i = 0; !hit[0] && c->fault_sig && i < c->n_poisoned && i < 4; i++)
        if (c->fault_addr >= c->poisoned[i].lo && c->fault_addr < c->poisoned[i].hi)
            snprintf(hit, sizeof hit,
                     ": it read the model description model_load was given (byte %llu of its copy, unmapped once "
                     "model_load returned): backend '%s' kept a pointer into gf_model_desc instead of copying what "
                     "it needs",
                     (unsigned long long)(c->fault_addr - c->poisoned[i].lo), c->poisoned[i].backend);
    if (c->in_call)
        snprintf(buf, cap, " in %s call #%lld%s%s", c->slot, c->call, shapes, hit);
    else if (!strcmp(c->slot, "model_free") && c->threads_after > 1)
        /* nothing of genfence runs a thread: one still there is the backend's (or its libraries') */
        snprintf(buf, cap,
                 " (after %s call #%lld%s had returned, with %d threads still running: a thread the backend started "
                 "outlived model_free)",
                 c->slot, c->call, shapes, (int)c->threads_after);
    else
        snprintf(buf, cap, " (after %s call #%lld%s had returned)%s", c->slot, c->call, shapes, hit);
}

json_t *gf_task_trace_json(const gf_task *t)
{
    if (!t->has_trace)
        return NULL;
    const gf_call_trace *c = &t->trace;
    json_t *o = json_pack("{s:s, s:I, s:b, s:i, s:i, s:I}", "slot", c->slot, "call", (json_int_t)c->call, "in_call",
                          c->in_call != 0, "B", (int)c->B, "T", (int)c->T, "calls_total", (json_int_t)c->calls_total);
    if (!o)
        return NULL;
    json_object_set_new(o, "step", c->step >= 0 ? json_integer((json_int_t)c->step) : json_null());
    json_object_set_new(o, "cache_length", c->cache_length >= 0 ? json_integer(c->cache_length) : json_null());
    if (!strcmp(c->slot, "model_free") && c->threads_after > 0)
        json_object_set_new(o, "threads_after", json_integer(c->threads_after));
    return o;
}

/* ---- child tasks ---- */

/* In the child: a fault the kernel raised (not a raise() or kill) leaves its
 * address in the trace, then the signal is raised again with its default
 * action, so the child still dies of it (the verdict and reason unchanged). */
static gf_call_trace *volatile g_child_trace;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    gf_call_trace *t = g_child_trace;
    if (t && si && si->si_code > 0) {
        t->fault_addr = (uintptr_t)si->si_addr;
        t->fault_sig = sig;
    }
    signal(sig, SIG_DFL);
    raise(sig); /* pending until this returns: then the default action */
}

typedef struct slot {
    size_t task;
    pid_t pid;
    int out_fd, err_fd;
    char *out;
    size_t out_n, out_cap;
    int out_over; /* the record passed RECORD_MAX */
    char err[ERR_TAIL_MAX + 1];
    size_t err_n;
    double start, deadline, drain_deadline;
    double total_deadline; /* start + the task's whole cap + grace (INFINITY: none) */
    double last_progress;  /* when the child's call trace last changed */
    long long seen_calls;  /* the trace's calls_total and in_call as last seen */
    int seen_in_call;
    int killed, reaped, status;
    int killed_over_total; /* the kill was the whole cap's, not a stall's */
    char scratch[512];     /* the child's TMPDIR (pool_scratch.c), removed when it is reaped; "" none */
} slot;

static int write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

static void make_nonce(char *out, size_t cap)
{
    unsigned char b[16];
    ssize_t got = getrandom(b, sizeof b, GRND_NONBLOCK);
    if (got != (ssize_t)sizeof b) { /* no entropy yet: still unique enough for a buggy backend */
        unsigned long long x =
            (unsigned long long)getpid() * 0x9e3779b97f4a7c15ull ^ (unsigned long long)(gf_now_s() * 1e9);
        for (size_t i = 0; i < sizeof b; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
            b[i] = (unsigned char)(x >> 56);
    }
    size_t k = 0;
    for (size_t i = 0; i < sizeof b && k + 2 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%02x", b[i]);
}

static void child_main(gf_task *t, int out_fd, int err_fd, unsigned long long mem, const slot *slots, size_t n_slots,
                       gf_call_trace *trace, pid_t parent, const char *scratch)
{
    setpgid(0, 0); /* its own group: killed as a whole */
    if (scratch[0])
        setenv("TMPDIR", scratch, 1);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent)
        _exit(GF_CHILD_EXIT_NO_RECORD);
    /* orphans of what the backend starts stay below this child while it
     * lives; once it is gone they go to genfence, which kills them */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    for (size_t i = 0; i < n_slots; i++) { /* the other children's pipes */
        if (slots[i].out_fd >= 0)
            close(slots[i].out_fd);
        if (slots[i].err_fd >= 0)
            close(slots[i].err_fd);
    }
    signal(SIGPIPE, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    dup2(err_fd, 2);
    close(err_fd);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        close(devnull);
    }
#ifndef GF_NO_RLIMIT_AS
    if (mem) {
        struct rlimit rl = {.rlim_cur = (rlim_t)mem, .rlim_max = (rlim_t)mem};
        setrlimit(RLIMIT_AS, &rl);
    }
#else
    (void)mem;
#endif
    gf_engine_trace_to(trace);
    g_child_trace = trace;
    struct sigaction fa;
    memset(&fa, 0, sizeof fa);
    fa.sa_sigaction = on_fault;
    fa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&fa.sa_mask);
    sigaction(SIGSEGV, &fa, NULL);
    sigaction(SIGBUS, &fa, NULL);
    if (t->timeout_s > 0) /* the whole cap; a stall is the parent's to see (pool_watch) */
        alarm((unsigned)ceil(task_total_s(t)));
    json_t *r = t->fn(t->arg);
    gf_engine_trace_to(NULL);
    if (r)
        json_object_set_new(r, "nonce", json_string(t->nonce));
    char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;
    if (!s)
        _exit(GF_CHILD_EXIT_NO_RECORD);
    /* one line: the compact dump has no raw newline */
    if (write_all(out_fd, s, strlen(s)) != 0 || write_all(out_fd, "\n", 1) != 0)
        _exit(GF_CHILD_EXIT_WRITE);
    if (close(out_fd) != 0 && errno == EBADF)
        _exit(GF_CHILD_EXIT_WRITE);
    _exit(0);
}

static void slot_close_fds(slot *s)
{
    if (s->out_fd >= 0)
        close(s->out_fd);
    if (s->err_fd >= 0)
        close(s->err_fd);
    s->out_fd = s->err_fd = -1;
}

static int spawn(gf_task *tasks, size_t ti, slot *s, slot *slots, size_t n_slots, unsigned long long mem,
                 gf_call_trace *trace)
{
    gf_task *t = &tasks[ti];
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0) {
        snprintf(t->spawn_err, sizeof t->spawn_err, "pipe: %s", strerror(errno));
        return 0;
    }
    if (pipe2(pe, O_CLOEXEC) < 0) {
        close(po[0]);
        close(po[1]);
        snprintf(t->spawn_err, sizeof t->spawn_err, "pipe: %s", strerror(errno));
        return 0;
    }
    make_nonce(t->nonce, sizeof t->nonce);
    memset((void *)trace, 0, sizeof *trace);
    char scratch[sizeof s->scratch];
    gf_pool_scratch_make(scratch, sizeof scratch);
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(t->spawn_err, sizeof t->spawn_err, "fork: %s", strerror(errno));
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        gf_pool_scratch_remove(scratch);
        return 0;
    }
    if (pid == 0) {
        close(po[0]);
        close(pe[0]);
        /* po[1] keeps O_CLOEXEC: a program the backend execs (an exec
         * client) cannot write to the result pipe; fd 2 is a plain dup */
        child_main(t, po[1], pe[1], mem, slots, n_slots, trace, parent, scratch);
    }
    setpgid(pid, pid); /* also here: no window where a kill of the group misses it */
    close(po[1]);
    close(pe[1]);
    memset(s, 0, sizeof *s);
    s->task = ti;
    s->pid = pid;
    s->out_fd = po[0];
    s->err_fd = pe[0];
    memcpy(s->scratch, scratch, sizeof s->scratch);
    s->start = gf_now_s();
    s->total_deadline = t->timeout_s > 0 ? s->start + task_total_s(t) + KILL_GRACE_S : INFINITY;
    s->last_progress = s->start;
    s->deadline = t->timeout_s > 0 ? fmin(s->start + t->timeout_s, s->total_deadline) : INFINITY;
    if (t->timeout_s > 0 && task_total_s(t) <= t->timeout_s) /* one bound: the child's alarm goes first */
        s->deadline = s->total_deadline;
    s->drain_deadline = INFINITY;
    return 1;
}

/* Read once from fd; returns 1 if data came, 0 if it would block, -1 at EOF
 * or an error (fd closed). */
static int slot_read(slot *s, int fd)
{
    char buf[65536];
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (r <= 0) {
        close(fd);
        if (fd == s->out_fd)
            s->out_fd = -1;
        else
            s->err_fd = -1;
        return -1;
    }
    if (fd == s->out_fd) {
        if (s->out_n + (size_t)r + 1 > s->out_cap && s->out_n + (size_t)r < RECORD_MAX) {
            size_t c = s->out_cap ? s->out_cap : 65536;
            while (c < s->out_n + (size_t)r + 1)
                c *= 2;
            char *g = realloc(s->out, c);
            if (g) {
                s->out = g;
                s->out_cap = c;
            }
        }
        if (s->out_n + (size_t)r + 1 <= s->out_cap) {
            memcpy(s->out + s->out_n, buf, (size_t)r);
            s->out_n += (size_t)r;
            s->out[s->out_n] = '\0';
        } else {
            s->out_over = 1;
        }
    } else {
        size_t n = (size_t)r;
        const char *src = buf;
        if (n > ERR_TAIL_MAX) {
            src += n - ERR_TAIL_MAX;
            n = ERR_TAIL_MAX;
        }
        if (s->err_n + n > ERR_TAIL_MAX) {
            size_t drop = s->err_n + n - ERR_TAIL_MAX;
            memmove(s->err, s->err + drop, s->err_n - drop);
            s->err_n -= drop;
        }
        memcpy(s->err + s->err_n, src, n);
        s->err_n += n;
        s->err[s->err_n] = '\0';
    }
    return 1;
}

/* After the child is gone (its group killed): read what the pipes hold now,
 * without blocking; close the result pipe once it holds a whole line. */
static void slot_drain(slot *s)
{
    for (int guard = 0; s->out_fd >= 0 && guard < 4096; guard++)
        if (slot_read(s, s->out_fd) <= 0)
            break;
    if (s->out_fd >= 0 && s->out_n && s->out[s->out_n - 1] == '\n') {
        close(s->out_fd);
        s->out_fd = -1;
    }
    for (int guard = 0; s->err_fd >= 0 && guard < 4096; guard++)
        if (slot_read(s, s->err_fd) <= 0)
            break;
}

static void reject(gf_task *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reject(gf_task *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->reject_why, sizeof t->reject_why, fmt, ap);
    va_end(ap);
    t->rejected = 1;
}

/* The record as the child sent it: one JSON object on one line, with this
 * task's nonce (removed here). Anything else is refused (t->rejected). */
static void accept_record(gf_task *t, slot *s)
{
    if (!s->out_n)
        return;
    if (s->out_over) {
        reject(t, "larger than %u MiB", RECORD_MAX >> 20);
        return;
    }
    json_error_t je;
    json_t *r = json_loadb(s->out, s->out_n, JSON_ALLOW_NUL, &je);
    if (!r) {
        reject(t, "unparsable (%s, at byte %d of %zu)", je.text, je.position, s->out_n);
        return;
    }
    json_t *nonce = json_is_object(r) ? json_object_get(r, "nonce") : NULL;
    if (!json_is_object(r))
        reject(t, "not a JSON object");
    else if (!json_is_string(nonce))
        reject(t, "it carries no nonce (not written by genfence's child: a forged or stray record)");
    else if (strcmp(json_string_value(nonce), t->nonce))
        reject(t, "wrong nonce (not this child's record)");
    if (t->rejected) {
        json_decref(r);
        return;
    }
    json_object_del(r, "nonce");
    t->record = r;
}

static void slot_finish(slot *s, gf_task *t, const gf_call_trace *trace)
{
    t->seconds = gf_now_s() - s->start;
    t->timed_out = s->killed && !t->interrupted;
    t->over_total = t->timed_out ? s->killed_over_total : (WIFSIGNALED(s->status) && WTERMSIG(s->status) == SIGALRM);
    if (WIFEXITED(s->status)) {
        t->exit_code = WEXITSTATUS(s->status);
        t->signal = 0;
    } else if (WIFSIGNALED(s->status)) {
        t->exit_code = -1;
        t->signal = WTERMSIG(s->status);
    }
    accept_record(t, s);
    memcpy(&t->trace, (const void *)trace, sizeof t->trace);
    t->trace.slot[sizeof t->trace.slot - 1] = '\0';
    t->has_trace = t->trace.slot[0] != '\0';
    if (s->err_n)
        t->err = strdup(s->err);
    free(s->out);
    s->out = NULL;
    gf_pool_scratch_remove(s->scratch); /* its group is dead: nothing writes there any more */
}

static void run_in_process(gf_task *tasks, size_t n, void (*started)(size_t, size_t, size_t, void *),
                           void (*finished)(size_t, size_t, void *), void *user)
{
    for (size_t i = 0; i < n; i++) {
        gf_task *t = &tasks[i];
        if (g_stop_starting) {
            t->not_started = 1;
            continue;
        }
        if (started)
            started(i, 1, i, user);
        double t0 = gf_now_s();
        t->record = t->fn(t->arg);
        t->seconds = gf_now_s() - t0;
        t->exit_code = t->record ? 0 : GF_CHILD_EXIT_NO_RECORD;
        if (finished)
            finished(i, i + 1, user);
    }
}

/* The stall watchdog: progress is a backend call starting or returning (the
 * child's shared call trace changing); the deadline is the last progress
 * plus the task's timeout, never past its whole cap. So a case that makes
 * many short calls on a loaded machine is not killed for the machine's
 * speed, and a call that hangs (or genfence's own code spinning between
 * calls) is killed timeout_s after it began. */
static void pool_watch(slot *s, const gf_task *t, const gf_call_trace *tr, double now)
{
    if (!(t->timeout_s > 0) || task_total_s(t) <= t->timeout_s)
        return; /* no watchdog, or one bound (the whole cap) */
    long long calls = tr->calls_total;
    int in_call = tr->in_call;
    if (calls != s->seen_calls || in_call != s->seen_in_call) {
        s->seen_calls = calls;
        s->seen_in_call = in_call;
        s->last_progress = now;
    }
    s->deadline = fmin(s->last_progress + t->timeout_s, s->total_deadline);
}

/* SIGKILL the child's group (and the child, should it have left it). */
static void kill_group(pid_t pid)
{
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
}

void gf_pool_run(gf_task *tasks, size_t n, int jobs, unsigned long long mem,
                 void (*started)(size_t ti, size_t running, size_t done, void *u),
                 void (*finished)(size_t ti, size_t done, void *u), void *user)
{
    if (g_in_process) {
        run_in_process(tasks, n, started, finished, user);
        return;
    }
    if (jobs < 1)
        jobs = 1;
    slot *slots = calloc((size_t)jobs, sizeof *slots);
    struct pollfd *pfd = calloc((size_t)jobs * 2, sizeof *pfd);
    pid_t *live = calloc((size_t)jobs, sizeof *live);
    size_t trace_bytes = (size_t)jobs * sizeof(gf_call_trace);
    gf_call_trace *traces = mmap(NULL, trace_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!slots || !pfd || !live || traces == MAP_FAILED) {
        for (size_t i = 0; i < n; i++) {
            tasks[i].spawn_failed = 1;
            snprintf(tasks[i].spawn_err, sizeof tasks[i].spawn_err, "out of memory");
        }
        free(slots);
        free(pfd);
        free(live);
        if (traces != MAP_FAILED)
            munmap(traces, trace_bytes);
        return;
    }
    for (int i = 0; i < jobs; i++) {
        slots[i].pid = 0;
        slots[i].out_fd = slots[i].err_fd = -1;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt; /* no SA_RESTART: poll returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    if (old_int.sa_handler == SIG_IGN) /* ignored by whoever started us (an async job): stays so */
        sigaction(SIGINT, &old_int, NULL);
    if (old_term.sa_handler == SIG_IGN)
        sigaction(SIGTERM, &old_term, NULL);
    int prev_reaper = gf_pool_subreaper_begin();
    size_t next = 0, done = 0;
    int running = 0, stopping = 0;
    double last_scan = 0;
    while (done < n) {
        if (g_interrupt && !stopping) { /* kill every group; start nothing more */
            stopping = 1;
            for (int i = 0; i < jobs; i++)
                if (slots[i].pid && !slots[i].reaped) {
                    kill_group(slots[i].pid);
                    slots[i].killed = 1;
                    tasks[slots[i].task].interrupted = 1;
                }
        }
        for (int i = 0; i < jobs && next < n && !stopping && !g_stop_starting; i++) {
            if (slots[i].pid)
                continue;
            size_t ti = next++;
            if (!spawn(tasks, ti, &slots[i], slots, (size_t)jobs, mem, &traces[i])) {
                tasks[ti].spawn_failed = 1;
                done++;
                if (finished)
                    finished(ti, done, user);
                i--; /* try this slot again with the next task */
                continue;
            }
            running++;
            if (started)
                started(ti, (size_t)running, done, user);
        }
        if (!running) {
            if (stopping || g_stop_starting)
                break;
            continue;
        }
        nfds_t np = 0;
        double now = gf_now_s(), wait_s = 0.25;
        for (int i = 0; i < jobs; i++) {
            if (!slots[i].pid)
                continue;
            if (slots[i].out_fd >= 0)
                pfd[np++] = (struct pollfd){.fd = slots[i].out_fd, .events = POLLIN};
            if (slots[i].err_fd >= 0)
                pfd[np++] = (struct pollfd){.fd = slots[i].err_fd, .events = POLLIN};
            double until = slots[i].reaped ? slots[i].drain_deadline : slots[i].deadline;
            if (until - now < wait_s)
                wait_s = until - now;
            if ((slots[i].reaped || (slots[i].out_fd < 0 && slots[i].err_fd < 0)) && wait_s > 0.005)
                wait_s = 0.005; /* exiting or draining: look again soon */
        }
        int ms = wait_s > 0 ? (int)(wait_s * 1000) + 1 : 0;
        if (np)
            poll(pfd, np, ms);
        else
            usleep(ms > 20 ? 20000 : (useconds_t)ms * 1000);
        for (nfds_t p = 0; p < np; p++) {
            if (!(pfd[p].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            for (int i = 0; i < jobs; i++)
                if (slots[i].pid && (slots[i].out_fd == pfd[p].fd || slots[i].err_fd == pfd[p].fd)) {
                    slot_read(&slots[i], pfd[p].fd);
                    break;
                }
        }
        now = gf_now_s();
        int gone = 0;
        for (int i = 0; i < jobs; i++) {
            slot *s = &slots[i];
            if (!s->pid)
                continue;
            if (!s->reaped) {
                /* exited? Look without reaping, so its pid (the group's id)
                 * stays taken while the group is killed. */
                siginfo_t si;
                memset(&si, 0, sizeof si);
                if (waitid(P_PID, (id_t)s->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == s->pid) {
                    kill_group(s->pid);
                    while (waitpid(s->pid, &s->status, 0) < 0 && errno == EINTR)
                        ; /* a zombie already: returns at once, unless a signal lands */
                    s->reaped = 1;
                    s->drain_deadline = now + DRAIN_S;
                    if (s->out_fd >= 0)
                        fcntl(s->out_fd, F_SETFL, fcntl(s->out_fd, F_GETFL) | O_NONBLOCK);
                    if (s->err_fd >= 0)
                        fcntl(s->err_fd, F_SETFL, fcntl(s->err_fd, F_GETFL) | O_NONBLOCK);
                    gone = 1;
                } else if (!s->killed) {
                    pool_watch(s, &tasks[s->task], &traces[i], now);
                    if (now > s->deadline) {
                        kill_group(s->pid);
                        s->killed = 1;
                        s->killed_over_total = now > s->total_deadline;
                    }
                }
            }
            if (s->reaped) {
                slot_drain(s);
                if ((s->out_fd >= 0 || s->err_fd >= 0) && now < s->drain_deadline)
                    continue; /* a helper may still hold them: until the deadline */
                slot_finish(s, &tasks[s->task], &traces[i]);
                size_t ti = s->task;
                slot_close_fds(s);
                s->pid = 0;
                running--;
                done++;
                if (finished)
                    finished(ti, done, user);
            }
        }
        int draining = 0;
        for (int i = 0; i < jobs; i++)
            draining |= slots[i].pid && slots[i].reaped;
        if (gone || (draining && now - last_scan > 0.1)) { /* what escaped the finished children's groups */
            size_t nl = 0;
            for (int i = 0; i < jobs; i++)
                if (slots[i].pid && !slots[i].reaped)
                    live[nl++] = slots[i].pid;
            gf_pool_kill_strays(live, nl);
            last_scan = now;
        }
    }
    for (size_t ti = next; ti < n; ti++) { /* interrupted, or stopped by gf_pool_stop_starting */
        tasks[ti].not_started = 1;
        tasks[ti].interrupted = g_interrupt != 0;
    }
    /* a killed stray's own children are reparented to genfence in turn */
    for (int round = 0; round < 50 && gf_pool_kill_strays(NULL, 0); round++)
        usleep(10000);
    gf_pool_subreaper_end(prev_reaper);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    munmap(traces, trace_bytes);
    free(slots);
    free(pfd);
    free(live);
}

void gf_runner_isolated(json_t *(*fn)(const void *arg), const void *const *args, size_t n, int jobs, double timeout_s,
                        unsigned long long mem, json_t **records_out, char (*why_out)[256])
{
    gf_task *tasks = calloc(n ? n : 1, sizeof *tasks);
    for (size_t i = 0; i < n; i++) {
        records_out[i] = NULL;
        snprintf(why_out[i], 256, "%s", tasks ? "" : "out of memory");
    }
    if (!tasks)
        return;
    for (size_t i = 0; i < n; i++) {
        tasks[i].fn = fn;
        tasks[i].arg = args[i];
        tasks[i].timeout_s = timeout_s;
    }
    gf_pool_run(tasks, n, jobs, mem, NULL, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        gf_task *t = &tasks[i];
        char ctx[200];
        gf_task_trace_text(t, ctx, sizeof ctx);
        records_out[i] = t->record;
        if (!t->record) {
            if (t->spawn_failed)
                snprintf(why_out[i], 256, "not started: %.200s", t->spawn_err);
            else if (t->interrupted)
                snprintf(why_out[i], 256, "interrupted (%s)", gf_signal_name(gf_runner_interrupted()));
            else if (t->rejected)
                snprintf(why_out[i], 256, "result record rejected: %.200s", t->reject_why);
            else if (t->timed_out || t->signal == SIGALRM)
                snprintf(why_out[i], 256, "timed out after %.0f s%.180s", timeout_s, ctx);
            else if (t->signal)
                snprintf(why_out[i], 256, "crashed (signal %d, %s)%.180s", t->signal, strsignal(t->signal), ctx);
            else
                snprintf(why_out[i], 256, "exited with status %d without an answer%.180s", t->exit_code, ctx);
        }
        free(t->err);
    }
    free(tasks);
}
