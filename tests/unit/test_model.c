/* config.json parsing and GPT-2 model directory loading. */
#define _XOPEN_SOURCE 700
#include <criterion/criterion.h>

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "genfence/model.h"
#include "genfence/safetensors.h"

#include "support_files.h"

/* Tiny GPT-2: V=16, n_positions=8, D=8, L=2, H=2, F=4D=32. */
enum { V = 16, P = 8, D = 8, L = 2, H = 2, F = 32 };

static void setup(void) { tf_tmpdir_make("gf-model"); }
static void teardown(void) { tf_tmpdir_remove(); }

TestSuite(config, .init = setup, .fini = teardown);
TestSuite(model, .init = setup, .fini = teardown);

static void check_msg(gf_status got, gf_status want, ...)
{
    const char *msg = gf_error_msg();
    cr_assert(got == want, "status %s, want %s; message: %s", gf_status_str(got), gf_status_str(want), msg);
    va_list ap;
    va_start(ap, want);
    for (const char *sub; (sub = va_arg(ap, const char *)) != NULL;)
        cr_assert(strstr(msg, sub) != NULL, "message lacks \"%s\": %s", sub, msg);
    va_end(ap);
}

/* ---- config.json ---- */

static json_t *base_config(void)
{
    json_t *c =
        json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:s, s:n}", "model_type", "gpt2", "vocab_size", V, "n_positions", P,
                  "n_embd", D, "n_layer", L, "n_head", H, "architectures_note", "unknown keys are ignored", "n_inner");
    cr_assert(c);
    return c;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot create %s", path);
    fputs(text, f);
    fclose(f);
}

static void write_json(const char *path, json_t *j)
{
    cr_assert(json_dump_file(j, path, JSON_INDENT(2)) == 0, "cannot write %s", path);
    json_decref(j);
}

static gf_status load_cfg(json_t *j, gf_model_config *c)
{
    const char *p = tf_path("config.json");
    write_json(p, j);
    memset(c, 0xAB, sizeof *c);
    gf_error_clear();
    return gf_config_load(p, c);
}

Test(config, defaults)
{
    gf_model_config c;
    gf_status s = load_cfg(base_config(), &c);
    cr_assert(s == GF_OK, "%s", gf_error_msg());
    cr_assert_eq(c.arch, GF_ARCH_GPT2);
    cr_assert_eq(c.norm, GF_NORM_LAYERNORM);
    cr_assert_eq(c.pos, GF_POS_LEARNED);
    cr_assert_eq(c.activation, GF_ACT_GELU_TANH);
    cr_assert_eq(c.vocab_size, V);
    cr_assert_eq(c.n_positions, P);
    cr_assert_eq(c.n_embd, D);
    cr_assert_eq(c.n_layer, L);
    cr_assert_eq(c.n_head, H);
    cr_assert_eq(c.n_kv_head, H);
    cr_assert_eq(c.d_head, D / H);
    cr_assert_eq(c.d_ff, 4 * D);
    cr_assert(c.norm_eps == 1e-5f);
    cr_assert(c.rope_theta == 0.0f);
    cr_assert_eq(c.bos_id, -1);
    cr_assert_eq(c.eos_id, -1);
    cr_assert_eq(c.tied_head, 1);
}

Test(config, optional_keys)
{
    json_t *j = base_config();
    json_object_set_new(j, "layer_norm_epsilon", json_real(1e-6));
    json_object_set_new(j, "activation_function", json_string("gelu"));
    json_object_set_new(j, "n_inner", json_integer(20));
    json_object_set_new(j, "bos_token_id", json_integer(15));
    json_object_set_new(j, "eos_token_id", json_null());
    json_object_set_new(j, "tie_word_embeddings", json_false());
    gf_model_config c;
    gf_status s = load_cfg(j, &c);
    cr_assert(s == GF_OK, "%s", gf_error_msg());
    cr_assert(c.norm_eps == 1e-6f);
    cr_assert_eq(c.activation, GF_ACT_GELU_ERF);
    cr_assert_eq(c.d_ff, 20);
    cr_assert_eq(c.bos_id, 15);
    cr_assert_eq(c.eos_id, -1);
    cr_assert_eq(c.tied_head, 0);
}

Test(config, activations)
{
    static const struct {
        const char *name;
        gf_activation act;
    } cases[] = {{"gelu_new", GF_ACT_GELU_TANH},
                 {"gelu_pytorch_tanh", GF_ACT_GELU_TANH},
                 {"gelu", GF_ACT_GELU_ERF},
                 {"relu", GF_ACT_RELU}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = base_config();
        json_object_set_new(j, "activation_function", json_string(cases[i].name));
        gf_model_config c;
        cr_assert(load_cfg(j, &c) == GF_OK, "%s: %s", cases[i].name, gf_error_msg());
        cr_assert_eq(c.activation, cases[i].act, "%s", cases[i].name);
    }
    json_t *j = base_config();
    json_object_set_new(j, "activation_function", json_string("quick_gelu"));
    gf_model_config c;
    check_msg(load_cfg(j, &c), GF_E_UNSUPPORTED, "config.json", "'quick_gelu' is not supported", "gelu_new", NULL);
    j = base_config();
    json_object_set_new(j, "activation_function", json_integer(1));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'activation_function' must be a string, got integer", NULL);
}

Test(config, missing_key)
{
    json_t *j = base_config();
    json_object_del(j, "n_head");
    gf_model_config c;
    check_msg(load_cfg(j, &c), GF_E_FORMAT, tf_path("config.json"), "missing required key 'n_head'", NULL);
    j = base_config();
    json_object_del(j, "model_type");
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "missing required key 'model_type'", NULL);
}

Test(config, wrong_type)
{
    json_t *j = base_config();
    json_object_set_new(j, "n_embd", json_string("8"));
    gf_model_config c;
    check_msg(load_cfg(j, &c), GF_E_FORMAT, tf_path("config.json"), "key 'n_embd' must be an integer, got string",
              NULL);
    j = base_config();
    json_object_set_new(j, "vocab_size", json_real(16.0));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'vocab_size' must be an integer, got real", NULL);
    j = base_config();
    json_object_set_new(j, "model_type", json_integer(2));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'model_type' must be a string, got integer", NULL);
    j = base_config();
    json_object_set_new(j, "tie_word_embeddings", json_string("true"));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'tie_word_embeddings' must be a boolean", NULL);
    j = base_config();
    json_object_set_new(j, "n_inner", json_string("32"));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'n_inner' must be an integer or null, got string", NULL);
    j = base_config();
    json_object_set_new(j, "eos_token_id", json_pack("[i]", 3));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'eos_token_id' must be an integer or null, got array", NULL);
    j = base_config();
    json_object_set_new(j, "layer_norm_epsilon", json_string("1e-5"));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'layer_norm_epsilon' must be a number", NULL);
}

Test(config, bad_values)
{
    gf_model_config c;
    json_t *j = base_config();
    json_object_set_new(j, "n_layer", json_integer(0));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'n_layer' is 0, must be in [1, ", NULL);
    j = base_config();
    json_object_set_new(j, "n_head", json_integer(3));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "n_embd 8 is not divisible by n_head 3", NULL);
    j = base_config();
    json_object_set_new(j, "vocab_size", json_integer(5000000000LL));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'vocab_size' is 5000000000", NULL);
    j = base_config();
    json_object_set_new(j, "eos_token_id", json_integer(50256));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'eos_token_id' is 50256, outside the vocabulary", "vocab_size 16",
              NULL);
    j = base_config();
    json_object_set_new(j, "layer_norm_epsilon", json_real(-1.0));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'layer_norm_epsilon' is -1", NULL);
}

Test(config, integer_epsilon_accepted)
{
    json_t *j = base_config();
    json_object_set_new(j, "layer_norm_epsilon", json_integer(1));
    gf_model_config c;
    cr_assert(load_cfg(j, &c) == GF_OK, "%s", gf_error_msg());
    cr_assert(c.norm_eps == 1.0f);
}

Test(config, malformed_json)
{
    const char *p = tf_path("config.json");
    write_text(p, "{\n  \"model_type\": \"gpt2\",\n  \"n_embd\": 8,,\n}\n");
    gf_model_config c;
    check_msg(gf_config_load(p, &c), GF_E_FORMAT, p, "invalid JSON at line 3, column", NULL);
}

Test(config, not_an_object)
{
    const char *p = tf_path("config.json");
    write_text(p, "[\"gpt2\"]");
    gf_model_config c;
    check_msg(gf_config_load(p, &c), GF_E_FORMAT, p, "top level is a JSON array", NULL);
}

Test(config, unsupported_model_type)
{
    json_t *j = base_config();
    json_object_set_new(j, "model_type", json_string("gemma2"));
    gf_model_config c;
    check_msg(load_cfg(j, &c), GF_E_UNSUPPORTED, tf_path("config.json"), "model_type 'gemma2' is not supported",
              "gpt2, llama, qwen2, mistral", NULL);
}

Test(config, missing_file)
{
    gf_model_config c;
    const char *p = tf_path("nope/config.json");
    check_msg(gf_config_load(p, &c), GF_E_IO, p, "No such file", NULL);
}

/* ---- model directory ---- */

typedef struct model_opts {
    const char *prefix;  /* "" or "transformer." */
    gf_dtype dtype;      /* F32 (default), F16, BF16, F64 */
    int lm_head;         /* write lm_head.weight */
    int n_layer;         /* layers written; default L */
    const char *skip;    /* tensor (unprefixed) not to write */
    const char *reshape; /* tensor (unprefixed) written with `shape` instead */
    int64_t shape[2];
    int buffers;                /* add h.N.attn.bias / masked_bias buffers */
    const char *int_dtype;      /* tensor (unprefixed) written as I32 */
    const char *dup_unprefixed; /* also write this one without the prefix */
} model_opts;

/* Exact in F16 and BF16: multiples of 1/16 in [-1, 15/16]. */
static float wval(int k, int64_t i) { return (float)((i * 7 + k * 13) % 32 - 16) / 16.0f; }

static uint16_t f16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) == 0)
        return sign;
    int32_t e = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    cr_assert(e > 0 && e < 31 && (u & 0x1fff) == 0, "test value %g not exact in F16", (double)f);
    return (uint16_t)(sign | (uint16_t)(e << 10) | (uint16_t)((u >> 13) & 0x3ff));
}

typedef struct spec {
    char name[64];
    int ndim;
    int64_t shape[2];
} spec;

/* The GPT-2 tensor list for `nl` layers, unprefixed; returns the count. */
static int gpt2_specs(spec *s, int nl, int lm_head)
{
    int n = 0;
#define ADD(nd, a, b, ...)                                  \
    do {                                                    \
        snprintf(s[n].name, sizeof s[n].name, __VA_ARGS__); \
        s[n].ndim = nd;                                     \
        s[n].shape[0] = a;                                  \
        s[n].shape[1] = b;                                  \
        n++;                                                \
    } while (0)
    ADD(2, V, D, "wte.weight");
    ADD(2, P, D, "wpe.weight");
    for (int l = 0; l < nl; l++) {
        ADD(1, D, 0, "h.%d.ln_1.weight", l);
        ADD(1, D, 0, "h.%d.ln_1.bias", l);
        ADD(2, D, 3 * D, "h.%d.attn.c_attn.weight", l);
        ADD(1, 3 * D, 0, "h.%d.attn.c_attn.bias", l);
        ADD(2, D, D, "h.%d.attn.c_proj.weight", l);
        ADD(1, D, 0, "h.%d.attn.c_proj.bias", l);
        ADD(1, D, 0, "h.%d.ln_2.weight", l);
        ADD(1, D, 0, "h.%d.ln_2.bias", l);
        ADD(2, D, F, "h.%d.mlp.c_fc.weight", l);
        ADD(1, F, 0, "h.%d.mlp.c_fc.bias", l);
        ADD(2, F, D, "h.%d.mlp.c_proj.weight", l);
        ADD(1, D, 0, "h.%d.mlp.c_proj.bias", l);
    }
    ADD(1, D, 0, "ln_f.weight");
    ADD(1, D, 0, "ln_f.bias");
    if (lm_head)
        ADD(2, V, D, "lm_head.weight");
#undef ADD
    return n;
}

static int64_t numel(const spec *s) { return s->ndim == 1 ? s->shape[0] : s->shape[0] * s->shape[1]; }

/* Index k of a tensor name in the spec list (its value seed). */
static int spec_index(const char *name)
{
    spec s[2 + 12 * 4 + 3];
    int n = gpt2_specs(s, L, 1);
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i].name, name))
            return i;
    cr_assert_fail("no spec %s", name);
    return -1;
}

/* Write <tmpdir>/<sub>/{config.json, model.safetensors}; returns the dir. */
static const char *write_model(const char *sub, json_t *cfg, const model_opts *o)
{
    const char *dir = tf_path(sub);
    mkdir(dir, 0777);
    char p[700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_json(p, cfg ? cfg : base_config());

    spec s[2 + 12 * 4 + 3];
    int nl = o->n_layer ? o->n_layer : L;
    int n = gpt2_specs(s, nl, o->lm_head);
    gf_st_write_tensor w[64];
    void *bufs[64];
    char names[64][96];
    int nw = 0;
    for (int k = 0; k < n; k++) {
        if (o->skip && !strcmp(o->skip, s[k].name))
            continue;
        spec sp = s[k];
        if (o->reshape && !strcmp(o->reshape, s[k].name)) {
            sp.shape[0] = o->shape[0];
            sp.shape[1] = o->shape[1];
        }
        int is_int = o->int_dtype && !strcmp(o->int_dtype, s[k].name);
        gf_dtype dt = is_int ? GF_DT_I32 : (o->dtype ? o->dtype : GF_DT_F32);
        int64_t ne = numel(&sp);
        unsigned char *b = calloc((size_t)ne ? (size_t)ne : 1, 8);
        for (int64_t i = 0; i < ne; i++) {
            float v = wval(k, i);
            if (dt == GF_DT_F32)
                memcpy(b + 4 * i, &v, 4);
            else if (dt == GF_DT_F64) {
                double d = v;
                memcpy(b + 8 * i, &d, 8);
            } else if (dt == GF_DT_F16) {
                uint16_t h = f16_of(v);
                memcpy(b + 2 * i, &h, 2);
            } else if (dt == GF_DT_BF16) {
                uint32_t u;
                memcpy(&u, &v, 4);
                uint16_t h = (uint16_t)(u >> 16);
                memcpy(b + 2 * i, &h, 2);
            } else {
                int32_t x = (int32_t)i;
                memcpy(b + 4 * i, &x, 4);
            }
        }
        const char *pre = o->prefix ? o->prefix : "";
        if (!strcmp(sp.name, "lm_head.weight"))
            pre = ""; /* as GPT2LMHeadModel saves it */
        snprintf(names[nw], sizeof names[nw], "%s%s", pre, sp.name);
        w[nw] = (gf_st_write_tensor){
            .name = names[nw], .dtype = dt, .ndim = sp.ndim, .shape = {sp.shape[0], sp.shape[1]}, .data = b};
        bufs[nw++] = b;
        if (o->dup_unprefixed && !strcmp(o->dup_unprefixed, s[k].name)) {
            snprintf(names[nw], sizeof names[nw], "%s", sp.name);
            w[nw] = w[nw - 1];
            w[nw].name = names[nw];
            bufs[nw++] = NULL;
        }
    }
    static const float causal[1 * 1 * P * P];
    static const float masked = -1e4f;
    if (o->buffers) {
        for (int l = 0; l < nl; l++) {
            snprintf(names[nw], sizeof names[nw], "%sh.%d.attn.bias", o->prefix ? o->prefix : "", l);
            w[nw] = (gf_st_write_tensor){
                .name = names[nw], .dtype = GF_DT_F32, .ndim = 4, .shape = {1, 1, P, P}, .data = causal};
            bufs[nw++] = NULL;
            snprintf(names[nw], sizeof names[nw], "%sh.%d.attn.masked_bias", o->prefix ? o->prefix : "", l);
            w[nw] = (gf_st_write_tensor){.name = names[nw], .dtype = GF_DT_F32, .ndim = 0, .data = &masked};
            bufs[nw++] = NULL;
        }
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    gf_status st = gf_safetensors_write(p, w, (size_t)nw, mk, mv, 1);
    for (int i = 0; i < nw; i++)
        free(bufs[i]);
    cr_assert(st == GF_OK, "write model: %s", gf_error_msg());
    return dir;
}

static gf_model *load_ok(const char *dir)
{
    gf_model *m = NULL;
    gf_error_clear();
    gf_status s = gf_model_load(dir, &m);
    cr_assert(s == GF_OK, "load %s: %s: %s", dir, gf_status_str(s), gf_error_msg());
    cr_assert(m != NULL);
    return m;
}

static void expect_load_fail(const char *dir, gf_status want, ...)
{
    gf_model *m = (gf_model *)0x1;
    gf_error_clear();
    gf_status s = gf_model_load(dir, &m);
    const char *msg = gf_error_msg();
    cr_assert(s == want, "status %s, want %s; message: %s", gf_status_str(s), gf_status_str(want), msg);
    cr_assert(m == NULL);
    va_list ap;
    va_start(ap, want);
    for (const char *sub; (sub = va_arg(ap, const char *)) != NULL;)
        cr_assert(strstr(msg, sub) != NULL, "message lacks \"%s\": %s", sub, msg);
    va_end(ap);
}

static void check_tensor(const float *got, const char *name)
{
    spec s[2 + 12 * 4 + 3];
    int n = gpt2_specs(s, L, 1);
    int k = spec_index(name);
    cr_assert(k < n);
    cr_assert(got != NULL, "%s not loaded", name);
    /* F32 weights are views into the mapped file: aligned for a float (the
     * file's offsets), not to 64 bytes as the converted ones are */
    cr_assert(((uintptr_t)got % sizeof(float)) == 0, "%s not float-aligned", name);
    for (int64_t i = 0; i < numel(&s[k]); i++)
        cr_assert(got[i] == wval(k, i), "%s[%lld] = %g, want %g", name, (long long)i, (double)got[i],
                  (double)wval(k, i));
}

static void check_all_weights(const gf_model_desc *d, int lm_head)
{
    const gf_model_weights *w = &d->weights;
    char nm[64];
    check_tensor(w->wte, "wte.weight");
    check_tensor(w->wpe, "wpe.weight");
    for (int l = 0; l < L; l++) {
        const gf_layer_weights *lw = &w->layers[l];
#define CT(field, suffix)                              \
    do {                                               \
        snprintf(nm, sizeof nm, "h.%d.%s", l, suffix); \
        check_tensor(lw->field, nm);                   \
    } while (0)
        CT(ln1_w, "ln_1.weight");
        CT(ln1_b, "ln_1.bias");
        CT(attn_qkv_w, "attn.c_attn.weight");
        CT(attn_qkv_b, "attn.c_attn.bias");
        CT(attn_proj_w, "attn.c_proj.weight");
        CT(attn_proj_b, "attn.c_proj.bias");
        CT(ln2_w, "ln_2.weight");
        CT(ln2_b, "ln_2.bias");
        CT(mlp_fc_w, "mlp.c_fc.weight");
        CT(mlp_fc_b, "mlp.c_fc.bias");
        CT(mlp_proj_w, "mlp.c_proj.weight");
        CT(mlp_proj_b, "mlp.c_proj.bias");
#undef CT
        cr_assert(lw->wq == NULL && lw->attn_norm_w == NULL && lw->w_gate == NULL);
    }
    check_tensor(w->lnf_w, "ln_f.weight");
    check_tensor(w->lnf_b, "ln_f.bias");
    if (lm_head) {
        cr_assert(w->lm_head != w->wte);
        check_tensor(w->lm_head, "lm_head.weight");
    } else {
        cr_assert(w->lm_head == w->wte);
    }
}

static const size_t k_params = (size_t)V * D + (size_t)P * D +
                               (size_t)L * (2 * D + D * 3 * D + 3 * D + D * D + D + 2 * D + D * F + F + F * D + D) +
                               2 * D;

Test(model, load_tied_f32)
{
    model_opts o = {0};
    const char *dir = write_model("m", NULL, &o);
    gf_model *m = load_ok(dir);
    const gf_model_desc *d = gf_model_desc_get(m);
    cr_assert_eq(d->struct_size, sizeof(gf_model_desc));
    cr_assert_str_eq(d->name, dir);
    cr_assert_str_eq(gf_model_dir(m), dir);
    cr_assert_eq(d->config.arch, GF_ARCH_GPT2);
    cr_assert_eq(d->config.vocab_size, V);
    cr_assert_eq(d->config.d_ff, F);
    cr_assert_eq(d->config.tied_head, 1);
    check_all_weights(d, 0);
    cr_assert_eq(gf_model_param_count(m), k_params, "params %zu, want %zu", gf_model_param_count(m), k_params);
    cr_assert_eq(k_params, 1952); /* what transformers reports for this config */
    /* F32 weights stay in the mapping: every tensor a view, and the desc says
     * they persist until gf_model_free (issue 27 item 3) */
    size_t n_views = 0;
    cr_assert_eq(gf_model_view_bytes(m, &n_views), k_params * sizeof(float));
    cr_assert_eq(n_views, 2 + 12 * L + 2, "%zu views", n_views);
    cr_assert(gf_model_desc_weights_persist(d));
    gf_model_free(m);
    gf_model_free(NULL);
}

Test(model, transformer_prefix_and_buffers_ignored)
{
    model_opts o = {.prefix = "transformer.", .buffers = 1};
    gf_model *m = load_ok(write_model("m", NULL, &o));
    check_all_weights(gf_model_desc_get(m), 0);
    cr_assert_eq(gf_model_param_count(m), k_params);
    gf_model_free(m);
}

Test(model, explicit_lm_head)
{
    model_opts o = {.prefix = "transformer.", .lm_head = 1};
    gf_model *m = load_ok(write_model("m", NULL, &o));
    const gf_model_desc *d = gf_model_desc_get(m);
    cr_assert_eq(d->config.tied_head, 0);
    check_all_weights(d, 1);
    cr_assert_eq(gf_model_param_count(m), k_params + (size_t)V * D);
    gf_model_free(m);
}

Test(model, lm_head_required_when_untied)
{
    json_t *c = base_config();
    json_object_set_new(c, "tie_word_embeddings", json_false());
    model_opts o = {0};
    const char *dir = write_model("m", c, &o);
    expect_load_fail(dir, GF_E_FORMAT, "model.safetensors", "'lm_head.weight' missing", "tie_word_embeddings", NULL);
}

Test(model, f16_bf16_f64_converted)
{
    const gf_dtype dts[] = {GF_DT_F16, GF_DT_BF16, GF_DT_F64};
    for (int i = 0; i < 3; i++) {
        model_opts o = {.dtype = dts[i], .lm_head = 1};
        char sub[16];
        snprintf(sub, sizeof sub, "m%d", i);
        gf_model *m = load_ok(write_model(sub, NULL, &o));
        check_all_weights(gf_model_desc_get(m), 1);
        size_t n_views = 1;
        cr_assert_eq(gf_model_view_bytes(m, &n_views), 0, "converted weights are no views");
        cr_assert_eq(n_views, 0);
        cr_assert(gf_model_desc_weights_persist(gf_model_desc_get(m)));
        gf_model_free(m);
    }
}

Test(model, missing_tensor)
{
    model_opts o = {.prefix = "transformer.", .skip = "h.1.mlp.c_fc.weight"};
    const char *dir = write_model("m", NULL, &o);
    expect_load_fail(dir, GF_E_FORMAT, "m/model.safetensors", "tensor 'h.1.mlp.c_fc.weight' missing",
                     "also looked for 'transformer.h.1.mlp.c_fc.weight'", NULL);
}

Test(model, shape_mismatch)
{
    model_opts o = {.reshape = "wpe.weight", .shape = {4, D}};
    const char *dir = write_model("m", NULL, &o);
    expect_load_fail(dir, GF_E_FORMAT,
                     "tensor 'wpe.weight': shape [4, 8], expected "
                     "(n_positions, n_embd) = [8, 8]",
                     "config.json", NULL);
}

Test(model, config_disagrees_with_weights)
{
    /* config says n_inner 16, weights have 32 */
    json_t *c = base_config();
    json_object_set_new(c, "n_inner", json_integer(16));
    model_opts o = {.prefix = "transformer."};
    expect_load_fail(write_model("m", c, &o), GF_E_FORMAT,
                     "tensor 'transformer.h.0.mlp.c_fc.weight': shape [8, 32], expected "
                     "(n_embd, n_inner) = [8, 16]",
                     NULL);
}

Test(model, extra_layers_rejected)
{
    model_opts o = {.prefix = "transformer.", .n_layer = 3};
    expect_load_fail(write_model("m", NULL, &o), GF_E_FORMAT, "transformer.h.2.", "belongs to layer 2", "n_layer = 2",
                     NULL);
}

Test(model, non_float_weight)
{
    model_opts o = {.int_dtype = "ln_f.bias"};
    expect_load_fail(write_model("m", NULL, &o), GF_E_FORMAT, "tensor 'ln_f.bias' has dtype I32", NULL);
}

Test(model, prefixed_and_unprefixed_is_ambiguous)
{
    model_opts o = {.prefix = "transformer.", .dup_unprefixed = "ln_f.weight"};
    expect_load_fail(write_model("m", NULL, &o), GF_E_FORMAT, "both 'ln_f.weight' and 'transformer.ln_f.weight'", NULL);
}

Test(model, config_errors_propagate)
{
    json_t *c = base_config();
    json_object_set_new(c, "n_embd", json_string("8"));
    model_opts o = {0};
    expect_load_fail(write_model("m", c, &o), GF_E_FORMAT, "m/config.json: key 'n_embd' must be an integer, got string",
                     NULL);
    c = base_config();
    json_object_set_new(c, "model_type", json_string("gemma2"));
    expect_load_fail(write_model("m2", c, &o), GF_E_UNSUPPORTED, "model_type 'gemma2'", NULL);
}

Test(model, safetensors_errors_propagate)
{
    model_opts o = {0};
    const char *dir = write_model("m", NULL, &o);
    char p[700];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    cr_assert(truncate(p, 100) == 0);
    expect_load_fail(dir, GF_E_FORMAT, "m/model.safetensors: header length", "past the end", NULL);
}

Test(model, missing_files)
{
    expect_load_fail(tf_path("nope"), GF_E_IO, "nope", "No such file", NULL);
    const char *dir = tf_path("empty");
    mkdir(dir, 0777);
    expect_load_fail(dir, GF_E_IO, "empty/config.json: cannot open", NULL);
    char p[700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_json(p, base_config());
    expect_load_fail(dir, GF_E_IO, "empty/model.safetensors: cannot open", NULL);
    snprintf(p, sizeof p, "%s/pytorch_model.bin", dir);
    write_text(p, "x");
    expect_load_fail(dir, GF_E_UNSUPPORTED, "pytorch_model.bin", "safe_serialization", NULL);
}

/* ---- config.json: the Llama family ---- */

static json_t *llama_config(const char *type)
{
    json_t *c = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "model_type", type, "vocab_size", 512, "hidden_size",
                          128, "intermediate_size", 344, "num_hidden_layers", 4, "num_attention_heads", 4,
                          "max_position_embeddings", 256);
    cr_assert(c);
    return c;
}

/* Mistral, Qwen2's sliding window, YaRN and longrope as transformers 4.47.1
 * reads them, and the keys whose meaning changed after it refused (the
 * forward against transformers: tests/cli/rope_variants.sh) */
Test(config, rope_variants)
{
    gf_model_config c;
    json_t *j = llama_config("mistral");
    json_object_set_new(j, "num_attention_heads", json_integer(16));
    cr_assert(load_cfg(j, &c) == GF_OK, "%s", gf_error_msg());
    cr_assert(c.n_kv_head == 8 && c.qkv_bias == 0, "MistralConfig: 8 kv heads absent the key, got %d", c.n_kv_head);
    j = llama_config("mistral");
    json_object_set_new(j, "num_key_value_heads", json_integer(2));
    json_object_set_new(j, "rope_scaling", json_pack("{s:s, s:f}", "rope_type", "linear", "factor", 2.0));
    check_msg(load_cfg(j, &c), GF_E_UNSUPPORTED, "rope_scaling on a mistral model", NULL);
    j = llama_config("mistral");
    json_object_set_new(j, "num_key_value_heads", json_integer(2));
    json_object_set_new(j, "sliding_window", json_integer(0));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'sliding_window' is 0", NULL);
    j = llama_config("qwen2");
    json_object_set_new(j, "num_key_value_heads", json_integer(2));
    json_object_set_new(j, "use_sliding_window", json_true());
    check_msg(load_cfg(json_incref(j), &c), GF_E_UNSUPPORTED, "max_window_layers 28 (the default)", NULL);
    json_object_set_new(j, "max_window_layers", json_integer(0));
    cr_assert(load_cfg(j, &c) == GF_OK, "%s", gf_error_msg());
    j = llama_config("llama");
    json_object_set_new(j, "rope_scaling", json_pack("{s:s, s:f}", "rope_type", "yarn", "factor", 4.0));
    cr_assert(load_cfg(j, &c) == GF_OK && c.rope_scaling == GF_ROPE_SCALING_YARN && c.rope_factor == 4.0f);
    j = llama_config("llama");
    json_object_set_new(j, "rope_scaling",
                        json_pack("{s:s, s:f, s:f}", "rope_type", "yarn", "factor", 4.0, "mscale_all_dim", 1.0));
    check_msg(load_cfg(json_incref(j), &c), GF_E_UNSUPPORTED, "'mscale_all_dim' but no 'attention_factor'", NULL);
    json_object_set_new(json_object_get(j, "rope_scaling"), "attention_factor", json_real(1.2));
    cr_assert(load_cfg(j, &c) == GF_OK, "%s", gf_error_msg());
    j = llama_config("llama");
    json_object_set_new(
        j, "rope_scaling",
        json_pack("{s:s, s:f, s:i}", "rope_type", "yarn", "factor", 4.0, "original_max_position_embeddings", 64));
    check_msg(load_cfg(j, &c), GF_E_UNSUPPORTED, "original_max_position_embeddings differs", NULL);
    j = llama_config("llama"); /* head_dim 32: 16 factors each */
    json_t *f16 = json_array();
    for (int i = 0; i < 16; i++)
        json_array_append_new(f16, json_real(1.0 + i));
    json_object_set_new(j, "original_max_position_embeddings", json_integer(128));
    json_object_set_new(
        j, "rope_scaling",
        json_pack("{s:s, s:o, s:O}", "rope_type", "longrope", "short_factor", json_deep_copy(f16), "long_factor", f16));
    cr_assert(load_cfg(json_incref(j), &c) == GF_OK && c.rope_scaling == GF_ROPE_SCALING_LONGROPE, "%s",
              gf_error_msg());
    json_array_remove(f16, 0);
    json_object_set_new(json_object_get(j, "rope_scaling"), "long_factor", json_deep_copy(f16));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "'long_factor' must be a list of 16 numbers", NULL);
    json_decref(f16);
}

Test(config, llama_defaults)
{
    gf_model_config c;
    gf_status s = load_cfg(llama_config("llama"), &c);
    cr_assert(s == GF_OK, "%s", gf_error_msg());
    cr_assert(c.arch == GF_ARCH_LLAMA && c.norm == GF_NORM_RMSNORM && c.pos == GF_POS_ROPE &&
              c.activation == GF_ACT_SILU);
    cr_assert(c.n_embd == 128 && c.d_ff == 344 && c.n_layer == 4 && c.n_positions == 256);
    cr_assert(c.n_head == 4 && c.n_kv_head == 4 && c.d_head == 32); /* LlamaConfig: kv heads = heads */
    cr_assert(c.norm_eps == 1e-6f && c.rope_theta == 10000.0f);     /* LlamaConfig's defaults */
    cr_assert(c.tied_head == 0 && c.qkv_bias == 0 && c.rope_scaling == GF_ROPE_SCALING_NONE && c.rope_factor == 0);
    cr_assert(c.bos_id == -1 && c.eos_id == -1);
}

Test(config, llama_keys)
{
    json_t *j = llama_config("llama");
    json_object_set_new(j, "num_key_value_heads", json_integer(2));
    json_object_set_new(j, "head_dim", json_integer(48)); /* H d_head != D is allowed */
    json_object_set_new(j, "rms_norm_eps", json_real(1e-5));
    json_object_set_new(j, "rope_theta", json_real(500000.0));
    json_object_set_new(j, "tie_word_embeddings", json_true());
    json_object_set_new(j, "eos_token_id", json_pack("[i, i]", 7, 9)); /* Llama 3 lists several */
    json_object_set_new(j, "rope_scaling",
                        json_pack("{s:s, s:f, s:f, s:f, s:i}", "rope_type", "llama3", "factor", 8.0, "low_freq_factor",
                                  1.0, "high_freq_factor", 4.0, "original_max_position_embeddings", 64));
    gf_model_config c;
    gf_status s = load_cfg(j, &c);
    cr_assert(s == GF_OK, "%s", gf_error_msg());
    cr_assert(c.n_kv_head == 2 && c.d_head == 48 && c.norm_eps == 1e-5f && c.rope_theta == 500000.0f);
    cr_assert(c.tied_head == 1 && c.eos_id == 7);
    cr_assert(c.rope_scaling == GF_ROPE_SCALING_LLAMA3 && c.rope_factor == 8.0f);
    j = llama_config("llama");
    json_object_set_new(j, "rope_scaling", json_pack("{s:s, s:f}", "type", "linear", "factor", 2.0)); /* old spelling */
    s = load_cfg(j, &c);
    cr_assert(s == GF_OK && c.rope_scaling == GF_ROPE_SCALING_LINEAR && c.rope_factor == 2.0f, "%s", gf_error_msg());
}

Test(config, qwen2_defaults_and_refusals)
{
    gf_model_config c;
    /* Qwen2Config's default num_key_value_heads is 32 (not the head count) */
    check_msg(load_cfg(llama_config("qwen2"), &c), GF_E_FORMAT,
              "num_attention_heads 4 is not a multiple of num_key_value_heads 32", NULL);
    json_t *j0 = llama_config("qwen2");
    json_object_set_new(j0, "num_attention_heads", json_integer(32));
    gf_status s = load_cfg(j0, &c);
    cr_assert(s == GF_OK, "%s", gf_error_msg());
    cr_assert(c.arch == GF_ARCH_LLAMA && c.qkv_bias == 1 && c.tied_head == 0);
    cr_assert(c.n_kv_head == 32 && c.d_head == 4, "kv heads %d, d_head %d", c.n_kv_head, c.d_head);
    json_t *j = llama_config("qwen2");
    json_object_set_new(j, "num_key_value_heads", json_null());
    cr_assert(load_cfg(j, &c) == GF_OK && c.n_kv_head == 4, "null -> num_attention_heads");
    j = llama_config("qwen2");
    json_object_set_new(j, "num_key_value_heads", json_integer(2));
    json_object_set_new(j, "head_dim", json_integer(16));
    check_msg(load_cfg(j, &c), GF_E_UNSUPPORTED, "head_dim 16 differs from hidden_size / num_attention_heads = 32",
              NULL);
    j = llama_config("llama");
    json_object_set_new(j, "rope_scaling", json_pack("{s:s, s:f}", "rope_type", "dynamic", "factor", 2.0));
    cr_assert(load_cfg(j, &c) == GF_OK && c.rope_scaling == GF_ROPE_SCALING_DYNAMIC && c.rope_factor == 2.0f, "%s",
              gf_error_msg());
    j = llama_config("llama");
    json_object_set_new(j, "rope_scaling", json_pack("{s:s, s:i}", "rope_type", "su", "factor", 2));
    check_msg(load_cfg(j, &c), GF_E_UNSUPPORTED, tf_path("config.json"), "rope_type 'su' is not supported",
              "linear, llama3, yarn, longrope, dynamic", NULL);
    j = llama_config("llama");
    json_object_set_new(j, "rope_scaling",
                        json_pack("{s:s, s:f, s:f, s:f, s:i}", "rope_type", "llama3", "factor", 8.0, "low_freq_factor",
                                  4.0, "high_freq_factor", 4.0, "original_max_position_embeddings", 64));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "high_freq_factor 4 must exceed low_freq_factor 4", NULL);
    j = llama_config("llama");
    json_object_set_new(j, "rope_theta", json_string("1e4"));
    check_msg(load_cfg(j, &c), GF_E_FORMAT, "key 'rope_theta' must be a number, got string", NULL);
    j = llama_config("llama");
    json_object_set_new(j, "partial_rotary_factor", json_real(0.5));
    check_msg(load_cfg(j, &c), GF_E_UNSUPPORTED, "partial_rotary_factor 0.5 is not supported", NULL);
}
