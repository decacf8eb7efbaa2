/* config.json (Hugging Face) -> gf_model_config: GPT-2, and the Llama family
 * (model_type "llama", and "qwen2" = Llama with q/k/v biases). Defaults are
 * transformers 4.47.1's (GPT2Config, LlamaConfig, Qwen2Config). */
#include "genfence/model.h"
#include "model_internal.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M_PI_VALUE 3.14159265358979323846

static const char *jtype(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* A required positive integer that fits in int32. */
static gf_status req_pos_int(const char *path, json_t *root, const char *key, int32_t *out)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return gf_error_set(GF_E_FORMAT, "%s: missing required key '%s' (an integer)", path, key);
    if (!json_is_integer(v))
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' must be an integer, got %s", path, key, jtype(v));
    json_int_t x = json_integer_value(v);
    if (x <= 0 || x > INT32_MAX)
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' is %" JSON_INTEGER_FORMAT ", must be in [1, %d]", path, key, x,
                            (int)INT32_MAX);
    *out = (int32_t)x;
    return GF_OK;
}

/* vocab_size: a positive int32 no larger than $GENFENCE_MAX_VOCAB (default
 * 2^24, the tokenizer's bound): every (vocab_size, ...) buffer and the
 * embedding are sized by it before any tensor is read. */
#define GF_MAX_VOCAB_DEFAULT ((uint64_t)1 << 24)
static gf_status req_vocab(const char *path, json_t *root, int32_t *out)
{
    gf_status s = req_pos_int(path, root, "vocab_size", out);
    uint64_t cap = gf_env_limit("GENFENCE_MAX_VOCAB", GF_MAX_VOCAB_DEFAULT);
    if (s == GF_OK && (uint64_t)*out > cap)
        return gf_error_set(GF_E_FORMAT,
                            "%s: vocab_size %d is over the limit of %llu (GENFENCE_MAX_VOCAB; set it higher to "
                            "load this model)",
                            path, *out, (unsigned long long)cap);
    return s;
}

/* An optional token id: absent or null -> -1; otherwise an integer in [0, vocab). */
static gf_status opt_token_id(const char *path, json_t *root, const char *key, int32_t vocab, int allow_list,
                              int32_t *out)
{
    json_t *v = json_object_get(root, key);
    *out = -1;
    if (!v || json_is_null(v))
        return GF_OK;
    if (allow_list && json_is_array(v) && json_array_size(v) > 0 && json_is_integer(json_array_get(v, 0)))
        v = json_array_get(v, 0); /* Llama 3 lists several eos ids; the engine stops on the first */
    if (!json_is_integer(v))
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' must be an integer or null, got %s", path, key, jtype(v));
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= vocab)
        return gf_error_set(GF_E_FORMAT,
                            "%s: key '%s' is %" JSON_INTEGER_FORMAT ", outside the vocabulary [0, %d) (vocab_size %d)",
                            path, key, x, (int)vocab, (int)vocab);
    *out = (int32_t)x;
    return GF_OK;
}

static gf_status llama_config(const char *path, json_t *root, int qwen2, gf_model_config *c, gf_rope_params *rp);

gf_status gf_config_load(const char *path, gf_model_config *cfg_out) { return gf_config_load_ex(path, cfg_out, NULL); }

gf_status gf_config_load_ex(const char *path, gf_model_config *cfg_out, gf_rope_params *rope_out)
{
    if (!path || !cfg_out)
        return gf_error_set(GF_E_INVALID_ARG, "gf_config_load: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f)
        return gf_error_set(GF_E_IO, "%s: cannot open: %s", path, strerror(errno));
    json_error_t err;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    int read_err = ferror(f);
    fclose(f);
    if (!root) {
        if (read_err)
            return gf_error_set(GF_E_IO, "%s: read error", path);
        return gf_error_set(GF_E_FORMAT, "%s: invalid JSON at line %d, column %d: %s", path, err.line, err.column,
                            err.text);
    }

    gf_model_config c;
    memset(&c, 0, sizeof c);
    gf_rope_params rp;
    memset(&rp, 0, sizeof rp);
    gf_status s = GF_OK;
    json_t *v;

    if (!json_is_object(root)) {
        s = gf_error_set(GF_E_FORMAT, "%s: top level is a JSON %s, expected an object", path, jtype(root));
        goto out;
    }

    v = json_object_get(root, "model_type");
    if (!v) {
        s = gf_error_set(GF_E_FORMAT, "%s: missing required key 'model_type' (e.g. \"gpt2\")", path);
        goto out;
    }
    if (!json_is_string(v)) {
        s = gf_error_set(GF_E_FORMAT, "%s: key 'model_type' must be a string, got %s", path, jtype(v));
        goto out;
    }
    if (!strcmp(json_string_value(v), "llama") || !strcmp(json_string_value(v), "qwen2")) {
        s = llama_config(path, root, !strcmp(json_string_value(v), "qwen2"), &c, &rp);
        if (s == GF_OK) {
            *cfg_out = c;
            if (rope_out)
                *rope_out = rp;
        }
        goto out;
    }
    if (strcmp(json_string_value(v), "gpt2") != 0) {
        s = gf_error_set(GF_E_UNSUPPORTED, "%s: model_type '%.100s' is not supported (supported: gpt2, llama, qwen2)",
                         path, json_string_value(v));
        goto out;
    }
    c.arch = GF_ARCH_GPT2;
    c.norm = GF_NORM_LAYERNORM;
    c.pos = GF_POS_LEARNED;

    if ((s = req_vocab(path, root, &c.vocab_size)) != GF_OK ||
        (s = req_pos_int(path, root, "n_positions", &c.n_positions)) != GF_OK ||
        (s = req_pos_int(path, root, "n_embd", &c.n_embd)) != GF_OK ||
        (s = req_pos_int(path, root, "n_layer", &c.n_layer)) != GF_OK ||
        (s = req_pos_int(path, root, "n_head", &c.n_head)) != GF_OK)
        goto out;
    if (c.n_embd % c.n_head != 0) {
        s = gf_error_set(GF_E_FORMAT, "%s: n_embd %d is not divisible by n_head %d", path, (int)c.n_embd,
                         (int)c.n_head);
        goto out;
    }
    c.n_kv_head = c.n_head;
    c.d_head = c.n_embd / c.n_head;

    /* layer_norm_epsilon */
    c.norm_eps = 1e-5f;
    v = json_object_get(root, "layer_norm_epsilon");
    if (v) {
        double e = json_is_number(v) ? json_number_value(v) : -1.0;
        if (!json_is_number(v)) {
            s = gf_error_set(GF_E_FORMAT, "%s: key 'layer_norm_epsilon' must be a number, got %s", path, jtype(v));
            goto out;
        }
        if (!(e > 0.0) || !isfinite(e) || e > 1.0) {
            s = gf_error_set(GF_E_FORMAT, "%s: key 'layer_norm_epsilon' is %g, must be a positive number <= 1", path,
                             e);
            goto out;
        }
        c.norm_eps = (float)e;
    }

    /* activation_function */
    c.activation = GF_ACT_GELU_TANH;
    v = json_object_get(root, "activation_function");
    if (v) {
        if (!json_is_string(v)) {
            s = gf_error_set(GF_E_FORMAT, "%s: key 'activation_function' must be a string, got %s", path, jtype(v));
            goto out;
        }
        const char *a = json_string_value(v);
        if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh"))
            c.activation = GF_ACT_GELU_TANH;
        else if (!strcmp(a, "gelu"))
            c.activation = GF_ACT_GELU_ERF;
        else if (!strcmp(a, "relu"))
            c.activation = GF_ACT_RELU;
        else {
            s = gf_error_set(GF_E_UNSUPPORTED,
                             "%s: activation_function '%.100s' is not supported (supported: "
                             "gelu_new, gelu_pytorch_tanh, gelu, relu)",
                             path, a);
            goto out;
        }
    }

    /* n_inner: null or absent -> 4 n_embd */
    v = json_object_get(root, "n_inner");
    if (!v || json_is_null(v)) {
        if ((int64_t)c.n_embd * 4 > INT32_MAX) {
            s = gf_error_set(GF_E_FORMAT, "%s: 4 x n_embd (%d) overflows; set n_inner", path, (int)c.n_embd);
            goto out;
        }
        c.d_ff = 4 * c.n_embd;
    } else if ((s = req_pos_int(path, root, "n_inner", &c.d_ff)) != GF_OK) {
        if (!json_is_integer(v))
            s = gf_error_set(GF_E_FORMAT, "%s: key 'n_inner' must be an integer or null, got %s", path, jtype(v));
        goto out;
    }

    if ((s = opt_token_id(path, root, "bos_token_id", c.vocab_size, 0, &c.bos_id)) != GF_OK ||
        (s = opt_token_id(path, root, "eos_token_id", c.vocab_size, 0, &c.eos_id)) != GF_OK)
        goto out;

    c.tied_head = 1;
    v = json_object_get(root, "tie_word_embeddings");
    if (v) {
        if (!json_is_boolean(v)) {
            s = gf_error_set(GF_E_FORMAT, "%s: key 'tie_word_embeddings' must be a boolean, got %s", path, jtype(v));
            goto out;
        }
        c.tied_head = json_is_true(v) ? 1 : 0;
    }

    *cfg_out = c;
    if (rope_out)
        *rope_out = rp;
out:
    json_decref(root);
    return s;
}

/* ---- the Llama family ---- */

/* An optional positive integer: absent or null -> dflt. */
static gf_status opt_pos_int(const char *path, json_t *root, const char *key, int32_t dflt, int32_t *out)
{
    json_t *v = json_object_get(root, key);
    *out = dflt;
    if (!v || json_is_null(v))
        return GF_OK;
    if (!json_is_integer(v))
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' must be an integer or null, got %s", path, key, jtype(v));
    return req_pos_int(path, root, key, out);
}

/* An optional number in (0, hi]: absent -> dflt. */
static gf_status opt_pos_real(const char *path, json_t *root, const char *key, double dflt, double hi, double *out)
{
    json_t *v = json_object_get(root, key);
    *out = dflt;
    if (!v)
        return GF_OK;
    if (!json_is_number(v))
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' must be a number, got %s", path, key, jtype(v));
    double x = json_number_value(v);
    if (!(x > 0.0) || !isfinite(x) || x > hi)
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' is %g, must be a positive number <= %g", path, key, x, hi);
    *out = x;
    return GF_OK;
}

static gf_status opt_bool(const char *path, json_t *root, const char *key, int dflt, int *out)
{
    json_t *v = json_object_get(root, key);
    *out = dflt;
    if (!v)
        return GF_OK;
    if (!json_is_boolean(v))
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' must be a boolean, got %s", path, key, jtype(v));
    *out = json_is_true(v);
    return GF_OK;
}

/* rope_scaling: null / absent / rope_type "default" -> none; "linear" (factor);
 * "llama3" (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings); any other type is GF_E_UNSUPPORTED. */
static gf_status rope_scaling(const char *path, json_t *root, gf_rope_params *rp)
{
    json_t *rs = json_object_get(root, "rope_scaling");
    memset(rp, 0, sizeof *rp);
    if (!rs || json_is_null(rs))
        return GF_OK;
    if (!json_is_object(rs))
        return gf_error_set(GF_E_FORMAT, "%s: key 'rope_scaling' must be an object or null, got %s", path, jtype(rs));
    json_t *t = json_object_get(rs, "rope_type");
    if (!t)
        t = json_object_get(rs, "type"); /* the older spelling */
    if (!t || !json_is_string(t))
        return gf_error_set(GF_E_FORMAT, "%s: rope_scaling needs a string 'rope_type' (or 'type')%s", path,
                            t ? ", got a non-string" : "");
    const char *type = json_string_value(t);
    if (!strcmp(type, "default"))
        return GF_OK;
    int llama3 = !strcmp(type, "llama3");
    if (!llama3 && strcmp(type, "linear") != 0)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: rope_scaling rope_type '%.60s' is not supported (supported: "
                            "linear, llama3)",
                            path, type);
    gf_status s;
    double big = 1e12;
    json_t *f = json_object_get(rs, "factor");
    if (!f)
        return gf_error_set(GF_E_FORMAT, "%s: rope_scaling (%s) is missing 'factor'", path, type);
    if ((s = opt_pos_real(path, rs, "factor", 1.0, big, &rp->factor)) != GF_OK)
        return gf_error_prefix(s, "rope_scaling");
    rp->type = llama3 ? GF_ROPE_SCALING_LLAMA3 : GF_ROPE_SCALING_LINEAR;
    if (!llama3)
        return GF_OK;
    static const char *const need[] = {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!json_object_get(rs, need[i]))
            return gf_error_set(GF_E_FORMAT, "%s: rope_scaling (llama3) is missing '%s'", path, need[i]);
    if ((s = opt_pos_real(path, rs, "low_freq_factor", 1.0, big, &rp->low_freq_factor)) != GF_OK ||
        (s = opt_pos_real(path, rs, "high_freq_factor", 4.0, big, &rp->high_freq_factor)) != GF_OK ||
        (s = req_pos_int(path, rs, "original_max_position_embeddings", &rp->original_max_pos)) != GF_OK)
        return gf_error_prefix(s, "rope_scaling");
    if (!(rp->high_freq_factor > rp->low_freq_factor))
        return gf_error_set(GF_E_FORMAT,
                            "%s: rope_scaling (llama3): high_freq_factor %g must exceed "
                            "low_freq_factor %g",
                            path, rp->high_freq_factor, rp->low_freq_factor);
    return GF_OK;
}

static gf_status llama_config(const char *path, json_t *root, int qwen2, gf_model_config *c, gf_rope_params *rp)
{
    const char *fam = qwen2 ? "qwen2" : "llama";
    gf_status s;
    c->arch = GF_ARCH_LLAMA;
    c->norm = GF_NORM_RMSNORM;
    c->pos = GF_POS_ROPE;
    c->activation = GF_ACT_SILU;
    c->qkv_bias = qwen2;
    if ((s = req_vocab(path, root, &c->vocab_size)) != GF_OK ||
        (s = req_pos_int(path, root, "hidden_size", &c->n_embd)) != GF_OK ||
        (s = req_pos_int(path, root, "intermediate_size", &c->d_ff)) != GF_OK ||
        (s = req_pos_int(path, root, "num_hidden_layers", &c->n_layer)) != GF_OK ||
        (s = req_pos_int(path, root, "num_attention_heads", &c->n_head)) != GF_OK ||
        (s = req_pos_int(path, root, "max_position_embeddings", &c->n_positions)) != GF_OK)
        return s;
    /* num_key_value_heads: null -> num_attention_heads; absent -> LlamaConfig's
     * None (= num_attention_heads) or Qwen2Config's 32 */
    json_t *kv = json_object_get(root, "num_key_value_heads");
    if ((s = opt_pos_int(path, root, "num_key_value_heads", kv || !qwen2 ? c->n_head : 32, &c->n_kv_head)) != GF_OK)
        return s;
    if (c->n_head % c->n_kv_head != 0)
        return gf_error_set(GF_E_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                            (int)c->n_head, (int)c->n_kv_head);
    /* head_dim: Llama reads it (null/absent -> hidden_size / heads); Qwen2 in
     * transformers 4.47.1 always uses hidden_size / heads */
    int32_t dh_default = c->n_embd / c->n_head;
    if (qwen2 && c->n_embd % c->n_head != 0)
        return gf_error_set(GF_E_FORMAT, "%s: hidden_size %d is not divisible by num_attention_heads %d", path,
                            (int)c->n_embd, (int)c->n_head);
    if ((s = opt_pos_int(path, root, "head_dim", dh_default, &c->d_head)) != GF_OK)
        return s;
    if (qwen2 && c->d_head != dh_default)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: head_dim %d differs from hidden_size / num_attention_heads = %d; "
                            "qwen2 (transformers 4.47.1) ignores head_dim, so this is not supported",
                            path, (int)c->d_head, (int)dh_default);
    if (c->d_head < 2 || c->d_head % 2 != 0)
        return gf_error_set(GF_E_FORMAT, "%s: head dimension %d must be even (rotary pairs)%s", path, (int)c->d_head,
                            json_object_get(root, "head_dim") ? "" : " (hidden_size / num_attention_heads)");
    if ((int64_t)c->n_head * c->d_head > INT32_MAX)
        return gf_error_set(GF_E_FORMAT, "%s: num_attention_heads x head_dim overflows", path);

    json_t *v = json_object_get(root, "hidden_act");
    if (v && (!json_is_string(v) || strcmp(json_string_value(v), "silu") != 0)) {
        if (!json_is_string(v))
            return gf_error_set(GF_E_FORMAT, "%s: key 'hidden_act' must be a string, got %s", path, jtype(v));
        return gf_error_set(GF_E_UNSUPPORTED, "%s: hidden_act '%.60s' is not supported for %s (supported: silu)", path,
                            json_string_value(v), fam);
    }
    double eps, theta;
    if ((s = opt_pos_real(path, root, "rms_norm_eps", 1e-6, 1.0, &eps)) != GF_OK ||
        (s = opt_pos_real(path, root, "rope_theta", 10000.0, 1e30, &theta)) != GF_OK)
        return s;
    c->norm_eps = (float)eps;
    c->rope_theta = (float)theta;
    double prf;
    if ((s = opt_pos_real(path, root, "partial_rotary_factor", 1.0, 1.0, &prf)) != GF_OK)
        return s;
    if (prf != 1.0)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported (only 1)", path, prf);
    int flag;
    if (!qwen2) {
        if ((s = opt_bool(path, root, "attention_bias", 0, &flag)) != GF_OK)
            return s;
        if (flag)
            return gf_error_set(GF_E_UNSUPPORTED,
                                "%s: attention_bias true (biases on q, k, v and o_proj) is not "
                                "supported; qwen2's q/k/v biases are",
                                path);
        if ((s = opt_bool(path, root, "mlp_bias", 0, &flag)) != GF_OK)
            return s;
        if (flag)
            return gf_error_set(GF_E_UNSUPPORTED, "%s: mlp_bias true is not supported", path);
    } else {
        if ((s = opt_bool(path, root, "use_sliding_window", 0, &flag)) != GF_OK)
            return s;
        if (flag)
            return gf_error_set(GF_E_UNSUPPORTED,
                                "%s: use_sliding_window true (Qwen2 sliding-window attention) is "
                                "not supported",
                                path);
    }
    if ((s = opt_bool(path, root, "tie_word_embeddings", 0, &c->tied_head)) != GF_OK)
        return s;
    if ((s = opt_token_id(path, root, "bos_token_id", c->vocab_size, 0, &c->bos_id)) != GF_OK ||
        (s = opt_token_id(path, root, "eos_token_id", c->vocab_size, 1, &c->eos_id)) != GF_OK)
        return s;
    if ((s = rope_scaling(path, root, rp)) != GF_OK)
        return s;
    c->rope_scaling = rp->type;
    c->rope_factor = rp->type ? (float)rp->factor : 0.0f;
    return GF_OK;
}

/* transformers 4.47.1, modeling_rope_utils.py, all in float32 (a Python
 * scalar meeting a float32 tensor is rounded to float32 first):
 *   default: inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim))
 *   linear:  inv_freq /= factor
 *   llama3:  wavelen = 2 pi / inv_freq; low-frequency entries (wavelen >
 *            old_len / low) divided by factor, high ones (wavelen < old_len /
 *            high) kept, the rest blended with smooth = (old_len / wavelen -
 *            low) / (high - low).
 * A Python number divided by a tensor is evaluated as reciprocal(tensor) *
 * number, so is it here. torch's float32 pow is its own vectorised one (1 ulp,
 * ISA-dependent); pow in double rounded to float agrees with it on all but a
 * few entries, which differ by 1 ulp. */
void gf_rope_inv_freq(const gf_model_config *cfg, const gf_rope_params *rp, float *out)
{
    const int32_t dim = cfg->d_head, half = dim / 2;
    const float base = cfg->rope_theta;
    for (int32_t i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)dim;
        float p = (float)pow((double)base, (double)e); /* torch.pow(float scalar, f32) */
        out[i] = 1.0f / p;
    }
    if (!rp || rp->type == GF_ROPE_SCALING_NONE)
        return;
    const float factor = (float)rp->factor;
    if (rp->type == GF_ROPE_SCALING_LINEAR) {
        for (int32_t i = 0; i < half; i++)
            out[i] = out[i] / factor;
        return;
    }
    const double old_len = rp->original_max_pos;
    const float low = (float)rp->low_freq_factor, high = (float)rp->high_freq_factor;
    const float low_wavelen = (float)(old_len / rp->low_freq_factor);
    const float high_wavelen = (float)(old_len / rp->high_freq_factor);
    const float two_pi = (float)(2.0 * M_PI_VALUE);
    const float span = (float)(rp->high_freq_factor - rp->low_freq_factor);
    for (int32_t i = 0; i < half; i++) {
        float inv = out[i];
        /* a Python number divided by a tensor is reciprocal(tensor) * number */
        float wavelen = (1.0f / inv) * two_pi;
        float scaled = wavelen > low_wavelen ? inv / factor : inv;
        float smooth = ((1.0f / wavelen) * (float)old_len - low) / span;
        float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
        int medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        out[i] = medium ? smoothed : scaled;
    }
    (void)high;
}
