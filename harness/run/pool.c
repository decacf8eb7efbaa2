/* The process pool: each task runs in its own child (fork) with a watchdog
 * and a memory cap, and answers with one JSON record over a pipe. */
#define _GNU_SOURCE
#include "runner.h"
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "krun.h"
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

/* ---- child tasks ---- */

typedef struct slot {
    size_t task;
    pid_t pid;
    int out_fd, err_fd;
    char *out;
    size_t out_n, out_cap;
    char err[ERR_TAIL_MAX + 1];
    size_t err_n;
    double start, deadline;
    int killed, reaped, status;
} slot;

static void write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

static void child_main(gf_task *t, int out_fd, int err_fd, unsigned long long mem, const slot *slots, size_t n_slots)
{
    for (size_t i = 0; i < n_slots; i++) { /* the other children's pipes */
        if (slots[i].out_fd >= 0)
            close(slots[i].out_fd);
        if (slots[i].err_fd >= 0)
            close(slots[i].err_fd);
    }
    signal(SIGPIPE, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
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
    if (t->timeout_s > 0)
        alarm((unsigned)ceil(t->timeout_s));
    json_t *r = t->fn(t->arg);
    char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;
    if (s)
        write_all(out_fd, s, strlen(s));
    close(out_fd);
    _exit(s ? 0 : 3);
}

static void slot_close_fds(slot *s)
{
    if (s->out_fd >= 0)
        close(s->out_fd);
    if (s->err_fd >= 0)
        close(s->err_fd);
    s->out_fd = s->err_fd = -1;
}

static int spawn(gf_task *tasks, size_t ti, slot *s, slot *slots, size_t n_slots, unsigned long long mem)
{
    gf_task *t = &tasks[ti];
    int po[2], pe[2];
    if (pipe(po) < 0) {
        snprintf(t->spawn_err, sizeof t->spawn_err, "pipe: %s", strerror(errno));
        return 0;
    }
    if (pipe(pe) < 0) {
        close(po[0]);
        close(po[1]);
        snprintf(t->spawn_err, sizeof t->spawn_err, "pipe: %s", strerror(errno));
        return 0;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(t->spawn_err, sizeof t->spawn_err, "fork: %s", strerror(errno));
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        return 0;
    }
    if (pid == 0) {
        close(po[0]);
        close(pe[0]);
        child_main(t, po[1], pe[1], mem, slots, n_slots);
    }
    close(po[1]);
    close(pe[1]);
    memset(s, 0, sizeof *s);
    s->task = ti;
    s->pid = pid;
    s->out_fd = po[0];
    s->err_fd = pe[0];
    s->start = gf_now_s();
    s->deadline = t->timeout_s > 0 ? s->start + t->timeout_s + KILL_GRACE_S : INFINITY;
    return 1;
}

static void slot_read(slot *s, int fd)
{
    char buf[65536];
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (r <= 0) {
        close(fd);
        if (fd == s->out_fd)
            s->out_fd = -1;
        else
            s->err_fd = -1;
        return;
    }
    if (fd == s->out_fd) {
        if (s->out_n + (size_t)r + 1 > s->out_cap && s->out_n + (size_t)r < RECORD_MAX) {
            size_t c = s->out_cap ? s->out_cap : 65536;
            while (c < s->out_n + (size_t)r + 1)
                c *= 2;
            char *g = realloc(s->out, c);
            if (!g)
                return;
            s->out = g;
            s->out_cap = c;
        }
        if (s->out_n + (size_t)r + 1 <= s->out_cap) {
            memcpy(s->out + s->out_n, buf, (size_t)r);
            s->out_n += (size_t)r;
            s->out[s->out_n] = '\0';
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
}

static void slot_finish(slot *s, gf_task *t)
{
    t->seconds = gf_now_s() - s->start;
    t->timed_out = s->killed;
    if (WIFEXITED(s->status)) {
        t->exit_code = WEXITSTATUS(s->status);
        t->signal = 0;
    } else if (WIFSIGNALED(s->status)) {
        t->exit_code = -1;
        t->signal = WTERMSIG(s->status);
    }
    if (s->out_n) {
        json_error_t je;
        t->record = json_loadb(s->out, s->out_n, 0, &je);
    }
    if (s->err_n)
        t->err = strdup(s->err);
    free(s->out);
    s->out = NULL;
}

void gf_pool_run(gf_task *tasks, size_t n, int jobs, unsigned long long mem,
                 void (*started)(size_t ti, size_t running, size_t done, void *u),
                 void (*finished)(size_t ti, size_t done, void *u), void *user)
{
    if (jobs < 1)
        jobs = 1;
    slot *slots = calloc((size_t)jobs, sizeof *slots);
    struct pollfd *pfd = calloc((size_t)jobs * 2, sizeof *pfd);
    if (!slots || !pfd) {
        for (size_t i = 0; i < n; i++) {
            tasks[i].spawn_failed = 1;
            snprintf(tasks[i].spawn_err, sizeof tasks[i].spawn_err, "out of memory");
        }
        free(slots);
        free(pfd);
        return;
    }
    for (int i = 0; i < jobs; i++) {
        slots[i].pid = 0;
        slots[i].out_fd = slots[i].err_fd = -1;
    }
    signal(SIGPIPE, SIG_IGN);
    size_t next = 0, done = 0;
    int running = 0;
    while (done < n) {
        for (int i = 0; i < jobs && next < n; i++) {
            if (slots[i].pid)
                continue;
            size_t ti = next++;
            if (!spawn(tasks, ti, &slots[i], slots, (size_t)jobs, mem)) {
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
        if (!running)
            continue;
        nfds_t np = 0;
        double now = gf_now_s(), wait_s = 0.25;
        for (int i = 0; i < jobs; i++) {
            if (!slots[i].pid)
                continue;
            if (slots[i].out_fd >= 0)
                pfd[np++] = (struct pollfd){.fd = slots[i].out_fd, .events = POLLIN};
            if (slots[i].err_fd >= 0)
                pfd[np++] = (struct pollfd){.fd = slots[i].err_fd, .events = POLLIN};
            if (slots[i].deadline - now < wait_s)
                wait_s = slots[i].deadline - now;
            if (slots[i].out_fd < 0 && slots[i].err_fd < 0 && wait_s > 0.005)
                wait_s = 0.005; /* its pipes are closed: it is exiting, reap it soon */
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
        for (int i = 0; i < jobs; i++) {
            slot *s = &slots[i];
            if (!s->pid)
                continue;
            if (!s->reaped) {
                pid_t w = waitpid(s->pid, &s->status, WNOHANG);
                if (w == s->pid)
                    s->reaped = 1;
            }
            if (!s->reaped && now > s->deadline && !s->killed) {
                kill(s->pid, SIGKILL);
                s->killed = 1;
            }
            if (s->reaped) {
                /* drain what is left in the pipes */
                while (s->out_fd >= 0)
                    slot_read(s, s->out_fd);
                while (s->err_fd >= 0)
                    slot_read(s, s->err_fd);
                slot_finish(s, &tasks[s->task]);
                size_t ti = s->task;
                slot_close_fds(s);
                s->pid = 0;
                running--;
                done++;
                if (finished)
                    finished(ti, done, user);
            }
        }
    }
    free(slots);
    free(pfd);
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
        records_out[i] = t->record;
        if (!t->record) {
            if (t->spawn_failed)
                snprintf(why_out[i], 256, "not started: %.200s", t->spawn_err);
            else if (t->timed_out)
                snprintf(why_out[i], 256, "timed out after %.0f s", timeout_s);
            else if (t->signal)
                snprintf(why_out[i], 256, "crashed (signal %d, %s)", t->signal, strsignal(t->signal));
            else
                snprintf(why_out[i], 256, "exited with status %d without an answer", t->exit_code);
        }
        free(t->err);
    }
    free(tasks);
}
