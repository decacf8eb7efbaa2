/* The runner: every backend probe and every (case, backend) runs in its own
 * child process (fork) with a watchdog (alarm in the child, SIGKILL from the
 * parent after a grace period) and a memory cap (RLIMIT_AS). The child writes
 * one JSON result record over a pipe; the parent derives crash / timeout from
 * the wait status when no record arrives. The parent never opens a backend
 * (except with gf_runner_in_process). */
#ifndef GENFENCE_HARNESS_RUNNER_H
#define GENFENCE_HARNESS_RUNNER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "case.h"
#include "compare.h"

#define GF_RUN_DEFAULT_TIMEOUT_S  120.0
#define GF_RUN_DEFAULT_MEMORY_GIB 8.0
#define GF_RUN_PROBE_TIMEOUT_S    30.0
/* --timeout is a stall bound (no backend call started or returned for that
 * long); a (case, backend) pair that keeps making progress is still capped
 * at this many times --timeout, so an endless loop of calls ends too. */
#define GF_RUN_TOTAL_FACTOR 10

typedef struct gf_run_opts {
    int jobs;                        /* children at once (-j) */
    int threads;                     /* backend threads per child (--threads) */
    double timeout_s;                /* per (case, backend): the stall bound (0: no watchdog);
                                        GF_RUN_TOTAL_FACTOR x this caps the pair */
    unsigned long long memory_limit; /* bytes of address space per child; 0 = none */
    const char *report_dir;          /* reports go here; failing-step logits under report_dir/failures */
    const char *golden_dir;          /* --golden-dir: read goldens from here (NULL: each case's own path) */
    int maxfail;                     /* --maxfail: start no job after this many failures (0: no limit) */
    int as_declared;                 /* a case's expect_verdict decides (not --raw-verdicts): --maxfail counts
                                      * only runs not as declared */
    const char *report_home;         /* the report folder as given (report_dir may be its staging folder;
                                        NULL: --no-report): reproduce lines report under its reproduce/ID/ */
    int trace;                       /* localization (localize.h): 0 a failing model case on a backend with
                                        the trace slot, 1 every model case (genfence trace), -1 none */
} gf_run_opts;

/* A backend as probed (in a child). */
typedef struct gf_backend_probe {
    char *requested; /* name or plugin path as given */
    char *name;      /* as the backend reports it (requested if it could not be opened) */
    int available;
    int required;           /* --require-backend */
    int explicit_;          /* named with --backend / --require-backend */
    int unusable;           /* could not be opened or described: unknown name, missing file,
                               refused ABI, the probe crashed or hung, no config (exec) */
    int opt_in;             /* the built-in C protocol client of a default run (exec with the
                               build's tools/echo_ref): only the cases tagged exec run on it
                               (cases/exec.yaml); no triangulation */
    int absent;             /* not there to probe (opt_in without its echo_ref): unavailable,
                               why says so, nothing is opened */
    char why[512];          /* why unavailable */
    gf_compute_dtype dtype; /* declared compute dtype (fp32 if undeclared) */
    int32_t threads;
    int has_sample;    /* has its own sampler slot */
    int has_speculate; /* has its own rejection sampler (the speculate slot) */
    int has_logprobs;  /* reports its own log-probabilities (the logprobs slot) */
    int engine_;       /* the pseudo-backend "engine": kinds that reach no slot of the
                       run's backends run once on it (never opened) */
    char library[256], detail[256], source[512], description[256];
    char weights[32], kv_cache[32]; /* gf_backend_info's weight and KV types; "" = as given / compute dtype */
    char cpu_path[256];             /* gf_backend_info's CPU kernel path; "" = not said */
} gf_backend_probe;

typedef struct gf_job {
    const gf_case *c;
    gf_backend_probe *backend; /* NULL: the case matched no backend (a skip) */
    size_t index;              /* order in the run */
    /* results */
    gf_verdict verdict;
    char *reason;
    double seconds;        /* wall time, fork to reap */
    json_t *record;        /* the child's record (NULL if none arrived) */
    char *stderr_tail;     /* the child's last stderr bytes, if any */
    int exit_code;         /* -1 if killed */
    int signal;            /* 0 if it exited */
    int ran;               /* a child was started */
    int decided;           /* the verdict is final (run, or decided without a child) */
    int interrupted;       /* SIGINT/SIGTERM stopped the run before this job finished
                          (verdict error, "not run: ..." or "interrupted ...") */
    json_t *crash_context; /* crash / timeout: the backend call it was in (slot, call,
                              in_call, step, B, T, cache_length, calls_total), or NULL */
    char *stat_note;       /* the plan's statistical-tier note for the child (gf_krun.stat_note), or NULL */
    int not_run;           /* --maxfail stopped the run before this job started (a skip, saying so) */
    json_t *baseline;      /* the baseline entry this run met (harness/report/baseline.c):
                              {status, file, line, verdict, reason, ...}, or NULL */
} gf_job;

/* SIGINT or SIGTERM while a pool ran: every child's process group was
 * killed, nothing more started; the signal number (0: not interrupted). The
 * caller still writes its report, saying so. Sticky for the process. */
int gf_runner_interrupted(void);
/* --in-process: every task runs in this process, one after another: no fork,
 * no watchdog, no memory cap, no interruption handling (a crash kills
 * genfence). For gdb and sanitizers. */
void gf_runner_in_process(int on);
int gf_runner_is_in_process(void);

/* The schema a job's record must hold to (jobs.c): a verdict of the verdict
 * table, a reason, checks of {name, passed}, a metrics object, "case" equal
 * to case_id; a pass needs a check run or a comparison (metrics.comparisons)
 * and no failed check. 1 if it holds, else 0 with why ("no verdict", ...). */
int gf_runner_record_check(const json_t *record, const char *case_id, char *why, size_t cap);

/* Probe each backend in a child: open (registry), probe, info. */
void gf_runner_probe(gf_backend_probe *b, size_t n, const gf_run_opts *o);
void gf_backend_probe_clear(gf_backend_probe *b);

/* Callbacks in the parent: a child started / a job finished. */
typedef struct gf_run_hooks {
    void (*started)(gf_job *job, size_t running, size_t done, size_t total, void *user);
    void (*finished)(gf_job *job, size_t done, size_t total, void *user);
    void *user;
} gf_run_hooks;

/* Run the jobs not yet decided whose backend is available, at most o->jobs
 * at a time, each in its own child. */
void gf_runner_run(gf_job *jobs, size_t n, const gf_run_opts *o, const gf_run_hooks *hooks);
void gf_job_clear(gf_job *j);

/* A shell command that reproduces one job alone. malloc'd. */
char *gf_job_reproduce(const gf_job *j, const gf_run_opts *o);
/* The same line as `genfence trace ...`: the case alone, its calls replayed
 * traced on the backend and ref (localize.h), every point printed. */
char *gf_job_trace_line(const gf_job *j, const gf_run_opts *o);

/* Run fn(args[i]) for each i in its own child (at most `jobs` at once) with
 * the watchdog and memory cap. records_out[i]: the child's JSON result, or
 * NULL with why_out[i] saying why (crash, timeout, no answer). */
void gf_runner_isolated(json_t *(*fn)(const void *arg), const void *const *args, size_t n, int jobs, double timeout_s,
                        unsigned long long mem, json_t **records_out, char (*why_out)[256]);

#endif
