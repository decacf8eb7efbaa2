/* The backend's own sampler slot beside the engine's sampler (slot.c): every
 * sampling call of a run also goes through the slot, tallied in the record. */
#ifndef GENFENCE_HARNESS_KIT_SLOT_H
#define GENFENCE_HARNESS_KIT_SLOT_H

#include <stdint.h>

#include "genfence/engine.h"
#include "record.h"

/* Record that the engine's sampler ran (and whether the backend has its own
 * slot): "sampler": "engine", or "engine + backend slot" when k->sample_ops. */
void gf_k_note_sampler(gf_krun *k);
/* With k->sample_ops: run B rows of logits (B, V) through the backend's slot
 * (gf_backend_sample, model NULL; seq_ids NULL = row index) and tally whether
 * each token equals engine_tokens[b], gf_sample's for the same row, seq id
 * and step. what names the call in the first mismatch. No-op without a slot. */
void gf_k_slot_rows(gf_krun *k, const char *what, const float *logits, int32_t B, int32_t V, const gf_sampler_params *p,
                    const uint64_t *seq_ids, uint64_t step, const int32_t *engine_tokens);
/* The slot's check and metrics (the runner calls it after a sampler-only kind
 * ran): "backend sample slot equals engine sampler". No-op without a slot. */
void gf_k_slot_finish(gf_krun *k);
/* Model kinds: when the session's backend has a `sample` slot, point
 * k->sample_ops at it (called with model NULL: the engine does not hand out
 * its backend model handle) so that every sampling step also runs through the
 * slot; the kind then calls gf_k_slot_finish itself. Returns 1 attached. */
int gf_k_slot_attach(gf_krun *k);
/* An on_step function (gf_generate_params.on_step) for model kinds with no
 * capture of their own: each step's rows through the slot (gf_k_slot_rows)
 * against the engine's choice (info->results), with the run's sampler and
 * seq ids. user: a gf_k_slot_steps. No-op without k->sample_ops. */
typedef struct gf_k_slot_steps {
    gf_krun *k;
    const gf_generate_params *gp; /* its sampler and seq_ids (NULL = row index) */
} gf_k_slot_steps;
gf_status gf_k_slot_on_step(void *user, const gf_step_info *info);

#endif
