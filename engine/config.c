/* config.json (Hugging Face) -> gf_model_config: GPT-2, and the Llama family
 * (model_type "llama", "qwen2" = Llama with q/k/v biases, "mistral" = Llama
 * with a sliding window), with the rope_scaling and sliding-window
 * parameters in gf_rope_params. Defaults are transformers 4.47.1's
 * (GPT2Config, LlamaConfig, Qwen2Config, MistralConfig). */
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

enum { FAM_LLAMA, FAM_QWEN2, FAM_MISTRAL };
static gf_status llama_config(const char *path, json_t *root, int fam_id, gf_model_config *c, gf_rope_params *rp);

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
    const char *mt = json_string_value(v);
    if (!strcmp(mt, "llama") || !strcmp(mt, "qwen2") || !strcmp(mt, "mistral")) {
        s = llama_config(path, root,
                         !strcmp(mt, "qwen2")     ? FAM_QWEN2
                         : !strcmp(mt, "mistral") ? FAM_MISTRAL
                                                  : FAM_LLAMA,
                         &c, &rp);
        if (s == GF_OK) {
            *cfg_out = c;
            if (rope_out)
                *rope_out = rp;
        }
        goto out;
    }
    if (strcmp(json_string_value(v), "gpt2") != 0) {
        s = gf_error_set(GF_E_UNSUPPORTED,
                         "%s: model_type '%.100s' is not supported (supported: gpt2, llama, qwen2, mistral)", path,
                         json_string_value(v));
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

/* An optional number (any sign) in Python's `x or dflt` sense: absent, null
 * or 0 -> dflt. */
static gf_status opt_num_or(const char *path, json_t *obj, const char *key, double dflt, double *out)
{
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v || json_is_null(v))
        return GF_OK;
    if (!json_is_number(v))
        return gf_error_set(GF_E_FORMAT, "%s: rope_scaling key '%s' must be a number or null, got %s", path, key,
                            jtype(v));
    double x = json_number_value(v);
    if (!isfinite(x))
        return gf_error_set(GF_E_FORMAT, "%s: rope_scaling key '%s' is not finite", path, key);
    if (x != 0.0)
        *out = x;
    return GF_OK;
}

/* YaRN, as transformers 4.47.1's _compute_yarn_parameters: factor,
 * attention_factor (absent: 0.1 ln(factor) + 1), beta_fast (32), beta_slow
 * (1), the correction range over max_position_embeddings. Keys whose meaning
 * changed after 4.47.1 are refused unless they cannot matter: mscale /
 * mscale_all_dim (4.47.1 ignores them; later versions take attention_factor
 * = mscale(factor, mscale) / mscale(factor, mscale_all_dim) from them, the
 * sglang 31232 mismatch) without an explicit attention_factor, and a
 * rope_scaling original_max_position_embeddings other than
 * max_position_embeddings (4.47.1 ignores it; later versions build the
 * correction range on it). */
static gf_status rope_yarn(const char *path, json_t *root, json_t *rs, const gf_model_config *c, gf_rope_params *rp)
{
    gf_status s;
    if (!json_object_get(rs, "factor"))
        return gf_error_set(GF_E_FORMAT, "%s: rope_scaling (yarn) is missing 'factor'", path);
    if ((s = opt_pos_real(path, rs, "factor", 1.0, 1e12, &rp->factor)) != GF_OK)
        return gf_error_prefix(s, "rope_scaling");
    json_t *af = json_object_get(rs, "attention_factor");
    if (af && !json_is_null(af)) {
        if ((s = opt_pos_real(path, rs, "attention_factor", 1.0, 1e12, &rp->attn_factor)) != GF_OK)
            return gf_error_prefix(s, "rope_scaling");
    } else {
        static const char *const later[] = {"mscale", "mscale_all_dim"};
        for (size_t i = 0; i < 2; i++)
            if (json_object_get(rs, later[i]))
                return gf_error_set(GF_E_UNSUPPORTED,
                                    "%s: rope_scaling (yarn) has '%s' but no 'attention_factor': transformers "
                                    "4.47.1 ignores %s (attention factor 0.1 ln(factor) + 1) while later versions "
                                    "derive the factor from mscale / mscale_all_dim, so the model's meaning depends "
                                    "on the version; give attention_factor explicitly",
                                    path, later[i], later[i]);
        rp->attn_factor = 0.1 * log(rp->factor) + 1.0;
    }
    if ((s = opt_num_or(path, rs, "beta_fast", 32.0, &rp->beta_fast)) != GF_OK ||
        (s = opt_num_or(path, rs, "beta_slow", 1.0, &rp->beta_slow)) != GF_OK)
        return s;
    json_t *om = json_object_get(rs, "original_max_position_embeddings");
    if (om && !json_is_null(om) && (!json_is_integer(om) || json_integer_value(om) != (json_int_t)c->n_positions))
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: rope_scaling (yarn) original_max_position_embeddings differs from "
                            "max_position_embeddings %d: transformers 4.47.1 ignores it (the correction range is "
                            "built on max_position_embeddings), later versions use it; not supported",
                            path, (int)c->n_positions);
    rp->max_pos = c->n_positions;
    rp->type = GF_ROPE_SCALING_YARN;
    (void)root;
    return GF_OK;
}

/* One list of d_head / 2 positive numbers (longrope's short / long factors). */
static gf_status factor_list(const char *path, json_t *rs, const char *key, int32_t n, double *out)
{
    json_t *v = json_object_get(rs, key);
    if (!v)
        return gf_error_set(GF_E_FORMAT, "%s: rope_scaling (longrope) is missing '%s'", path, key);
    if (!json_is_array(v) || json_array_size(v) != (size_t)n)
        return gf_error_set(GF_E_FORMAT, "%s: rope_scaling (longrope) '%s' must be a list of %d numbers (head_dim / 2)",
                            path, key, (int)n);
    for (int32_t i = 0; i < n; i++) {
        json_t *x = json_array_get(v, (size_t)i);
        double d = json_is_number(x) ? json_number_value(x) : -1.0;
        if (!(d > 0.0) || !isfinite(d))
            return gf_error_set(GF_E_FORMAT, "%s: rope_scaling (longrope) '%s'[%d] must be a positive number", path,
                                key, (int)i);
        if (out)
            out[i] = d;
    }
    return GF_OK;
}

/* longrope, as transformers 4.47.1's _compute_longrope_parameters is called
 * by LlamaRotaryEmbedding (once, without a sequence length): with a
 * top-level original_max_position_embeddings (Phi-3's layout) factor =
 * max_position_embeddings / original and the long factors are used iff
 * max_position_embeddings > original; without it, factor comes from
 * rope_scaling and the long factors are used iff factor > 1. attention_factor
 * (absent: 1 if factor <= 1, else sqrt(1 + ln(factor) / ln(original))). */
static gf_status rope_longrope(const char *path, json_t *root, json_t *rs, const gf_model_config *c, gf_rope_params *rp)
{
    gf_status s;
    const int32_t half = c->d_head / 2;
    if (half > GF_ROPE_MAX_HALF)
        return gf_error_set(GF_E_UNSUPPORTED, "%s: rope_scaling (longrope) with head_dim %d: at most %d supported",
                            path, (int)c->d_head, 2 * GF_ROPE_MAX_HALF);
    rp->n_ext = half;
    json_t *top = json_object_get(root, "original_max_position_embeddings");
    double factor, orig;
    if (top) {
        int32_t o;
        if ((s = req_pos_int(path, root, "original_max_position_embeddings", &o)) != GF_OK)
            return s;
        json_t *inner = json_object_get(rs, "original_max_position_embeddings");
        if (inner && !json_is_null(inner) && (!json_is_integer(inner) || json_integer_value(inner) != o))
            return gf_error_set(GF_E_UNSUPPORTED,
                                "%s: rope_scaling (longrope) original_max_position_embeddings differs from the "
                                "top-level one (%d); transformers 4.47.1 reads only the top-level key",
                                path, (int)o);
        rp->original_max_pos = o;
        orig = o;
        factor = (double)c->n_positions / orig;
        rp->long_factors = c->n_positions > o;
    } else {
        if (json_object_get(rs, "original_max_position_embeddings"))
            return gf_error_set(GF_E_UNSUPPORTED,
                                "%s: rope_scaling (longrope) original_max_position_embeddings without a top-level "
                                "one: transformers 4.47.1 ignores it (it reads the top-level key); move it there",
                                path);
        if (!json_object_get(rs, "factor"))
            return gf_error_set(GF_E_FORMAT,
                                "%s: rope_scaling (longrope) needs 'factor' or a top-level "
                                "original_max_position_embeddings",
                                path);
        if ((s = opt_pos_real(path, rs, "factor", 1.0, 1e12, &factor)) != GF_OK)
            return gf_error_prefix(s, "rope_scaling");
        orig = c->n_positions;
        rp->long_factors = factor > 1.0;
    }
    rp->factor = factor;
    if ((s = factor_list(path, rs, "short_factor", half, rp->long_factors ? NULL : rp->ext_factors)) != GF_OK ||
        (s = factor_list(path, rs, "long_factor", half, rp->long_factors ? rp->ext_factors : NULL)) != GF_OK)
        return s;
    json_t *af = json_object_get(rs, "attention_factor");
    if (af && !json_is_null(af)) {
        if ((s = opt_pos_real(path, rs, "attention_factor", 1.0, 1e12, &rp->attn_factor)) != GF_OK)
            return gf_error_prefix(s, "rope_scaling");
    } else
        rp->attn_factor = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log(orig));
    rp->type = GF_ROPE_SCALING_LONGROPE;
    return GF_OK;
}

/* dynamic (NTK), as transformers 4.47.1's LlamaRotaryEmbedding: the
 * frequencies are recomputed from seq_len = max(position_ids) + 1 only once
 * seq_len > max_position_embeddings, which is past genfence's context (its
 * positions stop at max_position_embeddings - 1): within it they are the
 * default ones, and at seq_len == max_position_embeddings the NTK base
 * (factor seq_len / max - (factor - 1) = 1) is the plain base too. factor is
 * required; a rope_scaling original_max_position_embeddings other than
 * max_position_embeddings is refused (4.47.1 ignores it, later versions take
 * it as the threshold, which would fall inside the context). */
static gf_status rope_dynamic(const char *path, json_t *rs, const gf_model_config *c, gf_rope_params *rp)
{
    gf_status s;
    if (!json_object_get(rs, "factor"))
        return gf_error_set(GF_E_FORMAT, "%s: rope_scaling (dynamic) is missing 'factor'", path);
    if ((s = opt_pos_real(path, rs, "factor", 1.0, 1e12, &rp->factor)) != GF_OK)
        return gf_error_prefix(s, "rope_scaling");
    json_t *om = json_object_get(rs, "original_max_position_embeddings");
    if (om && !json_is_null(om) && (!json_is_integer(om) || json_integer_value(om) != (json_int_t)c->n_positions))
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: rope_scaling (dynamic) original_max_position_embeddings differs from "
                            "max_position_embeddings %d: transformers 4.47.1 scales only past "
                            "max_position_embeddings (beyond genfence's context), later versions past the "
                            "original length, inside it; not supported",
                            path, (int)c->n_positions);
    rp->max_pos = c->n_positions;
    rp->type = GF_ROPE_SCALING_DYNAMIC;
    return GF_OK;
}

/* rope_scaling: null / absent / rope_type "default" -> none; "linear" (factor);
 * "llama3" (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings); "yarn"; "longrope"; "dynamic"; any
 * other type is GF_E_UNSUPPORTED. */
static gf_status rope_scaling(const char *path, json_t *root, const gf_model_config *c, gf_rope_params *rp)
{
    json_t *rs = json_object_get(root, "rope_scaling");
    memset(rp, 0, sizeof *rp);
    rp->attn_factor = 1.0;
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
    if (!strcmp(type, "yarn"))
        return rope_yarn(path, root, rs, c, rp);
    if (!strcmp(type, "longrope"))
        return rope_longrope(path, root, rs, c, rp);
    if (!strcmp(type, "dynamic"))
        return rope_dynamic(path, rs, c, rp);
    int llama3 = !strcmp(type, "llama3");
    if (!llama3 && strcmp(type, "linear") != 0)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: rope_scaling rope_type '%.60s' is not supported (supported: "
                            "linear, llama3, yarn, longrope, dynamic)",
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

/* A non-negative integer (absent -> dflt). */
static gf_status opt_nonneg_int(const char *path, json_t *root, const char *key, int32_t dflt, int32_t *out)
{
    json_t *v = json_object_get(root, key);
    *out = dflt;
    if (!v)
        return GF_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' must be an integer in [0, %d]", path, key, (int)INT32_MAX);
    *out = (int32_t)json_integer_value(v);
    return GF_OK;
}

/* The sliding window, as transformers 4.47.1 reads it (its eager / sdpa mask
 * windows every layer): mistral: sliding_window (absent -> MistralConfig's
 * 4096, null -> none); qwen2: only with use_sliding_window true,
 * sliding_window (absent -> 4096). Qwen2's max_window_layers is where 4.47.1
 * disagrees with itself: its flash-attention path windows only layers >=
 * max_window_layers, its eager / sdpa mask every layer; only 0 (every layer
 * in both) is accepted. */
static gf_status sliding_window(const char *path, json_t *root, int fam_id, const gf_model_config *c, int32_t *out)
{
    gf_status s;
    int flag = 1;
    *out = 0;
    if (fam_id == FAM_LLAMA)
        return GF_OK;
    if (fam_id == FAM_QWEN2) {
        if ((s = opt_bool(path, root, "use_sliding_window", 0, &flag)) != GF_OK)
            return s;
        if (!flag)
            return GF_OK;
        int32_t mwl;
        if ((s = opt_nonneg_int(path, root, "max_window_layers", 28, &mwl)) != GF_OK)
            return s;
        if (mwl != 0)
            return gf_error_set(GF_E_UNSUPPORTED,
                                "%s: use_sliding_window true with max_window_layers %d (%s): transformers 4.47.1 "
                                "windows only layers >= max_window_layers under flash attention but every layer "
                                "under eager / sdpa, so the model's output depends on the attention implementation; "
                                "only max_window_layers 0 (every layer windowed in both) is supported",
                                path, (int)mwl,
                                json_object_get(root, "max_window_layers") ? "as given" : "the default");
    }
    json_t *v = json_object_get(root, "sliding_window");
    if (v && json_is_null(v)) {
        if (fam_id == FAM_QWEN2)
            return gf_error_set(GF_E_FORMAT, "%s: use_sliding_window true but sliding_window is null", path);
        return GF_OK;
    }
    if ((s = opt_pos_int(path, root, "sliding_window", 4096, out)) != GF_OK)
        return s;
    (void)c;
    return GF_OK;
}

static gf_status llama_config(const char *path, json_t *root, int fam_id, gf_model_config *c, gf_rope_params *rp)
{
    const int qwen2 = fam_id == FAM_QWEN2;
    const char *fam = qwen2 ? "qwen2" : fam_id == FAM_MISTRAL ? "mistral" : "llama";
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
     * None (= num_attention_heads), Qwen2Config's 32 or MistralConfig's 8 */
    json_t *kv = json_object_get(root, "num_key_value_heads");
    int32_t kv_absent = qwen2 ? 32 : fam_id == FAM_MISTRAL ? 8 : c->n_head;
    if ((s = opt_pos_int(path, root, "num_key_value_heads", kv ? c->n_head : kv_absent, &c->n_kv_head)) != GF_OK)
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
    if (fam_id == FAM_LLAMA) {
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
    }
    int32_t window;
    if ((s = sliding_window(path, root, fam_id, c, &window)) != GF_OK)
        return s;
    if ((s = opt_bool(path, root, "tie_word_embeddings", 0, &c->tied_head)) != GF_OK)
        return s;
    if ((s = opt_token_id(path, root, "bos_token_id", c->vocab_size, 0, &c->bos_id)) != GF_OK ||
        (s = opt_token_id(path, root, "eos_token_id", c->vocab_size, 1, &c->eos_id)) != GF_OK)
        return s;
    /* MistralConfig (4.47.1) has no rope_scaling: its rotary embedding is the
     * plain one whatever config.json says; later versions read it */
    json_t *mrs = json_object_get(root, "rope_scaling");
    if (fam_id == FAM_MISTRAL && mrs && !json_is_null(mrs))
        return gf_error_set(GF_E_UNSUPPORTED,
                            "%s: rope_scaling on a mistral model: transformers 4.47.1's Mistral ignores it, later "
                            "versions apply it; not supported",
                            path);
    if ((s = rope_scaling(path, root, c, rp)) != GF_OK)
        return s;
    rp->sliding_window = window;
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
/* base ** (arange(0, dim, 2).float() / dim), entry i: torch.pow(float scalar, f32) */
static float pow_f32(float base, int32_t dim, int32_t i)
{
    float e = (float)(2 * i) / (float)dim;
    return (float)pow((double)base, (double)e);
}

/* YaRN's correction range (transformers 4.47.1 find_correction_range, in
 * double): low = floor(d(beta_fast)), high = ceil(d(beta_slow)), clamped to
 * [0, dim - 1], d(r) = dim ln(max_pos / (r 2 pi)) / (2 ln base). */
static double yarn_dim(double rot, int32_t dim, double base, double max_pos)
{
    return ((double)dim * log(max_pos / (rot * 2.0 * M_PI_VALUE))) / (2.0 * log(base));
}

void gf_rope_yarn_range(const gf_model_config *cfg, const gf_rope_params *rp, int32_t *low, int32_t *high)
{
    const int32_t dim = cfg->d_head;
    double lo = floor(yarn_dim(rp->beta_fast, dim, cfg->rope_theta, rp->max_pos));
    double hi = ceil(yarn_dim(rp->beta_slow, dim, cfg->rope_theta, rp->max_pos));
    lo = lo < 0 ? 0 : lo;
    hi = hi > dim - 1 ? dim - 1 : hi;
    *low = lo > INT32_MAX ? INT32_MAX : (int32_t)lo;
    *high = hi < INT32_MIN ? INT32_MIN : (int32_t)hi;
}

void gf_rope_inv_freq(const gf_model_config *cfg, const gf_rope_params *rp, float *out)
{
    const int32_t dim = cfg->d_head, half = dim / 2;
    const float base = cfg->rope_theta;
    for (int32_t i = 0; i < half; i++)
        out[i] = 1.0f / pow_f32(base, dim, i);
    if (!rp || rp->type == GF_ROPE_SCALING_NONE || rp->type == GF_ROPE_SCALING_DYNAMIC)
        return; /* dynamic: the default frequencies within the context (rope_dynamic) */
    if (rp->type == GF_ROPE_SCALING_LONGROPE) {
        /* 1.0 / (ext_factors * base ** (arange(0, dim, 2).float() / dim)) */
        for (int32_t i = 0; i < half; i++)
            out[i] = 1.0f / ((float)rp->ext_factors[i] * pow_f32(base, dim, i));
        return;
    }
    if (rp->type == GF_ROPE_SCALING_YARN) {
        int32_t low, high;
        gf_rope_yarn_range(cfg, rp, &low, &high);
        /* min == max: max += 0.001 (a Python float; the divisor is rounded to float32) */
        const float lo = (float)low, span = low == high ? (float)((high + 0.001) - low) : (float)(high - low);
        const float factor = (float)rp->factor;
        for (int32_t i = 0; i < half; i++) {
            const float p = pow_f32(base, dim, i);
            const float extra = 1.0f / p, inter = 1.0f / (factor * p);
            float ramp = ((float)i - lo) / span;
            ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
            const float ef = 1.0f - ramp; /* inv_freq_extrapolation_factor */
            out[i] = inter * (1.0f - ef) + extra * ef;
        }
        return;
    }
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
