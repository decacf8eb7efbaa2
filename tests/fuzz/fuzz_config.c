/* Fuzz target: config.json, and the model loader over it. Two tiny
 * checkpoints (a GPT-2 and a Llama, written at start-up) sit in the scratch
 * directory; an input that parses as a config is copied beside the one of its
 * family and gf_model_load runs on that directory, so every shape the config
 * claims is checked against real tensors (and must be checked before anything
 * of the claimed size is allocated: run with -rss_limit_mb / -malloc_limit_mb).
 * Properties: a loaded config is self-consistent (positive sizes, heads divide
 * the width); a loaded model's config equals the parsed one. */
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "genfence/model.h"
#include "genfence/safetensors.h"

enum { V = 16, P = 8, D = 8, F = 32, LF = 16, H = 2, KV = 1, DH = 4 };

static float vals[V * F];

static void tensor(gf_st_write_tensor *t, size_t *n, const char *name, int64_t d0, int64_t d1)
{
    gf_st_write_tensor *e = &t[(*n)++];
    e->name = name;
    e->dtype = GF_DT_F32;
    e->ndim = d1 ? 2 : 1;
    e->shape[0] = d0;
    e->shape[1] = d1;
    e->data = vals;
}

static void write_models(void)
{
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        vals[i] = 0.1f * sinf((float)i);
    char dir[600];
    gf_st_write_tensor t[32];
    size_t n = 0;
    tensor(t, &n, "wte.weight", V, D);
    tensor(t, &n, "wpe.weight", P, D);
    tensor(t, &n, "h.0.ln_1.weight", D, 0);
    tensor(t, &n, "h.0.ln_1.bias", D, 0);
    tensor(t, &n, "h.0.attn.c_attn.weight", D, 3 * D);
    tensor(t, &n, "h.0.attn.c_attn.bias", 3 * D, 0);
    tensor(t, &n, "h.0.attn.c_proj.weight", D, D);
    tensor(t, &n, "h.0.attn.c_proj.bias", D, 0);
    tensor(t, &n, "h.0.ln_2.weight", D, 0);
    tensor(t, &n, "h.0.ln_2.bias", D, 0);
    tensor(t, &n, "h.0.mlp.c_fc.weight", D, F);
    tensor(t, &n, "h.0.mlp.c_fc.bias", F, 0);
    tensor(t, &n, "h.0.mlp.c_proj.weight", F, D);
    tensor(t, &n, "h.0.mlp.c_proj.bias", D, 0);
    tensor(t, &n, "ln_f.weight", D, 0);
    tensor(t, &n, "ln_f.bias", D, 0);
    snprintf(dir, sizeof dir, "%s/gpt2", gf_fuzz_dir());
    mkdir(dir, 0700);
    if (gf_safetensors_write(gf_fuzz_path(0, "gpt2/model.safetensors"), t, n, NULL, NULL, 0) != GF_OK)
        abort();
    n = 0;
    tensor(t, &n, "model.embed_tokens.weight", V, D);
    tensor(t, &n, "model.layers.0.input_layernorm.weight", D, 0);
    tensor(t, &n, "model.layers.0.self_attn.q_proj.weight", H * DH, D);
    tensor(t, &n, "model.layers.0.self_attn.k_proj.weight", KV * DH, D);
    tensor(t, &n, "model.layers.0.self_attn.v_proj.weight", KV * DH, D);
    tensor(t, &n, "model.layers.0.self_attn.o_proj.weight", D, H * DH);
    tensor(t, &n, "model.layers.0.post_attention_layernorm.weight", D, 0);
    tensor(t, &n, "model.layers.0.mlp.gate_proj.weight", LF, D);
    tensor(t, &n, "model.layers.0.mlp.up_proj.weight", LF, D);
    tensor(t, &n, "model.layers.0.mlp.down_proj.weight", D, LF);
    tensor(t, &n, "model.norm.weight", D, 0);
    snprintf(dir, sizeof dir, "%s/llama", gf_fuzz_dir());
    mkdir(dir, 0700);
    if (gf_safetensors_write(gf_fuzz_path(0, "llama/model.safetensors"), t, n, NULL, NULL, 0) != GF_OK)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    write_models();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = gf_fuzz_path(0, "config.json");
    gf_fuzz_write(path, data, size);
    gf_model_config cfg;
    if (gf_config_load(path, &cfg) != GF_OK) {
        if (getenv("GF_FUZZ_VERBOSE"))
            fprintf(stderr, "config: %s\n", gf_error_msg());
        return 0;
    }
    GF_FUZZ_ASSERT(cfg.vocab_size > 0 && cfg.n_positions > 0 && cfg.n_embd > 0 && cfg.n_layer > 0 && cfg.n_head > 0 &&
                       cfg.n_kv_head > 0 && cfg.d_head > 0 && cfg.d_ff > 0,
                   "non-positive size (V %d P %d D %d L %d H %d Hkv %d dh %d F %d)", cfg.vocab_size, cfg.n_positions,
                   cfg.n_embd, cfg.n_layer, cfg.n_head, cfg.n_kv_head, cfg.d_head, cfg.d_ff);
    GF_FUZZ_ASSERT(cfg.n_head % cfg.n_kv_head == 0, "H %d not a multiple of H_kv %d", cfg.n_head, cfg.n_kv_head);
    GF_FUZZ_ASSERT(isfinite(cfg.norm_eps), "norm_eps %g", cfg.norm_eps);
    const char *family = cfg.arch == GF_ARCH_LLAMA ? "llama" : "gpt2";
    char cfg_path[700], dir[600];
    snprintf(dir, sizeof dir, "%s/%s", gf_fuzz_dir(), family);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    gf_fuzz_write(cfg_path, data, size);
    gf_model *m = NULL;
    gf_status s = gf_model_load(dir, &m);
    if (getenv("GF_FUZZ_VERBOSE"))
        fprintf(stderr, "model %s: %s\n", family, s == GF_OK ? "loaded" : gf_error_msg());
    if (s == GF_OK) {
        const gf_model_config *c = &gf_model_desc_get(m)->config;
        GF_FUZZ_ASSERT(c->vocab_size == cfg.vocab_size && c->n_layer == cfg.n_layer && c->n_embd == cfg.n_embd,
                       "model config differs from the parsed config");
        gf_model_free(m);
    } else {
        GF_FUZZ_ASSERT(m == NULL, "model_out not cleared");
    }
    return 0;
}
