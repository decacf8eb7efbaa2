/* The CUDA backend's model path on a machine without a GPU, through the host
 * twin executor (backends/cuda/cuda_exec_host.c: the kernel bodies of
 * cuda_body.h on the CPU, the device's cuBLAS call run as a column-major
 * reference GEMM):
 *   - the weight layout it uploads (GPT-2 transposed, Llama q|k|v and
 *     gate|up stacked, biases, tied head), offsets aligned and disjoint;
 *   - the forward pass and KV cache of cuda_forward.c: GPT-2 against ref, a
 *     tiny Llama / Qwen2 (GQA, q_dim != D, biases, RoPE, SwiGLU) against ref
 *     and a plain double-precision forward written here, the trained
 *     holmes-gpt / holmes-llama against ref; uncached, cached in chunks, key
 *     masks, GF_LOGITS_LAST; the 16-bit modes; ref's errors; every
 *     out-of-memory path (nothing leaks).
 * test_cuda_host.c has the options, rounding, sampler and the module. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../backends/cuda/cuda_exec_host.c"
#include "../../backends/cuda/cuda_forward.c"
#include "../../backends/cuda/cuda_pack.c"
#include "genfence/model.h"
#include "genfence/sampler.h"
#include "ref/ref.h"
#include "support_tiny_model.h"

/* ---- a tiny Llama / Qwen2 description ---- */

typedef struct tiny_llama {
    gf_model_desc desc;
    gf_layer_weights layers[2];
    float *store;
    size_t used;
} tiny_llama;

static float *fill(tiny_llama *m, size_t n, double scale, double offset)
{
    float *p = m->store + m->used;
    for (size_t i = 0; i < n; i++, m->used++)
        p[i] = (float)(offset + scale * (2.0 * gf_rng_uniform(99, 3, m->used / 4, (uint32_t)(m->used % 4)) - 1.0));
    return p;
}

/* V 50, 64 positions, D 24, H 4, H_kv 2, d_head 8 (q_dim 32 != D), F 40, L 2 */
static void tiny_llama_make(tiny_llama *m, int qkv_bias, int tied)
{
    memset(m, 0, sizeof *m);
    const int V = 50, D = 24, H = 4, Hkv = 2, dh = 8, F = 40, L = 2;
    m->store = malloc(200000 * sizeof(float));
    gf_model_weights *w = &m->desc.weights;
    w->wte = fill(m, (size_t)V * D, 0.5, 0);
    for (int l = 0; l < L; l++) {
        gf_layer_weights *y = &m->layers[l];
        y->attn_norm_w = fill(m, D, 0.2, 1.0);
        y->wq = fill(m, (size_t)H * dh * D, 0.3, 0);
        y->wk = fill(m, (size_t)Hkv * dh * D, 0.3, 0);
        y->wv = fill(m, (size_t)Hkv * dh * D, 0.3, 0);
        y->wo = fill(m, (size_t)D * H * dh, 0.2, 0);
        y->mlp_norm_w = fill(m, D, 0.2, 1.0);
        y->w_gate = fill(m, (size_t)F * D, 0.3, 0);
        y->w_up = fill(m, (size_t)F * D, 0.3, 0);
        y->w_down = fill(m, (size_t)D * F, 0.2, 0);
        if (qkv_bias) {
            y->bq = fill(m, (size_t)H * dh, 0.1, 0);
            y->bk = fill(m, (size_t)Hkv * dh, 0.1, 0);
            y->bv = fill(m, (size_t)Hkv * dh, 0.1, 0);
        }
    }
    w->layers = m->layers;
    w->lnf_w = fill(m, D, 0.2, 1.0);
    w->lm_head = tied ? w->wte : fill(m, (size_t)V * D, 0.5, 0);
    float *inv = fill(m, dh / 2, 0, 0);
    for (int i = 0; i < dh / 2; i++)
        inv[i] = (float)(1.0 / pow(10000.0, 2.0 * i / dh));
    w->rope_inv_freq = inv;
    m->desc.config = (gf_model_config){.arch = GF_ARCH_LLAMA,
                                       .activation = GF_ACT_SILU,
                                       .norm = GF_NORM_RMSNORM,
                                       .pos = GF_POS_ROPE,
                                       .vocab_size = V,
                                       .n_positions = 64,
                                       .n_embd = D,
                                       .n_layer = L,
                                       .n_head = H,
                                       .n_kv_head = Hkv,
                                       .d_head = dh,
                                       .d_ff = F,
                                       .norm_eps = 1e-6f,
                                       .rope_theta = 10000.0f,
                                       .bos_id = -1,
                                       .eos_id = -1,
                                       .tied_head = tied,
                                       .qkv_bias = qkv_bias};
    m->desc.struct_size = sizeof m->desc;
    m->desc.name = "tiny-llama";
}

/* ---- the uploaded layout ---- */

static int cmp_range(const void *a, const void *b)
{
    const size_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* every tensor 64-aligned, inside its image, no two overlapping */
static void check_ranges(size_t (*r)[2], size_t n, size_t count)
{
    qsort(r, n, sizeof r[0], cmp_range);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(r[i][0] % 64, 0, "offset %zu not 64-aligned", r[i][0]);
        cr_assert_leq(r[i][0] + r[i][1], count);
        if (i)
            cr_assert_leq(r[i - 1][0] + r[i - 1][1], r[i][0], "tensors overlap at %zu", r[i][0]);
    }
}

static void plan_ranges(const gfc_plan *p)
{
    size_t f[512][2], g[512][2], nf = 0, ng = 0;
#define F32(off, n)              \
    do {                         \
        if ((off) != GFC_NONE) { \
            f[nf][0] = (off);    \
            f[nf][1] = (n);      \
            nf++;                \
        }                        \
    } while (0)
#define GEMM(l)                           \
    do {                                  \
        g[ng][0] = (l).w;                 \
        g[ng][1] = (size_t)(l).N * (l).K; \
        ng++;                             \
        F32((l).b, (size_t)(l).N);        \
    } while (0)
    F32(p->wte, (size_t)p->V * p->D);
    F32(p->wpe, (size_t)p->cfg.n_positions * p->D);
    F32(p->lnf_w, (size_t)p->D);
    F32(p->lnf_b, (size_t)p->D);
    F32(p->rope, (size_t)p->dh / 2);
    GEMM(p->head);
    for (int32_t l = 0; l < p->L; l++) {
        const gfc_layer_plan *d = &p->layers[l];
        F32(d->norm1_w, (size_t)p->D);
        F32(d->norm1_b, (size_t)p->D);
        F32(d->norm2_w, (size_t)p->D);
        F32(d->norm2_b, (size_t)p->D);
        GEMM(d->qkv);
        GEMM(d->o);
        GEMM(d->up);
        GEMM(d->down);
    }
#undef F32
#undef GEMM
    check_ranges(f, nf, p->f32_count);
    check_ranges(g, ng, p->gemm_count);
}

static float gemm_elem(const gfc_plan *p, const void *img, size_t i) { return gemm_w(p->mode, img, i); }

static float as_mode(gfc_mode mode, float v) { return gemm_x(mode, v); } /* v as the GEMM dtype holds it */

Test(cuda_model, gpt2_layout)
{
    tiny_model tm;
    tiny_model_make(&tm, 40, 32, 16, 2, 2, 7);
    for (int mode = GFC_FP32; mode <= GFC_FP16; mode++) {
        gfc_plan p;
        cr_assert_eq(gfc_plan_init(&p, &tm.desc, (gfc_mode)mode), GF_OK, "%s", gf_error_msg());
        plan_ranges(&p);
        const int32_t D = 16, F = 64;
        cr_assert_eq(p.qkv_dim, 3 * D);
        cr_assert_eq(p.gemm_elem, mode >= GFC_BF16 ? 2u : 4u);
        float *fi = malloc(p.f32_count * sizeof(float));
        void *gi = malloc(p.gemm_count * p.gemm_elem);
        gfc_pack(&p, &tm.desc, fi, gi);
        const gf_layer_weights *s = &tm.layers[1];
        const gfc_layer_plan *d = &p.layers[1];
        /* Conv1D [in, out] -> [out, in]: row n, column k is W[k][n] */
        for (int32_t n = 0; n < 3 * D; n++)
            for (int32_t k = 0; k < D; k++)
                cr_assert_eq(gemm_elem(&p, gi, d->qkv.w + (size_t)n * D + k),
                             as_mode(mode, s->attn_qkv_w[k * 3 * D + n]));
        for (int32_t n = 0; n < D; n++)
            for (int32_t k = 0; k < F; k++)
                cr_assert_eq(gemm_elem(&p, gi, d->down.w + (size_t)n * F + k), as_mode(mode, s->mlp_proj_w[k * D + n]));
        cr_assert_eq(d->up.N, F);
        cr_assert_eq(d->up.K, D);
        cr_assert_eq(memcmp(fi + d->qkv.b, s->attn_qkv_b, 3 * D * sizeof(float)), 0);
        cr_assert_eq(memcmp(fi + d->down.b, s->mlp_proj_b, D * sizeof(float)), 0);
        cr_assert_eq(memcmp(fi + d->norm2_b, s->ln2_b, D * sizeof(float)), 0);
        cr_assert_eq(memcmp(fi + p.wpe, tm.desc.weights.wpe, 32 * D * sizeof(float)), 0);
        /* the tied head: wte's rows, in the GEMM dtype */
        for (size_t i = 0; i < (size_t)40 * D; i++)
            cr_assert_eq(gemm_elem(&p, gi, p.head.w + i), as_mode(mode, tm.desc.weights.wte[i]));
        cr_assert_eq(p.rope, GFC_NONE);
        free(fi);
        free(gi);
        gfc_plan_release(&p);
    }
    tiny_model_free(&tm);
}

Test(cuda_model, llama_layout)
{
    tiny_llama tl;
    tiny_llama_make(&tl, 1, 0);
    gfc_plan p;
    cr_assert_eq(gfc_plan_init(&p, &tl.desc, GFC_BF16), GF_OK, "%s", gf_error_msg());
    plan_ranges(&p);
    cr_assert_eq(p.q_dim, 32);
    cr_assert_eq(p.kv_dim, 16);
    cr_assert_eq(p.qkv_dim, 64);
    cr_assert_eq(p.up_dim, 80);
    cr_assert_eq(p.wpe, GFC_NONE);
    cr_assert_eq(p.lnf_b, GFC_NONE);
    float *fi = malloc(p.f32_count * sizeof(float));
    void *gi = malloc(p.gemm_count * p.gemm_elem);
    gfc_pack(&p, &tl.desc, fi, gi);
    const gf_layer_weights *s = &tl.layers[0];
    const gfc_layer_plan *d = &p.layers[0];
    const int32_t D = 24;
    for (int32_t k = 0; k < D; k++) {
        cr_assert_eq(gemm_elem(&p, gi, d->qkv.w + 5 * (size_t)D + k), as_mode(GFC_BF16, s->wq[5 * D + k]));
        cr_assert_eq(gemm_elem(&p, gi, d->qkv.w + (32 + 3) * (size_t)D + k), as_mode(GFC_BF16, s->wk[3 * D + k]));
        cr_assert_eq(gemm_elem(&p, gi, d->qkv.w + (48 + 15) * (size_t)D + k), as_mode(GFC_BF16, s->wv[15 * D + k]));
        cr_assert_eq(gemm_elem(&p, gi, d->up.w + 7 * (size_t)D + k), as_mode(GFC_BF16, s->w_gate[7 * D + k]));
        cr_assert_eq(gemm_elem(&p, gi, d->up.w + (40 + 7) * (size_t)D + k), as_mode(GFC_BF16, s->w_up[7 * D + k]));
    }
    cr_assert_eq(memcmp(fi + d->qkv.b, s->bq, 32 * sizeof(float)), 0);
    cr_assert_eq(memcmp(fi + d->qkv.b + 32, s->bk, 16 * sizeof(float)), 0);
    cr_assert_eq(memcmp(fi + d->qkv.b + 48, s->bv, 16 * sizeof(float)), 0);
    cr_assert_eq(memcmp(fi + p.rope, tl.desc.weights.rope_inv_freq, 4 * sizeof(float)), 0);
    cr_assert_eq(d->norm1_b, GFC_NONE);
    free(fi);
    free(gi);
    gfc_plan_release(&p);
    /* refusals */
    tl.desc.config.n_kv_head = 3; /* 4 % 3 */
    cr_assert_eq(gfc_plan_init(&p, &tl.desc, GFC_FP32), GF_E_UNSUPPORTED);
    tl.desc.config.n_kv_head = 2;
    tl.layers[1].bk = NULL;
    cr_assert_eq(gfc_plan_init(&p, &tl.desc, GFC_FP32), GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), "bias"), "%s", gf_error_msg());
    tl.desc.config.activation = GF_ACT_GELU_TANH;
    cr_assert_eq(gfc_plan_init(&p, &tl.desc, GFC_FP32), GF_E_UNSUPPORTED);
    tl.desc.config.arch = (gf_arch)7;
    cr_assert_eq(gfc_plan_init(&p, &tl.desc, GFC_FP32), GF_E_UNSUPPORTED);
    cr_assert_eq(gfc_plan_init(&p, NULL, GFC_FP32), GF_E_INVALID_ARG);
    free(tl.store);
}

/* ---- the forward pass through the host twin ---- */

static double max_delta(const float *a, const float *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m))
            m = d; /* NaN propagates */
    }
    return m;
}

enum { GB = 2, GT = 6, GV = 40 };
/* row 0: six real tokens; row 1: two pads on the left, then four */
static const int32_t g_tok[GB * GT] = {3, 17, 5, 39, 0, 22, 1, 1, 8, 30, 12, 7};
static const int32_t g_pos[GB * GT] = {0, 1, 2, 3, 4, 5, 0, 0, 0, 1, 2, 3};
static const uint8_t g_mask[GB * GT] = {1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1};

static gf_batch batch_of(int32_t t0, int32_t T, int32_t *tok, int32_t *pos, uint8_t *mask, gf_logits_mode mode)
{
    /* columns [t0, t0 + T) of the rows above; the mask covers [0, t0 + T) */
    for (int32_t b = 0; b < GB; b++) {
        for (int32_t t = 0; t < T; t++) {
            tok[b * T + t] = g_tok[b * GT + t0 + t];
            pos[b * T + t] = g_pos[b * GT + t0 + t];
        }
        for (int32_t j = 0; j < t0 + T; j++)
            mask[b * (t0 + T) + j] = g_mask[b * GT + j];
    }
    return (gf_batch){.B = GB, .T = T, .tokens = tok, .position_ids = pos, .key_mask = mask, .logits_mode = mode};
}

Test(cuda_model, gpt2_forward_matches_ref)
{
    tiny_model tm;
    tiny_model_make(&tm, GV, 32, 16, 2, 2, 7);
    const gf_backend_ops *ref = gf_backend_ref();
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    void *rm = NULL;
    cr_assert_eq(ref->model_load(&tm.desc, &o, &rm), GF_OK);
    gfc_host_exec hx;
    gfc_host_exec_init(&hx, GFC_FP32);
    gfc_model *m = NULL;
    cr_assert_eq(gfc_model_create(&tm.desc, &hx.base, &m), GF_OK, "%s", gf_error_msg());
    int32_t tok[GB * GT], pos[GB * GT];
    uint8_t mask[GB * GT];
    float want[GB * GT * GV], got[GB * GT * GV];
    /* uncached, every position and the last */
    for (int mode = GF_LOGITS_ALL; mode <= GF_LOGITS_LAST; mode++) {
        gf_batch in = batch_of(0, GT, tok, pos, mask, (gf_logits_mode)mode);
        size_t n = (size_t)GB * (mode == GF_LOGITS_ALL ? GT : 1) * GV;
        memset(got, 0xff, sizeof got);
        cr_assert_eq(ref->forward(rm, NULL, &in, want), GF_OK);
        cr_assert_eq(gfc_forward(m, NULL, &in, got), GF_OK, "%s", gf_error_msg());
        double d = max_delta(want, got, n);
        cr_assert_lt(d, 1e-4, "uncached mode %d: max |delta| %g", mode, d);
        if (mode == GF_LOGITS_ALL) { /* the mask changes row 1 */
            in.key_mask = NULL;
            cr_assert_eq(gfc_forward(m, NULL, &in, got), GF_OK);
            cr_assert_gt(max_delta(want + GT * GV, got + GT * GV, GT * GV), 1e-3, "key mask ignored");
        }
    }
    /* cached: 4 positions, then 2, against ref's cache; length advances once per call */
    void *rc = NULL;
    gfc_cache *c = NULL;
    cr_assert_eq(ref->cache_create(rm, GB, 12, &rc), GF_OK);
    cr_assert_eq(gfc_cache_create(m, GB, 12, &c), GF_OK);
    cr_assert_eq(gfc_cache_bytes(c), 2u * 2 * GB * 2 * 12 * 8 * sizeof(float));
    const int32_t chunks[][2] = {{0, 4}, {4, 2}};
    for (int k = 0; k < 2; k++) {
        gf_batch in = batch_of(chunks[k][0], chunks[k][1], tok, pos, mask, GF_LOGITS_ALL);
        cr_assert_eq(ref->forward(rm, rc, &in, want), GF_OK);
        cr_assert_eq(gfc_forward(m, c, &in, got), GF_OK, "%s", gf_error_msg());
        double d = max_delta(want, got, (size_t)GB * chunks[k][1] * GV);
        cr_assert_lt(d, 1e-4, "chunk %d: max |delta| %g", k, d);
        cr_assert_eq(c->length, chunks[k][0] + chunks[k][1]);
    }
    /* the cached logits equal the uncached ones at the same positions */
    gf_batch full = batch_of(0, GT, tok, pos, mask, GF_LOGITS_ALL);
    float all[GB * GT * GV];
    cr_assert_eq(gfc_forward(m, NULL, &full, all), GF_OK);
    for (int32_t b = 0; b < GB; b++)
        cr_assert_lt(max_delta(all + ((size_t)b * GT + 4) * GV, got + (size_t)b * 2 * GV, 2 * GV), 1e-5);
    /* errors: past max_len, wrong B, bad token; length unchanged */
    int32_t t7[GB * 7] = {0}, p7[GB * 7] = {0};
    gf_batch big = {.B = GB, .T = 7, .tokens = t7, .position_ids = p7, .logits_mode = GF_LOGITS_LAST};
    cr_assert_eq(gfc_forward(m, c, &big, got), GF_E_CONTEXT_LIMIT);
    cr_assert_eq(c->length, 6);
    big.B = 1;
    big.T = 1;
    cr_assert_eq(gfc_forward(m, c, &big, got), GF_E_INVALID_ARG);
    t7[0] = GV;
    big.B = GB;
    cr_assert_eq(gfc_forward(m, c, &big, got), GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), "token 40 at (0, 0)"), "%s", gf_error_msg());
    t7[0] = 0;
    cr_assert_eq(gfc_forward(m, c, &big, NULL), GF_E_INVALID_ARG);
    cr_assert_eq(c->length, 6);
    gfc_cache *bad = NULL;
    cr_assert_eq(gfc_cache_create(m, GB, 33, &bad), GF_E_INVALID_ARG);
    cr_assert_eq(gfc_cache_create(m, 0, 4, &bad), GF_E_INVALID_ARG);
    cr_assert_null(bad);
    /* more keys than one attention block holds */
    hx.base.max_keys = 5;
    gf_batch in = batch_of(0, GT, tok, pos, mask, GF_LOGITS_LAST);
    cr_assert_eq(gfc_forward(m, NULL, &in, got), GF_E_UNSUPPORTED);
    hx.base.max_keys = (size_t)1 << 30;
    ref->cache_free(rc);
    ref->model_free(rm);
    gfc_cache_destroy(c);
    gfc_model_destroy(m);
    cr_assert_eq(hx.live, 0, "%d allocations leaked", hx.live);
    tiny_model_free(&tm);
}

Test(cuda_model, gpt2_16bit_modes_round_the_products)
{
    tiny_model tm;
    tiny_model_make(&tm, GV, 32, 16, 2, 2, 7);
    int32_t tok[GB * GT], pos[GB * GT];
    uint8_t mask[GB * GT];
    gf_batch in = batch_of(0, GT, tok, pos, mask, GF_LOGITS_ALL);
    float f32[GB * GT * GV], got[GB * GT * GV];
    double prev = 0.0;
    for (int mode = GFC_FP32; mode <= GFC_FP16; mode++) {
        if (mode == GFC_TF32) /* the host twin has no TF32: it is fp32 here */
            continue;
        gfc_host_exec hx;
        gfc_host_exec_init(&hx, (gfc_mode)mode);
        gfc_model *m = NULL;
        cr_assert_eq(gfc_model_create(&tm.desc, &hx.base, &m), GF_OK);
        cr_assert_eq(gfc_forward(m, NULL, &in, mode == GFC_FP32 ? f32 : got), GF_OK);
        if (mode != GFC_FP32) {
            double d = max_delta(f32, got, sizeof got / sizeof got[0]);
            /* rounded (not identical), and bf16 (8 bits) coarser than fp16 (11) */
            cr_assert(d > 1e-5 && d < 0.1, "mode %s: max |delta| %g", gfc_mode_name((gfc_mode)mode), d);
            if (mode == GFC_FP16)
                cr_assert_lt(d, prev, "fp16 %g not closer than bf16 %g", d, prev);
            prev = d;
        }
        gfc_model_destroy(m);
        cr_assert_eq(hx.live, 0);
    }
    tiny_model_free(&tm);
}

Test(cuda_model, out_of_memory_leaks_nothing)
{
    tiny_model tm;
    tiny_model_make(&tm, GV, 32, 16, 2, 2, 7);
    int32_t tok[GB * GT], pos[GB * GT];
    uint8_t mask[GB * GT];
    gf_batch in = batch_of(0, GT, tok, pos, mask, GF_LOGITS_ALL);
    float want[GB * GT * GV], got[GB * GT * GV];
    gfc_host_exec hx;
    gfc_host_exec_init(&hx, GFC_FP32);
    gfc_model *m = NULL;
    for (int k = 0; k < 2; k++) { /* the two weight images */
        hx.allocs = 0;
        hx.fail_alloc_after = k;
        cr_assert_eq(gfc_model_create(&tm.desc, &hx.base, &m), GF_E_NOMEM);
        cr_assert_null(m);
        cr_assert_eq(hx.live, 0);
    }
    hx.fail_alloc_after = -1;
    cr_assert_eq(gfc_model_create(&tm.desc, &hx.base, &m), GF_OK);
    cr_assert_eq(gfc_forward(m, NULL, &in, want), GF_OK);
    gfc_model_destroy(m);
    for (int k = 0; k < 14; k++) { /* every scratch buffer of the first forward */
        hx.allocs = 0;
        hx.fail_alloc_after = -1;
        cr_assert_eq(gfc_model_create(&tm.desc, &hx.base, &m), GF_OK);
        hx.fail_alloc_after = hx.allocs + k;
        gf_status st = gfc_forward(m, NULL, &in, got);
        hx.fail_alloc_after = -1;
        if (st == GF_OK) {
            cr_assert_geq(k, 11, "forward needed only %d allocations", k);
        } else {
            cr_assert_eq(st, GF_E_NOMEM);
            cr_assert_eq(gfc_forward(m, NULL, &in, got), GF_OK, "no recovery after a failed allocation");
        }
        cr_assert_lt(max_delta(want, got, sizeof got / sizeof got[0]), 1e-6);
        gfc_model_destroy(m);
        cr_assert_eq(hx.live, 0, "k %d: %d allocations leaked", k, hx.live);
    }
    tiny_model_free(&tm);
}

/* ---- Llama / Qwen2 against a plain double-precision forward ---- */

static void lin_d(double *y, const double *x, const float *W, const float *b, int N, int K)
{
    for (int n = 0; n < N; n++) {
        double s = b ? b[n] : 0.0;
        for (int k = 0; k < K; k++)
            s += (double)W[(size_t)n * K + k] * x[k];
        y[n] = s;
    }
}

static void rms_d(double *y, const double *x, const float *w, int D, double eps)
{
    double ss = 0.0;
    for (int d = 0; d < D; d++)
        ss += x[d] * x[d];
    double inv = 1.0 / sqrt(ss / D + eps);
    for (int d = 0; d < D; d++)
        y[d] = x[d] * inv * w[d];
}

static void rope_d(double *v, int pos, const float *inv, int dh)
{
    for (int i = 0; i < dh / 2; i++) {
        double a = (float)pos * inv[i], c = cos(a), s = sin(a), x1 = v[i], x2 = v[i + dh / 2];
        v[i] = x1 * c - x2 * s;
        v[i + dh / 2] = x2 * c + x1 * s;
    }
}

/* logits (B, T, V) of the whole sequence: causal, key mask ANDed, own key kept */
static void llama_d(const tiny_llama *m, int B, int T, const int32_t *tok, const int32_t *pos, const uint8_t *mask,
                    float *out)
{
    const gf_model_config *c = &m->desc.config;
    const gf_model_weights *w = &m->desc.weights;
    enum { D = 24, H = 4, HKV = 2, DH = 8, F = 40, V = 50, TM = 8 };
    cr_assert_leq(T, TM);
    for (int b = 0; b < B; b++) {
        double x[TM][D], h[TM][D], q[TM][H * DH], k[TM][HKV * DH], v[TM][HKV * DH], o[TM][H * DH], t1[D];
        double g[F], u[F], a[F];
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++)
                x[t][d] = w->wte[(size_t)tok[b * T + t] * D + d];
        for (int l = 0; l < c->n_layer; l++) {
            const gf_layer_weights *y = &w->layers[l];
            for (int t = 0; t < T; t++) {
                rms_d(h[t], x[t], y->attn_norm_w, D, c->norm_eps);
                lin_d(q[t], h[t], y->wq, y->bq, H * DH, D);
                lin_d(k[t], h[t], y->wk, y->bk, HKV * DH, D);
                lin_d(v[t], h[t], y->wv, y->bv, HKV * DH, D);
                for (int hh = 0; hh < H; hh++)
                    rope_d(q[t] + hh * DH, pos[b * T + t], w->rope_inv_freq, DH);
                for (int hh = 0; hh < HKV; hh++)
                    rope_d(k[t] + hh * DH, pos[b * T + t], w->rope_inv_freq, DH);
            }
            for (int t = 0; t < T; t++)
                for (int hh = 0; hh < H; hh++) {
                    int kv = hh / (H / HKV);
                    double s[TM], mx = -INFINITY, sum = 0.0;
                    for (int j = 0; j <= t; j++) {
                        int ok = j == t || !mask || mask[b * T + j];
                        double dot = 0.0;
                        for (int d = 0; d < DH; d++)
                            dot += q[t][hh * DH + d] * k[j][kv * DH + d];
                        s[j] = ok ? dot / sqrt((double)DH) : -INFINITY;
                        mx = s[j] > mx ? s[j] : mx;
                    }
                    for (int j = 0; j <= t; j++)
                        sum += s[j] = s[j] == -INFINITY ? 0.0 : exp(s[j] - mx);
                    for (int d = 0; d < DH; d++) {
                        double acc = 0.0;
                        for (int j = 0; j <= t; j++)
                            acc += s[j] * v[j][kv * DH + d];
                        o[t][hh * DH + d] = acc / sum;
                    }
                }
            for (int t = 0; t < T; t++) {
                lin_d(t1, o[t], y->wo, NULL, D, H * DH);
                for (int d = 0; d < D; d++)
                    x[t][d] += t1[d];
                rms_d(h[t], x[t], y->mlp_norm_w, D, c->norm_eps);
                lin_d(g, h[t], y->w_gate, NULL, F, D);
                lin_d(u, h[t], y->w_up, NULL, F, D);
                for (int f = 0; f < F; f++)
                    a[f] = g[f] / (1.0 + exp(-g[f])) * u[f];
                lin_d(t1, a, y->w_down, NULL, D, F);
                for (int d = 0; d < D; d++)
                    x[t][d] += t1[d];
            }
        }
        for (int t = 0; t < T; t++) {
            double lg[V];
            rms_d(h[t], x[t], w->lnf_w, D, c->norm_eps);
            lin_d(lg, h[t], w->lm_head, NULL, V, D);
            for (int i = 0; i < V; i++)
                out[((size_t)b * T + t) * V + i] = (float)lg[i];
        }
    }
}

Test(cuda_model, llama_forward_matches_plain_forward)
{
    enum { B = 2, T = 7, V = 50 };
    const int32_t tok[B * T] = {4, 9, 33, 2, 49, 0, 17, 1, 1, 1, 8, 21, 40, 6};
    const int32_t pos[B * T] = {0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 1, 2, 3};
    const uint8_t mask[B * T] = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1};
    for (int variant = 0; variant < 2; variant++) { /* Llama (tied head), Qwen2 (q/k/v biases) */
        tiny_llama tl;
        tiny_llama_make(&tl, variant, !variant);
        float want[B * T * V], got[B * T * V];
        llama_d(&tl, B, T, tok, pos, mask, want);
        gfc_host_exec hx;
        gfc_host_exec_init(&hx, GFC_FP32);
        gfc_model *m = NULL;
        cr_assert_eq(gfc_model_create(&tl.desc, &hx.base, &m), GF_OK, "%s", gf_error_msg());
        gf_batch in = {.B = B, .T = T, .tokens = tok, .position_ids = pos, .key_mask = mask};
        cr_assert_eq(gfc_forward(m, NULL, &in, got), GF_OK, "%s", gf_error_msg());
        double d = max_delta(want, got, sizeof got / sizeof got[0]);
        cr_assert_lt(d, 1e-4, "variant %d uncached: max |delta| %g", variant, d);
        /* and against ref, which runs the Llama family too */
        const gf_backend_ops *ref = gf_backend_ref();
        gf_backend_options ro = {.struct_size = sizeof ro, .threads = 1};
        void *rm = NULL;
        float rl[B * T * V];
        cr_assert_eq(ref->model_load(&tl.desc, &ro, &rm), GF_OK, "%s", gf_error_msg());
        cr_assert_eq(ref->forward(rm, NULL, &in, rl), GF_OK, "%s", gf_error_msg());
        ref->model_free(rm);
        d = max_delta(rl, got, sizeof got / sizeof got[0]);
        cr_assert_lt(d, 1e-4, "variant %d against ref: max |delta| %g", variant, d);
        cr_assert_gt(hx.runs[GFC_K_ROPE], 0);
        cr_assert_eq(hx.runs[GFC_K_BIAS_ACT], variant ? 2 : 0); /* q/k/v biases per layer */
        /* cached: 5 positions, then 2 one at a time */
        gfc_cache *c = NULL;
        cr_assert_eq(gfc_cache_create(m, B, 16, &c), GF_OK);
        cr_assert_eq(gfc_cache_bytes(c), 2u * 2 * B * 2 * 16 * 8 * sizeof(float)); /* H_kv, not H */
        const int32_t parts[][2] = {{0, 5}, {5, 1}, {6, 1}};
        for (int k = 0; k < 3; k++) {
            const int32_t t0 = parts[k][0], n = parts[k][1];
            int32_t ct[B * 5], cp[B * 5];
            uint8_t cm[B * T];
            for (int b = 0; b < B; b++) {
                for (int t = 0; t < n; t++) {
                    ct[b * n + t] = tok[b * T + t0 + t];
                    cp[b * n + t] = pos[b * T + t0 + t];
                }
                for (int j = 0; j < t0 + n; j++)
                    cm[b * (t0 + n) + j] = mask[b * T + j];
            }
            gf_batch ci = {
                .B = B, .T = n, .tokens = ct, .position_ids = cp, .key_mask = cm, .logits_mode = GF_LOGITS_LAST};
            float last[B * V];
            cr_assert_eq(gfc_forward(m, c, &ci, last), GF_OK, "%s", gf_error_msg());
            for (int b = 0; b < B; b++) {
                double dd = max_delta(want + ((size_t)b * T + t0 + n - 1) * V, last + (size_t)b * V, V);
                cr_assert_lt(dd, 1e-4, "variant %d part %d row %d: max |delta| %g", variant, k, b, dd);
            }
            cr_assert_eq(c->length, t0 + n);
        }
        gfc_cache_destroy(c);
        gfc_model_destroy(m);
        cr_assert_eq(hx.live, 0);
        free(tl.store);
    }
}

/* ---- the trained models of the repository, through the host twin ---- */

static void real_model_vs_ref(const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/%s", GF_TEST_SOURCE_DIR, name);
    gf_model *gm = NULL;
    if (gf_model_load(dir, &gm) != GF_OK)
        cr_skip_test("%s: %s", name, gf_error_msg());
    const gf_model_desc *desc = gf_model_desc_get(gm);
    const int32_t V = desc->config.vocab_size, T = 40;
    int32_t tok[T], pos[T];
    for (int32_t t = 0; t < T; t++) {
        tok[t] = (int32_t)((t * 37 + 11) % V);
        pos[t] = t;
    }
    const gf_backend_ops *ref = gf_backend_ref();
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    void *rm = NULL;
    cr_assert_eq(ref->model_load(desc, &o, &rm), GF_OK, "%s", gf_error_msg());
    gfc_host_exec hx;
    gfc_host_exec_init(&hx, GFC_FP32);
    gfc_model *m = NULL;
    cr_assert_eq(gfc_model_create(desc, &hx.base, &m), GF_OK, "%s", gf_error_msg());
    float *want = malloc(sizeof(float) * T * V), *got = malloc(sizeof(float) * T * V);
    gf_batch in = {.B = 1, .T = T, .tokens = tok, .position_ids = pos};
    cr_assert_eq(ref->forward(rm, NULL, &in, want), GF_OK);
    cr_assert_eq(gfc_forward(m, NULL, &in, got), GF_OK, "%s", gf_error_msg());
    double d = max_delta(want, got, (size_t)T * V);
    cr_log_info("%s: uncached %d positions, max |delta| vs ref %.3g", name, T, d);
    cr_assert_lt(d, 1e-4, "%s uncached: max |delta| %g", name, d);
    /* cached: a 30-token prefill, then one token at a time */
    gfc_cache *c = NULL;
    cr_assert_eq(gfc_cache_create(m, 1, T, &c), GF_OK);
    for (int32_t t0 = 0; t0 < T;) {
        int32_t n = t0 == 0 ? 30 : 1;
        gf_batch ci = {.B = 1, .T = n, .tokens = tok + t0, .position_ids = pos + t0, .logits_mode = GF_LOGITS_LAST};
        cr_assert_eq(gfc_forward(m, c, &ci, got), GF_OK, "%s", gf_error_msg());
        t0 += n;
        double dd = max_delta(want + (size_t)(t0 - 1) * V, got, V);
        cr_assert_lt(dd, 1e-4, "%s cached at %d: max |delta| %g", name, t0, dd);
    }
    free(want);
    free(got);
    gfc_cache_destroy(c);
    gfc_model_destroy(m);
    ref->model_free(rm);
    gf_model_free(gm);
    cr_assert_eq(hx.live, 0);
}

Test(cuda_model, holmes_gpt_matches_ref) { real_model_vs_ref("holmes-gpt"); }
Test(cuda_model, holmes_llama_matches_ref) { real_model_vs_ref("holmes-llama"); }
