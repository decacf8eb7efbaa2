/* Beam search with Hugging Face transformers 4.47.1's rules (engine/beam.c;
 * `generate(num_beams=k, do_sample=False, length_penalty=..., early_stopping=...,
 * num_return_sequences=...)`, generation/utils.py _beam_search and
 * generation/beam_search.py BeamSearchScorer / BeamHypotheses), over a
 * backend's forward: an uncached recompute of every running beam at each
 * step (the ABI has no slot that copies a cache row), one prompt.
 *
 * Per step: each running beam's last-position logits through log_softmax
 * (double), plus the beam's running sum; the best 2 x num_beams of all
 * (beam, token) candidates, highest first, ties to the lower flat index
 * beam x V + token. In that order a candidate that is EOS (eos_id >= 0) and
 * ranks below num_beams is dropped; one that ranks within num_beams becomes
 * a finished hypothesis (its beam's tokens plus EOS, sum_logprobs the
 * candidate's score, generated_len = its length with EOS minus the prompt);
 * any other candidate continues as a running beam until num_beams run.
 * A hypothesis scores sum_logprobs / generated_len ^ length_penalty; the
 * num_beams best are kept (BeamHypotheses.add: the lowest is dropped, the
 * lower index on equal scores). The search is done once num_beams are kept
 * and: early_stopping true; false (the heuristic): the worst kept >= the best
 * candidate's sum / (running length + 1 - prompt) ^ length_penalty; never:
 * the same with max length in place of running length + 1 when
 * length_penalty > 0. It also stops after max_new_tokens tokens; a search
 * not done then adds every running beam as a hypothesis (generated_len =
 * max_new_tokens). The num_return best hypotheses come back, best first
 * (equal scores: the later one added first, as HF's stable sort and pop). */
#ifndef GENFENCE_BEAM_H
#define GENFENCE_BEAM_H

#include <stdint.h>

#include "genfence/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_beam_early {
    GF_BEAM_EARLY_FALSE = 0, /* HF early_stopping=False: the heuristic */
    GF_BEAM_EARLY_TRUE = 1,  /* stop once num_beams hypotheses finished */
    GF_BEAM_EARLY_NEVER = 2, /* "never": the best attainable score over max length */
} gf_beam_early;

typedef struct gf_beam_params {
    int32_t num_beams;      /* >= 2; 2 x num_beams <= V */
    int32_t num_return;     /* 1 .. num_beams */
    int32_t max_new_tokens; /* >= 1; prompt + max_new_tokens - 1 <= n_positions */
    double length_penalty;  /* finite */
    int32_t early_stopping; /* gf_beam_early */
    int32_t eos_id;         /* -1: none */
} gf_beam_params;

typedef struct gf_beam_result {
    int32_t n;              /* hypotheses returned (num_return) */
    int32_t prompt_len;     /* P */
    int32_t steps;          /* forward calls made */
    int32_t *n_tokens;      /* (n) P + generated (EOS included when it finished) */
    int32_t **tokens;       /* (n) x n_tokens[r] */
    double *scores;         /* (n) sum_logprobs / generated_len ^ length_penalty */
    double *sum_logprobs;   /* (n) */
    int32_t *generated_len; /* (n) */
    uint8_t *finished;      /* (n) 1: ended with EOS */
    /* the smallest score difference between two adjacent candidates among the
     * best 2 x num_beams + 1 of a step (how near a rank decision was to a tie),
     * and its step */
    double min_gap;
    int32_t min_gap_step;
} gf_beam_result;

/* Runs the search on e for one prompt (P >= 1 tokens). Fills *out (cleared
 * on failure); GF_E_INVALID_ARG naming the parameter. */
gf_status gf_beam_search(gf_engine *e, const int32_t *prompt, int32_t P, const gf_beam_params *p, gf_beam_result *out);
void gf_beam_result_clear(gf_beam_result *r); /* NULL-safe */

/* The index of the highest of scores[0..n), the lowest index on equal
 * scores (NaN never wins; -1 when n < 1 or every score is NaN): best_of's
 * pick (harness/kinds/multi_sample.c). */
int32_t gf_best_of(const double *scores, int32_t n);

#ifdef __cplusplus
}
#endif
#endif
