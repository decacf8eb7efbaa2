/* The CUDA backend's forward pass over an executor (see cuda_forward.h). */
#include "cuda_forward.h"

#include <stdlib.h>
#include <string.h>

#define TRY(call)                   \
    do {                            \
        if ((st = (call)) != GF_OK) \
            goto done;              \
    } while (0)

static const float *f32_at(const gfc_model *m, size_t off) { return off == GFC_NONE ? NULL : m->f32 + off; }

static const void *gemm_at(const gfc_model *m, size_t off) { return (const char *)m->gemm + off * m->plan.gemm_elem; }

/* ---- the model ---- */

static void scratch_release(gfc_model *m)
{
    gfc_exec *ex = m->ex;
    void *bufs[] = {m->x, m->h, m->tmp, m->qkv, m->att, m->ff, m->act, m->logits, m->tok, m->pos};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ex->release(ex, bufs[i]);
    m->x = m->h = m->tmp = m->qkv = m->att = m->ff = m->act = m->logits = NULL;
    m->tok = m->pos = NULL;
    m->rows_cap = 0;
}

void gfc_model_destroy(gfc_model *m)
{
    if (!m)
        return;
    scratch_release(m);
    m->ex->release(m->ex, m->mask);
    m->ex->release(m->ex, m->kv_tmp);
    m->ex->release(m->ex, m->f32);
    m->ex->release(m->ex, m->gemm);
    gfc_plan_release(&m->plan);
    free(m);
}

gf_status gfc_model_create(const gf_model_desc *desc, gfc_exec *ex, gfc_model **m_out)
{
    *m_out = NULL;
    gfc_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "cuda: out of memory");
    m->ex = ex;
    float *hf = NULL;
    void *hg = NULL;
    gf_status st = gfc_plan_init(&m->plan, desc, ex->mode);
    if (st != GF_OK) {
        free(m);
        return st;
    }
    const gfc_plan *p = &m->plan;
    const size_t fb = p->f32_count * sizeof(float), gb = p->gemm_count * p->gemm_elem;
    hf = malloc(fb);
    hg = malloc(gb);
    if (!hf || !hg) {
        st = gf_error_set(GF_E_NOMEM, "cuda: out of host memory packing %zu + %zu bytes of weights", fb, gb);
        goto done;
    }
    gfc_pack(p, desc, hf, hg);
    TRY(ex->alloc(ex, (void **)&m->f32, fb));
    TRY(ex->alloc(ex, &m->gemm, gb));
    TRY(ex->upload(ex, m->f32, hf, fb));
    TRY(ex->upload(ex, m->gemm, hg, gb));
done:
    free(hf);
    free(hg);
    if (st != GF_OK) {
        gfc_model_destroy(m);
        return st;
    }
    *m_out = m;
    return GF_OK;
}

/* scratch for R rows and a key mask of mask_len bytes */
static gf_status scratch_reserve(gfc_model *m, size_t R, size_t mask_len, size_t kv_floats)
{
    gfc_exec *ex = m->ex;
    const gfc_plan *p = &m->plan;
    gf_status st = GF_OK;
    if (R > m->rows_cap) {
        scratch_release(m);
        TRY(ex->alloc(ex, (void **)&m->x, R * p->D * sizeof(float)));
        TRY(ex->alloc(ex, (void **)&m->h, R * p->D * sizeof(float)));
        TRY(ex->alloc(ex, (void **)&m->tmp, R * p->D * sizeof(float)));
        TRY(ex->alloc(ex, (void **)&m->qkv, R * p->qkv_dim * sizeof(float)));
        TRY(ex->alloc(ex, (void **)&m->att, R * p->q_dim * sizeof(float)));
        TRY(ex->alloc(ex, (void **)&m->ff, R * p->up_dim * sizeof(float)));
        if (p->llama)
            TRY(ex->alloc(ex, (void **)&m->act, R * p->F * sizeof(float)));
        TRY(ex->alloc(ex, (void **)&m->logits, R * p->V * sizeof(float)));
        TRY(ex->alloc(ex, (void **)&m->tok, R * sizeof(int32_t)));
        TRY(ex->alloc(ex, (void **)&m->pos, R * sizeof(int32_t)));
        m->rows_cap = R;
    }
    if (mask_len > m->mask_cap) {
        ex->release(ex, m->mask);
        m->mask = NULL;
        m->mask_cap = 0;
        TRY(ex->alloc(ex, (void **)&m->mask, mask_len));
        m->mask_cap = mask_len;
    }
    if (kv_floats > m->kv_tmp_cap) {
        ex->release(ex, m->kv_tmp);
        m->kv_tmp = NULL;
        m->kv_tmp_cap = 0;
        TRY(ex->alloc(ex, (void **)&m->kv_tmp, 2 * kv_floats * sizeof(float)));
        m->kv_tmp_cap = kv_floats;
    }
done:
    if (st != GF_OK)
        scratch_release(m);
    return st;
}

/* ---- the cache ---- */

gf_status gfc_cache_create(gfc_model *m, int32_t batch, int32_t max_len, gfc_cache **c_out)
{
    *c_out = NULL;
    gf_status st = gfc_check_cache_args(&m->plan.cfg, batch, max_len);
    if (st != GF_OK)
        return st;
    gfc_cache *c = calloc(1, sizeof *c);
    if (!c)
        return gf_error_set(GF_E_NOMEM, "cuda: out of memory");
    c->m = m;
    c->B = batch;
    c->max_len = max_len;
    size_t n = gfc_kv_floats(&m->plan, batch, max_len);
    if ((st = m->ex->alloc(m->ex, (void **)&c->k, n * sizeof(float))) != GF_OK ||
        (st = m->ex->alloc(m->ex, (void **)&c->v, n * sizeof(float))) != GF_OK) {
        gfc_cache_destroy(c);
        return gf_error_prefix(st, "cuda: a %zu-byte KV cache", 2 * n * sizeof(float));
    }
    *c_out = c;
    return GF_OK;
}

void gfc_cache_destroy(gfc_cache *c)
{
    if (!c)
        return;
    c->m->ex->release(c->m->ex, c->k);
    c->m->ex->release(c->m->ex, c->v);
    free(c);
}

size_t gfc_cache_bytes(const gfc_cache *c) { return 2 * gfc_kv_floats(&c->m->plan, c->B, c->max_len) * sizeof(float); }

/* ---- the forward pass ---- */

static gf_status norm(gfc_model *m, float *y, const float *x, size_t w, size_t b, size_t rows, int32_t every,
                      int32_t first)
{
    const gfc_plan *p = &m->plan;
    gfc_norm_args a = {.y = y,
                       .x = x,
                       .w = f32_at(m, w),
                       .b = f32_at(m, b),
                       .D = p->D,
                       .rms = p->llama,
                       .every = every,
                       .first = first,
                       .eps = p->cfg.norm_eps};
    return m->ex->run(m->ex, GFC_K_NORM, rows, &a);
}

static gf_status linear(gfc_model *m, const gfc_lin *l, const float *x, float *y, size_t rows)
{
    return m->ex->gemm(m->ex, gemm_at(m, l->w), l->N, l->K, x, y, (int32_t)rows);
}

/* The trace slot (backend.h): the device rows y (R, D), plus the bias the
 * residual kernel adds (NULL: none), copied to the host as point pt. host
 * (R, D) and hb (D) are the caller's staging buffers. */
static gf_status trace_point(gfc_model *m, const gf_trace_request *tr, int32_t pt, const float *y, const float *bias,
                             int32_t B, int32_t T, float *host, float *hb)
{
    const int32_t D = m->plan.D;
    const size_t R = (size_t)B * T;
    gf_status st = m->ex->download(m->ex, host, y, R * D * sizeof(float));
    if (st == GF_OK && bias)
        st = m->ex->download(m->ex, hb, bias, (size_t)D * sizeof(float));
    if (st != GF_OK)
        return st;
    for (size_t i = 0; bias && i < R; i++)
        for (int32_t d = 0; d < D; d++)
            host[i * D + d] += hb[d];
    gf_trace_put(tr, pt, host, B, T);
    return GF_OK;
}

gf_status gfc_forward(gfc_model *m, gfc_cache *c, const gf_batch *in, float *logits_out)
{
    return gfc_forward_trace(m, c, in, logits_out, NULL);
}

gf_status gfc_forward_trace(gfc_model *m, gfc_cache *c, const gf_batch *in, float *logits_out,
                            const gf_trace_request *tr)
{
    const gfc_plan *p = &m->plan;
    float *th = NULL, *thb = NULL; /* the trace's host staging: (R, D), (D) */
    gfc_exec *ex = m->ex;
    gf_status st = gfc_check_batch(&p->cfg, c ? c->B : -1, c ? c->length : 0, c ? c->max_len : 0, in);
    if (st != GF_OK)
        return st;
    if (!logits_out)
        return gf_error_set(GF_E_INVALID_ARG, "cuda: logits_out is NULL");
    const int32_t B = in->B, T = in->T, D = p->D, dh = p->dh;
    const int32_t start = c ? c->length : 0, Tk = start + T, S = c ? c->max_len : T;
    const size_t R = (size_t)B * T, rows_out = in->logits_mode == GF_LOGITS_LAST ? (size_t)B : R;
    if ((size_t)Tk > ex->max_keys)
        return gf_error_set(GF_E_UNSUPPORTED, "cuda: %d keys exceed the %zu one attention block holds", Tk,
                            ex->max_keys);
    const size_t layer_kv = (size_t)B * p->Hkv * S * dh;
    TRY(scratch_reserve(m, R, in->key_mask ? (size_t)B * Tk : 0, c ? 0 : gfc_kv_floats(p, B, T)));
    float *kc = c ? c->k : m->kv_tmp, *vc = c ? c->v : m->kv_tmp + gfc_kv_floats(p, B, T);
    TRY(ex->upload(ex, m->tok, in->tokens, R * sizeof(int32_t)));
    TRY(ex->upload(ex, m->pos, in->position_ids, R * sizeof(int32_t)));
    if (in->key_mask)
        TRY(ex->upload(ex, m->mask, in->key_mask, (size_t)B * Tk));

    gfc_embed_args ea = {
        .x = m->x, .wte = f32_at(m, p->wte), .wpe = f32_at(m, p->wpe), .tok = m->tok, .pos = m->pos, .D = D};
    TRY(ex->run(ex, GFC_K_EMBED, R * D, &ea));
    if (tr) {
        th = malloc(R * D * sizeof *th);
        thb = malloc((size_t)D * sizeof *thb);
        if (!th || !thb) {
            st = gf_error_set(GF_E_NOMEM, "cuda: out of host memory for a (%zu, %d) trace", R, D);
            goto done;
        }
        TRY(trace_point(m, tr, 0, m->x, NULL, B, T, th, thb));
    }
    for (int32_t l = 0; l < p->L; l++) {
        const gfc_layer_plan *lp = &p->layers[l];
        float *K = kc + (size_t)l * layer_kv, *Vc = vc + (size_t)l * layer_kv;
        /* attention block: h = norm1(x); qkv = h Wqkv^T (+ b); rotary on q, k */
        TRY(norm(m, m->h, m->x, lp->norm1_w, lp->norm1_b, R, 1, 0));
        TRY(linear(m, &lp->qkv, m->h, m->qkv, R));
        if (lp->qkv.b != GFC_NONE) {
            gfc_bias_act_args ba = {.y = m->qkv, .b = f32_at(m, lp->qkv.b), .N = p->qkv_dim, .act = GFC_ACT_NONE};
            TRY(ex->run(ex, GFC_K_BIAS_ACT, R * p->qkv_dim, &ba));
        }
        if (p->llama) {
            gfc_rope_args ra = {.qkv = m->qkv,
                                .pos = m->pos,
                                .inv_freq = f32_at(m, p->rope),
                                .H = p->H,
                                .Hkv = p->Hkv,
                                .dh = dh,
                                .qkv_dim = p->qkv_dim};
            TRY(ex->run(ex, GFC_K_ROPE, R * (size_t)(p->H + p->Hkv) * (size_t)(dh / 2), &ra));
        }
        /* this chunk's keys and values at [start, start + T) */
        gfc_kv_args ka = {.k = K,
                          .v = Vc,
                          .qkv = m->qkv,
                          .B = B,
                          .T = T,
                          .Hkv = p->Hkv,
                          .dh = dh,
                          .S = S,
                          .start = start,
                          .q_dim = p->q_dim,
                          .kv_dim = p->kv_dim,
                          .qkv_dim = p->qkv_dim};
        TRY(ex->run(ex, GFC_K_KV_WRITE, R * p->kv_dim, &ka));
        gfc_attn_args aa = {.out = m->att,
                            .qkv = m->qkv,
                            .k = K,
                            .v = Vc,
                            .mask = in->key_mask ? m->mask : NULL,
                            .B = B,
                            .T = T,
                            .H = p->H,
                            .Hkv = p->Hkv,
                            .dh = dh,
                            .S = S,
                            .start = start,
                            .qkv_dim = p->qkv_dim,
                            .scale = (float)(1.0 / sqrt((double)dh))};
        TRY(ex->run(ex, GFC_K_ATTENTION, R * p->H, &aa));
        /* x += att Wo^T (+ b) */
        TRY(linear(m, &lp->o, m->att, m->tmp, R));
        gfc_residual_args xa = {.x = m->x, .y = m->tmp, .b = f32_at(m, lp->o.b), .N = D};
        if (tr) /* before the residual add: the projection with its bias */
            TRY(trace_point(m, tr, gf_trace_index(p->L, GF_TRACE_ATTN_OUT, l), m->tmp, xa.b, B, T, th, thb));
        TRY(ex->run(ex, GFC_K_RESIDUAL, R * D, &xa));
        if (tr)
            TRY(trace_point(m, tr, gf_trace_index(p->L, GF_TRACE_ATTN_RESID, l), m->x, NULL, B, T, th, thb));
        /* MLP block: x += down(act(norm2(x) Wup^T (+ b))) (+ b) */
        TRY(norm(m, m->h, m->x, lp->norm2_w, lp->norm2_b, R, 1, 0));
        TRY(linear(m, &lp->up, m->h, m->ff, R));
        const float *mid = m->ff;
        if (p->llama) {
            gfc_swiglu_args sa = {.out = m->act, .gu = m->ff, .F = p->F};
            TRY(ex->run(ex, GFC_K_SWIGLU, R * p->F, &sa));
            mid = m->act;
        } else {
            gfc_bias_act_args ba = {.y = m->ff, .b = f32_at(m, lp->up.b), .N = p->F, .act = p->cfg.activation};
            TRY(ex->run(ex, GFC_K_BIAS_ACT, R * p->F, &ba));
        }
        TRY(linear(m, &lp->down, mid, m->tmp, R));
        xa.b = f32_at(m, lp->down.b);
        if (tr)
            TRY(trace_point(m, tr, gf_trace_index(p->L, GF_TRACE_MLP_OUT, l), m->tmp, xa.b, B, T, th, thb));
        TRY(ex->run(ex, GFC_K_RESIDUAL, R * D, &xa));
        if (tr)
            TRY(trace_point(m, tr, gf_trace_index(p->L, GF_TRACE_MLP_RESID, l), m->x, NULL, B, T, th, thb));
    }
    if (tr) { /* the final norm at every position, whatever logits_mode says */
        TRY(norm(m, m->tmp, m->x, p->lnf_w, p->lnf_b, R, 1, 0));
        TRY(trace_point(m, tr, gf_trace_index(p->L, GF_TRACE_FINAL_NORM, 0), m->tmp, NULL, B, T, th, thb));
    }
    /* logits = norm_f(x) head^T, for every position or each row's last */
    if (in->logits_mode == GF_LOGITS_LAST)
        TRY(norm(m, m->h, m->x, p->lnf_w, p->lnf_b, rows_out, T, T - 1));
    else
        TRY(norm(m, m->h, m->x, p->lnf_w, p->lnf_b, rows_out, 1, 0));
    TRY(linear(m, &p->head, m->h, m->logits, rows_out));
    TRY(ex->download(ex, logits_out, m->logits, rows_out * p->V * sizeof(float)));
    if (c)
        c->length = Tk; /* once, after the last layer */
done:
    free(th);
    free(thb);
    return st;
}

/* ---- the sampler ---- */

gf_status gfc_sample(gfc_exec *ex, const float *logits, int32_t B, int32_t V, const gf_sampler_params *p,
                     const double *u, int32_t *ids_out)
{
    gf_status st = GF_OK;
    const int sorted = p->temperature != 0.0 && ((p->use_top_k && p->top_k < V) || p->use_top_p);
    int32_t P = 1;
    while (P < V)
        P <<= 1;
    const size_t n = (size_t)B * V, np = sorted ? (size_t)B * P : 0;
    gfc_sample_args a = {.V = V,
                         .P = P,
                         .temperature = p->temperature,
                         .use_top_k = p->use_top_k,
                         .top_k = p->top_k,
                         .use_top_p = p->use_top_p,
                         .top_p = p->top_p};
    float *dl = NULL;
    double *du = NULL;
    TRY(ex->alloc(ex, (void **)&dl, n * sizeof(float)));
    TRY(ex->alloc(ex, (void **)&du, n * sizeof(double)));
    TRY(ex->alloc(ex, (void **)&a.ids, (size_t)B * sizeof(int32_t)));
    if (sorted) {
        TRY(ex->alloc(ex, (void **)&a.zs, np * sizeof(double)));
        TRY(ex->alloc(ex, (void **)&a.is, np * sizeof(int32_t)));
        if (p->use_top_p)
            TRY(ex->alloc(ex, (void **)&a.e, np * sizeof(double)));
    }
    TRY(ex->upload(ex, dl, logits, n * sizeof(float)));
    TRY(ex->upload(ex, du, u, n * sizeof(double)));
    a.logits = dl;
    a.u = du;
    TRY(ex->run(ex, GFC_K_SAMPLE, (size_t)B, &a));
    TRY(ex->download(ex, ids_out, a.ids, (size_t)B * sizeof(int32_t)));
done:
    ex->release(ex, dl);
    ex->release(ex, du);
    ex->release(ex, a.ids);
    ex->release(ex, a.zs);
    ex->release(ex, a.is);
    ex->release(ex, a.e);
    return st;
}
