/* ref with a speculate slot (backend.h, gf_spec_request): a rejection
 * sampler of its own, one fault each (issue 30; cases/detect/
 * speculative_sampling.yaml, tests/cli/speculative_sampling.sh):
 *   153 ref-spec-draft0-unverified  draft[0] is committed without its test
 *                                   (a length-1 draft always accepted)
 *   154 ref-spec-bonus-row          the bonus token drawn from row K - 1,
 *                                   not row K
 *   155 ref-spec-no-renorm          the residual max(0, p - q) drawn without
 *                                   renormalising it (its inverse CDF against
 *                                   u, not u times its mass)
 *   156 ref-spec-ratio-inverted     acceptance with probability min(1, q/p)
 *                                   instead of min(1, p/q)
 *   157 ref-spec-slot               none: this file's sampler as it should
 *                                   be (a pass; the faults' control)
 * p comes from the engine's gf_sampler_probs (the target's distribution is
 * not what these faults are about); the rules and draws are this file's. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "genfence/backend.h"
#include "genfence/sampler.h"
#include "ref/ref.h"

static gf_backend_ops g_ops;

/* the inverse CDF of u over w (V): w's total scales u unless raw */
static int32_t draw(const double *w, int32_t V, double u, int raw)
{
    double total = 0.0, run = 0.0;
    for (int32_t j = 0; j < V; j++)
        total += w[j] > 0 ? w[j] : 0.0;
    const double t = raw ? u : u * total;
    int32_t last = -1;
    for (int32_t j = 0; j < V; j++) {
        if (!(w[j] > 0))
            continue;
        last = j;
        run += w[j];
        if (run > t)
            return j;
    }
    return last;
}

static gf_status fs_speculate(void *model, const gf_spec_request *rq, int32_t *accepted_out, int32_t *next_out)
{
    (void)model;
    const int32_t K = rq->K, V = rq->V;
    double *p = malloc((size_t)V * sizeof *p), *r = malloc((size_t)V * sizeof *r);
    gf_status st = p && r ? GF_OK : GF_E_NOMEM;
    int32_t acc = 0, next = -1;
    for (int32_t i = 0; i < K && st == GF_OK && next < 0; i++) {
        st = gf_sampler_probs(rq->target_logits + (size_t)i * V, V, rq->params, p);
        const int32_t x = rq->draft[i];
        const double *q = rq->draft_probs ? rq->draft_probs + (size_t)i * V : NULL;
        const double qx = q ? q[x] : 1.0;
        int ok;
        if (rq->rule == GF_PROFILE_LLAMACPP) {
            const int32_t y = draw(p, V, rq->u_draw[i], 0);
            ok = y == x;
            if (!ok)
                next = y;
        } else {
#if GF_FAULT == 156
            ok = p[x] > 0 ? rq->u_accept[i] * p[x] <= qx : qx > 0; /* the fault: q/p */
#else
            ok = qx > 0 ? rq->u_accept[i] * qx <= p[x] : (rq->rule != GF_PROFILE_VLLM && p[x] > 0);
#endif
        }
#if GF_FAULT == 153
        if (i == 0 && !ok) { /* the fault: draft[0] committed unverified */
            ok = 1;
            next = -1;
        }
#endif
        if (ok) {
            acc++;
            continue;
        }
        if (next >= 0)
            break;
        double mass = 0.0;
        for (int32_t j = 0; j < V; j++) {
            const double qj = q ? q[j] : (j == x ? 1.0 : 0.0);
            r[j] = p[j] > qj ? p[j] - qj : 0.0;
            mass += r[j];
        }
        next = draw(mass > 0 ? r : p, V, rq->u_draw[i], GF_FAULT == 155);
    }
    if (st == GF_OK && next < 0) {
        const int32_t row = GF_FAULT == 154 ? K - 1 : K; /* 154: the bonus from the wrong row */
        st = gf_sampler_probs(rq->target_logits + (size_t)row * V, V, rq->params, p);
        next = draw(p, V, rq->u_draw[K], 0);
    }
    free(p);
    free(r);
    if (st == GF_OK) {
        *accepted_out = acc;
        *next_out = next;
    }
    return st;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.struct_size = sizeof g_ops;
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref with a rejection sampler of its own (tests/backends/faulty_spec_slot.c)";
        g_ops.speculate = fs_speculate;
    }
    return &g_ops;
}
