/* The runner: probes and (case, backend) runs in child processes. */
#define _GNU_SOURCE
#include "runner.h"

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

#include "cli.h"
#include "kind.h"
#include "registry.h"

#if defined(__SANITIZE_ADDRESS__)
#define GF_NO_RLIMIT_AS 1  /* AddressSanitizer reserves terabytes of shadow memory */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GF_NO_RLIMIT_AS 1
#endif
#endif

#define ERR_TAIL_MAX 8192
#define RECORD_MAX (64u << 20)
#define KILL_GRACE_S 5.0

double gf_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int gf_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int gf_parse_size(const char *s, unsigned long long *out)
{
    if (!strcmp(s, "none") || !strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0))
        return -1;
    double mul = 1;
    if (!*end || !strcmp(end, "B"))
        mul = 1;
    else if (!strcmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "k"))
        mul = 1024.0;
    else if (!strcmp(end, "M") || !strcmp(end, "MiB"))
        mul = 1024.0 * 1024;
    else if (!strcmp(end, "G") || !strcmp(end, "GiB"))
        mul = 1024.0 * 1024 * 1024;
    else if (!strcmp(end, "T") || !strcmp(end, "TiB"))
        mul = 1024.0 * 1024 * 1024 * 1024;
    else
        return -1;
    *out = (unsigned long long)(v * mul);
    return 0;
}

/* ---- child tasks ---- */

typedef struct task {
    json_t *(*fn)(const void *arg);
    const void *arg;
    double timeout_s;
    /* results */
    json_t *record;
    char *err;                 /* stderr tail (NUL-terminated) */
    int exit_code, signal, timed_out, spawn_failed;
    char spawn_err[256];
    double seconds;
} task;

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

static void child_main(task *t, int out_fd, int err_fd, unsigned long long mem, const slot *slots, size_t n_slots)
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

static int spawn(task *tasks, size_t ti, slot *s, slot *slots, size_t n_slots, unsigned long long mem)
{
    task *t = &tasks[ti];
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

static void slot_finish(slot *s, task *t)
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

static void run_tasks(task *tasks, size_t n, int jobs, unsigned long long mem,
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

void gf_runner_isolated(json_t *(*fn)(const void *arg), const void *const *args, size_t n, int jobs,
                        double timeout_s, unsigned long long mem, json_t **records_out, char (*why_out)[256])
{
    task *tasks = calloc(n ? n : 1, sizeof *tasks);
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
    run_tasks(tasks, n, jobs, mem, NULL, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        task *t = &tasks[i];
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

/* ---- probes ---- */

void gf_backend_probe_clear(gf_backend_probe *b)
{
    free(b->requested);
    free(b->name);
    memset(b, 0, sizeof *b);
}

typedef struct probe_arg {
    const gf_backend_probe *b;
    int threads;
} probe_arg;

static json_t *probe_child(const void *arg)
{
    const probe_arg *a = arg;
    gf_backend_handle h;
    json_t *r = json_object();
    gf_status st = gf_registry_open(a->b->requested, &h);
    if (st != GF_OK) {
        json_object_set_new(r, "available", json_false());
        json_object_set_new(r, "why", json_string(gf_error_msg()));
        return r;
    }
    const gf_backend_ops *ops = h.ops;
    json_object_set_new(r, "name", json_string(ops->name));
    json_object_set_new(r, "description", json_string(ops->description ? ops->description : ""));
    json_object_set_new(r, "source", json_string(h.source));
    json_object_set_new(r, "has_sample", json_boolean(ops->sample != NULL));
    char why[512] = "";
    st = ops->probe(why, sizeof why);
    json_object_set_new(r, "available", json_boolean(st == GF_OK));
    json_object_set_new(r, "why", json_string(st == GF_OK ? "" : why[0] ? why : gf_status_str(st)));
    if (st == GF_OK && ops->info) {
        gf_backend_options o = gf_registry_options(&h, a->threads);
        gf_backend_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if (ops->info(&o, &info) == GF_OK) {
            json_object_set_new(r, "dtype", json_integer(info.dtype));
            json_object_set_new(r, "threads", json_integer(info.threads));
            json_object_set_new(r, "library", json_string(info.library ? info.library : ""));
            json_object_set_new(r, "detail", json_string(info.detail ? info.detail : ""));
        }
    }
    gf_registry_close(&h);
    return r;
}

static void copy_str(char *dst, size_t cap, json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    snprintf(dst, cap, "%s", v ? v : "");
}

void gf_runner_probe(gf_backend_probe *b, size_t n, const gf_run_opts *o)
{
    task *tasks = calloc(n ? n : 1, sizeof *tasks);
    probe_arg *args = calloc(n ? n : 1, sizeof *args);
    if (!tasks || !args) {
        free(tasks);
        free(args);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        args[i].b = &b[i];
        args[i].threads = o->threads;
        tasks[i].fn = probe_child;
        tasks[i].arg = &args[i];
        tasks[i].timeout_s = GF_RUN_PROBE_TIMEOUT_S;
    }
    run_tasks(tasks, n, (int)(n > 16 ? 16 : n), o->memory_limit, NULL, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        task *t = &tasks[i];
        gf_backend_probe *p = &b[i];
        p->dtype = GF_COMPUTE_F32;
        p->threads = o->threads;
        if (!t->record) {
            p->available = 0;
            if (t->spawn_failed)
                snprintf(p->why, sizeof p->why, "probe not started: %s", t->spawn_err);
            else if (t->signal)
                snprintf(p->why, sizeof p->why, "the probe crashed (signal %d, %s)", t->signal, strsignal(t->signal));
            else
                snprintf(p->why, sizeof p->why, "the probe exited with status %d without an answer", t->exit_code);
        } else {
            json_t *r = t->record;
            const char *name = json_string_value(json_object_get(r, "name"));
            if (name) {
                free(p->name);
                p->name = strdup(name);
            }
            p->available = json_is_true(json_object_get(r, "available"));
            copy_str(p->why, sizeof p->why, r, "why");
            copy_str(p->library, sizeof p->library, r, "library");
            copy_str(p->detail, sizeof p->detail, r, "detail");
            copy_str(p->source, sizeof p->source, r, "source");
            copy_str(p->description, sizeof p->description, r, "description");
            p->has_sample = json_is_true(json_object_get(r, "has_sample"));
            json_int_t dt = json_integer_value(json_object_get(r, "dtype"));
            if (dt >= GF_COMPUTE_F32 && dt <= GF_COMPUTE_F64)
                p->dtype = (gf_compute_dtype)dt;
            json_int_t th = json_integer_value(json_object_get(r, "threads"));
            if (th > 0)
                p->threads = (int32_t)th;
        }
        if (!p->name)
            p->name = strdup(p->requested);
        json_decref(t->record);
        free(t->err);
    }
    free(tasks);
    free(args);
}

/* ---- (case, backend) jobs ---- */

typedef struct job_arg {
    const gf_job *job;
    const gf_run_opts *o;
} job_arg;

static void stem_for(char *buf, size_t cap, const gf_job *j)
{
    snprintf(buf, cap, "%s@%s", j->c->id, j->backend ? j->backend->name : "none");
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '-' || *p == '.' || *p == '@'))
            *p = '_';
}

static json_t *job_child(const void *arg)
{
    const job_arg *a = arg;
    const gf_job *j = a->job;
    const gf_case *c = j->c;
    double t0 = gf_now_s();
    gf_krun k;
    gf_krun_init(&k);
    k.backend = j->backend->requested;
    k.backend_name = j->backend->name;
    k.threads = a->o->threads;
    k.dtype = j->backend->dtype;
    k.backend_has_sample = j->backend->has_sample;
    char stem[512], dir[4096];
    stem_for(stem, sizeof stem, j);
    snprintf(dir, sizeof dir, "%s/failures", a->o->report_dir ? a->o->report_dir : "reports");
    k.artifact_stem = stem;
    k.artifact_dir = a->o->report_dir ? dir : NULL;
    k.golden_dir = a->o->golden_dir;
    if (c->kind->uses_backend) {
        gf_session s;
        gf_status st = gf_session_open(&s, c->model, k.backend, k.threads, 0);
        if (st != GF_OK) {
            switch (st) {
            case GF_E_UNAVAILABLE:
            case GF_E_UNSUPPORTED: gf_k_skip(&k, "%s", gf_error_msg()); break;
            case GF_E_IO:
            case GF_E_FORMAT:
            case GF_E_NOT_FOUND:
            case GF_E_INVALID_ARG: gf_k_error(&k, "model '%s': %s", c->model_arg, gf_error_msg()); break;
            default: gf_k_fail(&k, "opening the model on the backend: %s", gf_error_msg()); break;
            }
        } else {
            k.session = &s;
            c->kind->run(c, &k);
            k.session = NULL;
            gf_session_close(&s);
        }
    } else if (k.backend_has_sample) {
        /* sampler-only kind, backend with its own sampler: the kind also runs
         * every sampling call through the slot (model NULL) */
        gf_backend_handle h;
        gf_status st = gf_registry_open(k.backend, &h);
        if (st != GF_OK || !h.ops->sample) {
            gf_k_fail(&k, "opening backend '%s' for its sample slot: %s", k.backend,
                      st != GF_OK ? gf_error_msg() : "it has no sample slot");
        } else {
            k.sample_ops = h.ops;
            c->kind->run(c, &k);
            gf_k_slot_finish(&k);
            k.sample_ops = NULL;
        }
        if (st == GF_OK)
            gf_registry_close(&h);
    } else {
        c->kind->run(c, &k);
    }
    json_t *r = gf_krun_record(&k);
    json_object_set_new(r, "child_seconds", json_real(gf_now_s() - t0));
    gf_krun_clear(&k);
    return r;
}

typedef struct run_ctx {
    gf_job *jobs;
    size_t *map;               /* task index -> job index */
    size_t total;
    const gf_run_hooks *hooks;
    task *tasks;
    const gf_run_opts *o;
} run_ctx;

static void on_started(size_t ti, size_t running, size_t done, void *u)
{
    run_ctx *r = u;
    gf_job *j = &r->jobs[r->map[ti]];
    j->ran = 1;
    if (r->hooks && r->hooks->started)
        r->hooks->started(j, running, done, r->total, r->hooks->user);
}

static void set_reason(gf_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(gf_job *j, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(j->reason);
    j->reason = strdup(buf);
}

static void on_finished(size_t ti, size_t done, void *u)
{
    run_ctx *r = u;
    task *t = &r->tasks[ti];
    gf_job *j = &r->jobs[r->map[ti]];
    j->decided = 1;
    j->seconds = t->seconds;
    j->exit_code = t->exit_code;
    j->signal = t->signal;
    j->stderr_tail = t->err;
    t->err = NULL;
    j->record = t->record;
    t->record = NULL;
    const char *rv = j->record ? json_string_value(json_object_get(j->record, "verdict")) : NULL;
    const char *rr = j->record ? json_string_value(json_object_get(j->record, "reason")) : NULL;
    gf_verdict v;
    if (t->spawn_failed) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "could not start a child: %s", t->spawn_err);
    } else if (t->timed_out || t->signal == SIGALRM) {
        j->verdict = GF_V_TIMEOUT;
        set_reason(j, "no result within the %.0f s timeout (watchdog%s)", r->o->timeout_s,
                   t->timed_out ? ", killed" : "");
    } else if (t->signal) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "killed by signal %d (%s)%s", t->signal, strsignal(t->signal),
                   j->record ? " after writing its result" : "");
    } else if (t->exit_code != 0) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "exited with status %d%s", t->exit_code, j->record ? " after writing its result" : " without a result");
    } else if (!j->record || !rv || !gf_verdict_parse(rv, &v)) {
        j->verdict = GF_V_CRASH;
        set_reason(j, "no readable result record from the child");
    } else {
        j->verdict = v;
        set_reason(j, "%s", rr ? rr : "");
    }
    if (r->hooks && r->hooks->finished)
        r->hooks->finished(j, done, r->total, r->hooks->user);
}

void gf_runner_run(gf_job *jobs, size_t n, const gf_run_opts *o, const gf_run_hooks *hooks)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!jobs[i].decided && jobs[i].backend && jobs[i].backend->available)
            m++;
    task *tasks = calloc(m ? m : 1, sizeof *tasks);
    job_arg *args = calloc(m ? m : 1, sizeof *args);
    size_t *map = calloc(m ? m : 1, sizeof *map);
    if (!tasks || !args || !map) {
        free(tasks);
        free(args);
        free(map);
        return;
    }
    if (o->report_dir) {
        mkdir(o->report_dir, 0777);
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/failures", o->report_dir);
        mkdir(dir, 0777);
    }
    size_t t = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].decided || !jobs[i].backend || !jobs[i].backend->available)
            continue;
        args[t].job = &jobs[i];
        args[t].o = o;
        tasks[t].fn = job_child;
        tasks[t].arg = &args[t];
        tasks[t].timeout_s = o->timeout_s;
        map[t] = i;
        t++;
    }
    run_ctx ctx = {.jobs = jobs, .map = map, .total = n, .hooks = hooks, .tasks = tasks, .o = o};
    run_tasks(tasks, m, o->jobs, o->memory_limit, on_started, on_finished, &ctx);
    for (size_t i = 0; i < m; i++) {
        json_decref(tasks[i].record);
        free(tasks[i].err);
    }
    free(tasks);
    free(args);
    free(map);
}

void gf_job_clear(gf_job *j)
{
    free(j->reason);
    free(j->stderr_tail);
    json_decref(j->record);
    j->reason = NULL;
    j->stderr_tail = NULL;
    j->record = NULL;
}

/* Single-quote s for a POSIX shell when it needs it. */
static void shell_quote(char *dst, size_t cap, const char *s)
{
    int plain = *s != '\0';
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("_-./=:@+,", *p)))
            plain = 0;
    if (plain) {
        snprintf(dst, cap, "%s", s);
        return;
    }
    size_t at = 0;
    if (at < cap)
        dst[at++] = '\'';
    for (const char *p = s; *p && at + 5 < cap; p++) {
        if (*p == '\'') {
            memcpy(dst + at, "'\\''", 4);
            at += 4;
        } else {
            dst[at++] = *p;
        }
    }
    if (at + 1 < cap)
        dst[at++] = '\'';
    dst[at < cap ? at : cap - 1] = '\0';
}

char *gf_job_reproduce(const gf_job *j, const gf_run_opts *o)
{
    char file[2048], filt[1024], be[1200], idre[600];
    shell_quote(file, sizeof file, j->c->file);
    /* the id is [A-Za-z0-9_.-]; escape the dots for the regex */
    size_t at = 0;
    idre[at++] = '^';
    for (const char *p = j->c->id; *p && at + 4 < sizeof idre; p++) {
        if (*p == '.')
            idre[at++] = '\\';
        idre[at++] = *p;
    }
    idre[at++] = '$';
    idre[at] = '\0';
    shell_quote(filt, sizeof filt, idre);
    be[0] = '\0';
    if (j->backend) {
        char q[1100];
        shell_quote(q, sizeof q, j->backend->requested);
        snprintf(be, sizeof be, " --backend %s", q);
    }
    char extra[1200] = "";
    if (o->threads != 1)
        snprintf(extra, sizeof extra, " --threads %d", o->threads);
    if (o->golden_dir) {
        char q[1100];
        shell_quote(q, sizeof q, o->golden_dir);
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --golden-dir %s", q);
    }
    size_t n = strlen(file) + strlen(filt) + strlen(be) + strlen(extra) + 64;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "genfence run %s --filter %s%s%s", file, filt, be, extra);
    return out;
}
