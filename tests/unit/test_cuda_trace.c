/* The CUDA backend's trace slot (gfc_forward_trace, backend.h "the trace
 * slot") on a machine without a GPU, through the host twin executor
 * (backends/cuda/cuda_exec_host.c): on holmes-gpt and holmes-llama, every
 * trace point of an uncached forward and of a cached prefill + decode matches
 * ref's trace (NMSE far below the fp32 bound of docs/backends.md), the
 * logits are forward's, and a point the request does not cover is not
 * written; the GPT-2 projections' biases (added by the residual kernel on
 * the device) are in the attention and MLP outputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../backends/cuda/cuda_exec_host.c"
#include "../../backends/cuda/cuda_forward.c"
#include "../../backends/cuda/cuda_pack.c"
#include "genfence/model.h"
#include "ref/ref.h"

/* sum (a - b)^2 / sum b^2 over n floats */
static double nmse(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

static void trace_vs_ref(const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/%s", GF_TEST_SOURCE_DIR, name);
    gf_model *gm = NULL;
    if (gf_model_load(dir, &gm) != GF_OK)
        cr_skip_test("%s: %s", name, gf_error_msg());
    const gf_model_desc *desc = gf_model_desc_get(gm);
    const int32_t V = desc->config.vocab_size, D = desc->config.n_embd, L = desc->config.n_layer;
    const int32_t P = GF_TRACE_POINTS(L), T = 12;
    int32_t tok[T], pos[T];
    for (int32_t t = 0; t < T; t++) {
        tok[t] = (int32_t)((t * 37 + 11) % V);
        pos[t] = t;
    }
    const gf_backend_ops *ref = gf_backend_ref();
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    void *rm = NULL;
    cr_assert_eq(ref->model_load(desc, &o, &rm), GF_OK, "%s", gf_error_msg());
    cr_assert(GF_OPS_HAS(ref, forward_trace));
    gfc_host_exec hx;
    gfc_host_exec_init(&hx, GFC_FP32);
    gfc_model *m = NULL;
    cr_assert_eq(gfc_model_create(desc, &hx.base, &m), GF_OK, "%s", gf_error_msg());
    float *lw = malloc(sizeof(float) * T * V), *lg = malloc(sizeof(float) * T * V), *lp = malloc(sizeof(float) * T * V);
    float *tw = calloc((size_t)P * T * D, sizeof(float)), *tg = calloc((size_t)P * T * D, sizeof(float));
    uint8_t gw[64], gg[64];
    cr_assert(P <= 64);
    /* (a) uncached, every point, every position */
    gf_trace_request rw = {sizeof rw, L, D, 0, 1, 0, T, tw, gw, 0, 0, NULL, NULL},
                     rg = {sizeof rg, L, D, 0, 1, 0, T, tg, gg, 0, 0, NULL, NULL};
    memset(gw, 0, sizeof gw);
    memset(gg, 0, sizeof gg);
    gf_batch in = {.B = 1, .T = T, .tokens = tok, .position_ids = pos};
    cr_assert_eq(ref->forward_trace(rm, NULL, &in, lw, &rw), GF_OK);
    cr_assert_eq(gfc_forward_trace(m, NULL, &in, lg, &rg), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(gfc_forward(m, NULL, &in, lp), GF_OK);
    cr_assert_eq(memcmp(lg, lp, sizeof(float) * T * V), 0, "%s: the traced forward's logits differ", name);
    for (int32_t p = 0; p < P; p++) {
        cr_assert(gw[p] && gg[p], "%s: point %d not given", name, p);
        double e = nmse(tg + (size_t)p * T * D, tw + (size_t)p * T * D, (size_t)T * D);
        cr_assert_lt(e, 1e-9, "%s: point %d NMSE %g vs ref", name, p, e);
        if (p == 0 || p == P - 1)
            cr_log_info("%s: point %d NMSE %.3g", name, p, e);
    }
    /* (b) a cached prefill of 8, then one position, only positions [1, 2) of
     * the chunk requested: the others stay untouched */
    gfc_cache *c = NULL;
    void *rc = NULL;
    cr_assert_eq(gfc_cache_create(m, 1, T, &c), GF_OK);
    cr_assert_eq(ref->cache_create(rm, 1, T, &rc), GF_OK);
    for (int32_t t0 = 0; t0 < 9;) {
        int32_t n = t0 == 0 ? 8 : 1;
        gf_batch ci = {.B = 1, .T = n, .tokens = tok + t0, .position_ids = pos + t0, .logits_mode = GF_LOGITS_LAST};
        int32_t p0 = n > 1 ? 1 : 0;
        for (size_t i = 0; i < (size_t)P * T * D; i++) /* (P, 1, 1, D) asked for; the rest must stay NaN */
            tg[i] = tw[i] = NAN;
        gf_trace_request qw = {sizeof qw, L, D, 0, 1, p0, 1, tw, gw, 0, 0, NULL, NULL},
                         qg = {sizeof qg, L, D, 0, 1, p0, 1, tg, gg, 0, 0, NULL, NULL};
        cr_assert_eq(ref->forward_trace(rm, rc, &ci, lw, &qw), GF_OK);
        cr_assert_eq(gfc_forward_trace(m, c, &ci, lg, &qg), GF_OK, "%s", gf_error_msg());
        for (int32_t p = 0; p < P; p++) {
            double e = nmse(tg + (size_t)p * D, tw + (size_t)p * D, (size_t)D);
            cr_assert_lt(e, 1e-9, "%s cached at %d: point %d NMSE %g vs ref", name, t0, p, e);
        }
        cr_assert(isnan(tg[(size_t)P * D]), "%s: a position outside the request was written", name);
        t0 += n;
    }
    cr_assert_eq(c->length, 9);
    free(lw);
    free(lg);
    free(lp);
    free(tw);
    free(tg);
    gfc_cache_destroy(c);
    ref->cache_free(rc);
    gfc_model_destroy(m);
    ref->model_free(rm);
    gf_model_free(gm);
    cr_assert_eq(hx.live, 0);
}

Test(cuda_trace, holmes_gpt_matches_ref) { trace_vs_ref("holmes-gpt"); }
Test(cuda_trace, holmes_llama_matches_ref) { trace_vs_ref("holmes-llama"); }
