/* Loading a Hugging Face model directory (config.json + model.safetensors)
 * into a host-side gf_model_desc of F32 weights. */
#ifndef GENFENCE_MODEL_H
#define GENFENCE_MODEL_H

#include "genfence/model_desc.h"
#include "genfence/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_model gf_model;

/* Parse config.json (jansson). Required GPT-2 keys: model_type ("gpt2"),
 * vocab_size, n_positions, n_embd, n_layer, n_head; optional with Hugging
 * Face's defaults: layer_norm_epsilon (1e-5), activation_function
 * ("gelu_new"), n_inner (null = 4 n_embd), bos_token_id, eos_token_id,
 * tie_word_embeddings (true). Unknown keys are ignored; missing or wrong-typed
 * required keys are GF_E_FORMAT naming the file and the key. */
gf_status gf_config_load(const char *config_json_path, gf_model_config *cfg_out);

/* Load <dir>/config.json and <dir>/model.safetensors; tensor names as GPT-2's
 * (optionally prefixed "transformer."), lm_head.weight optional (else tied),
 * F32/F16/BF16 converted to F32, every shape checked against the config. */
gf_status gf_model_load(const char *dir, gf_model **model_out);
void gf_model_free(gf_model *m);                          /* NULL-safe */
const gf_model_desc *gf_model_desc_get(const gf_model *m);
const char *gf_model_dir(const gf_model *m);
size_t gf_model_param_count(const gf_model *m);

#ifdef __cplusplus
}
#endif
#endif
