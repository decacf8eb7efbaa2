/* Rotary models on the ref backend: the grouped-query cache size, the
 * sliding-window measurement (evicted cache vs recompute over the window) and
 * cached generation that slides by recompute (== the uncached loop). */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "ref/ref.h"
#include "support_tiny_model.h"

/* A tiny Llama: V 64, n_positions 48, D 16, L 2, H 4, H_kv 2, d_head 4, F 24. */
enum { TV = 64, TNP = 48, TD = 16, TL = 2, TH = 4, THKV = 2, TDH = 4, TF = 24 };

typedef struct tiny_llama {
    gf_model_desc desc;
    gf_layer_weights layers[TL];
    float *storage;
    float inv_freq[TDH / 2];
} tiny_llama;

static float rnd(uint64_t k)
{
    double u = gf_rng_uniform(99, 3, k, 0);
    return (float)(2.0 * u - 1.0);
}

static void tiny_llama_make(tiny_llama *m, int qkv_bias)
{
    memset(m, 0, sizeof *m);
    const size_t Q = TH * TDH, KV = THKV * TDH;
    size_t per = 2 * TD + Q * TD + 2 * KV * TD + TD * Q + 3 * (size_t)TF * TD + Q + 2 * KV;
    m->storage = malloc(((size_t)TV * TD + TL * per + TD) * sizeof(float));
    cr_assert(m->storage);
    float *p = m->storage;
    uint64_t k = 0;
#define TAKE(dst, n, base, amp)                     \
    do {                                            \
        dst = p;                                    \
        for (size_t i_ = 0; i_ < (size_t)(n); i_++) \
            p[i_] = (base) + (amp)*rnd(k++);        \
        p += (n);                                   \
    } while (0)
    gf_model_weights *w = &m->desc.weights;
    TAKE(w->wte, (size_t)TV * TD, 0.0f, 1.0f);
    for (int l = 0; l < TL; l++) {
        gf_layer_weights *ly = &m->layers[l];
        TAKE(ly->attn_norm_w, TD, 1.0f, 0.3f);
        TAKE(ly->wq, Q * TD, 0.0f, 0.5f);
        TAKE(ly->wk, KV * TD, 0.0f, 0.5f);
        TAKE(ly->wv, KV * TD, 0.0f, 0.5f);
        TAKE(ly->wo, TD * Q, 0.0f, 0.3f);
        TAKE(ly->mlp_norm_w, TD, 1.0f, 0.3f);
        TAKE(ly->w_gate, (size_t)TF * TD, 0.0f, 0.4f);
        TAKE(ly->w_up, (size_t)TF * TD, 0.0f, 0.4f);
        TAKE(ly->w_down, (size_t)TD * TF, 0.0f, 0.3f);
        if (qkv_bias) {
            TAKE(ly->bq, Q, 0.0f, 0.2f);
            TAKE(ly->bk, KV, 0.0f, 0.2f);
            TAKE(ly->bv, KV, 0.0f, 0.2f);
        }
    }
    TAKE(w->lnf_w, TD, 1.0f, 0.3f);
#undef TAKE
    for (int i = 0; i < TDH / 2; i++)
        m->inv_freq[i] = 1.0f / (float)pow(10000.0, (double)((float)(2 * i) / (float)TDH));
    w->layers = m->layers;
    w->lm_head = w->wte;
    w->rope_inv_freq = m->inv_freq;
    m->desc.config = (gf_model_config){.arch = GF_ARCH_LLAMA,
                                       .activation = GF_ACT_SILU,
                                       .norm = GF_NORM_RMSNORM,
                                       .pos = GF_POS_ROPE,
                                       .vocab_size = TV,
                                       .n_positions = TNP,
                                       .n_embd = TD,
                                       .n_layer = TL,
                                       .n_head = TH,
                                       .n_kv_head = THKV,
                                       .d_head = TDH,
                                       .d_ff = TF,
                                       .norm_eps = 1e-5f,
                                       .rope_theta = 10000.0f,
                                       .bos_id = -1,
                                       .eos_id = -1,
                                       .tied_head = 1,
                                       .qkv_bias = qkv_bias};
    m->desc.struct_size = sizeof m->desc;
    m->desc.name = "tiny-llama";
}

static gf_engine *llama_engine(tiny_llama *m, int qkv_bias)
{
    tiny_llama_make(m, qkv_bias);
    gf_engine *e = NULL;
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    gf_status st = gf_engine_create(gf_backend_ref(), &m->desc, &o, &e);
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    return e;
}

static const int32_t k_prompt[] = {5, 17, 33, 2, 60, 41, 9, 12};
enum { PLEN = sizeof k_prompt / sizeof k_prompt[0] };

Test(llama_ref, cache_holds_kv_heads_only)
{
    tiny_llama m;
    gf_engine *e = llama_engine(&m, 0);
    void *cache = NULL;
    cr_assert(gf_engine_cache_create(e, 3, TNP, &cache) == GF_OK, "%s", gf_error_msg());
    size_t want = 2 * (size_t)TL * 3 * THKV * TNP * TDH * sizeof(float); /* (L, B, H_kv, max_len, d_head) */
    size_t got = gf_engine_ops(e)->cache_bytes(cache);
    cr_assert_eq(got, want, "cache_bytes %zu, expected %zu (H_kv = %d, not H = %d)", got, want, THKV, TH);
    gf_engine_cache_free(e, cache);
    gf_engine_destroy(e);
    free(m.storage);
}

Test(llama_ref, gpt2_cannot_slide)
{
    tiny_model g;
    gf_engine *e = tiny_engine(&g);
    cr_assert(e);
    gf_sliding_result r;
    gf_status st = gf_sliding_window_measure(e, k_prompt, PLEN, 16, 8, NULL, &r);
    cr_assert(st == GF_E_UNSUPPORTED && strstr(gf_error_msg(), "sliding = recompute"), "%s", gf_error_msg());
    gf_engine_destroy(e);
    tiny_model_free(&g);
}

Test(llama_ref, sliding_window_measurement)
{
    for (int bias = 0; bias <= 1; bias++) {
        tiny_llama m;
        gf_engine *e = llama_engine(&m, bias);
        const int32_t W = 12, steps = 30;
        gf_sliding_result r;
        gf_status st = gf_sliding_window_measure(e, k_prompt, PLEN, W, steps, NULL, &r);
        cr_assert(st == GF_OK, "%s", gf_error_msg());
        /* steps 0 .. W - PLEN see at most W tokens: the two paths are the same computation */
        cr_assert_eq(r.first_evict_step, W - PLEN + 1);
        cr_assert_eq(r.evict_steps, steps - (W - PLEN + 1));
        cr_assert(r.pre_evict_max_delta <= 1e-5, "before eviction max |delta| %g", r.pre_evict_max_delta);
        /* after it, layer-1 keys remember evicted tokens: a real drift, but finite */
        cr_assert(r.max_abs_delta > 1e-4 && isfinite(r.max_abs_delta), "drift %g", r.max_abs_delta);
        cr_assert(r.max_delta_step >= r.first_evict_step);
        for (int32_t s = 0; s < r.first_evict_step; s++)
            cr_assert_eq(r.tokens[s], r.evicted_tokens[s], "step %d", s);
        gf_sliding_result_clear(&r);
        /* a window holding everything never evicts */
        st = gf_sliding_window_measure(e, k_prompt, PLEN, PLEN + steps, steps, NULL, &r);
        cr_assert(st == GF_OK, "%s", gf_error_msg());
        cr_assert_eq(r.evict_steps, 0);
        cr_assert_eq(r.first_evict_step, -1);
        cr_assert(r.pre_evict_max_delta <= 1e-5);
        gf_sliding_result_clear(&r);
        /* limits */
        cr_assert(gf_sliding_window_measure(e, k_prompt, PLEN, PLEN - 1, 4, NULL, &r) == GF_E_INVALID_ARG);
        cr_assert(gf_sliding_window_measure(e, k_prompt, PLEN, W, TNP, NULL, &r) == GF_E_CONTEXT_LIMIT);
        gf_engine_destroy(e);
        free(m.storage);
    }
}

typedef struct logit_log {
    float *rows; /* (steps, B, V) */
    int32_t n, cap;
} logit_log;

static gf_status record(void *user, const gf_step_info *info)
{
    logit_log *lg = user;
    cr_assert(lg->n < lg->cap);
    memcpy(lg->rows + (size_t)lg->n * info->B * info->V, info->logits, (size_t)info->B * info->V * sizeof(float));
    lg->n++;
    return GF_OK;
}

Test(llama_ref, slide_by_recompute_equals_uncached_loop)
{
    tiny_llama m;
    gf_engine *e = llama_engine(&m, 1);
    const int32_t B = 2, N = 30;
    const int32_t p0[] = {5, 17, 33, 2,  60, 41, 9,  12, 7,  7,  3,  44, 1,  2,  3,  4,  5,  6,  7,  8,
                          9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28};
    const int32_t p1[] = {8, 9, 10};
    const int32_t *prompts[] = {p0, p1};
    const int32_t lens[] = {40, 3};
    logit_log a = {malloc((size_t)N * B * TV * sizeof(float)), 0, N};
    logit_log b = {malloc((size_t)N * B * TV * sizeof(float)), 0, N};
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = N;
    gp.on_step = record;
    gp.user = &a;
    gf_generation *gc = NULL, *gu = NULL, *gs = NULL;
    gf_status st = gf_generate(e, B, prompts, lens, &gp, &gs); /* the GPT rule: stops */
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    cr_assert_eq(gs->stop[0], GF_STOP_CONTEXT_LIMIT);
    a.n = 0;
    gp.slide_on_limit = 1;
    st = gf_generate(e, B, prompts, lens, &gp, &gc);
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    gp.slide_on_limit = 0;
    gp.use_cache = 0;
    gp.user = &b;
    st = gf_generate(e, B, prompts, lens, &gp, &gu);
    cr_assert(st == GF_OK, "%s", gf_error_msg());
    cr_assert_eq(gc->steps, N);
    cr_assert_eq(gu->steps, N);
    for (int32_t r = 0; r < B; r++) {
        cr_assert_eq(gc->stop[r], GF_STOP_LENGTH);
        cr_assert_eq(gc->n_tokens[r], gu->n_tokens[r]);
        cr_assert(!memcmp(gc->tokens[r], gu->tokens[r], (size_t)gc->n_tokens[r] * sizeof(int32_t)),
                  "row %d: slid cached tokens differ from the uncached loop", r);
    }
    /* past the limit both compute the same batch: bit-identical logits on ref */
    int32_t limit_step = TNP - 40; /* row 0's cache is full after this step */
    for (int32_t s = limit_step + 1; s < N; s++)
        cr_assert(!memcmp(a.rows + (size_t)s * B * TV, b.rows + (size_t)s * B * TV, (size_t)B * TV * sizeof(float)),
                  "step %d: logits differ", s);
    gf_generation_free(gs);
    gf_generation_free(gc);
    gf_generation_free(gu);
    free(a.rows);
    free(b.rows);
    gf_engine_destroy(e);
    free(m.storage);
}
