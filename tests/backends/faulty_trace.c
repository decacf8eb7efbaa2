/* ref with one fault each in a mechanism the trace slot must localize
 * (tests/cli/trace_faults.sh, docs/backends.md "The trace slot"): the RoPE
 * positions, the GQA head map, a norm. Each fault sits around ref, in
 * model_load (the weights ref copies) or in the batch it is handed, and the
 * trace slot goes through the same fault, so the trace shows where it bites.
 *   GF_FAULT 90 ref-rope-chunk-pos: RoPE rotates by the position within the
 *      chunk (t), not the position id: a cached call after the first, or a
 *      left-padded row, rotates wrong (rotary models only)
 *   GF_FAULT 91 ref-gqa-map: query heads of kv group 0 read kv head 1 and
 *      those of group 1 read kv head 0 (the k and v projections of kv heads
 *      0 and 1 swapped; models with H_kv >= 2 < H only)
 *   GF_FAULT 92 ref-mlp-norm: every block's MLP norm uses the attention
 *      norm's weights (ln_2 <- ln_1)
 *   GF_FAULT 93 ref-final-norm: the final norm drops its weight (w = 1)
 */
#include <stdlib.h>
#include <string.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault"
#endif

static gf_backend_ops g_ops;
static int g_rotary; /* the loaded model is rotary (GF_POS_ROPE) */

/* copy of desc with the fault in its weights; what it allocated in *keep
 * (freed once ref has copied the weights) */
static gf_status load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    g_rotary = desc->config.pos == GF_POS_ROPE;
    gf_model_desc d = *desc;
    /* the faulty weights are freed below: ref must copy, not keep views */
    if (gf_model_desc_has(&d, weights_persist))
        d.weights_persist = 0;
    const gf_model_config *g = &desc->config;
    const int32_t L = g->n_layer, D = g->n_embd;
    (void)D;
    gf_layer_weights *ly = malloc((size_t)L * sizeof *ly); /* (L) */
    float *buf = NULL;                                     /* the faulty weights */
    if (!ly)
        return GF_E_NOMEM;
    memcpy(ly, desc->weights.layers, (size_t)L * sizeof *ly);
    d.weights.layers = ly;
#if GF_FAULT == 91
    const int32_t Hkv = g->n_kv_head, dh = g->d_head;
    if (g->arch == GF_ARCH_LLAMA && Hkv >= 2 && g->n_head > Hkv) {
        const size_t per = (size_t)Hkv * dh * D; /* (H_kv dh, D) of wk, then wv, per layer */
        buf = malloc(2 * (size_t)L * per * sizeof *buf);
        if (!buf) {
            free(ly);
            return GF_E_NOMEM;
        }
        for (int32_t l = 0; l < L; l++) {
            float *k = buf + 2 * (size_t)l * per, *v = k + per;
            const size_t head = (size_t)dh * D; /* rows of one kv head */
            memcpy(k, desc->weights.layers[l].wk, per * sizeof *k);
            memcpy(v, desc->weights.layers[l].wv, per * sizeof *v);
            memcpy(k, desc->weights.layers[l].wk + head, head * sizeof *k);
            memcpy(k + head, desc->weights.layers[l].wk, head * sizeof *k);
            memcpy(v, desc->weights.layers[l].wv + head, head * sizeof *v);
            memcpy(v + head, desc->weights.layers[l].wv, head * sizeof *v);
            ly[l].wk = k;
            ly[l].wv = v;
            if (ly[l].bk) { /* biases of kv heads 0 and 1 swapped likewise (Qwen2) */
                float *bk = malloc(2 * (size_t)Hkv * dh * sizeof *bk);
                /* a small leak per load in a test backend is simpler than a second list */
                if (bk) {
                    float *bv = bk + (size_t)Hkv * dh;
                    memcpy(bk, ly[l].bk, (size_t)Hkv * dh * sizeof *bk);
                    memcpy(bv, ly[l].bv, (size_t)Hkv * dh * sizeof *bv);
                    memcpy(bk, ly[l].bk + dh, dh * sizeof *bk);
                    memcpy(bk + dh, ly[l].bk, dh * sizeof *bk);
                    memcpy(bv, ly[l].bv + dh, dh * sizeof *bv);
                    memcpy(bv + dh, ly[l].bv, dh * sizeof *bv);
                    ly[l].bk = bk;
                    ly[l].bv = bv;
                }
            }
        }
    }
#elif GF_FAULT == 92
    for (int32_t l = 0; l < L; l++) {
        if (g->norm == GF_NORM_RMSNORM) {
            ly[l].mlp_norm_w = ly[l].attn_norm_w;
        } else {
            ly[l].ln2_w = ly[l].ln1_w;
            ly[l].ln2_b = ly[l].ln1_b;
        }
    }
#elif GF_FAULT == 93
    buf = malloc((size_t)D * sizeof *buf); /* (D) */
    if (!buf) {
        free(ly);
        return GF_E_NOMEM;
    }
    for (int32_t i = 0; i < D; i++)
        buf[i] = 1.0f;
    d.weights.lnf_w = buf;
#endif
    gf_status st = gf_backend_ref()->model_load(&d, opts, model_out);
    free(buf);
    free(ly);
    return st;
}

static gf_status forward_any(void *model, void *cache, const gf_batch *in, float *logits_out,
                             const gf_trace_request *req)
{
    gf_batch b = *in;
    int32_t *pos = NULL; /* (B, T) */
#if GF_FAULT == 90
    if (g_rotary) {
        pos = malloc((size_t)in->B * in->T * sizeof *pos);
        if (!pos)
            return GF_E_NOMEM;
        for (int32_t r = 0; r < in->B; r++)
            for (int32_t t = 0; t < in->T; t++)
                pos[(size_t)r * in->T + t] = t; /* the chunk's own index, the cache offset forgotten */
        b.position_ids = pos;
    }
#endif
    gf_status st = req ? gf_backend_ref()->forward_trace(model, cache, &b, logits_out, req)
                       : gf_backend_ref()->forward(model, cache, &b, logits_out);
    free(pos);
    return st;
}

static gf_status faulty_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    return forward_any(model, cache, in, logits_out, NULL);
}

static gf_status faulty_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                      const gf_trace_request *req)
{
    return forward_any(model, cache, in, logits_out, req);
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref with a fault the trace localizes (tests/backends/faulty_trace.c)";
        g_ops.model_load = load;
        g_ops.forward = faulty_forward;
        g_ops.forward_trace = faulty_forward_trace;
    }
    return &g_ops;
}
