/* A batch of prompts against each prompt alone (batch.c). */
#ifndef GENFENCE_HARNESS_KIT_BATCH_H
#define GENFENCE_HARNESS_KIT_BATCH_H

#include <stdint.h>

#include "genfence/engine.h"
#include "record.h"

/* A batch of B prompts (sequence ids gp->seq_ids, NULL: 0..B-1) against
 * each prompt alone with its row's sequence id,
 * free-running, gated (batch.c; used by batch_consistency and
 * seeded_reproducibility). Comparisons are recorded as "<label>/row<b>".
 * singles_out (optional, B entries) keeps the single runs for the caller. */
gf_status gf_kind_batch_vs_single(gf_krun *k, const char *label, int32_t B, int32_t *const *prompts,
                                  const int32_t *lens, const gf_generate_params *gp, const gf_gate *gate, double atol,
                                  gf_generation **singles_out);

#endif
