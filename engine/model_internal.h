/* Engine-internal: the parts of config.json that gf_model_config does not
 * carry (the rope_scaling parameters), and the rotary inverse frequencies. */
#ifndef GENFENCE_MODEL_INTERNAL_H
#define GENFENCE_MODEL_INTERNAL_H

#include "genfence/model.h"

typedef struct gf_rope_params {
    gf_rope_scaling type;     /* NONE, LINEAR, LLAMA3 */
    double factor;            /* linear, llama3 */
    double low_freq_factor;   /* llama3 */
    double high_freq_factor;  /* llama3 */
    int32_t original_max_pos; /* llama3: original_max_position_embeddings */
} gf_rope_params;

/* gf_config_load, also returning the rope_scaling parameters (rope_out may be NULL). */
gf_status gf_config_load_ex(const char *path, gf_model_config *cfg_out, gf_rope_params *rope_out);

/* The d_head/2 inverse frequencies exactly as transformers 4.47.1 computes
 * them in float32 (ROPE_INIT_FUNCTIONS: default, linear, llama3). */
void gf_rope_inv_freq(const gf_model_config *cfg, const gf_rope_params *rp, float *out);

/* gf_env_limit (the loaders' caps) and gf_path_join: genfence/util.h */
#include "genfence/util.h"

#endif
