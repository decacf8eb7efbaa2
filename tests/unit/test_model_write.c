/* gf_model_write, the loader's inverse (engine/model_write.c): a GPT-2
 * written and loaded back is the same model to the bit; a Llama micro-model
 * of the probes (GQA, head_dim given, linear rope scaling) is a fixed point
 * of load(write(.)) (a name or layout the writer and the loader read
 * differently would move a tensor on each trip), and llama3 scaling without
 * its mapping is refused. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

#include "genfence/model.h"
#include "probe.h"
#include "support_files.h"
#include "support_tiny_model.h"

static void setup(void) { tf_tmpdir_make("gf-model-write"); }
static void teardown(void) { tf_tmpdir_remove(); }
TestSuite(model_write, .init = setup, .fini = teardown);

static int same(const float *a, const float *b, size_t n)
{
    if (!a || !b)
        return a == b;
    return !memcmp(a, b, n * sizeof *a);
}

/* every weight of two descriptions of the same config, bit for bit */
static void assert_same_weights(const gf_model_desc *x, const gf_model_desc *y)
{
    const gf_model_config *c = &x->config;
    const size_t V = c->vocab_size, D = c->n_embd, F = c->d_ff, P = c->n_positions;
    const size_t Q = (size_t)c->n_head * c->d_head, KV = (size_t)c->n_kv_head * c->d_head;
    const gf_model_weights *a = &x->weights, *b = &y->weights;
    cr_assert(same(a->wte, b->wte, V * D), "wte");
    cr_assert(same(a->wpe, b->wpe, a->wpe ? P * D : 0), "wpe");
    cr_assert(same(a->lnf_w, b->lnf_w, D) && same(a->lnf_b, b->lnf_b, a->lnf_b ? D : 0), "final norm");
    cr_assert(same(a->lm_head, b->lm_head, V * D), "lm_head");
    for (int32_t l = 0; l < c->n_layer; l++) {
        const gf_layer_weights *p = &a->layers[l], *q = &b->layers[l];
        if (c->arch == GF_ARCH_GPT2) {
            cr_assert(same(p->ln1_w, q->ln1_w, D) && same(p->ln1_b, q->ln1_b, D), "layer %d ln_1", l);
            cr_assert(same(p->attn_qkv_w, q->attn_qkv_w, D * 3 * D) && same(p->attn_qkv_b, q->attn_qkv_b, 3 * D),
                      "layer %d c_attn", l);
            cr_assert(same(p->attn_proj_w, q->attn_proj_w, D * D) && same(p->attn_proj_b, q->attn_proj_b, D),
                      "layer %d attn c_proj", l);
            cr_assert(same(p->ln2_w, q->ln2_w, D) && same(p->ln2_b, q->ln2_b, D), "layer %d ln_2", l);
            cr_assert(same(p->mlp_fc_w, q->mlp_fc_w, D * F) && same(p->mlp_fc_b, q->mlp_fc_b, F), "layer %d c_fc", l);
            cr_assert(same(p->mlp_proj_w, q->mlp_proj_w, F * D) && same(p->mlp_proj_b, q->mlp_proj_b, D),
                      "layer %d mlp c_proj", l);
        } else {
            cr_assert(same(p->attn_norm_w, q->attn_norm_w, D) && same(p->mlp_norm_w, q->mlp_norm_w, D),
                      "layer %d norms", l);
            cr_assert(same(p->wq, q->wq, Q * D) && same(p->wk, q->wk, KV * D) && same(p->wv, q->wv, KV * D),
                      "layer %d q/k/v", l);
            cr_assert(same(p->wo, q->wo, D * Q), "layer %d o_proj", l);
            cr_assert(same(p->w_gate, q->w_gate, F * D) && same(p->w_up, q->w_up, F * D) &&
                          same(p->w_down, q->w_down, D * F),
                      "layer %d mlp", l);
        }
    }
}

static void assert_same_config(const gf_model_config *a, const gf_model_config *b)
{
    cr_assert(a->arch == b->arch && a->activation == b->activation && a->norm == b->norm && a->pos == b->pos);
    cr_assert(a->vocab_size == b->vocab_size && a->n_positions == b->n_positions && a->n_embd == b->n_embd);
    cr_assert(a->n_layer == b->n_layer && a->n_head == b->n_head && a->n_kv_head == b->n_kv_head);
    cr_assert(a->d_head == b->d_head && a->d_ff == b->d_ff && a->tied_head == b->tied_head);
    cr_assert(a->norm_eps == b->norm_eps && a->rope_theta == b->rope_theta, "eps %g/%g theta %g/%g", a->norm_eps,
              b->norm_eps, a->rope_theta, b->rope_theta);
    cr_assert(a->rope_scaling == b->rope_scaling && a->rope_factor == b->rope_factor);
}

Test(model_write, gpt2_round_trip_is_exact)
{
    tiny_model m;
    tiny_model_make(&m, 16, 8, 8, 2, 2, 7);
    cr_assert_eq(gf_model_write(&m.desc, NULL, tf_tmpdir()), GF_OK, "%s", gf_error_msg());
    gf_model *g = NULL;
    cr_assert_eq(gf_model_load(tf_tmpdir(), &g), GF_OK, "%s", gf_error_msg());
    const gf_model_desc *d = gf_model_desc_get(g);
    assert_same_config(&m.desc.config, &d->config);
    assert_same_weights(&m.desc, d);
    gf_model_free(g);
    tiny_model_free(&m);
}

Test(model_write, llama_probe_model_is_a_fixed_point)
{
    gf_probe_spec s = {.mech = GF_PROBE_attention,
                       .arch = GF_ARCH_LLAMA,
                       .n_embd = 40,
                       .n_head = 4,
                       .n_kv_head = 2,
                       .d_head = 12,
                       .d_ff = 36,
                       .vocab = 51,
                       .n_positions = 32,
                       .n_layer = 2,
                       .activation = GF_ACT_SILU,
                       .norm_eps = 1e-6,
                       .rope_theta = 5000,
                       .embed_scale = 1,
                       .qk_scale = 1,
                       .head_scale = 1,
                       .gain_spread = 0.5,
                       .seed = 3};
    s.rope_scaling = json_pack("{s:s, s:f}", "rope_type", "linear", "factor", 2.0);
    char d1[4200], d2[4200];
    snprintf(d1, sizeof d1, "%s/one", tf_tmpdir());
    snprintf(d2, sizeof d2, "%s/two", tf_tmpdir());
    cr_assert(mkdir(d1, 0700) == 0 && mkdir(d2, 0700) == 0);
    cr_assert_eq(gf_probe_model_write(&s, d1), GF_OK, "%s", gf_error_msg());
    gf_model *a = NULL, *b = NULL;
    cr_assert_eq(gf_model_load(d1, &a), GF_OK, "%s", gf_error_msg());
    const gf_model_desc *da = gf_model_desc_get(a);
    cr_assert(da->config.rope_scaling == GF_ROPE_SCALING_LINEAR && da->config.rope_factor == 2.0f);
    cr_assert(da->config.n_kv_head == 2 && da->config.d_head == 12 && da->config.vocab_size == 51);
    cr_assert_eq(gf_model_write(da, NULL, d2), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(gf_model_load(d2, &b), GF_OK, "%s", gf_error_msg());
    const gf_model_desc *db = gf_model_desc_get(b);
    assert_same_config(&da->config, &db->config);
    assert_same_weights(da, db);
    cr_assert(same(da->weights.rope_inv_freq, db->weights.rope_inv_freq, 6), "rope_inv_freq");
    /* the attention probe zeroes the MLP's output: w_down all 0, w_up not */
    for (size_t i = 0; i < 40 * 36; i++)
        cr_assert(da->weights.layers[0].w_down[i] == 0.0f);
    gf_model_free(a);
    gf_model_free(b);
    json_decref(s.rope_scaling);
}

Test(model_write, llama3_without_its_mapping_is_refused)
{
    tiny_model m;
    tiny_model_make(&m, 16, 8, 8, 1, 2, 7);
    gf_model_desc d = m.desc;
    d.config.arch = GF_ARCH_LLAMA; /* only the config is read before the refusal */
    d.config.rope_scaling = GF_ROPE_SCALING_LLAMA3;
    cr_assert_eq(gf_model_write(&d, NULL, tf_tmpdir()), GF_E_UNSUPPORTED);
    cr_assert(strstr(gf_error_msg(), "llama3"), "%s", gf_error_msg());
    tiny_model_free(&m);
}
