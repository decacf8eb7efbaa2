/* Recording the golden of a golden_generation case on a backend (genfence
 * bless, harness/cli/cmd_bless.c; docs/goldens.md). */
#ifndef GENFENCE_HARNESS_GOLDEN_BLESS_H
#define GENFENCE_HARNESS_GOLDEN_BLESS_H

#include <stdint.h>

#include "golden_case.h"

/* What gf_golden_record wrote. */
typedef struct gf_golden_recorded {
    int32_t rows, steps;
    double min_margin; /* the smallest margin of any step's choice */
    char backend[128]; /* the name the backend reports */
} gf_golden_recorded;

/* Record the golden of golden_generation case c on `backend` into path
 * (genfence bless): each prompt alone, free-running, cached decode, with the
 * provenance (backend, machine, genfence commit, hashes) in the metadata.
 * GF_OK with *out filled, else the error (its message names what failed). */
gf_status gf_golden_record(const gf_case *c, const char *backend, int32_t threads, const char *path,
                           gf_golden_recorded *out);

#endif
