/* Engine-internal: the parts of config.json that gf_model_config does not
 * carry (the rope_scaling parameters), and the rotary inverse frequencies. */
#ifndef GENFENCE_MODEL_INTERNAL_H
#define GENFENCE_MODEL_INTERNAL_H

#include "genfence/model.h"

#define GF_ROPE_MAX_HALF 512 /* longrope: at most this many factors (d_head <= 1024) */

typedef struct gf_rope_params {
    gf_rope_scaling type;                 /* NONE, LINEAR, LLAMA3, YARN, LONGROPE */
    double factor;                        /* linear, llama3, yarn */
    double low_freq_factor;               /* llama3 */
    double high_freq_factor;              /* llama3 */
    int32_t original_max_pos;             /* llama3: original_max_position_embeddings */
    int32_t max_pos;                      /* max_position_embeddings (yarn's correction range) */
    double beta_fast;                     /* yarn (32) */
    double beta_slow;                     /* yarn (1) */
    double attn_factor;                   /* yarn, longrope: what cos and sin are multiplied by; 1 otherwise */
    int32_t n_ext;                        /* longrope: d_head / 2 */
    double ext_factors[GF_ROPE_MAX_HALF]; /* longrope: the factors chosen at load (short or long) */
    int32_t long_factors;                 /* longrope: 1 if ext_factors are the long ones */
    /* not rotary: the sliding window every layer uses (Mistral's
     * sliding_window, Qwen2's with use_sliding_window); 0 = none */
    int32_t sliding_window;
} gf_rope_params;

/* gf_config_load, also returning the rope_scaling parameters (rope_out may be NULL). */
gf_status gf_config_load_ex(const char *path, gf_model_config *cfg_out, gf_rope_params *rope_out);

/* The d_head/2 inverse frequencies exactly as transformers 4.47.1 computes
 * them in float32 (ROPE_INIT_FUNCTIONS: default, linear, llama3, yarn,
 * longrope). */
void gf_rope_inv_freq(const gf_model_config *cfg, const gf_rope_params *rp, float *out);

/* YaRN's ramp edges [low, high] over the d_head / 2 frequencies, as
 * transformers 4.47.1's find_correction_range (rp->type YARN). */
void gf_rope_yarn_range(const gf_model_config *cfg, const gf_rope_params *rp, int32_t *low, int32_t *high);

/* gf_env_limit (the loaders' caps) and gf_path_join: genfence/util.h */
#include "genfence/util.h"

#endif
