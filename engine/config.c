/* config.json (Hugging Face) -> gf_model_config. GPT-2 only for now. */
#include "genfence/model.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

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
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' must be an integer, got %s", path, key,
                            jtype(v));
    json_int_t x = json_integer_value(v);
    if (x <= 0 || x > INT32_MAX)
        return gf_error_set(GF_E_FORMAT,
                            "%s: key '%s' is %" JSON_INTEGER_FORMAT ", must be in [1, %d]", path,
                            key, x, (int)INT32_MAX);
    *out = (int32_t)x;
    return GF_OK;
}

/* An optional token id: absent or null -> -1; otherwise an integer in [0, vocab). */
static gf_status opt_token_id(const char *path, json_t *root, const char *key, int32_t vocab,
                              int32_t *out)
{
    json_t *v = json_object_get(root, key);
    *out = -1;
    if (!v || json_is_null(v))
        return GF_OK;
    if (!json_is_integer(v))
        return gf_error_set(GF_E_FORMAT, "%s: key '%s' must be an integer or null, got %s", path,
                            key, jtype(v));
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= vocab)
        return gf_error_set(GF_E_FORMAT,
                            "%s: key '%s' is %" JSON_INTEGER_FORMAT
                            ", outside the vocabulary [0, %d) (vocab_size %d)",
                            path, key, x, (int)vocab, (int)vocab);
    *out = (int32_t)x;
    return GF_OK;
}

gf_status gf_config_load(const char *path, gf_model_config *cfg_out)
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
        return gf_error_set(GF_E_FORMAT, "%s: invalid JSON at line %d, column %d: %s", path,
                            err.line, err.column, err.text);
    }

    gf_model_config c;
    memset(&c, 0, sizeof c);
    gf_status s = GF_OK;
    json_t *v;

    if (!json_is_object(root)) {
        s = gf_error_set(GF_E_FORMAT, "%s: top level is a JSON %s, expected an object", path,
                         jtype(root));
        goto out;
    }

    v = json_object_get(root, "model_type");
    if (!v) {
        s = gf_error_set(GF_E_FORMAT, "%s: missing required key 'model_type' (e.g. \"gpt2\")",
                         path);
        goto out;
    }
    if (!json_is_string(v)) {
        s = gf_error_set(GF_E_FORMAT, "%s: key 'model_type' must be a string, got %s", path,
                         jtype(v));
        goto out;
    }
    if (strcmp(json_string_value(v), "gpt2") != 0) {
        s = gf_error_set(GF_E_UNSUPPORTED,
                         "%s: model_type '%.100s' is not supported (supported: gpt2)", path,
                         json_string_value(v));
        goto out;
    }
    c.arch = GF_ARCH_GPT2;
    c.norm = GF_NORM_LAYERNORM;
    c.pos = GF_POS_LEARNED;

    if ((s = req_pos_int(path, root, "vocab_size", &c.vocab_size)) != GF_OK ||
        (s = req_pos_int(path, root, "n_positions", &c.n_positions)) != GF_OK ||
        (s = req_pos_int(path, root, "n_embd", &c.n_embd)) != GF_OK ||
        (s = req_pos_int(path, root, "n_layer", &c.n_layer)) != GF_OK ||
        (s = req_pos_int(path, root, "n_head", &c.n_head)) != GF_OK)
        goto out;
    if (c.n_embd % c.n_head != 0) {
        s = gf_error_set(GF_E_FORMAT, "%s: n_embd %d is not divisible by n_head %d", path,
                         (int)c.n_embd, (int)c.n_head);
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
            s = gf_error_set(GF_E_FORMAT, "%s: key 'layer_norm_epsilon' must be a number, got %s",
                             path, jtype(v));
            goto out;
        }
        if (!(e > 0.0) || !isfinite(e) || e > 1.0) {
            s = gf_error_set(GF_E_FORMAT,
                             "%s: key 'layer_norm_epsilon' is %g, must be a positive number <= 1",
                             path, e);
            goto out;
        }
        c.norm_eps = (float)e;
    }

    /* activation_function */
    c.activation = GF_ACT_GELU_TANH;
    v = json_object_get(root, "activation_function");
    if (v) {
        if (!json_is_string(v)) {
            s = gf_error_set(GF_E_FORMAT, "%s: key 'activation_function' must be a string, got %s",
                             path, jtype(v));
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
            s = gf_error_set(GF_E_FORMAT, "%s: 4 x n_embd (%d) overflows; set n_inner", path,
                             (int)c.n_embd);
            goto out;
        }
        c.d_ff = 4 * c.n_embd;
    } else if ((s = req_pos_int(path, root, "n_inner", &c.d_ff)) != GF_OK) {
        if (!json_is_integer(v))
            s = gf_error_set(GF_E_FORMAT, "%s: key 'n_inner' must be an integer or null, got %s",
                             path, jtype(v));
        goto out;
    }

    if ((s = opt_token_id(path, root, "bos_token_id", c.vocab_size, &c.bos_id)) != GF_OK ||
        (s = opt_token_id(path, root, "eos_token_id", c.vocab_size, &c.eos_id)) != GF_OK)
        goto out;

    c.tied_head = 1;
    v = json_object_get(root, "tie_word_embeddings");
    if (v) {
        if (!json_is_boolean(v)) {
            s = gf_error_set(GF_E_FORMAT,
                             "%s: key 'tie_word_embeddings' must be a boolean, got %s", path,
                             jtype(v));
            goto out;
        }
        c.tied_head = json_is_true(v) ? 1 : 0;
    }

    *cfg_out = c;
out:
    json_decref(root);
    return s;
}
