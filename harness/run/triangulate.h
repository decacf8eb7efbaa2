/* Triangulation: when backends disagree, which one is off, and by how much?
 *
 * For every model a run used and every backend other than ref, a child loads
 * the model on that backend AND on ref and runs one fixed probe through both:
 *   forward  uncached logits at every position of a deterministic sequence A
 *            (Philox tokens, seed 0x747269, up to 96 positions) and of a
 *            second sequence B of its own tokens (half as long);
 *   cached   A's second half decoded one token at a time through the cache;
 *   chunked  A prefilled into a cache in three chunks (T/4, T/3, the rest),
 *            every position's logits;
 *   padded   the left-padded batch [A; pads + B] (distinct tokens per row),
 *            each row against its sequence alone;
 *   padded_cached  the same batch through a cache: prefilled, then its last
 *            columns decoded one at a time.
 * Every part is judged against ref's uncached single-row forwards. Each
 * part's max |delta logit|, where it occurred, and ref's
 * top-1 minus top-2 margin there, go into the report. */
#ifndef GENFENCE_HARNESS_TRIANGULATE_H
#define GENFENCE_HARNESS_TRIANGULATE_H

#include <jansson.h>

#include "runner.h"

/* models: distinct model directories; backends: the run's probed backends.
 * Returns a JSON array (one object per (model, non-ref available backend)),
 * or an empty array when there is nothing to triangulate. */
json_t *gf_triangulate(const char *const *models, size_t n_models, const gf_backend_probe *backends, size_t n_backends,
                       const gf_run_opts *o);

/* Console lines for the array: a part agrees with ref when its max |delta|
 * is at most GF_TRIANGULATION_AGREE (verdict/compare.h, beside the gate).
 * Also names, for each case whose verdicts differ across backends, the one
 * that is off. */
void gf_triangulation_print(const json_t *tri, const gf_job *jobs, size_t n_jobs);

#endif
