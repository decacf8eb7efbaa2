/* A model description written as a Hugging Face directory: config.json and
 * model.safetensors (F32), in the names and layouts gf_model_load reads
 * (engine/model.c), so that a model made in memory (the mechanism probes,
 * harness/kinds/probe.c) goes through the same loader as a downloaded one. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/model.h"
#include "genfence/safetensors.h"
#include "genfence/status.h"
#include "genfence/util.h"

typedef struct tensor_list {
    gf_st_write_tensor *t;
    char (*names)[96];
    size_t n, cap;
} tensor_list;

static void add(tensor_list *l, const char *name, const float *data, int64_t d0, int64_t d1)
{
    if (l->n == l->cap || !data)
        return;
    gf_st_write_tensor *t = &l->t[l->n];
    snprintf(l->names[l->n], sizeof l->names[l->n], "%s", name);
    t->name = l->names[l->n];
    t->dtype = GF_DT_F32;
    t->ndim = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->data = data;
    l->n++;
}

static json_t *config_json(const gf_model_config *c, const json_t *extra)
{
    json_t *o = json_object();
    if (c->arch == GF_ARCH_GPT2) {
        const char *act = c->activation == GF_ACT_GELU_ERF ? "gelu"
                          : c->activation == GF_ACT_RELU   ? "relu"
                                                           : "gelu_new";
        json_object_set_new(o, "model_type", json_string("gpt2"));
        json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
        json_object_set_new(o, "n_positions", json_integer(c->n_positions));
        json_object_set_new(o, "n_embd", json_integer(c->n_embd));
        json_object_set_new(o, "n_layer", json_integer(c->n_layer));
        json_object_set_new(o, "n_head", json_integer(c->n_head));
        json_object_set_new(o, "n_inner", json_integer(c->d_ff));
        json_object_set_new(o, "layer_norm_epsilon", json_real(c->norm_eps));
        json_object_set_new(o, "activation_function", json_string(act));
        json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tied_head));
    } else {
        json_object_set_new(o, "model_type", json_string(c->qkv_bias ? "qwen2" : "llama")); /* qwen2: q/k/v biases */
        json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
        json_object_set_new(o, "hidden_size", json_integer(c->n_embd));
        json_object_set_new(o, "intermediate_size", json_integer(c->d_ff));
        json_object_set_new(o, "num_hidden_layers", json_integer(c->n_layer));
        json_object_set_new(o, "num_attention_heads", json_integer(c->n_head));
        json_object_set_new(o, "num_key_value_heads", json_integer(c->n_kv_head));
        json_object_set_new(o, "head_dim", json_integer(c->d_head));
        json_object_set_new(o, "max_position_embeddings", json_integer(c->n_positions));
        json_object_set_new(o, "rms_norm_eps", json_real(c->norm_eps));
        json_object_set_new(o, "rope_theta", json_real(c->rope_theta));
        json_object_set_new(o, "hidden_act", json_string("silu"));
        json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tied_head));
    }
    if (c->arch == GF_ARCH_LLAMA && c->rope_scaling == GF_ROPE_SCALING_LINEAR) {
        json_t *rs = json_object();
        json_object_set_new(rs, "rope_type", json_string("linear"));
        json_object_set_new(rs, "factor", json_real(c->rope_factor));
        json_object_set_new(o, "rope_scaling", rs);
    }
    if (c->bos_id >= 0)
        json_object_set_new(o, "bos_token_id", json_integer(c->bos_id));
    if (c->eos_id >= 0)
        json_object_set_new(o, "eos_token_id", json_integer(c->eos_id));
    if (extra)
        json_object_update(o, (json_t *)extra);
    return o;
}

gf_status gf_model_write(const gf_model_desc *desc, const json_t *extra_config, const char *dir)
{
    if (!desc || !dir || !desc->weights.layers)
        return gf_error_set(GF_E_INVALID_ARG, "gf_model_write: NULL argument");
    const gf_model_config *c = &desc->config;
    const gf_model_weights *w = &desc->weights;
    if (c->arch == GF_ARCH_LLAMA && c->rope_scaling == GF_ROPE_SCALING_LLAMA3 &&
        !(extra_config && json_object_get(extra_config, "rope_scaling"))) {
        /* the config keeps the factor only, not the llama3 blend's other three */
        return gf_error_set(GF_E_UNSUPPORTED, "gf_model_write: llama3 rope scaling needs its rope_scaling mapping in "
                                              "extra_config (the config keeps only the factor)");
    }
    const int64_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, P = c->n_positions;
    const int64_t Q = (int64_t)c->n_head * c->d_head, KV = (int64_t)c->n_kv_head * c->d_head;
    tensor_list l = {0};
    l.cap = 8 + (size_t)c->n_layer * 16;
    l.t = calloc(l.cap, sizeof *l.t);
    l.names = calloc(l.cap, sizeof *l.names);
    char *cfg_path = gf_path_join(dir, "config.json"), *st_path = gf_path_join(dir, "model.safetensors");
    json_t *cfg = NULL;
    gf_status st = GF_OK;
    if (!l.t || !l.names || !cfg_path || !st_path) {
        st = gf_error_set(GF_E_NOMEM, "gf_model_write: out of memory");
        goto done;
    }
    char nm[96];
    if (c->arch == GF_ARCH_GPT2) {
        add(&l, "wte.weight", w->wte, V, D);
        add(&l, "wpe.weight", w->wpe, P, D);
        for (int32_t i = 0; i < c->n_layer; i++) {
            const gf_layer_weights *y = &w->layers[i];
#define N(s) (snprintf(nm, sizeof nm, "h.%d.%s", (int)i, s), nm)
            add(&l, N("ln_1.weight"), y->ln1_w, D, 0);
            add(&l, N("ln_1.bias"), y->ln1_b, D, 0);
            add(&l, N("attn.c_attn.weight"), y->attn_qkv_w, D, 3 * D);
            add(&l, N("attn.c_attn.bias"), y->attn_qkv_b, 3 * D, 0);
            add(&l, N("attn.c_proj.weight"), y->attn_proj_w, D, D);
            add(&l, N("attn.c_proj.bias"), y->attn_proj_b, D, 0);
            add(&l, N("ln_2.weight"), y->ln2_w, D, 0);
            add(&l, N("ln_2.bias"), y->ln2_b, D, 0);
            add(&l, N("mlp.c_fc.weight"), y->mlp_fc_w, D, F);
            add(&l, N("mlp.c_fc.bias"), y->mlp_fc_b, F, 0);
            add(&l, N("mlp.c_proj.weight"), y->mlp_proj_w, F, D);
            add(&l, N("mlp.c_proj.bias"), y->mlp_proj_b, D, 0);
#undef N
        }
        add(&l, "ln_f.weight", w->lnf_w, D, 0);
        add(&l, "ln_f.bias", w->lnf_b, D, 0);
    } else {
        add(&l, "model.embed_tokens.weight", w->wte, V, D);
        for (int32_t i = 0; i < c->n_layer; i++) {
            const gf_layer_weights *y = &w->layers[i];
#define N(s) (snprintf(nm, sizeof nm, "model.layers.%d.%s", (int)i, s), nm)
            add(&l, N("input_layernorm.weight"), y->attn_norm_w, D, 0);
            add(&l, N("self_attn.q_proj.weight"), y->wq, Q, D);
            add(&l, N("self_attn.k_proj.weight"), y->wk, KV, D);
            add(&l, N("self_attn.v_proj.weight"), y->wv, KV, D);
            if (c->qkv_bias) {
                add(&l, N("self_attn.q_proj.bias"), y->bq, Q, 0);
                add(&l, N("self_attn.k_proj.bias"), y->bk, KV, 0);
                add(&l, N("self_attn.v_proj.bias"), y->bv, KV, 0);
            }
            add(&l, N("self_attn.o_proj.weight"), y->wo, D, Q);
            add(&l, N("post_attention_layernorm.weight"), y->mlp_norm_w, D, 0);
            add(&l, N("mlp.gate_proj.weight"), y->w_gate, F, D);
            add(&l, N("mlp.up_proj.weight"), y->w_up, F, D);
            add(&l, N("mlp.down_proj.weight"), y->w_down, D, F);
#undef N
        }
        add(&l, "model.norm.weight", w->lnf_w, D, 0);
    }
    if (!c->tied_head)
        add(&l, "lm_head.weight", w->lm_head, V, D);
    const char *mk[] = {"format", "written_by"}, *mv[] = {"pt", "genfence gf_model_write"};
    if ((st = gf_safetensors_write(st_path, l.t, l.n, mk, mv, 2)) != GF_OK)
        goto done;
    cfg = config_json(c, extra_config);
    if (!cfg || json_dump_file(cfg, cfg_path, JSON_INDENT(2) | JSON_SORT_KEYS) != 0)
        st = gf_error_set(GF_E_IO, "gf_model_write: cannot write %s", cfg_path);
done:
    json_decref(cfg);
    free(l.t);
    free(l.names);
    free(cfg_path);
    free(st_path);
    return st;
}

void gf_model_write_remove(const char *dir)
{
    static const char *const files[] = {"config.json", "model.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = gf_path_join(dir, files[i]);
        if (p)
            remove(p);
        free(p);
    }
    remove(dir);
}
