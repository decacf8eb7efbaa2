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

#include <stddef.h>
#include <stdint.h>

#include "genfence/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_sampler_ext gf_sampler_ext;

struct gf_sampler_params {
    double temperature; /* 0 = greedy */
    int32_t use_top_k;  /* 0: top-k off */
    int32_t top_k;
    int32_t use_top_p; /* 0: top-p off */
    double top_p;
    uint64_t seed; /* Philox key */
    /* Added after the first six fields (which every backend's `sample` slot
     * reads) and only ever read by genfence and a `sample_ex` slot: the
     * profile and the further filters. NULL = the seed profile with no
     * further filter, exactly the sampler above, bit for bit. A zero-
     * initialised or gf_sampler_greedy() struct has it NULL. */
    const gf_sampler_ext *ext;
};
typedef struct gf_sampler_params gf_sampler_params;

/* ---- sampler profiles (docs/sampler.md, "Profiles") ----
 *
 * A profile is one engine's argument semantics and chain order:
 *   seed      temperature -> top-k -> top-p (-> min-p -> typical), strict ranges
 *   hf        Hugging Face transformers 4.47 generate(): top_k 0 / top_p >= 1 /
 *             top_p NaN are off, top_p 0 keeps min_tokens_to_keep, temperature 0
 *             is an error (HF wants do_sample=False), no frequency/presence
 *   llamacpp  llama.cpp's sampler chain (default order penalties, top-k,
 *             typical, top-p, min-p, temperature; `chain` reorders): top_k <= 0
 *             off and exact (no ties kept), top_p 0 keeps one, temperature <= 0
 *             keeps the first maximum at its place in the chain
 *   vllm      vLLM v1: top_k -1 / 0 off, top_p in (0, 1], temperature < 1e-5
 *             greedy after penalties, min-p before top-k/top-p, an all -inf or
 *             poisoned (NaN, +inf) row still gives a valid id
 * The Philox exponential race of docs/random.md draws for every profile. */
typedef enum gf_sampler_profile {
    GF_PROFILE_SEED = 0,
    GF_PROFILE_HF = 1,
    GF_PROFILE_LLAMACPP = 2,
    GF_PROFILE_VLLM = 3,
} gf_sampler_profile;
#define GF_PROFILE_COUNT  4
#define GF_PROFILE_BIT(p) (1u << (unsigned)(p))

/* "seed", "hf", "llamacpp", "vllm"; NULL for anything else. */
const char *gf_sampler_profile_name(int profile);
/* The profile of a name, or -1. */
int gf_sampler_profile_from_name(const char *name);

/* Chain stages (llamacpp's `chain` orders them; logit bias and the
 * min_new_tokens EOS ban always come first): X(ID, value, name). */
#define GF_SAMPLER_STAGE_LIST(X)     \
    X(PENALTIES, 1, "penalties")     \
    X(TOP_K, 2, "top_k")             \
    X(TYPICAL_P, 3, "typical_p")     \
    X(TOP_P, 4, "top_p")             \
    X(MIN_P, 5, "min_p")             \
    X(TEMPERATURE, 6, "temperature") \
    X(XTC, 7, "xtc")                 \
    X(TOP_N_SIGMA, 8, "top_n_sigma") \
    X(DRY, 9, "dry")
typedef enum gf_sampler_stage {
#define GF_STAGE_ENUM_(ID, v, name) GF_STAGE_##ID = v,
    GF_SAMPLER_STAGE_LIST(GF_STAGE_ENUM_)
#undef GF_STAGE_ENUM_
} gf_sampler_stage;
#define GF_SAMPLER_MAX_CHAIN \
    6 /* the capacity of gf_sampler_ext.chain (part of its layout: an explicit chain
                                  names at most 6 of the stages) */
/* "penalties", "top_k", "typical_p", "top_p", "min_p", "temperature", "xtc",
 * "top_n_sigma", "dry"; NULL otherwise. */
const char *gf_sampler_stage_name(int stage);
int gf_sampler_stage_from_name(const char *name); /* -1 if unknown */

typedef struct gf_logit_bias {
    int32_t token;
    float bias; /* added to the logit; -inf bans the token */
} gf_logit_bias;

/* A token sequence: hf's bad_words_ids and sequence_bias entries, vllm's
 * bad words (as token ids). */
typedef struct gf_token_seq {
    int32_t n;
    const int32_t *ids; /* (n) */
    float bias;         /* sequence_bias: added to ids[n - 1]'s logit (-inf bans); bad words: unused */
} gf_token_seq;

/* The profile and further filters. Versioned: struct_size is the size the
 * caller was built with; fields past it take their gf_sampler_ext_defaults()
 * values. All pointers are borrowed for the call. */
struct gf_sampler_ext {
    uint32_t struct_size;
    int32_t profile;                     /* gf_sampler_profile */
    int32_t n_chain;                     /* 0: the profile's order; else llamacpp only */
    int32_t chain[GF_SAMPLER_MAX_CHAIN]; /* gf_sampler_stage, each at most once */
    int32_t use_min_p;
    double min_p; /* keep p_i >= min_p * max_j p_j */
    int32_t use_typical_p;
    double typical_p;           /* locally typical sampling mass */
    double repetition_penalty;  /* 1: off. seen z > 0: z / r, else z * r */
    double frequency_penalty;   /* 0: off. z -= f * count */
    double presence_penalty;    /* 0: off. z -= p * (count > 0) */
    int32_t penalty_last_n;     /* llamacpp: the last n history ids count; -1 all, 0 off */
    int32_t min_tokens_to_keep; /* >= 1 (llamacpp: min_keep, >= 0); vllm: 1 only */
    int32_t n_bias;
    const gf_logit_bias *bias; /* (n_bias) token -> bias, each token at most once */
    int32_t n_history;
    const int32_t *history; /* (n_history) prompt then generated ids */
    int32_t n_prompt;       /* history[0, n_prompt) is the prompt */
    int32_t min_new_tokens; /* ban eos_id (vllm: and stop_ids) while fewer generated */
    int32_t eos_id;         /* -1: none */
    int32_t n_stop_ids;
    const int32_t *stop_ids; /* (n_stop_ids) generation stops on these (generate) */
    /* llamacpp's XTC (exclude top choices): when it fires, every token with
     * p >= threshold but the least probable of them is dropped, if at least
     * min_keep stay. probability 0: off; 1: fires every step (genfence has no
     * per-step coin: (0, 1) is refused); threshold > 0.5: off. */
    double xtc_probability; /* 0 */
    double xtc_threshold;   /* 0.1 */
    int32_t xtc_min_keep;   /* 1 */
    /* llamacpp's top-n-sigma: drop z < z_max - n * sigma (sigma the
     * population standard deviation of the finite z); n <= 0: off. */
    double top_n_sigma; /* -1 */
    /* llamacpp's DRY ("don't repeat yourself"): a token that would extend a
     * repeat of the history's last tokens at least allowed_length long is
     * penalised by multiplier * base^(length - allowed_length). Over the last
     * penalty_last_n ids of the history (-1: all, 0: off); a breaker id in
     * that window limits the repeat length, and is never penalised itself.
     * multiplier 0 or base < 1: off. Breakers are single tokens. */
    double dry_multiplier;       /* 0 */
    double dry_base;             /* 1.75 */
    int32_t dry_allowed_length;  /* 2 */
    int32_t dry_penalty_last_n;  /* -1 */
    int32_t n_dry_breakers;      /* 0 */
    const int32_t *dry_breakers; /* (n_dry_breakers) token ids */
    /* llamacpp's mirostat (1: v1 with m = 100, 2: v2; 0 off): it replaces
     * the chain (bias, temperature, mirostat). Its state across steps is mu,
     * an input here: unset (use_mirostat_mu 0) is the first step's 2 * tau;
     * after a draw mu -= eta * (-log2 p_token - tau) (gf_sampler_mirostat_mu). */
    int32_t mirostat;        /* 0 */
    double mirostat_tau;     /* 5 */
    double mirostat_eta;     /* 0.1 */
    int32_t use_mirostat_mu; /* 0: 2 * tau */
    double mirostat_mu;
    /* hf's no_repeat_ngram_size: ban every token that would complete an
     * n-gram already in the history (prompt and generated); 0: off. */
    int32_t no_repeat_ngram_size; /* 0 */
    /* hf's epsilon and eta cutoffs (EpsilonLogitsWarper, EtaLogitsWarper),
     * after typical_p: drop p_i < epsilon, or p_i < min(eta, sqrt(eta) *
     * exp(-H)) with H the entropy, the top min_tokens_to_keep always kept;
     * generate() adds each only for a value in (0, 1): anything else is off. */
    double epsilon_cutoff; /* 0 */
    double eta_cutoff;     /* 0 */
    /* Banned token sequences: the last id of an entry is banned when the
     * history ends in the entry's other ids (one id: always). hf's
     * bad_words_ids over the whole history (a one-id entry equal to eos_id
     * is dropped, as HF does); vllm's bad_words over the generated ids. */
    int32_t n_bad_words;
    const gf_token_seq *bad_words; /* (n_bad_words); bias unused */
    /* hf's sequence_bias: an entry's bias is added to its last id's logit
     * when the history ends in its other ids (one id: always). */
    int32_t n_sequence_bias;
    const gf_token_seq *sequence_bias; /* (n_sequence_bias) */
    /* hf's min_length: ban eos_id while the history (prompt and generated)
     * is shorter than min_length; 0 off. */
    int32_t min_length;
    /* hf's forced BOS / EOS: every logit -inf but this id's, which becomes
     * 0, when the history holds 1 id (BOS) or max_length - 1 ids (EOS);
     * -1 none. max_length is HF's (default 20): only forced EOS reads it. */
    int32_t forced_bos_id; /* -1 */
    int32_t forced_eos_id; /* -1 */
    int32_t max_length;    /* 20 */
    /* vllm's allowed_token_ids: every other id -inf, first of all filters. */
    int32_t n_allowed_ids;
    const int32_t *allowed_ids; /* (n_allowed_ids) */
    /* vllm's structured-output mask, given (a grammar's bitmask as the ids it
     * allows): every other id -inf before the sampler; one that allows
     * nothing leaves an all -inf row (vllm's rule for it). */
    int32_t n_mask_ids;
    const int32_t *mask_ids; /* (n_mask_ids) */
    /* hf's exponential_decay_length_penalty = (start_index, decay_factor):
     * once more than start_index ids were generated (n_history - n_prompt
     * > start), eos_id's z += |z| (factor^k - 1), k = generated - start,
     * after the repetition penalty and before the warpers (generate()'s
     * order). start -1: off. */
    int32_t exp_decay_start; /* -1 */
    double exp_decay_factor; /* 1 */
};

/* Seed profile, nothing further: repetition 1, penalties 0, penalty_last_n
 * -1, min_tokens_to_keep 1, eos_id -1, no chain, no bias, no history. */
gf_sampler_ext gf_sampler_ext_defaults(void);

/* One row of the semantics table (genfence list --profiles): what a
 * parameter means under each profile, in profile order. */
typedef struct gf_profile_row {
    const char *what;
    const char *by_profile[GF_PROFILE_COUNT];
} gf_profile_row;
const gf_profile_row *gf_sampler_profile_rows(size_t *n);

/* The profile of p (seed when p->ext is NULL). */
int gf_sampler_params_profile(const gf_sampler_params *p);
/* 1 when p is what a `sample` slot without profiles implements: ext NULL,
 * or the seed profile with every further filter at its default. */
int gf_sampler_params_plain(const gf_sampler_params *p);

/* Greedy defaults: temperature 0, no top-k/top-p, seed 0, ext NULL. */
gf_sampler_params gf_sampler_greedy(void);

/* GF_OK or GF_E_INVALID_ARG with the offending parameter in the message
 * (under p's profile: e.g. top_p 0 is an error under seed and vllm only). */
gf_status gf_sampler_validate(const gf_sampler_params *p);

typedef struct gf_sample_result {
    int32_t token;
    int32_t runner_up; /* token with the second score, -1 if none */
    double margin;     /* top-1 minus top-2 score (see above), +inf if no runner-up */
    int32_t kept;      /* candidates left after top-k/top-p (V when greedy) */
} gf_sample_result;

/* Sample one row of V logits for sequence seq_id at generation step `step`. */
gf_status gf_sample(const float *logits, int32_t V, const gf_sampler_params *p, uint64_t seq_id, uint64_t step,
                    gf_sample_result *out);

/* gf_sample for one row of a generation: with p->ext set, under a copy of it
 * whose history is the row's tokens (prompt then generated, n_tokens of
 * them, the first n_prompt the prompt) and whose eos_id, when unset (-1), is
 * the generation's eos_id; with ext NULL exactly gf_sample. */
gf_status gf_sample_row(const float *logits, int32_t V, const gf_sampler_params *p, const int32_t *tokens,
                        int32_t n_tokens, int32_t n_prompt, int32_t eos_id, uint64_t seq_id, uint64_t step,
                        gf_sample_result *out);
/* 1 when token is one of p->ext's stop_token_ids (generation stops there). */
int gf_sampler_is_stop(const gf_sampler_params *p, int32_t token);

/* Mirostat's state after drawing `token` from the row (mirostat 1 or 2 under
 * llamacpp): *mu_out = mu - eta * (-log2 p_token - tau), p the row's kept,
 * renormalised distribution at p's mu (gf_sampler_probs). A generation
 * passes it as the next step's mirostat_mu. GF_E_INVALID_ARG when mirostat
 * is off or the token was not kept. */
gf_status gf_sampler_mirostat_mu(const float *logits, int32_t V, const gf_sampler_params *p, int32_t token,
                                 double *mu_out);

/* Steps 1-3 only: the filtered, temperature-scaled logits z (V, -inf where
 * dropped). Greedy (temperature 0) keeps only the argmax. */
gf_status gf_sampler_filter(const float *logits, int32_t V, const gf_sampler_params *p, double *z_out);

/* softmax of gf_sampler_filter's z: the distribution draws follow (V). */
gf_status gf_sampler_probs(const float *logits, int32_t V, const gf_sampler_params *p, double *probs_out);

/* ---- what a backend reports as log-probabilities (docs/sampler.md, "Logprobs") ----
 * X(ID, name): raw log_softmax of the raw logits (vLLM's raw_logprobs,
 * llama.cpp's n_probs, HF's output_logits normalised); raw_logits the raw
 * logits themselves (vLLM's raw_logits); scaled log_softmax(logits / T),
 * temperature alone; processed log_softmax of the profile's filtered z
 * (gf_sampler_filter: -inf where dropped; vLLM's processed_logprobs, HF's
 * output_scores normalised, llama.cpp's post_sampling_probs);
 * processed_logits the filtered z (vLLM's processed_logits, HF's
 * output_scores). */
#define GF_LOGPROB_MODE_LIST(X) \
    X(RAW, "raw")               \
    X(RAW_LOGITS, "raw_logits") \
    X(SCALED, "scaled")         \
    X(PROCESSED, "processed")   \
    X(PROCESSED_LOGITS, "processed_logits")
typedef enum gf_logprob_mode {
#define GF_LPM_ENUM_(ID, name) GF_LOGPROBS_##ID,
    GF_LOGPROB_MODE_LIST(GF_LPM_ENUM_)
#undef GF_LPM_ENUM_
        GF_LOGPROBS_COUNT
} gf_logprob_mode;
/* "raw", ... for a mode; NULL otherwise. */
const char *gf_logprob_mode_name(int mode);
int gf_logprob_mode_from_name(const char *name); /* -1 if unknown */
/* The V values of `mode` for the row under p (validated as gf_sample does).
 * scaled, processed and processed_logits need a sampled p (temperature
 * above the profile's greedy threshold): a greedy row reports no
 * temperature, and a profile's greedy processed values are its own choice
 * (GF_E_INVALID_ARG says so). */
gf_status gf_sampler_logprobs(const float *logits, int32_t V, const gf_sampler_params *p, int mode, double *out);

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
