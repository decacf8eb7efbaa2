/* genfence bench --shape: a model of a published shape with seeded random
 * weights, built in memory (nothing downloaded, nothing written). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const char *const gf_bench_shape_names[] = {"gpt2-small", "llama-small", "qwen2-0.5b", NULL};

int gf_bench_shape_config(const char *name, gf_model_config *c)
{
    memset(c, 0, sizeof *c);
    if (!strcmp(name, "gpt2-small")) { /* openai-community/gpt2 */
        *c = (gf_model_config){.arch = GF_ARCH_GPT2,
                               .activation = GF_ACT_GELU_TANH,
                               .norm = GF_NORM_LAYERNORM,
                               .pos = GF_POS_LEARNED,
                               .vocab_size = 50257,
                               .n_positions = 1024,
                               .n_embd = 768,
                               .n_layer = 12,
                               .n_head = 12,
                               .n_kv_head = 12,
                               .d_head = 64,
                               .d_ff = 3072,
                               .norm_eps = 1e-5f,
                               .bos_id = 50256,
                               .eos_id = 50256,
                               .tied_head = 1};
        return 0;
    }
    if (!strcmp(name, "llama-small")) { /* GPT-2-small's width and depth, Llama's parts:
                                           GQA 12/4 heads, SwiGLU 2048, 32k vocab, untied */
        *c = (gf_model_config){.arch = GF_ARCH_LLAMA,
                               .activation = GF_ACT_SILU,
                               .norm = GF_NORM_RMSNORM,
                               .pos = GF_POS_ROPE,
                               .vocab_size = 32000,
                               .n_positions = 2048,
                               .n_embd = 768,
                               .n_layer = 12,
                               .n_head = 12,
                               .n_kv_head = 4,
                               .d_head = 64,
                               .d_ff = 2048,
                               .norm_eps = 1e-6f,
                               .rope_theta = 10000.0f,
                               .bos_id = 1,
                               .eos_id = 2,
                               .tied_head = 0};
        return 0;
    }
    if (!strcmp(name, "qwen2-0.5b")) { /* Qwen/Qwen2.5-0.5B's config.json: 494M parameters, tied */
        *c = (gf_model_config){.arch = GF_ARCH_LLAMA,
                               .activation = GF_ACT_SILU,
                               .norm = GF_NORM_RMSNORM,
                               .pos = GF_POS_ROPE,
                               .vocab_size = 151936,
                               .n_positions = 32768,
                               .n_embd = 896,
                               .n_layer = 24,
                               .n_head = 14,
                               .n_kv_head = 2,
                               .d_head = 64,
                               .d_ff = 4864,
                               .norm_eps = 1e-6f,
                               .rope_theta = 1000000.0f,
                               .bos_id = 151643,
                               .eos_id = 151643,
                               .tied_head = 1,
                               .qkv_bias = 1};
        return 0;
    }
    return -1;
}

typedef struct carver {
    float *next;
    uint64_t rng;
} carver;

static float *take(carver *cv, size_t n)
{
    float *p = cv->next;
    cv->next += n;
    return p;
}

/* xorshift64*: uniform in [-a, a) with a = 0.02 sqrt(3) (std 0.02) */
static float *take_random(carver *cv, size_t n)
{
    float *p = take(cv, n);
    const float a = 0.02f * 1.7320508f;
    for (size_t i = 0; i < n; i++) {
        cv->rng ^= cv->rng >> 12;
        cv->rng ^= cv->rng << 25;
        cv->rng ^= cv->rng >> 27;
        uint64_t r = cv->rng * 2685821657736338717ull;
        p[i] = a * ((float)(r >> 40) * (2.0f / 16777216.0f) - 1.0f);
    }
    return p;
}

static float *take_fill(carver *cv, size_t n, float v)
{
    float *p = take(cv, n);
    for (size_t i = 0; i < n; i++)
        p[i] = v;
    return p;
}

gf_status gf_bench_shape_build(const char *name, uint64_t seed, gf_bench_shape *out)
{
    memset(out, 0, sizeof *out);
    gf_model_config c;
    if (gf_bench_shape_config(name, &c) != 0)
        return gf_error_set(GF_E_INVALID_ARG, "unknown shape '%s'", name);
    const size_t V = c.vocab_size, D = c.n_embd, F = c.d_ff, L = c.n_layer;
    const size_t Q = (size_t)c.n_head * c.d_head, KV = (size_t)c.n_kv_head * c.d_head;
    size_t n = (size_t)(gf_bench_param_count(&c) + 0.5) + (c.pos == GF_POS_ROPE ? (size_t)c.d_head / 2 : 0);
    out->arena = malloc(n * sizeof(float));
    out->layers = calloc(L, sizeof *out->layers);
    if (!out->arena || !out->layers) {
        gf_bench_shape_free(out);
        return gf_error_set(GF_E_NOMEM, "out of memory for a %zu-byte %s model", n * sizeof(float), name);
    }
    out->n_floats = n;
    carver cv = {.next = out->arena, .rng = seed * 0x9E3779B97F4A7C15ull + 1};
    gf_model_weights *w = &out->desc.weights;
    w->wte = take_random(&cv, V * D);
    for (size_t l = 0; l < L; l++) {
        gf_layer_weights *y = &out->layers[l];
        if (c.arch == GF_ARCH_GPT2) {
            y->ln1_w = take_fill(&cv, D, 1.0f);
            y->ln1_b = take_fill(&cv, D, 0.0f);
            y->attn_qkv_w = take_random(&cv, D * 3 * D);
            y->attn_qkv_b = take_fill(&cv, 3 * D, 0.0f);
            y->attn_proj_w = take_random(&cv, D * D);
            y->attn_proj_b = take_fill(&cv, D, 0.0f);
            y->ln2_w = take_fill(&cv, D, 1.0f);
            y->ln2_b = take_fill(&cv, D, 0.0f);
            y->mlp_fc_w = take_random(&cv, D * F);
            y->mlp_fc_b = take_fill(&cv, F, 0.0f);
            y->mlp_proj_w = take_random(&cv, F * D);
            y->mlp_proj_b = take_fill(&cv, D, 0.0f);
        } else {
            y->attn_norm_w = take_fill(&cv, D, 1.0f);
            y->wq = take_random(&cv, Q * D);
            y->wk = take_random(&cv, KV * D);
            y->wv = take_random(&cv, KV * D);
            if (c.qkv_bias) {
                y->bq = take_random(&cv, Q);
                y->bk = take_random(&cv, KV);
                y->bv = take_random(&cv, KV);
            }
            y->wo = take_random(&cv, D * Q);
            y->mlp_norm_w = take_fill(&cv, D, 1.0f);
            y->w_gate = take_random(&cv, F * D);
            y->w_up = take_random(&cv, F * D);
            y->w_down = take_random(&cv, D * F);
        }
    }
    w->layers = out->layers;
    if (c.arch == GF_ARCH_GPT2) {
        w->wpe = take_random(&cv, (size_t)c.n_positions * D);
        w->lnf_w = take_fill(&cv, D, 1.0f);
        w->lnf_b = take_fill(&cv, D, 0.0f);
        w->lm_head = w->wte;
    } else {
        w->lnf_w = take_fill(&cv, D, 1.0f);
        w->lm_head = c.tied_head ? w->wte : take_random(&cv, V * D);
        /* inv_freq = 1 / theta^(2i / d_head), in float32 as transformers computes it */
        float *inv = take(&cv, (size_t)c.d_head / 2);
        for (int32_t i = 0; i < c.d_head / 2; i++)
            inv[i] = (float)(1.0 / pow((double)c.rope_theta, (double)(2 * i) / c.d_head));
        w->rope_inv_freq = inv;
    }
    out->desc.struct_size = sizeof out->desc;
    out->desc.config = c;
    out->desc.name = name;
    return GF_OK;
}

void gf_bench_shape_free(gf_bench_shape *s)
{
    if (!s)
        return;
    free(s->arena);
    free(s->layers);
    memset(s, 0, sizeof *s);
}
