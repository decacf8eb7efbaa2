/* Loading a Hugging Face model directory (config.json + model.safetensors or
 * its shards) into a host-side gf_model_desc of F32 weights: GPT-2, Llama,
 * Qwen2. */
#ifndef GENFENCE_MODEL_H
#define GENFENCE_MODEL_H

#include "genfence/model_desc.h"
#include "genfence/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_model gf_model;

/* Parse config.json (jansson). model_type "gpt2": required vocab_size,
 * n_positions, n_embd, n_layer, n_head; optional with Hugging Face's defaults:
 * layer_norm_epsilon (1e-5), activation_function ("gelu_new"), n_inner (null =
 * 4 n_embd), bos_token_id, eos_token_id, tie_word_embeddings (true).
 * model_type "llama" / "qwen2" (qwen2 = llama with q/k/v biases): required
 * vocab_size, hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, max_position_embeddings (-> n_positions); optional
 * num_key_value_heads (llama: = heads; qwen2 absent: 32), head_dim (llama
 * only; null = hidden_size / heads), rms_norm_eps (1e-6), rope_theta (10000),
 * tie_word_embeddings (false), hidden_act ("silu" only), bos/eos_token_id (a
 * list: its first), rope_scaling null or rope_type "linear" (factor) /
 * "llama3" (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings) / "yarn" / "longrope" / "dynamic"; model_type
 * "mistral" (llama with sliding_window, absent: 4096, null: none; kv heads
 * absent: 8) and qwen2's use_sliding_window (with max_window_layers 0) give
 * the desc's layer_window. Any other rope_type,
 * attention_bias or mlp_bias true, partial_rotary_factor != 1, and the keys
 * whose meaning changed after transformers 4.47.1 (docs/model-files.md) are
 * GF_E_UNSUPPORTED. Unknown keys are ignored; missing or wrong-typed keys
 * are GF_E_FORMAT naming the file and the key. */
gf_status gf_config_load(const char *config_json_path, gf_model_config *cfg_out);
/* The sliding window every layer of that config gets (gf_model_desc.layer_window:
 * Mistral's sliding_window, Qwen2's with use_sliding_window), 0 when none or
 * when it is at least the context (it then hides no key). */
gf_status gf_config_sliding_window(const char *config_json_path, int32_t *window_out);

/* Load <dir>/config.json and <dir>/model.safetensors (or the shards named by
 * <dir>/model.safetensors.index.json, which must agree with them exactly).
 * GPT-2 tensor names optionally prefixed "transformer.", lm_head.weight
 * optional (else tied). Llama names "model.embed_tokens.weight",
 * "model.layers.N.{input,post_attention}_layernorm.weight",
 * "model.layers.N.self_attn.{q,k,v,o}_proj.weight" (qwen2: + q/k/v .bias),
 * "model.layers.N.mlp.{gate,up,down}_proj.weight", "model.norm.weight"
 * ("model." optional), "lm_head.weight" (required unless tied; ignored when
 * tied, as transformers ties it). F32 tensors (4-byte aligned in the file)
 * handed out as views into the mapping, F16/BF16/F64 converted to F32; every
 * shape checked against the config before anything is allocated; the rotary
 * inverse frequencies computed as transformers does (weights.rope_inv_freq). */
gf_status gf_model_load(const char *dir, gf_model **model_out);
/* NULL-safe. Unmaps the weights: every engine made from the model's desc must
 * be destroyed first (its backend may keep pointers into them,
 * gf_model_desc.weights_persist). */
void gf_model_free(gf_model *m);
/* Bytes of the weights handed out as views into the mapping (and how many
 * tensors); the rest were converted into memory of the model's own. */
size_t gf_model_view_bytes(const gf_model *m, size_t *n_views);
const gf_model_desc *gf_model_desc_get(const gf_model *m);
const char *gf_model_dir(const gf_model *m);
size_t gf_model_param_count(const gf_model *m);

/* The inverse of gf_model_load (engine/model_write.c): desc written into the
 * existing directory dir as config.json (the family's Hugging Face keys, then
 * every key of extra_config, a JSON object or NULL, over them: rope_scaling,
 * say, which the loader then folds into rope_inv_freq) and model.safetensors
 * (F32, the names gf_model_load reads; lm_head only when untied). The
 * rope_inv_freq of desc is not written: the loader computes it from
 * rope_theta and rope_scaling (linear: written from config.rope_factor;
 * llama3: GF_E_UNSUPPORTED unless extra_config holds its mapping, since the
 * config keeps only the factor). */
typedef struct json_t json_t;
gf_status gf_model_write(const gf_model_desc *desc, const json_t *extra_config, const char *dir);
/* Remove what gf_model_write wrote into dir, then dir itself (if empty). */
void gf_model_write_remove(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
