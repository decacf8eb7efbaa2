/* The probes' micro-models: one seeded model per probe case, built in memory
 * and written as a Hugging Face directory (gf_model_write), so the backend
 * and ref both load it through the one loader. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/model.h"
#include "keys.h"
#include "probe.h"

typedef struct arena {
    float *next, *end;
    uint64_t seed, stream; /* one Philox stream per tensor */
} arena;

static float *take(arena *a, size_t n)
{
    float *p = a->next;
    a->next += n;
    return a->next <= a->end ? p : NULL;
}

/* n values mean + std N(0, 1), from the next stream */
static const float *normal(arena *a, size_t n, double mean, double std)
{
    float *p = take(a, n);
    double *d = malloc(n * sizeof *d);
    if (!p || !d) {
        free(d);
        return NULL;
    }
    gf_k_normals(a->seed, a->stream++, d, n);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(mean + std * d[i]);
    free(d);
    return p;
}

static const float *fill(arena *a, size_t n, float v)
{
    float *p = take(a, n);
    if (p)
        for (size_t i = 0; i < n; i++)
            p[i] = v;
    return p;
}

/* the sublayers a mechanism keeps (GF_PROBE_LIST) */
static const unsigned char k_keeps_attn[] = {
#define GF_PROBE_ATT(name, att, mlp, what) att,
    GF_PROBE_LIST(GF_PROBE_ATT)
#undef GF_PROBE_ATT
};
static const unsigned char k_keeps_mlp[] = {
#define GF_PROBE_MLP(name, att, mlp, what) mlp,
    GF_PROBE_LIST(GF_PROBE_MLP)
#undef GF_PROBE_MLP
};

gf_status gf_probe_model_write(const gf_probe_spec *s, const char *dir)
{
    const size_t V = (size_t)s->vocab, D = (size_t)s->n_embd, F = (size_t)s->d_ff, L = (size_t)s->n_layer,
                 P = (size_t)s->n_positions;
    const size_t Q = (size_t)s->n_head * s->d_head, KV = (size_t)s->n_kv_head * s->d_head;
    const int gpt2 = s->arch == GF_ARCH_GPT2, att = k_keeps_attn[s->mech], mlp = k_keeps_mlp[s->mech];
    /* every tensor, an upper bound: embeddings, positions, head, final norm, per layer */
    size_t per_layer = gpt2 ? 4 * D + D * 3 * D + 3 * D + D * D + D + D * F + F + F * D + D
                            : 2 * D + Q * D + 2 * KV * D + D * Q + 3 * F * D;
    size_t n = 2 * V * D + (gpt2 ? P * D : 0) + 2 * D + L * per_layer;
    float *mem = malloc(n * sizeof *mem);
    gf_layer_weights *layers = calloc(L, sizeof *layers);
    if (!mem || !layers) {
        free(mem);
        free(layers);
        return gf_error_set(GF_E_NOMEM, "probe: out of memory for a %zu-float micro-model", n);
    }
    arena a = {.next = mem, .end = mem + n, .seed = (uint64_t)s->seed};
    const double unit = 1.0 / sqrt((double)D), unit_ff = 1.0 / sqrt((double)F);
    const double gs = s->gain_spread;
    gf_model_desc desc = {.struct_size = sizeof desc, .name = "probe"};
    gf_model_config *c = &desc.config;
    c->arch = (gf_arch)s->arch;
    c->activation = (gf_activation)s->activation;
    c->norm = gpt2 ? GF_NORM_LAYERNORM : GF_NORM_RMSNORM;
    c->pos = gpt2 ? GF_POS_LEARNED : GF_POS_ROPE;
    c->vocab_size = (int32_t)V;
    c->n_positions = (int32_t)P;
    c->n_embd = (int32_t)D;
    c->n_layer = (int32_t)L;
    c->n_head = (int32_t)s->n_head;
    c->n_kv_head = (int32_t)s->n_kv_head;
    c->d_head = (int32_t)s->d_head;
    c->d_ff = (int32_t)F;
    c->norm_eps = (float)s->norm_eps;
    c->rope_theta = (float)s->rope_theta;
    c->bos_id = c->eos_id = -1;
    c->tied_head = 0;
    gf_model_weights *w = &desc.weights;
    w->wte = normal(&a, V * D, 0, s->embed_scale);
    if (gpt2)
        w->wpe = normal(&a, P * D, 0, s->embed_scale);
    for (size_t l = 0; l < L; l++) {
        gf_layer_weights *y = &layers[l];
        if (gpt2) {
            y->ln1_w = normal(&a, D, 1, gs);
            y->ln1_b = normal(&a, D, 0, gs);
            /* q and k columns scaled by qk_scale, v by 1: (D, 3D) [in, out] */
            float *qkv = (float *)normal(&a, D * 3 * D, 0, unit);
            if (qkv)
                for (size_t i = 0; i < D; i++)
                    for (size_t j = 0; j < 2 * D; j++)
                        qkv[i * 3 * D + j] *= (float)s->qk_scale;
            y->attn_qkv_w = qkv;
            y->attn_qkv_b = normal(&a, 3 * D, 0, 0.1);
            y->attn_proj_w = att ? normal(&a, D * D, 0, unit) : fill(&a, D * D, 0);
            y->attn_proj_b = att ? normal(&a, D, 0, 0.1) : fill(&a, D, 0);
            y->ln2_w = normal(&a, D, 1, gs);
            y->ln2_b = normal(&a, D, 0, gs);
            y->mlp_fc_w = normal(&a, D * F, 0, unit);
            y->mlp_fc_b = normal(&a, F, 0, 0.1);
            y->mlp_proj_w = mlp ? normal(&a, F * D, 0, unit_ff) : fill(&a, F * D, 0);
            y->mlp_proj_b = mlp ? normal(&a, D, 0, 0.1) : fill(&a, D, 0);
        } else {
            y->attn_norm_w = normal(&a, D, 1, gs);
            y->wq = normal(&a, Q * D, 0, unit * s->qk_scale);
            y->wk = normal(&a, KV * D, 0, unit * s->qk_scale);
            y->wv = normal(&a, KV * D, 0, unit);
            y->wo = att ? normal(&a, D * Q, 0, 1.0 / sqrt((double)Q)) : fill(&a, D * Q, 0);
            y->mlp_norm_w = normal(&a, D, 1, gs);
            y->w_gate = normal(&a, F * D, 0, unit);
            y->w_up = normal(&a, F * D, 0, unit);
            y->w_down = mlp ? normal(&a, D * F, 0, unit_ff) : fill(&a, D * F, 0);
        }
    }
    w->layers = layers;
    w->lnf_w = normal(&a, D, 1, gs);
    if (gpt2)
        w->lnf_b = normal(&a, D, 0, gs);
    w->lm_head = normal(&a, V * D, 0, unit * s->head_scale);
    gf_status st;
    if (a.next > a.end)
        st = gf_error_set(GF_E_INTERNAL, "probe: micro-model arena too small (%zu floats)", n);
    else {
        json_t *extra = json_object();
        if (s->rope_scaling)
            json_object_set(extra, "rope_scaling", s->rope_scaling);
        st = gf_model_write(&desc, extra, dir);
        json_decref(extra);
    }
    free(mem);
    free(layers);
    return st;
}
