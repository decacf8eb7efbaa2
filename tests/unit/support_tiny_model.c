#include "support_tiny_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"

static float normal(uint64_t seed, uint64_t i)
{
    double u1 = gf_rng_uniform(seed, 7, i / 2, 0), u2 = gf_rng_uniform(seed, 7, i / 2, 1);
    double r = sqrt(-2.0 * log(u1));
    return (float)(i % 2 ? r * cos(2 * M_PI * u2) : r * sin(2 * M_PI * u2));
}

void tiny_model_make(tiny_model *m, int V, int NP, int D, int L, int H, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    const int F = 4 * D;
    size_t per_layer =
        2 * D + (size_t)D * 3 * D + 3 * D + (size_t)D * D + D + 2 * D + (size_t)D * F + F + (size_t)F * D + D;
    size_t total = (size_t)V * D + (size_t)NP * D + L * per_layer + 2 * D;
    m->storage = malloc(total * sizeof(float));
    m->layers = calloc((size_t)L, sizeof *m->layers);
    float *p = m->storage;
    uint64_t k = 0;
#define TAKE(ptr, n, kind)                                        \
    do {                                                          \
        ptr = p;                                                  \
        for (size_t i_ = 0; i_ < (size_t)(n); i_++, k++)          \
            p[i_] = (kind) == 0   ? 0.3f * normal(seed, k)        \
                    : (kind) == 1 ? 1.0f + 0.1f * normal(seed, k) \
                                  : 0.02f * normal(seed, k);      \
        p += (n);                                                 \
    } while (0)
    gf_model_weights *w = &m->desc.weights;
    float *t;
    TAKE(t, (size_t)V * D, 0);
    w->wte = t;
    TAKE(t, (size_t)NP * D, 0);
    w->wpe = t;
    for (int l = 0; l < L; l++) {
        gf_layer_weights *ly = &m->layers[l];
        TAKE(t, D, 1);
        ly->ln1_w = t;
        TAKE(t, D, 2);
        ly->ln1_b = t;
        TAKE(t, (size_t)D * 3 * D, 0);
        ly->attn_qkv_w = t;
        TAKE(t, 3 * D, 2);
        ly->attn_qkv_b = t;
        TAKE(t, (size_t)D * D, 0);
        ly->attn_proj_w = t;
        TAKE(t, D, 2);
        ly->attn_proj_b = t;
        TAKE(t, D, 1);
        ly->ln2_w = t;
        TAKE(t, D, 2);
        ly->ln2_b = t;
        TAKE(t, (size_t)D * F, 0);
        ly->mlp_fc_w = t;
        TAKE(t, F, 2);
        ly->mlp_fc_b = t;
        TAKE(t, (size_t)F * D, 0);
        ly->mlp_proj_w = t;
        TAKE(t, D, 2);
        ly->mlp_proj_b = t;
    }
    TAKE(t, D, 1);
    w->lnf_w = t;
    TAKE(t, D, 2);
    w->lnf_b = t;
#undef TAKE
    w->layers = m->layers;
    w->lm_head = w->wte;
    gf_model_config *c = &m->desc.config;
    *c = (gf_model_config){.arch = GF_ARCH_GPT2,
                           .activation = GF_ACT_GELU_TANH,
                           .norm = GF_NORM_LAYERNORM,
                           .pos = GF_POS_LEARNED,
                           .vocab_size = V,
                           .n_positions = NP,
                           .n_embd = D,
                           .n_layer = L,
                           .n_head = H,
                           .n_kv_head = H,
                           .d_head = D / H,
                           .d_ff = F,
                           .norm_eps = 1e-5f,
                           .bos_id = -1,
                           .eos_id = -1,
                           .tied_head = 1};
    m->desc.struct_size = sizeof m->desc;
    m->desc.name = "tiny";
}

void tiny_model_free(tiny_model *m)
{
    free(m->storage);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

gf_engine *tiny_engine(tiny_model *m)
{
    tiny_model_make(m, 64, 128, 16, 2, 2, 42);
    gf_engine *e = NULL;
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    if (gf_engine_create(gf_backend_ref(), &m->desc, &o, &e) != GF_OK)
        return NULL;
    return e;
}
