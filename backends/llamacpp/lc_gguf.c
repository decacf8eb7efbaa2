/* gf_model_desc -> GGUF, with ggml's own gguf writer (gguf.h): GPT-2 as arch
 * "gpt2", the Llama family as "llama" (no q/k/v biases) or "qwen2" (biases).
 *
 * Shapes follow llama.cpp's convention: a 2-D tensor has ne = {in, out}, ne[0]
 * contiguous, i.e. row-major [out][in], which is nn.Linear's layout as stored.
 * GPT-2's Conv1D weights are [in, out] and are transposed here, as
 * llama.cpp's convert script (conversion/gpt2.py) transposes c_attn, c_proj
 * and c_fc. The vocabulary is "none" with <arch>.vocab_size dummy tokens:
 * genfence hands llama.cpp token ids, never text, and llama.cpp checks ids
 * against that count.
 *
 * Llama: Hugging Face's rotary embedding rotates the halves of each head
 * (x[i], x[i + d/2]); llama.cpp's "llama" graph rotates adjacent pairs
 * (x[2i], x[2i + 1]). Its convert script (conversion/llama.py, permute())
 * reorders the rows of q_proj and k_proj per head so the two agree: new row
 * h d + 2 i + j = old row h d + j d/2 + i. The same is done here. "qwen2"
 * uses the halves form (NEOX) and takes the weights as they are. Rope
 * scaling: linear as rope.scaling.type/factor keys; llama3 as the per-pair
 * rope_freqs.weight divisors, base^(-2i/d) / inv_freq[i] from the scaled
 * inverse frequencies genfence hands over ("llama" only).
 *
 * Weights are written F32; f16 / q8_0 are made from this
 * file by llama_model_quantize (lc_model.c), as a user's llama-quantize would. */
#include "lc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ggml.h>
#include <gguf.h>

/* Everything one write needs, freed in one place. */
typedef struct gguf_job {
    struct gguf_context *g;
    struct ggml_context *meta; /* tensor headers only (no_alloc) */
    float **owned;             /* transposed / permuted copies */
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

    int ok = add_f32(j, "token_embd.weight", w->wte, D, V) && add_f32(j, "position_embd.weight", w->wpe, D, NP) &&
             add_f32(j, "output_norm.weight", w->lnf_w, D, 1) && add_f32(j, "output_norm.bias", w->lnf_b, D, 1);
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
             add_f32(j, NAME("ffn_norm.weight"), s->ln2_w, D, 1) && add_f32(j, NAME("ffn_norm.bias"), s->ln2_b, D, 1) &&
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

/* Rows of a per-head [out, in] weight (n_heads heads of d rows, K columns),
 * or a bias (K = 1), permuted as conversion/llama.py's permute(). */
static const float *permute_heads(gguf_job *j, const float *w, int64_t n_heads, int64_t d, int64_t K)
{
    if (!w)
        return NULL;
    float *t = job_alloc(j, (size_t)(n_heads * d * K));
    if (!t)
        return NULL;
    for (int64_t h = 0; h < n_heads; h++)
        for (int64_t half = 0; half < 2; half++)
            for (int64_t i = 0; i < d / 2; i++)
                memcpy(t + (h * d + 2 * i + half) * K, w + (h * d + half * (d / 2) + i) * K, (size_t)K * sizeof *t);
    return t;
}

static gf_status add_llama(gguf_job *j, const gf_model_desc *desc)
{
    const gf_model_config *c = &desc->config;
    const gf_model_weights *w = &desc->weights;
    const int64_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, dh = c->d_head;
    const int64_t H = c->n_head, Hkv = c->n_kv_head, Q = H * dh, KV = Hkv * dh;
    const int qwen2 = c->qkv_bias != 0;
    const char *arch = qwen2 ? "qwen2" : "llama";
    /* test-only fault (tests/cli/llamacpp_llama.sh): leave q/k unpermuted,
     * which the ref comparison must catch */
    const char *np = getenv("GENFENCE_LLAMACPP_NO_PERMUTE");
    const int permute = !qwen2 && !(np && np[0] == '1');
    struct gguf_context *g = j->g;
    char key[96];
#define KEY(fmt) (snprintf(key, sizeof key, "%s." fmt, arch), key)
    gguf_set_val_str(g, "general.architecture", arch);
    gguf_set_val_u32(g, KEY("context_length"), (uint32_t)c->n_positions);
    gguf_set_val_u32(g, KEY("embedding_length"), (uint32_t)D);
    gguf_set_val_u32(g, KEY("feed_forward_length"), (uint32_t)F);
    gguf_set_val_u32(g, KEY("block_count"), (uint32_t)c->n_layer);
    gguf_set_val_u32(g, KEY("attention.head_count"), (uint32_t)H);
    gguf_set_val_u32(g, KEY("attention.head_count_kv"), (uint32_t)Hkv);
    gguf_set_val_u32(g, KEY("attention.key_length"), (uint32_t)dh);
    gguf_set_val_u32(g, KEY("attention.value_length"), (uint32_t)dh);
    gguf_set_val_f32(g, KEY("attention.layer_norm_rms_epsilon"), c->norm_eps);
    gguf_set_val_u32(g, KEY("rope.dimension_count"), (uint32_t)dh);
    gguf_set_val_f32(g, KEY("rope.freq_base"), c->rope_theta);
    gguf_set_val_u32(g, KEY("vocab_size"), (uint32_t)V);
    if (c->rope_scaling == GF_ROPE_SCALING_LINEAR) {
        gguf_set_val_str(g, KEY("rope.scaling.type"), "linear");
        gguf_set_val_f32(g, KEY("rope.scaling.factor"), c->rope_factor);
    }
#undef KEY
    int ok = add_f32(j, "token_embd.weight", w->wte, D, V) && add_f32(j, "output_norm.weight", w->lnf_w, D, 1);
    if (ok && !c->tied_head && w->lm_head && w->lm_head != w->wte)
        ok = add_f32(j, "output.weight", w->lm_head, D, V);
    if (ok && c->rope_scaling == GF_ROPE_SCALING_LLAMA3) {
        float *ff = job_alloc(j, (size_t)dh / 2);
        ok = ff != NULL;
        for (int64_t i = 0; ok && i < dh / 2; i++)
            ff[i] = (float)(pow((double)c->rope_theta, -2.0 * (double)i / (double)dh) / (double)w->rope_inv_freq[i]);
        ok = ok && add_f32(j, "rope_freqs.weight", ff, dh / 2, 1);
    }
    char name[96];
    for (int32_t l = 0; ok && l < c->n_layer; l++) {
        const gf_layer_weights *s = &w->layers[l];
#define NAME(fmt) (snprintf(name, sizeof name, "blk.%d." fmt, (int)l), name)
        const float *wq = permute ? permute_heads(j, s->wq, H, dh, D) : s->wq;
        const float *wk = permute ? permute_heads(j, s->wk, Hkv, dh, D) : s->wk;
        ok = add_f32(j, NAME("attn_norm.weight"), s->attn_norm_w, D, 1) &&
             add_f32(j, NAME("attn_q.weight"), wq, D, Q) && add_f32(j, NAME("attn_k.weight"), wk, D, KV) &&
             add_f32(j, NAME("attn_v.weight"), s->wv, D, KV) && add_f32(j, NAME("attn_output.weight"), s->wo, Q, D) &&
             add_f32(j, NAME("ffn_norm.weight"), s->mlp_norm_w, D, 1) &&
             add_f32(j, NAME("ffn_gate.weight"), s->w_gate, D, F) && add_f32(j, NAME("ffn_up.weight"), s->w_up, D, F) &&
             add_f32(j, NAME("ffn_down.weight"), s->w_down, F, D);
        if (ok && qwen2)
            ok = add_f32(j, NAME("attn_q.bias"), s->bq, Q, 1) && add_f32(j, NAME("attn_k.bias"), s->bk, KV, 1) &&
                 add_f32(j, NAME("attn_v.bias"), s->bv, KV, 1);
#undef NAME
    }
    if (!ok)
        return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory (or a NULL weight) writing the GGUF");
    return GF_OK;
}

static gf_status check_llama(const gf_model_config *c, const gf_model_weights *w)
{
    if (c->norm != GF_NORM_RMSNORM || c->pos != GF_POS_ROPE)
        return gf_error_set(GF_E_UNSUPPORTED, "llamacpp: Llama family needs RMSNorm and rotary positions");
    /* llama.cpp's llama / qwen2 graphs hard-code SwiGLU with SiLU */
    if (c->activation != GF_ACT_SILU)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "llamacpp: Llama family with activation %d: llama.cpp's graph has SiLU only",
                            (int)c->activation);
    if (c->n_embd < 1 || c->n_head < 1 || c->n_kv_head < 1 || c->n_head % c->n_kv_head || c->d_head < 2 ||
        c->d_head % 2 || c->n_layer < 1 || c->vocab_size < 1 || c->d_ff < 1 || c->n_positions < 1)
        return gf_error_set(GF_E_UNSUPPORTED, "llamacpp: unsupported shape (D %d, H %d, kv heads %d, d_head %d)",
                            c->n_embd, c->n_head, c->n_kv_head, c->d_head);
    if (c->qkv_bias && c->n_head * c->d_head != c->n_embd)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "llamacpp: qwen2 with H d_head %d != hidden %d: llama.cpp's qwen2 graph needs them equal",
                            c->n_head * c->d_head, c->n_embd);
    if (c->qkv_bias && c->rope_scaling == GF_ROPE_SCALING_LLAMA3)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "llamacpp: qwen2 with llama3 rope scaling: llama.cpp's qwen2 has no rope_freqs");
    if (c->rope_scaling != GF_ROPE_SCALING_NONE && c->rope_scaling != GF_ROPE_SCALING_LINEAR &&
        c->rope_scaling != GF_ROPE_SCALING_LLAMA3)
        return gf_error_set(GF_E_UNSUPPORTED, "llamacpp: rope scaling %d not supported", (int)c->rope_scaling);
    if (!w->layers || !w->wte || !w->lnf_w || !w->rope_inv_freq)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: Llama description without layers, wte, norm or rope_inv_freq");
    return GF_OK;
}

gf_status lc_check_desc(const gf_model_desc *desc)
{
    if (!desc || desc->struct_size < offsetof(gf_model_desc, name))
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: model description missing or too small");
    const gf_model_config *c = &desc->config;
    if (c->arch == GF_ARCH_LLAMA)
        return check_llama(c, &desc->weights);
    if (c->arch != GF_ARCH_GPT2)
        return gf_error_set(GF_E_UNSUPPORTED, "llamacpp: architecture %d not supported (GPT-2, Llama, Qwen2)",
                            (int)c->arch);
    /* llama.cpp's gpt2 graph hard-codes GELU (tanh form): any other
     * activation would be computed wrongly, so it is refused */
    if (c->activation != GF_ACT_GELU_TANH)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "llamacpp: GPT-2 with activation %d: llama.cpp's gpt2 graph only has gelu_new",
                            (int)c->activation);
    if (c->n_embd < 1 || c->n_head < 1 || c->n_layer < 1 || c->vocab_size < 1 || c->d_ff < 1 || c->n_positions < 1 ||
        c->n_embd % c->n_head || (c->n_kv_head && c->n_kv_head != c->n_head))
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
    struct ggml_init_params ip = {.mem_size = n_tensors * ggml_tensor_overhead(), .mem_buffer = NULL, .no_alloc = true};
    j.meta = ggml_init(ip);
    j.g = gguf_init_empty();
    if (!j.meta || !j.g) {
        job_free(&j);
        return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory starting the GGUF");
    }
    gguf_set_val_str(j.g, "general.name", desc->name ? desc->name : "genfence model");
    gguf_set_val_u32(j.g, "general.file_type", 0); /* LLAMA_FTYPE_ALL_F32 */
    gguf_set_val_str(j.g, "tokenizer.ggml.model", "none");
    st = desc->config.arch == GF_ARCH_LLAMA ? add_llama(&j, desc) : add_gpt2(&j, desc);
    if (st == GF_OK && !gguf_write_to_file(j.g, path, false))
        st = gf_error_set(GF_E_IO, "llamacpp: cannot write the GGUF to %s", path);
    job_free(&j);
    return st;
}
