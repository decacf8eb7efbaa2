/* Loading Llama / Qwen2 directories written here with genfence's own
 * safetensors writer: single file and sharded (model.safetensors.index.json),
 * F32 and BF16, the desc's pointers and values, tied/untied heads, and the
 * rotary inverse frequencies. (Malformed directories: tests/cli/llama_model_errors.sh;
 * the forward against transformers: tests/cli/forward_vs_transformers.sh.) */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "genfence/model.h"
#include "genfence/safetensors.h"

#include "support_files.h"

/* V 16, D 8, L 2, H 2, H_kv 1, d_head 4, F 12, 32 positions */
enum { V = 16, D = 8, L = 2, H = 2, HKV = 1, DH = 4, F = 12, NP = 32, MAXT = 64 };

static void setup(void) { tf_tmpdir_make("gf-llama"); }
static void teardown(void) { tf_tmpdir_remove(); }
TestSuite(llama_load, .init = setup, .fini = teardown);

typedef struct tens {
    char name[96];
    int64_t shape[2];
    int ndim;
    float *data;
} tens;

/* value j of tensor k: exact in BF16 (multiples of 1/8 in [-2, 2)) */
static float val(int k, int64_t j) { return (float)(((j * 5 + k * 3) % 32) - 16) / 8.0f; }

static int make_tensors(tens *t, int qwen2, int head)
{
    int n = 0;
#define ADD(nd, a, b, ...)                                  \
    do {                                                    \
        snprintf(t[n].name, sizeof t[n].name, __VA_ARGS__); \
        t[n].ndim = nd;                                     \
        t[n].shape[0] = a;                                  \
        t[n].shape[1] = b;                                  \
        n++;                                                \
    } while (0)
    ADD(2, V, D, "model.embed_tokens.weight");
    for (int l = 0; l < L; l++) {
        ADD(1, D, 0, "model.layers.%d.input_layernorm.weight", l);
        ADD(2, H * DH, D, "model.layers.%d.self_attn.q_proj.weight", l);
        ADD(2, HKV * DH, D, "model.layers.%d.self_attn.k_proj.weight", l);
        ADD(2, HKV * DH, D, "model.layers.%d.self_attn.v_proj.weight", l);
        if (qwen2) {
            ADD(1, H * DH, 0, "model.layers.%d.self_attn.q_proj.bias", l);
            ADD(1, HKV * DH, 0, "model.layers.%d.self_attn.k_proj.bias", l);
            ADD(1, HKV * DH, 0, "model.layers.%d.self_attn.v_proj.bias", l);
        }
        ADD(2, D, H * DH, "model.layers.%d.self_attn.o_proj.weight", l);
        ADD(1, D, 0, "model.layers.%d.post_attention_layernorm.weight", l);
        ADD(2, F, D, "model.layers.%d.mlp.gate_proj.weight", l);
        ADD(2, F, D, "model.layers.%d.mlp.up_proj.weight", l);
        ADD(2, D, F, "model.layers.%d.mlp.down_proj.weight", l);
    }
    ADD(1, D, 0, "model.norm.weight");
    if (head)
        ADD(2, V, D, "lm_head.weight");
#undef ADD
    for (int k = 0; k < n; k++) {
        int64_t m = t[k].ndim == 1 ? t[k].shape[0] : t[k].shape[0] * t[k].shape[1];
        t[k].data = malloc((size_t)m * sizeof(float));
        for (int64_t j = 0; j < m; j++)
            t[k].data[j] = val(k, j);
    }
    return n;
}

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    cr_assert((u & 0xffffu) == 0, "%g not exact in BF16", (double)f);
    return (uint16_t)(u >> 16);
}

/* Write tensors [from, to) to DIR/file, in dtype. */
static void write_part(const char *dir, const char *file, tens *t, int from, int to, gf_dtype dt)
{
    gf_st_write_tensor w[MAXT];
    uint16_t *half[MAXT] = {0};
    for (int k = from; k < to; k++) {
        gf_st_write_tensor *e = &w[k - from];
        memset(e, 0, sizeof *e);
        e->name = t[k].name;
        e->dtype = dt;
        e->ndim = t[k].ndim;
        e->shape[0] = t[k].shape[0];
        e->shape[1] = t[k].shape[1];
        e->data = t[k].data;
        if (dt == GF_DT_BF16) {
            int64_t m = t[k].ndim == 1 ? t[k].shape[0] : t[k].shape[0] * t[k].shape[1];
            half[k] = malloc((size_t)m * 2);
            for (int64_t j = 0; j < m; j++)
                half[k][j] = bf16_of(t[k].data[j]);
            e->data = half[k];
        }
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    gf_status st = gf_safetensors_write(p, w, (size_t)(to - from), mk, mv, 1);
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    for (int k = from; k < to; k++)
        free(half[k]);
}

static const char *write_dir(const char *sub, const char *type, int tied, int shards, gf_dtype dt, tens *t, int *n_out,
                             const char *rope_scaling_json)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s", tf_path(sub));
    cr_assert(mkdir(dir, 0755) == 0);
    int qwen2 = !strcmp(type, "qwen2");
    int n = make_tensors(t, qwen2, !tied);
    *n_out = n;
    json_t *c = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:b, s:i, s:i}", "model_type", type,
                          "vocab_size", V, "hidden_size", D, "intermediate_size", F, "num_hidden_layers", L,
                          "num_attention_heads", H, "num_key_value_heads", HKV, "max_position_embeddings", NP,
                          "rms_norm_eps", 1e-5, "tie_word_embeddings", tied, "bos_token_id", 1, "eos_token_id", 2);
    if (!qwen2)
        json_object_set_new(c, "head_dim", json_integer(DH));
    if (rope_scaling_json)
        json_object_set_new(c, "rope_scaling", json_loads(rope_scaling_json, 0, NULL));
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    cr_assert(json_dump_file(c, p, 0) == 0);
    json_decref(c);
    if (shards <= 1) {
        write_part(dir, "model.safetensors", t, 0, n, dt);
        return dir;
    }
    json_t *map = json_object();
    for (int s = 0; s < shards; s++) {
        char f[64];
        snprintf(f, sizeof f, "model-%05d-of-%05d.safetensors", s + 1, shards);
        int from = n * s / shards, to = n * (s + 1) / shards;
        write_part(dir, f, t, from, to, dt);
        for (int k = from; k < to; k++)
            json_object_set_new(map, t[k].name, json_string(f));
    }
    json_t *idx = json_pack("{s:{s:i}, s:o}", "metadata", "total_size", 0, "weight_map", map);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    cr_assert(json_dump_file(idx, p, 0) == 0);
    json_decref(idx);
    return dir;
}

static void free_tensors(tens *t, int n)
{
    for (int k = 0; k < n; k++)
        free(t[k].data);
}

static void expect_same(const float *got, const tens *t, const char *what)
{
    cr_assert(got, "%s is NULL", what);
    int64_t m = t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
    for (int64_t j = 0; j < m; j++)
        cr_assert(got[j] == t->data[j], "%s [%lld]: %g != %g", what, (long long)j, (double)got[j], (double)t->data[j]);
}

static const tens *find(const tens *t, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(t[k].name, name))
            return &t[k];
    cr_assert_fail("no tensor %s", name);
    return NULL;
}

static void check_model(const gf_model *m, const tens *t, int n, int qwen2, int tied)
{
    const gf_model_desc *d = gf_model_desc_get(m);
    const gf_model_config *c = &d->config;
    cr_assert(c->arch == GF_ARCH_LLAMA && c->pos == GF_POS_ROPE && c->norm == GF_NORM_RMSNORM);
    cr_assert(c->n_head == H && c->n_kv_head == HKV && c->d_head == DH && c->d_ff == F && c->n_positions == NP);
    cr_assert(c->qkv_bias == qwen2 && c->tied_head == tied && c->bos_id == 1 && c->eos_id == 2);
    const gf_model_weights *w = &d->weights;
    expect_same(w->wte, find(t, n, "model.embed_tokens.weight"), "wte");
    expect_same(w->lnf_w, find(t, n, "model.norm.weight"), "lnf_w");
    cr_assert(w->wpe == NULL && w->lnf_b == NULL);
    if (tied)
        cr_assert(w->lm_head == w->wte);
    else
        expect_same(w->lm_head, find(t, n, "lm_head.weight"), "lm_head");
    char nm[96];
    for (int l = 0; l < L; l++) {
        const gf_layer_weights *ly = &w->layers[l];
#define CHECK(field, suffix) \
    (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix), expect_same(ly->field, find(t, n, nm), nm))
        CHECK(attn_norm_w, "input_layernorm.weight");
        CHECK(wq, "self_attn.q_proj.weight");
        CHECK(wk, "self_attn.k_proj.weight");
        CHECK(wv, "self_attn.v_proj.weight");
        CHECK(wo, "self_attn.o_proj.weight");
        CHECK(mlp_norm_w, "post_attention_layernorm.weight");
        CHECK(w_gate, "mlp.gate_proj.weight");
        CHECK(w_up, "mlp.up_proj.weight");
        CHECK(w_down, "mlp.down_proj.weight");
        if (qwen2) {
            CHECK(bq, "self_attn.q_proj.bias");
            CHECK(bk, "self_attn.k_proj.bias");
            CHECK(bv, "self_attn.v_proj.bias");
        } else {
            cr_assert(!ly->bq && !ly->bk && !ly->bv);
        }
        cr_assert(!ly->attn_qkv_w && !ly->ln1_w, "GPT-2 fields stay NULL");
#undef CHECK
    }
    size_t params = 0;
    for (int k = 0; k < n; k++)
        params += (size_t)(t[k].ndim == 1 ? t[k].shape[0] : t[k].shape[0] * t[k].shape[1]);
    cr_assert_eq(gf_model_param_count(m), params);
    /* d_head 4, theta 10000: 1, 10000^-0.5 */
    cr_assert(w->rope_inv_freq && w->rope_inv_freq[0] == 1.0f && w->rope_inv_freq[1] == 0.01f, "inv_freq %a %a",
              (double)w->rope_inv_freq[0], (double)w->rope_inv_freq[1]);
}

Test(llama_load, single_file_f32)
{
    tens t[MAXT];
    int n;
    const char *dir = write_dir("a", "llama", 1, 1, GF_DT_F32, t, &n, NULL);
    gf_model *m = NULL;
    gf_status st = gf_model_load(dir, &m);
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    check_model(m, t, n, 0, 1);
    gf_model_free(m);
    free_tensors(t, n);
}

Test(llama_load, sharded_bf16_qwen2_untied)
{
    tens t[MAXT];
    int n;
    const char *dir = write_dir("b", "qwen2", 0, 3, GF_DT_BF16, t, &n, NULL);
    gf_st_set *set = NULL;
    gf_status st = gf_st_set_open(dir, &set);
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    cr_assert_eq(gf_st_set_shard_count(set), 3);
    cr_assert_eq(gf_st_set_count(set), (size_t)n);
    const gf_safetensors *shard = NULL;
    const gf_st_tensor *x = gf_st_set_find(set, "model.norm.weight", &shard);
    cr_assert(x && strstr(gf_safetensors_path(shard), "model-00003-of-00003.safetensors"));
    cr_assert(!gf_st_set_find(set, "nope", NULL));
    gf_st_set_close(set);
    gf_model *m = NULL;
    st = gf_model_load(dir, &m);
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    check_model(m, t, n, 1, 0);
    gf_model_free(m);
    free_tensors(t, n);
}

Test(llama_load, rope_scaling_folded_in)
{
    tens t[MAXT];
    int n;
    const char *dir = write_dir("c", "llama", 1, 1, GF_DT_F32, t, &n, "{\"rope_type\": \"linear\", \"factor\": 4.0}");
    gf_model *m = NULL;
    gf_status st = gf_model_load(dir, &m);
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    const gf_model_desc *d = gf_model_desc_get(m);
    cr_assert(d->config.rope_scaling == GF_ROPE_SCALING_LINEAR && d->config.rope_factor == 4.0f);
    cr_assert(d->weights.rope_inv_freq[0] == 0.25f && d->weights.rope_inv_freq[1] == 0.0025f);
    gf_model_free(m);
    free_tensors(t, n);
}
