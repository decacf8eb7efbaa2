/* The llamacpp backend module's private interface (see llamacpp.c). */
#ifndef GENFENCE_LLAMACPP_LC_H
#define GENFENCE_LLAMACPP_LC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "genfence/backend.h"

/* Weight types (the part of the config before any ','): f32, then what
 * llama_model_quantize makes of the F32 GGUF, as llama-quantize would. A
 * k-quant needs rows of 256: a tensor whose rows are not a multiple of 256
 * is quantized to llama.cpp's fallback type (q5_0 / q8_0 ...), as llama.cpp
 * itself does, so on the tiny models the k-quants are a mix (docs/llamacpp.md). */
typedef enum lc_wtype {
    LC_W_F32 = 0,
    LC_W_F16,
    LC_W_Q8_0,
    LC_W_Q6_K,
    LC_W_Q5_K_M,
    LC_W_Q4_K_M,
    LC_W_Q4_0,
    LC_W_COUNT
} lc_wtype;

/* KV cache types (kv=T for both, k=T and v=T apart). */
typedef enum lc_kvtype { LC_KV_F32 = 0, LC_KV_F16 = 1, LC_KV_Q8_0 = 2, LC_KV_Q4_0 = 3 } lc_kvtype;

typedef struct lc_config {
    lc_wtype wtype;
    int kv_k, kv_v;   /* lc_kvtype of the K and the V cache; -1 while unset (then the weights' default) */
    int flash_attn;   /* 1: llama.cpp's flash attention, 0: off */
    int extra_bufts;  /* 1: ggml's extra buffer types (AMX, repacked kernels), 0: off (repack=off) */
    int32_t n_batch;  /* batch=N: the most tokens one llama_decode takes (a forward of more is several); 0: all */
    int32_t n_ubatch; /* ubatch=N: llama.cpp's micro-batch, the tokens computed together; 0: 512 */
} lc_config;

/* Parse opts->config ("f32", "q8_0,kv=f16", "f32,k=q8_0,v=f16", "f16,fa=on",
 * "q8_0,repack=off" ...; NULL = "f32"). kv=T sets the K and V cache types,
 * k=T and v=T one each (f32, f16, q8_0, q4_0; a quantized V needs fa=on in
 * llama.cpp, which then refuses the context and genfence says so). Defaults:
 * kv=f32 for f32 weights, kv=f16 (llama.cpp's own default) for f16 and q8_0; fa=off; repack=on (llama.cpp's default:
 * model params use_extra_bufts); batch=N (llama.cpp's n_batch: a forward of
 * more real tokens is decoded N at a time) and ubatch=N (its n_ubatch, at
 * most n_batch), both >= 1, default every token in one decode and 512. */
gf_status lc_config_parse(const char *config, lc_config *out);
const char *lc_wtype_name(lc_wtype w);
const char *lc_kvtype_name(int t);
/* info.kv_cache: "f16" when K and V agree, else "k=q8_0,v=f16" (buf: at least 32 bytes) */
const char *lc_kv_desc(const lc_config *c, char *buf, size_t len);

/* Can llama.cpp run this description? GF_OK or the error, recorded. */
gf_status lc_check_desc(const gf_model_desc *desc);
/* Write desc as an F32 GGUF file at path. */
gf_status lc_gguf_write(const gf_model_desc *desc, const char *path);

/* The sample slot over llama.cpp's samplers (lc_sample.c). */
gf_status lc_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                    const gf_rng_draws *draws, int32_t *ids_out);
/* The llamacpp profile through llama.cpp's own chain (lc_sample.c). */
uint32_t lc_sample_profiles(void);
gf_status lc_sample_ex(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                       const gf_rng_draws *draws, int32_t *ids_out);

/* The trace slot over ggml's graph callback (lc_trace.c): begin before a
 * traced llama_decode of n_tokens whose token i is (batch row row[i], new
 * position pos[i]); finish after it (the points copied into req); end frees. */
struct ggml_tensor;
typedef struct lc_trace {
    const gf_trace_request *req;
    int32_t L, D, gpt2, n;
    const int32_t *row, *pos; /* (n) */
    float *buf;               /* (4 L + 2, n, D) */
    uint8_t *got;             /* (4 L + 2) */
    int32_t ub_off, ub_next;  /* the current ubatch's first token, the next one's */
    int32_t last_p;           /* the last point copied */
    int bad;
} lc_trace;
gf_status lc_trace_begin(lc_trace *tr, const gf_trace_request *req, int32_t n_layer, int32_t n_embd, int gpt2,
                         int32_t n_tokens, const int32_t *row, const int32_t *pos);
void lc_trace_finish(lc_trace *tr);
void lc_trace_end(lc_trace *tr);
/* llama_context_params.cb_eval: the tensors a traced decode on this thread asks for */
bool lc_trace_eval(struct ggml_tensor *t, bool ask, void *user);

#endif
