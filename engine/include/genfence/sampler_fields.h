/* The sampler's fields, one table (docs/sampler.md, "The field table").
 *
 * Every parameter of a sampler -- the four of gf_sampler_params and every
 * field of gf_sampler_ext -- is one X() row of GF_SAMPLER_FIELD_LIST: its
 * name (the case key, the record key; `flag` is genfence generate's), its
 * type and where it lives, its default, the range a case key or flag reads,
 * the chain stage that must hold it (llamacpp's `chain`), and its argument
 * rules: one check every profile applies (`any`) and one per profile (seed,
 * hf, llamacpp, vllm), each a range with that engine's message. Everything
 * that reads, checks or writes a sampler walks this table:
 *
 *   engine/sampler_profile.c   gf_sampler_validate, gf_sampler_ext_defaults
 *   harness/kit/keys.c         the case keys (gf_y_sampler) and the record (gf_sampler_json)
 *   harness/cli/gen_sampler.c  genfence generate's flags, their --help lines
 *   harness/golden/golden.c    the golden's sampler record (and its diff)
 *
 * so a new filter is its row here, its field(s) at the end of gf_sampler_ext
 * (and its stage in GF_SAMPLER_STAGE_LIST), its stage in
 * engine/sampler_chain.c and its docs and cases.
 *
 * In-tree only (not installed: the plugin ABI is sampler.h). */
#ifndef GENFENCE_SAMPLER_FIELDS_H
#define GENFENCE_SAMPLER_FIELDS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "genfence/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_sf_type {
    GF_SF_REAL,       /* double */
    GF_SF_REAL_OPT,   /* double and a use flag (aux); null / none: off */
    GF_SF_INT,        /* int32_t */
    GF_SF_INT_OPT,    /* int32_t and a use flag (aux); null / none: off */
    GF_SF_SEED,       /* uint64_t */
    GF_SF_PROFILE,    /* int32_t gf_sampler_profile (a name; the case key may list several) */
    GF_SF_CHAIN,      /* int32_t chain[GF_SAMPLER_MAX_CHAIN], aux its length: stage names */
    GF_SF_BIAS,       /* const gf_logit_bias *, aux the count: {token id: bias} */
    GF_SF_IDS,        /* const int32_t *, aux the count: token ids >= 0 */
    GF_SF_PROMPT_LEN, /* int32_t in [0, the length of `history`] */
    GF_SF_SEQS,       /* const gf_token_seq *, aux the count: [[id, ...], ...] (bias unused) */
    GF_SF_SEQ_BIAS,   /* const gf_token_seq *, aux the count: [[[id, ...], bias], ...] */
} gf_sf_type;

/* Where a field lives: P gf_sampler_params, E gf_sampler_ext. */
#define GF_SF_STRUCT_P gf_sampler_params
#define GF_SF_STRUCT_E gf_sampler_ext
#define GF_SF_IN_EXT_P 0
#define GF_SF_IN_EXT_E 1

/* One argument rule: the value must lie in [lo, hi] (ends open with
 * LO_OPEN / HI_OPEN; NaN fails unless NAN_OK). The message takes the value
 * at its %s (rendered by the V_ style) and, with PREFIX, "PROFILE: " first.
 * A lists' rule reads its count. msg NULL: no rule. */
enum {
    GF_SFC_LO_OPEN = 1,
    GF_SFC_HI_OPEN = 2,
    GF_SFC_NAN_OK = 4,
    GF_SFC_PREFIX = 8,
    GF_SFC_V_G17 = 0x00,     /* %.17g */
    GF_SFC_V_NANWORD = 0x10, /* NaN as "NaN", else %.17g */
    GF_SFC_V_G = 0x20,       /* %g */
    GF_SFC_V_D = 0x30,       /* %d */
    GF_SFC_V_NONE = 0x40,    /* no value in the message */
    GF_SFC_V_PROFILE = 0x50, /* the profile's name */
    GF_SFC_V_MASK = 0xf0,
};
typedef struct gf_sf_check {
    double lo, hi;
    unsigned flags;
    const char *msg;
    uint32_t except; /* GF_PROFILE_BIT()s the rule does not apply to (an `any` rule) */
} gf_sf_check;
#define GF_SFC(lo, hi, flags, msg)    \
    {                                 \
        (lo), (hi), (flags), (msg), 0 \
    }
#define GF_SFC_EXCEPT(profiles, lo, hi, flags, msg) \
    {                                               \
        (lo), (hi), (flags), (msg), (profiles)      \
    }
#define GF_SFC_NONE      \
    {                    \
        0, 0, 0, NULL, 0 \
    }

/* rec: how gf_sampler_json (a run record, generate --json) writes it. */
enum {
    GF_SF_REC_ALWAYS,       /* always (an off optional as null) */
    GF_SF_REC_SET,          /* only when not at its default (set, non-empty) */
    GF_SF_REC_WITH_HISTORY, /* when `history` is written */
    GF_SF_REC_NEVER,        /* not at all (generate --json adds its own eos_id) */
};
/* flags */
enum {
    GF_SF_EXT_KEY = 1, /* naming it in a case gives the case an extension (eos_id alone does not:
                          kinds have their own eos_id key) */
    GF_SF_FILTER = 2,  /* changes the draw: a plain `sample` slot cannot run it (gf_sampler_params_plain) */
};

#define GF_SF_INF  ((double)INFINITY)
#define GF_SF_IMAX 2147483647.0

/* X(ID, name, type, where, member, aux, default, read_lo, read_hi, stage, rec, flags, flag, help,
 *   any, seed, hf, llamacpp, vllm)
 * Order: the record's (ext fields, then the params'), the case loader's and
 * generate's (an invalid sampler names its flags in this order). */
#define GF_SAMPLER_FIELD_LIST(X)                                                                                       \
    X(TEMPERATURE, "temperature", GF_SF_REAL, P, temperature, temperature, 0.0, -GF_SF_INF, GF_SF_INF, 0,              \
      GF_SF_REC_ALWAYS, 0, "--temperature", NULL, GF_SFC_NONE,                                                         \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_HI_OPEN | GF_SFC_V_NANWORD, "temperature must be a finite number >= 0, got %s"),   \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_LO_OPEN | GF_SFC_PREFIX,                                                           \
             "temperature (=%s) has to be a strictly positive float (HF's TemperatureLogitsWarper raises; greedy is "  \
             "do_sample=False)"),                                                                                      \
      GF_SFC(-GF_SF_INF, GF_SF_INF, GF_SFC_PREFIX | GF_SFC_V_NONE,                                                     \
             "temperature is NaN (llama.cpp would divide every logit by it)"),                                         \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_HI_OPEN | GF_SFC_PREFIX | GF_SFC_V_NANWORD,                                        \
             "temperature must be a non-negative finite number, got %s"))                                              \
    X(TOP_K, "top_k", GF_SF_INT_OPT, P, top_k, use_top_k, 0.0, -GF_SF_IMAX, GF_SF_IMAX, GF_STAGE_TOP_K,                \
      GF_SF_REC_ALWAYS, 0, "--top-k", NULL, GF_SFC_NONE,                                                               \
      GF_SFC(1.0, GF_SF_IMAX, GF_SFC_V_D, "top_k must be >= 1, got %s"),                                               \
      GF_SFC(0.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D,                                                              \
             "top_k has to be a strictly positive integer (0: off), got %s"),                                          \
      GF_SFC_NONE,                                                                                                     \
      GF_SFC(-1.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "top_k must be -1 or 0 (disable) or at least 1, got %s"))   \
    X(TOP_P, "top_p", GF_SF_REAL_OPT, P, top_p, use_top_p, 1.0, -GF_SF_INF, GF_SF_INF, GF_STAGE_TOP_P,                 \
      GF_SF_REC_ALWAYS, 0, "--top-p", NULL, GF_SFC_NONE,                                                               \
      GF_SFC(0.0, 1.0, GF_SFC_LO_OPEN | GF_SFC_V_NANWORD, "top_p must lie in (0, 1], got %s"),                         \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_NAN_OK | GF_SFC_PREFIX,                                                            \
             "top_p has to be a float in [0, 1] (>= 1 and NaN: off), got %s"),                                         \
      GF_SFC_NONE, GF_SFC(0.0, 1.0, GF_SFC_LO_OPEN | GF_SFC_PREFIX, "top_p must be in (0, 1], got %s"))                \
    X(SEED, "seed", GF_SF_SEED, P, seed, seed, 0.0, 0.0, 0.0, 0, GF_SF_REC_ALWAYS, 0, "--seed", NULL, GF_SFC_NONE,     \
      GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE)                                                              \
    X(PROFILE, "profile", GF_SF_PROFILE, E, profile, profile, 0.0, 0.0, 0.0, 0, GF_SF_REC_ALWAYS, GF_SF_EXT_KEY,       \
      "--profile",                                                                                                     \
      "  --profile NAME         seed (default), hf, llamacpp or vllm: whose argument\n"                                \
      "                         semantics and chain order (genfence list --profiles)\n",                               \
      GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE)                                                 \
    X(CHAIN, "chain", GF_SF_CHAIN, E, chain, n_chain, 0.0, 0.0, 0.0, 0, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER,   \
      "--chain",                                                                                                       \
      "  --chain S,S,...        llamacpp's stage order over penalties, dry, top_n_sigma, top_k,\n"                     \
      "                         typical_p, top_p, min_p, xtc, temperature (each set filter must be in it,\n"           \
      "                         the default top-k 40 and top-p 0.95 too: or give none)\n",                             \
      GF_SF_FIXED_ORDER, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE)                                           \
    X(MIN_P, "min_p", GF_SF_REAL_OPT, E, min_p, use_min_p, 0.0, -GF_SF_INF, GF_SF_INF, GF_STAGE_MIN_P, GF_SF_REC_SET,  \
      GF_SF_EXT_KEY | GF_SF_FILTER, "--min-p", "  --min-p P|none         keep p_i >= P * p_max (default none)\n",      \
      GF_SFC_NONE, GF_SFC(0.0, 1.0, GF_SFC_PREFIX, "min_p must lie in [0, 1], got %s"),                                \
      GF_SFC(0.0, 1.0, GF_SFC_PREFIX, "min_p has to be a float in the [0, 1] interval, got %s"), GF_SFC_NONE,          \
      GF_SFC(0.0, 1.0, GF_SFC_PREFIX, "min_p must be in [0, 1], got %s"))                                              \
    X(TYPICAL_P, "typical_p", GF_SF_REAL_OPT, E, typical_p, use_typical_p, 1.0, -GF_SF_INF, GF_SF_INF,                 \
      GF_STAGE_TYPICAL_P, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--typical-p",                                  \
      "  --typical-p P|none     locally typical sampling (default none)\n", GF_SFC_NONE,                               \
      GF_SFC(0.0, 1.0, GF_SFC_LO_OPEN | GF_SFC_PREFIX, "typical_p must lie in (0, 1], got %s"),                        \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_LO_OPEN | GF_SFC_NAN_OK | GF_SFC_PREFIX,                                           \
             "typical_p has to be a float > 0 (>= 1 and NaN: off), got %s"),                                           \
      GF_SFC_NONE, GF_SFC(1.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE, "vLLM has no typical_p"))                           \
    X(REPETITION_PENALTY, "repetition_penalty", GF_SF_REAL, E, repetition_penalty, repetition_penalty, 1.0,            \
      -GF_SF_INF, GF_SF_INF, GF_STAGE_PENALTIES, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--repetition-penalty",  \
      "  --repetition-penalty R over the history: prompt and generated ids (default 1: off)\n", GF_SFC_NONE,           \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_LO_OPEN | GF_SFC_HI_OPEN | GF_SFC_PREFIX,                                          \
             "repetition_penalty must be a finite number > 0, got %s"),                                                \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_LO_OPEN | GF_SFC_PREFIX,                                                           \
             "repetition_penalty has to be a strictly positive float, got %s"),                                        \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_LO_OPEN | GF_SFC_HI_OPEN | GF_SFC_PREFIX,                                          \
             "repeat penalty must be a finite number > 0 (1: off), got %s"),                                           \
      GF_SFC(0.0, GF_SF_INF, GF_SFC_LO_OPEN | GF_SFC_HI_OPEN | GF_SFC_PREFIX,                                          \
             "repetition_penalty must be greater than zero, got %s"))                                                  \
    X(FREQUENCY_PENALTY, "frequency_penalty", GF_SF_REAL, E, frequency_penalty, frequency_penalty, 0.0, -GF_SF_INF,    \
      GF_SF_INF, GF_STAGE_PENALTIES, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--frequency-penalty",               \
      "  --frequency-penalty F  z -= F * count (default 0)\n",                                                         \
      GF_SF_FINITE("frequency_penalty must be finite, got %s"), GF_SFC_NONE,                                           \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_G, "transformers has no frequency_penalty (got %s)"), GF_SFC_NONE,     \
      GF_SFC(-2.0, 2.0, GF_SFC_PREFIX | GF_SFC_V_G, "frequency_penalty must be in [-2, 2], got %s"))                   \
    X(PRESENCE_PENALTY, "presence_penalty", GF_SF_REAL, E, presence_penalty, presence_penalty, 0.0, -GF_SF_INF,        \
      GF_SF_INF, GF_STAGE_PENALTIES, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--presence-penalty",                \
      "  --presence-penalty P   z -= P once seen (default 0)\n",                                                       \
      GF_SF_FINITE("presence_penalty must be finite, got %s"), GF_SFC_NONE,                                            \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_G, "transformers has no presence_penalty (got %s)"), GF_SFC_NONE,      \
      GF_SFC(-2.0, 2.0, GF_SFC_PREFIX | GF_SFC_V_G, "presence_penalty must be in [-2, 2], got %s"))                    \
    X(PENALTY_LAST_N, "penalty_last_n", GF_SF_INT, E, penalty_last_n, penalty_last_n, -1.0, -1.0, GF_SF_IMAX, 0,       \
      GF_SF_REC_SET, GF_SF_EXT_KEY, "--penalty-last-n",                                                                \
      "  --penalty-last-n N     llamacpp: the last N ids count (-1 all, 0 off; default -1)\n",                         \
      GF_SFC(-1.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D,                                                             \
             "penalty_last_n must be >= -1 (-1: the whole history), got %s"),                                          \
      GF_SFC_NONE,                                                                                                     \
      GF_SFC(-1.0, -1.0, GF_SFC_PREFIX | GF_SFC_V_NONE,                                                                \
             "repetition_penalty covers the whole history; penalty_last_n is llamacpp's"),                             \
      GF_SFC_NONE,                                                                                                     \
      GF_SFC(-1.0, -1.0, GF_SFC_PREFIX | GF_SFC_V_NONE,                                                                \
             "penalties cover the whole prompt and output; penalty_last_n is llamacpp's"))                             \
    X(MIN_TOKENS_TO_KEEP, "min_tokens_to_keep", GF_SF_INT, E, min_tokens_to_keep, min_tokens_to_keep, 1.0, 0.0,        \
      GF_SF_IMAX, 0, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--min-tokens-to-keep",                              \
      "  --min-tokens-to-keep N (default 1; llamacpp's min_keep may be 0)\n", GF_SFC_NONE,                             \
      GF_SFC(1.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "min_tokens_to_keep must be >= 1, got %s"),                  \
      GF_SFC(1.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "min_tokens_to_keep has to be a positive integer, got %s"),  \
      GF_SFC(0.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "min_keep must be >= 0, got %s"),                            \
      GF_SFC(1.0, 1.0, GF_SFC_PREFIX | GF_SFC_V_D, "vLLM has no min_tokens_to_keep (got %s)"))                         \
    X(LOGIT_BIAS, "logit_bias", GF_SF_BIAS, E, bias, n_bias, 0.0, 0.0, GF_SF_IMAX, 0, GF_SF_REC_SET,                   \
      GF_SF_EXT_KEY | GF_SF_FILTER, "--logit-bias",                                                                    \
      "  --logit-bias ID:B,...  add B to token ID's logit (-inf bans it); repeatable\n", GF_SFC_NONE, GF_SFC_NONE,     \
      GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE)                                                                           \
    X(HISTORY, "history", GF_SF_IDS, E, history, n_history, 0.0, 0.0, GF_SF_IMAX, 0, GF_SF_REC_SET, GF_SF_EXT_KEY,     \
      NULL, NULL, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE)                                     \
    X(HISTORY_PROMPT, "history_prompt", GF_SF_PROMPT_LEN, E, n_prompt, n_prompt, 0.0, 0.0, GF_SF_IMAX, 0,              \
      GF_SF_REC_WITH_HISTORY, GF_SF_EXT_KEY, NULL, NULL, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE,           \
      GF_SFC_NONE)                                                                                                     \
    X(MIN_NEW_TOKENS, "min_new_tokens", GF_SF_INT, E, min_new_tokens, min_new_tokens, 0.0, 0.0, GF_SF_IMAX, 0,         \
      GF_SF_REC_SET, GF_SF_EXT_KEY, "--min-new-tokens",                                                                \
      "  --min-new-tokens N     ban the eos id (vllm: and the stop ids) before N new tokens\n",                        \
      GF_SFC(0.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "min_new_tokens must be >= 0, got %s"), GF_SFC_NONE,         \
      GF_SFC_NONE,                                                                                                     \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE,                                                                  \
             "llama.cpp's sampler has no min_new_tokens (ban EOS with logit_bias)"),                                   \
      GF_SFC_NONE)                                                                                                     \
    X(EOS_ID, "eos_id", GF_SF_INT, E, eos_id, eos_id, -1.0, 0.0, GF_SF_IMAX, 0, GF_SF_REC_NEVER, 0, NULL, NULL,        \
      GF_SFC(-1.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "eos_id must be >= 0 (or -1: none), got %s"), GF_SFC_NONE,  \
      GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE)                                                                           \
    X(STOP_TOKEN_IDS, "stop_token_ids", GF_SF_IDS, E, stop_ids, n_stop_ids, 0.0, 0.0, GF_SF_IMAX, 0, GF_SF_REC_SET,    \
      GF_SF_EXT_KEY, "--stop-token-ids",                                                                               \
      "  --stop-token-ids A,B   stop after any of these ids (stop_reason stop_token_id)\n", GF_SFC_NONE, GF_SFC_NONE,  \
      GF_SFC_NONE, GF_SFC_NONE, GF_SFC_NONE)                                                                           \
    X(XTC_PROBABILITY, "xtc_probability", GF_SF_REAL, E, xtc_probability, xtc_probability, 0.0, -GF_SF_INF, GF_SF_INF, \
      GF_STAGE_XTC, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--xtc-probability",                                  \
      "  --xtc-probability P    llamacpp's XTC: 0 off, 1 every step (default 0)\n", GF_SFC_NONE,                       \
      GF_SF_XTC_ONLY("xtc_probability", 0.0), GF_SF_XTC_ONLY("xtc_probability", 0.0),                                  \
      GF_SFC(-GF_SF_INF, GF_SF_INF, GF_SFC_PREFIX | GF_SFC_V_NONE, "xtc_probability is NaN"),                          \
      GF_SF_XTC_ONLY("xtc_probability", 0.0))                                                                          \
    X(XTC_THRESHOLD, "xtc_threshold", GF_SF_REAL, E, xtc_threshold, xtc_threshold, 0.1, -GF_SF_INF, GF_SF_INF, 0,      \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--xtc-threshold",                                                  \
      "  --xtc-threshold T      XTC drops the tokens with p >= T but the last (> 0.5: off; default 0.1)\n",            \
      GF_SFC_NONE, GF_SF_XTC_ONLY("xtc_threshold", 0.1), GF_SF_XTC_ONLY("xtc_threshold", 0.1),                         \
      GF_SFC(-GF_SF_INF, GF_SF_INF, GF_SFC_PREFIX | GF_SFC_V_NONE, "xtc_threshold is NaN"),                            \
      GF_SF_XTC_ONLY("xtc_threshold", 0.1))                                                                            \
    X(XTC_MIN_KEEP, "xtc_min_keep", GF_SF_INT, E, xtc_min_keep, xtc_min_keep, 1.0, 0.0, GF_SF_IMAX, 0, GF_SF_REC_SET,  \
      GF_SF_EXT_KEY | GF_SF_FILTER, "--xtc-min-keep",                                                                  \
      "  --xtc-min-keep N       XTC fires only if at least N tokens stay (default 1)\n", GF_SFC_NONE,                  \
      GF_SF_XTC_ONLY("xtc_min_keep", 1.0), GF_SF_XTC_ONLY("xtc_min_keep", 1.0),                                        \
      GF_SFC(0.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "xtc_min_keep must be >= 0, got %s"),                        \
      GF_SF_XTC_ONLY("xtc_min_keep", 1.0))                                                                             \
    X(TOP_N_SIGMA, "top_n_sigma", GF_SF_REAL, E, top_n_sigma, top_n_sigma, -1.0, -GF_SF_INF, GF_SF_INF,                \
      GF_STAGE_TOP_N_SIGMA, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--top-n-sigma",                              \
      "  --top-n-sigma N        llamacpp: drop z < z_max - N * sigma (<= 0 off; default -1)\n", GF_SFC_NONE,           \
      GF_SF_LC_ONLY("top_n_sigma", "top-n-sigma", -1.0), GF_SF_LC_ONLY("top_n_sigma", "top-n-sigma", -1.0),            \
      GF_SF_FINITE("top_n_sigma must be finite, got %s"), GF_SF_LC_ONLY("top_n_sigma", "top-n-sigma", -1.0))           \
    X(DRY_MULTIPLIER, "dry_multiplier", GF_SF_REAL, E, dry_multiplier, dry_multiplier, 0.0, -GF_SF_INF, GF_SF_INF,     \
      GF_STAGE_DRY, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--dry-multiplier",                                   \
      "  --dry-multiplier M     llamacpp's DRY: penalty M * base^(len - allowed) (0 off; default 0)\n", GF_SFC_NONE,   \
      GF_SF_DRY_ONLY("dry_multiplier", 0.0), GF_SF_DRY_ONLY("dry_multiplier", 0.0),                                    \
      GF_SF_FINITE("dry_multiplier must be finite, got %s"), GF_SF_DRY_ONLY("dry_multiplier", 0.0))                    \
    X(DRY_BASE, "dry_base", GF_SF_REAL, E, dry_base, dry_base, 1.75, -GF_SF_INF, GF_SF_INF, GF_STAGE_DRY,              \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--dry-base",                                                       \
      "  --dry-base B           DRY's base (< 1 off; default 1.75)\n", GF_SFC_NONE, GF_SF_DRY_ONLY("dry_base", 1.75),  \
      GF_SF_DRY_ONLY("dry_base", 1.75), GF_SF_FINITE("dry_base must be finite, got %s"),                               \
      GF_SF_DRY_ONLY("dry_base", 1.75))                                                                                \
    X(DRY_ALLOWED_LENGTH, "dry_allowed_length", GF_SF_INT, E, dry_allowed_length, dry_allowed_length, 2.0, 0.0,        \
      GF_SF_IMAX, GF_STAGE_DRY, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--dry-allowed-length",                   \
      "  --dry-allowed-length N DRY penalises repeats longer than N tokens (default 2)\n", GF_SFC_NONE,                \
      GF_SF_DRY_ONLY("dry_allowed_length", 2.0), GF_SF_DRY_ONLY("dry_allowed_length", 2.0),                            \
      GF_SFC(0.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "dry_allowed_length must be >= 0, got %s"),                  \
      GF_SF_DRY_ONLY("dry_allowed_length", 2.0))                                                                       \
    X(DRY_PENALTY_LAST_N, "dry_penalty_last_n", GF_SF_INT, E, dry_penalty_last_n, dry_penalty_last_n, -1.0, -1.0,      \
      GF_SF_IMAX, GF_STAGE_DRY, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--dry-penalty-last-n",                   \
      "  --dry-penalty-last-n N DRY scans the last N ids of the history (-1 all, 0 off; default -1)\n", GF_SFC_NONE,   \
      GF_SF_DRY_ONLY("dry_penalty_last_n", -1.0), GF_SF_DRY_ONLY("dry_penalty_last_n", -1.0),                          \
      GF_SFC(-1.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D,                                                             \
             "dry_penalty_last_n must be >= -1 (-1: the history), got %s"),                                            \
      GF_SF_DRY_ONLY("dry_penalty_last_n", -1.0))                                                                      \
    X(DRY_SEQUENCE_BREAKERS, "dry_sequence_breakers", GF_SF_IDS, E, dry_breakers, n_dry_breakers, 0.0, 0.0,            \
      GF_SF_IMAX, GF_STAGE_DRY, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--dry-sequence-breakers",                \
      "  --dry-sequence-breakers A,B  DRY's breaker token ids (single tokens; default none)\n", GF_SFC_NONE,           \
      GF_SF_DRY_ONLY("dry_sequence_breakers", 0.0), GF_SF_DRY_ONLY("dry_sequence_breakers", 0.0), GF_SFC_NONE,         \
      GF_SF_DRY_ONLY("dry_sequence_breakers", 0.0))                                                                    \
    X(MIROSTAT, "mirostat", GF_SF_INT, E, mirostat, mirostat, 0.0, 0.0, 2.0, 0, GF_SF_REC_SET,                         \
      GF_SF_EXT_KEY | GF_SF_FILTER, "--mirostat",                                                                      \
      "  --mirostat 0|1|2       llamacpp: mirostat v1 / v2 replaces the chain (default 0: off)\n", GF_SFC_NONE,        \
      GF_SF_MIRO_ONLY("mirostat", 0.0), GF_SF_MIRO_ONLY("mirostat", 0.0),                                              \
      GF_SFC(0.0, 2.0, GF_SFC_PREFIX | GF_SFC_V_D, "mirostat must be 0, 1 or 2, got %s"),                              \
      GF_SF_MIRO_ONLY("mirostat", 0.0))                                                                                \
    X(MIROSTAT_TAU, "mirostat_tau", GF_SF_REAL, E, mirostat_tau, mirostat_tau, 5.0, -GF_SF_INF, GF_SF_INF, 0,          \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--mirostat-tau",                                                   \
      "  --mirostat-tau T       mirostat's target surprise in bits (default 5)\n", GF_SFC_NONE,                        \
      GF_SF_MIRO_ONLY("mirostat_tau", 5.0), GF_SF_MIRO_ONLY("mirostat_tau", 5.0),                                      \
      GF_SF_FINITE("mirostat_tau must be finite, got %s"), GF_SF_MIRO_ONLY("mirostat_tau", 5.0))                       \
    X(MIROSTAT_ETA, "mirostat_eta", GF_SF_REAL, E, mirostat_eta, mirostat_eta, 0.1, -GF_SF_INF, GF_SF_INF, 0,          \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--mirostat-eta",                                                   \
      "  --mirostat-eta E       mirostat's learning rate (default 0.1)\n", GF_SFC_NONE,                                \
      GF_SF_MIRO_ONLY("mirostat_eta", 0.1), GF_SF_MIRO_ONLY("mirostat_eta", 0.1),                                      \
      GF_SF_FINITE("mirostat_eta must be finite, got %s"), GF_SF_MIRO_ONLY("mirostat_eta", 0.1))                       \
    X(MIROSTAT_MU, "mirostat_mu", GF_SF_REAL_OPT, E, mirostat_mu, use_mirostat_mu, 0.0, -GF_SF_INF, GF_SF_INF, 0,      \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--mirostat-mu",                                                    \
      "  --mirostat-mu M|none   mirostat's state going into the step (default none: 2 * tau)\n", GF_SFC_NONE,          \
      GF_SFC(1.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE, "mirostat_mu is llamacpp's mirostat (give profile: llamacpp)"),  \
      GF_SFC(1.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE, "mirostat_mu is llamacpp's mirostat (give profile: llamacpp)"),  \
      GF_SF_FINITE("mirostat_mu must be finite, got %s"),                                                              \
      GF_SFC(1.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE, "mirostat_mu is llamacpp's mirostat (give profile: llamacpp)"))  \
    X(NO_REPEAT_NGRAM_SIZE, "no_repeat_ngram_size", GF_SF_INT, E, no_repeat_ngram_size, no_repeat_ngram_size, 0.0,     \
      0.0, GF_SF_IMAX, 0, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--no-repeat-ngram-size",                       \
      "  --no-repeat-ngram-size N  hf: ban what would repeat an N-gram of the history (default 0: off)\n",             \
      GF_SFC_NONE,                                                                                                     \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_D, "no_repeat_ngram_size is hf's (give profile: hf), got %s"),         \
      GF_SFC_NONE,                                                                                                     \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE,                                                                  \
             "llama.cpp's sampler has no no_repeat_ngram_size (DRY is its repeat guard)"),                             \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE, "vLLM's SamplingParams has no no_repeat_ngram_size"))            \
    X(EPSILON_CUTOFF, "epsilon_cutoff", GF_SF_REAL, E, epsilon_cutoff, epsilon_cutoff, 0.0, -GF_SF_INF, GF_SF_INF, 0,  \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--epsilon-cutoff",                                                 \
      "  --epsilon-cutoff E     hf: drop p < E (off outside (0, 1), as generate(); default 0)\n", GF_SFC_NONE,         \
      GF_SF_HF_ONLY("epsilon_cutoff", 0.0), GF_SFC_NONE, GF_SF_LC_NONE("epsilon_cutoff", 0.0),                         \
      GF_SF_VL_NONE("epsilon_cutoff", 0.0))                                                                            \
    X(ETA_CUTOFF, "eta_cutoff", GF_SF_REAL, E, eta_cutoff, eta_cutoff, 0.0, -GF_SF_INF, GF_SF_INF, 0, GF_SF_REC_SET,   \
      GF_SF_EXT_KEY | GF_SF_FILTER, "--eta-cutoff",                                                                    \
      "  --eta-cutoff E         hf: drop p < min(E, sqrt(E) exp(-entropy)) (off outside (0, 1); default 0)\n",         \
      GF_SFC_NONE, GF_SF_HF_ONLY("eta_cutoff", 0.0), GF_SFC_NONE, GF_SF_LC_NONE("eta_cutoff", 0.0),                    \
      GF_SF_VL_NONE("eta_cutoff", 0.0))                                                                                \
    X(BAD_WORDS_IDS, "bad_words_ids", GF_SF_SEQS, E, bad_words, n_bad_words, 0.0, 0.0, GF_SF_IMAX, 0, GF_SF_REC_SET,   \
      GF_SF_EXT_KEY | GF_SF_FILTER, NULL, NULL, GF_SFC_NONE,                                                           \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE, "bad_words_ids is hf's and vllm's (give profile: hf or vllm)"),  \
      GF_SFC_NONE, GF_SF_LC_NONE("bad_words_ids", 0.0), GF_SFC_NONE)                                                   \
    X(SEQUENCE_BIAS, "sequence_bias", GF_SF_SEQ_BIAS, E, sequence_bias, n_sequence_bias, 0.0, 0.0, GF_SF_IMAX, 0,      \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, NULL, NULL, GF_SFC_NONE, GF_SF_HF_ONLY("sequence_bias", 0.0),       \
      GF_SFC_NONE, GF_SF_LC_NONE("sequence_bias", 0.0),                                                                \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE,                                                                  \
             "vLLM's SamplingParams has no sequence_bias (logit_bias is per token)"))                                  \
    X(MIN_LENGTH, "min_length", GF_SF_INT, E, min_length, min_length, 0.0, -GF_SF_IMAX, GF_SF_IMAX, 0, GF_SF_REC_SET,  \
      GF_SF_EXT_KEY | GF_SF_FILTER, "--min-length",                                                                    \
      "  --min-length N         hf: ban the eos id while prompt + generated < N (default 0)\n", GF_SFC_NONE,           \
      GF_SF_HF_ONLY("min_length", 0.0),                                                                                \
      GF_SFC(0.0, GF_SF_IMAX, GF_SFC_PREFIX | GF_SFC_V_D, "`min_length` has to be a non-negative integer, but is %s"), \
      GF_SF_LC_NONE("min_length", 0.0), GF_SF_VL_NONE("min_length (min_tokens counts the generated ids)", 0.0))        \
    X(FORCED_BOS_TOKEN_ID, "forced_bos_token_id", GF_SF_INT, E, forced_bos_id, forced_bos_id, -1.0, 0.0, GF_SF_IMAX,   \
      0, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--forced-bos-token-id",                                         \
      "  --forced-bos-token-id ID  hf: the first generated token after a 1-id prompt is ID\n", GF_SFC_NONE,            \
      GF_SF_HF_ONLY("forced_bos_token_id", -1.0), GF_SFC_NONE, GF_SF_LC_NONE("forced_bos_token_id", -1.0),             \
      GF_SF_VL_NONE("forced_bos_token_id", -1.0))                                                                      \
    X(FORCED_EOS_TOKEN_ID, "forced_eos_token_id", GF_SF_INT, E, forced_eos_id, forced_eos_id, -1.0, 0.0, GF_SF_IMAX,   \
      0, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--forced-eos-token-id",                                         \
      "  --forced-eos-token-id ID  hf: the token at length max_length is ID\n", GF_SFC_NONE,                           \
      GF_SF_HF_ONLY("forced_eos_token_id", -1.0), GF_SFC_NONE, GF_SF_LC_NONE("forced_eos_token_id", -1.0),             \
      GF_SF_VL_NONE("forced_eos_token_id", -1.0))                                                                      \
    X(MAX_LENGTH, "max_length", GF_SF_INT, E, max_length, max_length, 20.0, 0.0, GF_SF_IMAX, 0, GF_SF_REC_SET,         \
      GF_SF_EXT_KEY | GF_SF_FILTER, "--max-length",                                                                    \
      "  --max-length N         hf's max_length (prompt + generated), read by forced EOS (default 20)\n", GF_SFC_NONE, \
      GF_SF_HF_ONLY("max_length", 20.0), GF_SFC_NONE, GF_SF_LC_NONE("max_length", 20.0),                               \
      GF_SF_VL_NONE("max_length", 20.0))                                                                               \
    X(EXP_DECAY_START, "exponential_decay_start", GF_SF_INT, E, exp_decay_start, exp_decay_start, -1.0, -1.0,          \
      GF_SF_IMAX, 0, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--exponential-decay-start",                         \
      "  --exponential-decay-start N  hf's exponential_decay_length_penalty start_index: after N\n"                    \
      "                         generated ids eos_id's logit grows by factor^(generated - N) (-1 off)\n",              \
      GF_SFC_NONE, GF_SF_HF_ONLY("exponential_decay_start", -1.0), GF_SFC_NONE,                                        \
      GF_SF_LC_NONE("exponential_decay_length_penalty", -1.0),                                                         \
      GF_SF_VL_NONE("exponential_decay_length_penalty", -1.0))                                                         \
    X(EXP_DECAY_FACTOR, "exponential_decay_factor", GF_SF_REAL, E, exp_decay_factor, exp_decay_factor, 1.0,            \
      -GF_SF_INF, GF_SF_INF, 0, GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--exponential-decay-factor",             \
      "  --exponential-decay-factor F  its decay_factor (default 1: no change)\n",                                     \
      GF_SF_FINITE("exponential_decay_factor must be finite, got %s"), GF_SF_HF_ONLY("exponential_decay_factor", 1.0), \
      GF_SFC_NONE, GF_SF_LC_NONE("exponential_decay_length_penalty", 1.0),                                             \
      GF_SF_VL_NONE("exponential_decay_length_penalty", 1.0))                                                          \
    X(ALLOWED_TOKEN_IDS, "allowed_token_ids", GF_SF_IDS, E, allowed_ids, n_allowed_ids, 0.0, 0.0, GF_SF_IMAX, 0,       \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--allowed-token-ids",                                              \
      "  --allowed-token-ids A,B  vllm: only these ids may be sampled\n", GF_SFC_NONE,                                 \
      GF_SF_VL_ONLY("allowed_token_ids"),                                                                              \
      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE,                                                                  \
             "allowed_token_ids is vLLM's (HF has prefix_allowed_tokens_fn, a "                                        \
             "callback; give profile: vllm)"),                                                                         \
      GF_SF_LC_NONE("allowed_token_ids", 0.0), GF_SFC_NONE)                                                            \
    X(STRUCTURED_OUTPUT_MASK, "structured_output_mask", GF_SF_IDS, E, mask_ids, n_mask_ids, 0.0, 0.0, GF_SF_IMAX, 0,   \
      GF_SF_REC_SET, GF_SF_EXT_KEY | GF_SF_FILTER, "--structured-output-mask",                                         \
      "  --structured-output-mask A,B  vllm: a grammar's bitmask, given as the ids it allows\n", GF_SFC_NONE,          \
      GF_SF_VL_ONLY("structured_output_mask"), GF_SF_VL_ONLY("structured_output_mask"),                                \
      GF_SF_LC_NONE("structured_output_mask (its grammar sampler needs a vocabulary)", 0.0), GF_SFC_NONE)

/* the shared rules of two rows above */
#define GF_SF_FIXED_ORDER                                                                          \
    GF_SFC_EXCEPT(GF_PROFILE_BIT(GF_PROFILE_LLAMACPP), 0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_PROFILE, \
                  "an explicit chain is llamacpp's (its order is configurable); %s has a fixed order")
/* XTC, top-n-sigma and DRY are llama.cpp's: every other profile refuses a
 * field away from its default (a list: any entry) */
#define GF_SF_LC_ONLY(name, what, def) \
    GF_SFC((def), (def), GF_SFC_PREFIX | GF_SFC_V_NONE, name " is llamacpp's " what " (give profile: llamacpp)")
#define GF_SF_XTC_ONLY(name, def)  GF_SF_LC_ONLY(name, "XTC", def)
#define GF_SF_DRY_ONLY(name, def)  GF_SF_LC_ONLY(name, "DRY", def)
#define GF_SF_MIRO_ONLY(name, def) GF_SF_LC_ONLY(name, "mirostat", def)
/* hf's and vllm's own filters: the other profiles refuse a field away
 * from its default (a list: any entry) */
#define GF_SF_HF_ONLY(name, def) GF_SFC((def), (def), GF_SFC_PREFIX | GF_SFC_V_NONE, name " is hf's (give profile: hf)")
#define GF_SF_VL_ONLY(name)      GF_SFC(0.0, 0.0, GF_SFC_PREFIX | GF_SFC_V_NONE, name " is vLLM's (give profile: vllm)")
#define GF_SF_LC_NONE(name, def) GF_SFC((def), (def), GF_SFC_PREFIX | GF_SFC_V_NONE, "llama.cpp's sampler has no " name)
#define GF_SF_VL_NONE(name, def) \
    GF_SFC((def), (def), GF_SFC_PREFIX | GF_SFC_V_NONE, "vLLM's SamplingParams has no " name)
#define GF_SF_FINITE(msg) \
    GF_SFC(-GF_SF_INF, GF_SF_INF, GF_SFC_LO_OPEN | GF_SFC_HI_OPEN | GF_SFC_PREFIX | GF_SFC_V_G, msg)

typedef enum gf_sf_id { /* GF_SFI_TEMPERATURE ... */
#define GF_SF_ENUM_(ID, ...) GF_SFI_##ID,
                        GF_SAMPLER_FIELD_LIST(GF_SF_ENUM_)
#undef GF_SF_ENUM_
                            GF_SF_COUNT
} gf_sf_id;

typedef struct gf_sampler_field {
    const char *name;
    gf_sf_type type;
    int in_ext;       /* 1: a gf_sampler_ext field, 0: gf_sampler_params */
    size_t off, aux;  /* the value; the use flag (_OPT) or the count (lists) */
    double def;       /* REAL, REAL_OPT, INT, INT_OPT, PROFILE */
    double lo, hi;    /* what a case key or flag reads (INT, IDS, BIAS tokens) */
    int stage;        /* the gf_sampler_stage that must be in llamacpp's chain when it is set; 0 none */
    int rec;          /* GF_SF_REC_* */
    unsigned flags;   /* GF_SF_EXT_KEY, GF_SF_FILTER */
    const char *flag; /* genfence generate's flag, NULL none */
    const char *help; /* its --help lines (the params' four: cmd_generate's own) */
    gf_sf_check any;  /* every profile */
    gf_sf_check by_profile[GF_PROFILE_COUNT];
} gf_sampler_field;

/* The table (engine/sampler_profile.c), GF_SF_COUNT rows in list order. */
extern const gf_sampler_field gf_sampler_fields[GF_SF_COUNT];

/* The field's value (f->off) and aux (f->aux) in p or e (e may be NULL for
 * a params field). */
void *gf_sf_at(const gf_sampler_field *f, gf_sampler_params *p, gf_sampler_ext *e, size_t off);
const void *gf_sf_cat(const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e, size_t off);
/* The count of a list field (CHAIN, BIAS, IDS); 0 otherwise. */
int32_t gf_sf_count(const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e);
/* 1 when the field holds its default: off, empty, or equal to f->def. */
int gf_sf_is_default(const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e);
/* The field back at its default (lists empty, optionals off). */
void gf_sf_reset(const gf_sampler_field *f, gf_sampler_params *p, gf_sampler_ext *e);

/* "seed, hf, llamacpp, vllm" (last_sep ", ") or "seed, hf, llamacpp or vllm"
 * (" or "): the profiles for a message. Static storage. */
const char *gf_sampler_profile_list(const char *last_sep);
/* "penalties, top_k, typical_p, top_p, min_p, temperature, xtc": the stages. */
const char *gf_sampler_stage_list(void);

#ifdef __cplusplus
}
#endif
#endif
