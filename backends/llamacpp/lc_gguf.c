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
 * file by llama_model_quantize (lc_model.c), as a user's llama-quantize would.
 * The file is written tensor by tensor from genfence's mapping (the
 * transposes and permutations block by block), each source's pages handed
 * back once written: the conversion adds no copy of the weights to the
 * process, so llama.cpp's own copy is the one it holds (issue 27's RSS). */
#include "lc.h"

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ggml.h>
#include <gguf.h>

/* Where one tensor's bytes come from: the weights as they are, GPT-2's
 * [in, out] transposed, or a Llama q/k weight with its heads' rows permuted.
 * Nothing is copied ahead: each tensor is made as it is written. */
typedef enum { SRC_PLAIN, SRC_TRANSPOSE, SRC_PERMUTE } src_mode;
typedef struct gguf_src {
    const float *w;
    src_mode mode;
    int64_t n;    /* floats, the tensor's ne0 x ne1 in every mode */
    int64_t a, b; /* transpose: (K a, N b) read; permute: a heads of b rows (of ne0 columns) */
} gguf_src;

/* Everything one write needs, freed in one place. */
typedef struct gguf_job {
    struct gguf_context *g;
    struct ggml_context *meta; /* tensor headers only (no_alloc) */
    gguf_src *src;             /* (gguf_get_n_tensors(g)) in the GGUF's order */
    size_t cap_src;
    float *owned; /* llama3's rope_freqs divisors, made here */
} gguf_job;

static void job_free(gguf_job *j)
{
    free(j->src);
    free(j->owned);
    if (j->meta)
        ggml_free(j->meta);
    if (j->g)
        gguf_free(j->g);
}

/* Add tensor `name` of shape ne = {ne0, ne1} (ne1 = 1: 1-D), its bytes from `s`. */
static int add_src(gguf_job *j, const char *name, int64_t ne0, int64_t ne1, gguf_src s)
{
    if (!s.w)
        return 0;
    size_t n = (size_t)gguf_get_n_tensors(j->g);
    if (n == j->cap_src) {
        size_t cap = j->cap_src ? 2 * j->cap_src : 64;
        gguf_src *p = realloc(j->src, cap * sizeof *p);
        if (!p)
            return 0;
        j->src = p;
        j->cap_src = cap;
    }
    struct ggml_tensor *t = ne1 > 1 ? ggml_new_tensor_2d(j->meta, GGML_TYPE_F32, ne0, ne1)
                                    : ggml_new_tensor_1d(j->meta, GGML_TYPE_F32, ne0);
    if (!t)
        return 0;
    ggml_set_name(t, name);
    t->data = (void *)s.w; /* never read by gguf: only the metadata is written through it */
    gguf_add_tensor(j->g, t);
    s.n = ne0 * ne1;
    j->src[n] = s;
    return 1;
}

static int add_f32(gguf_job *j, const char *name, const float *data, int64_t ne0, int64_t ne1)
{
    return add_src(j, name, ne0, ne1, (gguf_src){.w = data, .mode = SRC_PLAIN});
}

/* An [in, out] (K, N) row-major weight as llama.cpp's ne = {K, N}: the
 * transpose, (N, K) row-major. */
static int add_in_out(gguf_job *j, const char *name, const float *w, int64_t K, int64_t N)
{
    return add_src(j, name, K, N, (gguf_src){.w = w, .mode = SRC_TRANSPOSE, .a = K, .b = N});
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

/* Rows of a per-head [out, in] weight (n_heads heads of d rows, K columns)
 * permuted as conversion/llama.py's permute(): new row h d + 2 i + half is
 * old row h d + half d/2 + i. */
static int add_permuted(gguf_job *j, const char *name, const float *w, int64_t n_heads, int64_t d, int64_t K)
{
    return add_src(j, name, K, n_heads * d, (gguf_src){.w = w, .mode = SRC_PERMUTE, .a = n_heads, .b = d});
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
        float *ff = j->owned = malloc((size_t)dh / 2 * sizeof *ff);
        ok = ff != NULL;
        for (int64_t i = 0; ok && i < dh / 2; i++)
            ff[i] = (float)(pow((double)c->rope_theta, -2.0 * (double)i / (double)dh) / (double)w->rope_inv_freq[i]);
        ok = ok && add_f32(j, "rope_freqs.weight", ff, dh / 2, 1);
    }
    char name[96];
    for (int32_t l = 0; ok && l < c->n_layer; l++) {
        const gf_layer_weights *s = &w->layers[l];
#define NAME(fmt) (snprintf(name, sizeof name, "blk.%d." fmt, (int)l), name)
        ok = add_f32(j, NAME("attn_norm.weight"), s->attn_norm_w, D, 1) &&
             (permute ? add_permuted(j, NAME("attn_q.weight"), s->wq, H, dh, D)
                      : add_f32(j, NAME("attn_q.weight"), s->wq, D, Q)) &&
             (permute ? add_permuted(j, NAME("attn_k.weight"), s->wk, Hkv, dh, D)
                      : add_f32(j, NAME("attn_k.weight"), s->wk, D, KV)) &&
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

/* Hand a source tensor's whole pages back to the kernel once written: the
 * weights are genfence's mapping of model.safetensors, clean file pages that
 * fault back in if read again, so the contents stay as they are (anonymous
 * memory without swap simply stays). llama.cpp then reads the GGUF into its
 * own buffers, and the process holds one copy of the weights, not two. */
static void page_out(const void *p, size_t bytes)
{
#ifdef MADV_PAGEOUT
    uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + ps - 1) & ~(ps - 1), e = ((uintptr_t)p + bytes) & ~(ps - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_PAGEOUT);
#else
    (void)p;
    (void)bytes;
#endif
}

/* One tensor's bytes, made from its source block by block (rows of at most
 * GF_GGUF_BLOCK floats) and written at the file's position. */
enum { GF_GGUF_BLOCK = 1 << 16 };
static int write_src(FILE *f, const gguf_src *s, float *blk)
{
    if (s->mode == SRC_PLAIN)
        return fwrite(s->w, sizeof *s->w, (size_t)s->n, f) == (size_t)s->n;
    if (s->mode == SRC_PERMUTE) {
        const int64_t d = s->b, K = s->n / (s->a * d);
        for (int64_t h = 0; h < s->a; h++)
            for (int64_t i = 0; i < d / 2; i++)
                for (int64_t half = 0; half < 2; half++)
                    if (fwrite(s->w + (h * d + half * (d / 2) + i) * K, sizeof *s->w, (size_t)K, f) != (size_t)K)
                        return 0;
        return 1;
    }
    const int64_t K = s->a, N = s->b, rows = K < GF_GGUF_BLOCK ? GF_GGUF_BLOCK / K : 1;
    for (int64_t n0 = 0; n0 < N; n0 += rows) {
        const int64_t n1 = n0 + rows < N ? n0 + rows : N;
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = n0; n < n1; n++)
                blk[(n - n0) * K + k] = s->w[k * N + n];
        if (fwrite(blk, sizeof *blk, (size_t)((n1 - n0) * K), f) != (size_t)((n1 - n0) * K))
            return 0;
    }
    return 1;
}

/* The metadata by ggml's writer, then each tensor at the offset it gives,
 * zero-padded to the alignment as ggml's own whole-file writer pads. */
static gf_status write_job(gguf_job *j, const char *path)
{
    if (!gguf_write_to_file(j->g, path, true))
        return gf_error_set(GF_E_IO, "llamacpp: cannot write the GGUF's metadata to %s", path);
    FILE *f = fopen(path, "ab");
    int64_t blk_n = GF_GGUF_BLOCK; /* a transpose's block: rows of K, at least one */
    for (int64_t i = 0; i < gguf_get_n_tensors(j->g); i++)
        if (j->src[i].mode == SRC_TRANSPOSE && j->src[i].a > blk_n)
            blk_n = j->src[i].a;
    float *blk = malloc((size_t)blk_n * sizeof *blk);
    gf_status st = GF_OK;
    if (!f || !blk)
        st = gf_error_set(!f ? GF_E_IO : GF_E_NOMEM, "llamacpp: cannot append the tensors to %s", path);
    const size_t base = gguf_get_meta_size(j->g), align = gguf_get_alignment(j->g);
    static const char zeros[64];
    size_t pos = base;
    if (st == GF_OK && (fseek(f, 0, SEEK_END) != 0 || (size_t)ftell(f) != base))
        st = gf_error_set(GF_E_IO, "llamacpp: %s: the metadata is not the %zu bytes ggml says", path, base);
    for (int64_t i = 0; st == GF_OK && i < gguf_get_n_tensors(j->g); i++) {
        const size_t at = base + gguf_get_tensor_offset(j->g, i), bytes = gguf_get_tensor_size(j->g, i);
        const gguf_src *s = &j->src[i];
        int ok = at >= pos && at - pos <= sizeof zeros; /* F32: bytes is the source's n floats */
        ok = ok && fwrite(zeros, 1, at - pos, f) == at - pos && write_src(f, s, blk);
        if (!ok) {
            st = gf_error_set(GF_E_IO, "llamacpp: cannot write tensor %s to %s", gguf_get_tensor_name(j->g, i), path);
            break;
        }
        pos = at + bytes;
        page_out(s->w, bytes);
    }
    const size_t end = align ? (pos + align - 1) / align * align : pos;
    if (st == GF_OK && (end - pos > sizeof zeros || fwrite(zeros, 1, end - pos, f) != end - pos))
        st = gf_error_set(GF_E_IO, "llamacpp: cannot pad %s", path);
    if (f && fclose(f) != 0 && st == GF_OK)
        st = gf_error_set(GF_E_IO, "llamacpp: cannot close %s", path);
    free(blk);
    return st;
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
    if (st == GF_OK)
        st = write_job(&j, path);
    job_free(&j);
    return st;
}
