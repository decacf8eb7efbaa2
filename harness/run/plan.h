/* The plan of a run: every (case, backend) pair the run will do, and every
 * one it will not, with the reason, decided in the parent before any child
 * starts (`genfence run --plan` prints it, the run then does exactly it).
 *
 * A kind runs on a backend only where it reaches one of the backend's slots
 * (gf_kind_def.reaches); where it reaches none of an available backend's, it
 * runs once, on the engine. A case its backends filter keeps off every
 * backend is a skip; a named backend that cannot be used is an error on every
 * case, one unavailable here a skip. A kind that judges token equality
 * against a fp32 reference (defers_to_statistical) is a skip on a backend
 * with lower-precision weights where a statistical case (the default suite's
 * cases/statistical*.yaml, loaded once here) judges them. */
#ifndef GENFENCE_HARNESS_PLAN_H
#define GENFENCE_HARNESS_PLAN_H

#include <jansson.h>
#include <stddef.h>

#include "runner.h"

/* --rerun-failed: the (case, backend) pairs that did not pass in an earlier
 * report, and the backends they ran on (as requested, options included). */
typedef struct gf_rerun {
    const char *path;
    json_t *pairs;   /* {id: {backend_requested: true}} */
    char **backends; /* the failing pairs' backends (not "engine"), first seen first */
    int *required;   /* each one's --require-backend in that run */
    size_t n_backends;
    size_t n_pairs;
    char **files; /* the case files of the failing pairs, as that run named them, first seen first */
    size_t n_files;
} gf_rerun;

/* Read a run.json; 0, or -1 with a message (gf_cli-style, on stderr). */
int gf_rerun_load(gf_rerun *r, const char *path, char *why, size_t cap);
void gf_rerun_free(gf_rerun *r);
/* Did (id, backend_requested) not pass in that report? */
int gf_rerun_has(const gf_rerun *r, const char *id, const char *backend_requested);
int gf_rerun_has_case(const gf_rerun *r, const char *id);

typedef struct gf_plan {
    gf_job *jobs; /* case-major */
    size_t n_jobs, n_cases;
    gf_backend_probe *backends; /* borrowed */
    size_t n_backends;
    gf_backend_probe engine; /* the pseudo-backend of kinds that reach no slot */
    size_t n_dropped;        /* pairs --rerun-failed left out (they passed) */
} gf_plan;

/* The matrix of cases x backends (probed), threads for the engine entry.
 * rerun (or NULL) keeps only the pairs that did not pass in that report.
 * The statistical cases are read with `kinds`. 0, or -1 out of memory. */
int gf_plan_build(gf_plan *p, const gf_case *const *cases, size_t n_cases, gf_backend_probe *bs, size_t n_bs,
                  const gf_kind_def *const *kinds, int threads, const gf_rerun *rerun);
void gf_plan_free(gf_plan *p);

/* --plan: one line per pair and what will happen to it, then a summary. */
void gf_plan_print(const gf_plan *p);
/* --plan's exit status: 2 when any pair is an error, 1 when a required
 * backend would skip, else 0. */
int gf_plan_exit_status(const gf_plan *p);

/* A verdict decided without a child (a skip or an error), with its reason. */
void gf_job_decide(gf_job *j, gf_verdict v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
