/* The sampler: temperature -> top-k -> top-p -> exponential-race draw.
 *
 * Semantics (the seed's sample_next, docs/sampler.md):
 *  1. temperature 0 returns the argmax (lowest index on ties); negative, NaN
 *     or infinite temperature is an error. Otherwise z = logits / temperature
 *     (in double).
 *  2. top-k (if set): everything strictly below the k-th largest z becomes
 *     -inf (ties with the k-th are kept); k > V clamps to V; k < 1 is an error.
 *  3. top-p (if set): sort z descending, softmax, exclusive prefix sum; a token
 *     is dropped once the mass before it has reached p (>= p); the top token is
 *     always kept; p outside (0, 1] (or NaN) is an error.
 *  4. draw: the kept token maximising  z_i - log(E_i),  E_i = -log(u_i), with
 *     u_i = gf_rng_uniform(seed, seq_id, step, i) (docs/random.md). This is
 *     argmax p_i / E_i (the exponential race, Gumbel-max), since log p_i and
 *     z_i differ by a constant.
 * The margin of a step is top-1 minus top-2 of the scores that chose it: raw
 * logits when greedy, raced scores z_i - log E_i when sampled; +inf when only
 * one candidate remains. No global state: the same inputs give the same token. */
#ifndef GENFENCE_SAMPLER_H
#define GENFENCE_SAMPLER_H

#include <stdint.h>

#include "genfence/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gf_sampler_params {
    double temperature;  /* 0 = greedy */
    int32_t use_top_k;   /* 0: top-k off */
    int32_t top_k;
    int32_t use_top_p;   /* 0: top-p off */
    double top_p;
    uint64_t seed;       /* Philox key */
};
typedef struct gf_sampler_params gf_sampler_params;

/* Greedy defaults: temperature 0, no top-k/top-p, seed 0. */
gf_sampler_params gf_sampler_greedy(void);

/* GF_OK or GF_E_INVALID_ARG with the offending parameter in the message. */
gf_status gf_sampler_validate(const gf_sampler_params *p);

typedef struct gf_sample_result {
    int32_t token;
    int32_t runner_up;   /* token with the second score, -1 if none */
    double margin;       /* top-1 minus top-2 score (see above), +inf if no runner-up */
    int32_t kept;        /* candidates left after top-k/top-p (V when greedy) */
} gf_sample_result;

/* Sample one row of V logits for sequence seq_id at generation step `step`. */
gf_status gf_sample(const float *logits, int32_t V, const gf_sampler_params *p,
                    uint64_t seq_id, uint64_t step, gf_sample_result *out);

/* Steps 1-3 only: the filtered, temperature-scaled logits z (V, -inf where
 * dropped). Greedy (temperature 0) keeps only the argmax. */
gf_status gf_sampler_filter(const float *logits, int32_t V, const gf_sampler_params *p,
                            double *z_out);

/* softmax of gf_sampler_filter's z: the distribution draws follow (V). */
gf_status gf_sampler_probs(const float *logits, int32_t V, const gf_sampler_params *p,
                           double *probs_out);

/* Greedy over raw logits without validation: token = first index of the
 * maximum, runner_up = first index of the maximum of the rest, margin = their
 * difference (+inf if no runner-up); -inf entries are never a runner-up. */
void gf_sampler_greedy_pick(const float *logits, int32_t V, gf_sample_result *out);

/* The race over already-filtered z (V) with the given uniforms u (V). */
void gf_sampler_race(const double *z, const double *u, int32_t V, gf_sample_result *out);

/* ---- randomness (docs/random.md) ---- */

/* Philox4x32-10: counter (4 words), key (2 words) -> 4 words. */
void gf_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* key = (seed lo32, seed hi32); counter = (i / 4, step lo32, seq lo32, seq hi32);
 * word i % 4 of the output x gives u = (x + 0.5) / 2^32, in (0, 1). */
double gf_rng_uniform(uint64_t seed, uint64_t seq_id, uint64_t step, uint32_t i);
/* u_out[i] = gf_rng_uniform(seed, seq_id, step, i) for i in [0, V). */
void gf_rng_uniforms(uint64_t seed, uint64_t seq_id, uint64_t step, int32_t V, double *u_out);

#ifdef __cplusplus
}
#endif
#endif
