/* Internal to harness/run: the process pool the probes, the jobs and
 * gf_runner_isolated share (pool.c). */
#ifndef GENFENCE_HARNESS_POOL_H
#define GENFENCE_HARNESS_POOL_H

#include <jansson.h>
#include <stddef.h>

typedef struct gf_task {
    json_t *(*fn)(const void *arg);
    const void *arg;
    double timeout_s;
    /* results */
    json_t *record;
    char *err; /* stderr tail (NUL-terminated) */
    int exit_code, signal, timed_out, spawn_failed;
    char spawn_err[256];
    double seconds;
} gf_task;

/* Run the n tasks, at most `jobs` children at once, each with address space
 * capped at mem bytes (0: none); started / finished (optional) are called in
 * the parent as children start and are reaped. */
void gf_pool_run(gf_task *tasks, size_t n, int jobs, unsigned long long mem,
                 void (*started)(size_t ti, size_t running, size_t done, void *u),
                 void (*finished)(size_t ti, size_t done, void *u), void *user);

#endif
