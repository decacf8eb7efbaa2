/* gf_model_desc -> GGUF, with ggml's own gguf writer (gguf.h).
 *
 * Shapes follow llama.cpp's convention: a 2-D tensor has ne = {in, out}, ne[0]
 * contiguous, i.e. row-major [out][in], which is nn.Linear's layout as stored.
 * GPT-2's Conv1D weights are [in, out] and are transposed here, as
 * llama.cpp's convert script (conversion/gpt2.py) transposes c_attn, c_proj
 * and c_fc. The vocabulary is "none" with <arch>.vocab_size dummy tokens:
 * genfence hands llama.cpp token ids, never text, and llama.cpp checks ids
 * against that count. Weights are written F32; f16 / q8_0 are made from this
 * file by llama_model_quantize (lc_model.c), as a user's llama-quantize would. */
#include "lc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ggml.h>
#include <gguf.h>

/* Everything one write needs, freed in one place. */
typedef struct gguf_job {
    struct gguf_context *g;
    struct ggml_context *meta;   /* tensor headers only (no_alloc) */
    float **owned;               /* transposed / permuted copies */
    size_t n_owned, cap_owned;
} gguf_job;

static void job_free(gguf_job *j)
{
    for (size_t i = 0; i < j->n_owned; i++)
        free(j->owned[i]);
    free(j->owned);
    if (j->meta)
        ggml_free(j->meta);
    if (j->g)
        gguf_free(j->g);
}

static float *job_alloc(gguf_job *j, size_t n)
{
    if (j->n_owned == j->cap_owned) {
        size_t cap = j->cap_owned ? 2 * j->cap_owned : 64;
        float **p = realloc(j->owned, cap * sizeof *p);
        if (!p)
            return NULL;
        j->owned = p;
        j->cap_owned = cap;
    }
    float *f = malloc(n * sizeof *f);
    if (f)
        j->owned[j->n_owned++] = f;
    return f;
}

/* Add tensor `name` of shape ne = {ne0, ne1} (ne1 = 1: 1-D) over data. */
static int add_f32(gguf_job *j, const char *name, const float *data, int64_t ne0, int64_t ne1)
{
    if (!data)
        return 0;
    struct ggml_tensor *t = ne1 > 1 ? ggml_new_tensor_2d(j->meta, GGML_TYPE_F32, ne0, ne1)
                                    : ggml_new_tensor_1d(j->meta, GGML_TYPE_F32, ne0);
    if (!t)
        return 0;
    ggml_set_name(t, name);
    t->data = (void *)data;
    gguf_add_tensor(j->g, t);
    return 1;
}

/* An [in, out] (K, N) row-major weight as llama.cpp's ne = {K, N}: the
 * transpose, (N, K) row-major. */
static int add_in_out(gguf_job *j, const char *name, const float *w, int64_t K, int64_t N)
{
    if (!w)
        return 0;
    float *t = job_alloc(j, (size_t)K * N);
    if (!t)
        return 0;
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            t[n * K + k] = w[k * N + n];
    return add_f32(j, name, t, K, N);
}

static gf_status add_gpt2(gguf_job *j, const gf_model_desc *desc)
{
    const gf_model_config *c = &desc->config;
    const gf_model_weights *w = &desc->weights;
    const int64_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, NP = c->n_positions;
    struct gguf_context *g = j->g;
    gguf_set_val_str(g, "general.architecture", "gpt2");
    gguf_set_val_u32(g, "gpt2.context_length", (uint32_t)NP);
    gguf_set_val_u32(g, "gpt2.embedding_length", (uint32_t)D);
    gguf_set_val_u32(g, "gpt2.feed_forward_length", (uint32_t)F);
    gguf_set_val_u32(g, "gpt2.block_count", (uint32_t)c->n_layer);
    gguf_set_val_u32(g, "gpt2.attention.head_count", (uint32_t)c->n_head);
    gguf_set_val_u32(g, "gpt2.attention.head_count_kv", (uint32_t)c->n_head);
    gguf_set_val_f32(g, "gpt2.attention.layer_norm_epsilon", c->norm_eps);
    gguf_set_val_u32(g, "gpt2.vocab_size", (uint32_t)V);

    int ok = add_f32(j, "token_embd.weight", w->wte, D, V) &&
             add_f32(j, "position_embd.weight", w->wpe, D, NP) &&
             add_f32(j, "output_norm.weight", w->lnf_w, D, 1) &&
             add_f32(j, "output_norm.bias", w->lnf_b, D, 1);
    /* an untied head is written; a tied one is left to llama.cpp, which then
     * uses token_embd for the output (as for a converted tied GPT-2) */
    if (ok && !c->tied_head && w->lm_head && w->lm_head != w->wte)
        ok = add_f32(j, "output.weight", w->lm_head, D, V);
    char name[96];
    for (int32_t l = 0; ok && l < c->n_layer; l++) {
        const gf_layer_weights *s = &w->layers[l];
#define NAME(fmt) (snprintf(name, sizeof name, "blk.%d." fmt, (int)l), name)
        ok = add_f32(j, NAME("attn_norm.weight"), s->ln1_w, D, 1) &&
             add_f32(j, NAME("attn_norm.bias"), s->ln1_b, D, 1) &&
             add_in_out(j, NAME("attn_qkv.weight"), s->attn_qkv_w, D, 3 * D) &&
             add_f32(j, NAME("attn_qkv.bias"), s->attn_qkv_b, 3 * D, 1) &&
             add_in_out(j, NAME("attn_output.weight"), s->attn_proj_w, D, D) &&
             add_f32(j, NAME("attn_output.bias"), s->attn_proj_b, D, 1) &&
             add_f32(j, NAME("ffn_norm.weight"), s->ln2_w, D, 1) &&
             add_f32(j, NAME("ffn_norm.bias"), s->ln2_b, D, 1) &&
             add_in_out(j, NAME("ffn_up.weight"), s->mlp_fc_w, D, F) &&
             add_f32(j, NAME("ffn_up.bias"), s->mlp_fc_b, F, 1) &&
             add_in_out(j, NAME("ffn_down.weight"), s->mlp_proj_w, F, D) &&
             add_f32(j, NAME("ffn_down.bias"), s->mlp_proj_b, D, 1);
#undef NAME
    }
    if (!ok)
        return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory (or a NULL weight) writing the GGUF");
    return GF_OK;
}

gf_status lc_check_desc(const gf_model_desc *desc)
{
    if (!desc || desc->struct_size < offsetof(gf_model_desc, name))
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: model description missing or too small");
    const gf_model_config *c = &desc->config;
    if (c->arch != GF_ARCH_GPT2)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "llamacpp: architecture %d not supported yet (GPT-2 only; docs/llamacpp.md)",
                            (int)c->arch);
    /* llama.cpp's gpt2 graph hard-codes GELU (tanh form): any other
     * activation would be computed wrongly, so it is refused */
    if (c->activation != GF_ACT_GELU_TANH)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "llamacpp: GPT-2 with activation %d: llama.cpp's gpt2 graph only has gelu_new",
                            (int)c->activation);
    if (c->n_embd < 1 || c->n_head < 1 || c->n_layer < 1 || c->vocab_size < 1 || c->d_ff < 1 ||
        c->n_positions < 1 || c->n_embd % c->n_head || (c->n_kv_head && c->n_kv_head != c->n_head))
        return gf_error_set(GF_E_UNSUPPORTED, "llamacpp: unsupported shape (D %d, H %d, kv heads %d, L %d, V %d, F %d)",
                            c->n_embd, c->n_head, c->n_kv_head, c->n_layer, c->vocab_size, c->d_ff);
    if (!desc->weights.layers || !desc->weights.wte || !desc->weights.wpe)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: GPT-2 description without layers, wte or wpe");
    return GF_OK;
}

gf_status lc_gguf_write(const gf_model_desc *desc, const char *path)
{
    gf_status st = lc_check_desc(desc);
    if (st != GF_OK)
        return st;
    gguf_job j = {0};
    /* headers of at most 16 tensors per layer + 8 */
    size_t n_tensors = (size_t)desc->config.n_layer * 16 + 8;
    struct ggml_init_params ip = {.mem_size = n_tensors * ggml_tensor_overhead(), .mem_buffer = NULL,
                                  .no_alloc = true};
    j.meta = ggml_init(ip);
    j.g = gguf_init_empty();
    if (!j.meta || !j.g) {
        job_free(&j);
        return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory starting the GGUF");
    }
    gguf_set_val_str(j.g, "general.name", desc->name ? desc->name : "genfence model");
    gguf_set_val_u32(j.g, "general.file_type", 0); /* LLAMA_FTYPE_ALL_F32 */
    gguf_set_val_str(j.g, "tokenizer.ggml.model", "none");
    st = add_gpt2(&j, desc);
    if (st == GF_OK && !gguf_write_to_file(j.g, path, false))
        st = gf_error_set(GF_E_IO, "llamacpp: cannot write the GGUF to %s", path);
    job_free(&j);
    return st;
}
