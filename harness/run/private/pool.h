/* Internal to harness/run: the process pool the probes, the jobs and
 * gf_runner_isolated share (pool.c, pool_reap.c). */
#ifndef GENFENCE_HARNESS_POOL_H
#define GENFENCE_HARNESS_POOL_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "genfence/engine.h"

/* The child's exit status when it has no record to send (fn returned NULL)
 * and when writing the record to its pipe failed (the backend closed or
 * replaced file descriptors it does not own). */
#define GF_CHILD_EXIT_NO_RECORD 3
#define GF_CHILD_EXIT_WRITE     121

typedef struct gf_task {
    json_t *(*fn)(const void *arg);
    const void *arg;
    double timeout_s; /* the stall bound: killed after this long without progress (a backend call
                         started or returned); 0: no watchdog */
    double total_s;   /* the whole task's cap (the child's alarm); 0: timeout_s (one bound) */
    /* results */
    json_t *record; /* accepted record (its nonce checked and removed), or NULL */
    char *err;      /* stderr tail (NUL-terminated) */
    int exit_code, signal, timed_out, spawn_failed;
    int over_total;  /* timed out by the whole-task cap (total_s), not by a stall */
    int not_started; /* the run was interrupted before this task started */
    int interrupted; /* SIGINT/SIGTERM in the parent: its process group was killed */
    int rejected;    /* a record arrived and was refused: reject_why says why */
    char reject_why[256];
    char spawn_err[256];
    char nonce[40];      /* the random token the child's record must carry */
    gf_call_trace trace; /* the child's last backend call (shared page), if has_trace */
    int has_trace;
    double seconds;
} gf_task;

/* Run the n tasks, at most `jobs` children at once, each with address space
 * capped at mem bytes (0: none); started / finished (optional) are called in
 * the parent as children start and are reaped. Each child is its own process
 * group, killed as a whole when it exits, times out or the run is
 * interrupted; its pipes are drained with a deadline. In the in-process mode
 * (gf_runner_in_process) the tasks run one after another in this process. */
void gf_pool_run(gf_task *tasks, size_t n, int jobs, unsigned long long mem,
                 void (*started)(size_t ti, size_t running, size_t done, void *u),
                 void (*finished)(size_t ti, size_t done, void *u), void *user);

/* From a finished callback: start no more tasks; the running ones finish,
 * the rest end not_started (not interrupted). Off again with 0. */
void gf_pool_stop_starting(int on);

/* " in forward call #3 (step 2, B 2, T 1, cache length 7)", " (after ... had
 * returned)", or "" without a trace: what a crash or timeout reason ends with. */
void gf_task_trace_text(const gf_task *t, char *buf, size_t cap);
/* The trace as a JSON object (NULL without one). */
json_t *gf_task_trace_json(const gf_task *t);
/* "SIGSEGV" for 11: the signal's name. */
const char *gf_signal_name(int sig);

/* pool_reap.c: descendants that escaped their child's process group
 * (setsid, double fork) are reparented to genfence, a child subreaper while
 * the pool runs; these kill and reap them. */
int gf_pool_subreaper_begin(void); /* returns the previous setting */
void gf_pool_subreaper_end(int previous);
/* SIGKILL and reap every child of this process whose pid is not in live[]. */
size_t gf_pool_kill_strays(const pid_t *live, size_t n_live);

/* pool_scratch.c: a child's scratch folder under $TMPDIR (1; 0 and dir ""
 * when none could be made), and its removal with everything in it (dir is
 * cleared; "" is a no-op). */
int gf_pool_scratch_make(char *dir, size_t cap);
void gf_pool_scratch_remove(char *dir);

#endif
