/* gf_spec_round: the engine's reference rejection sampler for one
 * speculative round (include/genfence/backend.h, gf_spec_request;
 * docs/speculative.md), and gf_backend_speculate, the one way genfence calls
 * a backend's own `speculate` slot. All arithmetic is in double. */
#include "genfence/engine.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "engine_trace.h"

int32_t gf_spec_draw(const double *w, int32_t V, double u)
{
    double total = 0.0;
    for (int32_t j = 0; j < V; j++)
        if (w[j] > 0)
            total += w[j];
    const double t = u * total;
    double run = 0.0;
    int32_t last = -1;
    for (int32_t j = 0; j < V; j++) {
        if (!(w[j] > 0))
            continue;
        run += w[j];
        last = j;
        if (run > t)
            return j;
    }
    return last;
}

double gf_spec_accept_prob(int rule, double p, double q)
{
    if (rule == GF_PROFILE_LLAMACPP)
        return p; /* the target's own draw equals x with probability p(x) */
    if (q <= 0)
        return rule == GF_PROFILE_VLLM || p <= 0 ? 0.0 : 1.0;
    return p >= q ? 1.0 : p / q;
}

/* the request's shape and values (what the slot may assume) */
static gf_status spec_check(const gf_spec_request *r)
{
    if (!r || r->struct_size < sizeof *r)
        return gf_error_set(GF_E_INVALID_ARG, "speculate: request %s", r ? "struct_size too small" : "NULL");
    if (r->K < 1 || r->V < 1)
        return gf_error_set(GF_E_INVALID_ARG, "speculate: K %d and V %d must be >= 1", r->K, r->V);
    if (!gf_sampler_profile_name(r->rule))
        return gf_error_set(GF_E_INVALID_ARG, "speculate: rule %d is no sampler profile", r->rule);
    if (!r->target_logits || !r->draft || !r->params || !r->u_accept || !r->u_draw)
        return gf_error_set(GF_E_INVALID_ARG, "speculate: target_logits, draft, params, u_accept and u_draw "
                                              "must be non-NULL");
    if (!gf_sampler_params_plain(r->params))
        return gf_error_set(GF_E_INVALID_ARG, "speculate: the target's sampler must be plain (ext NULL)");
    gf_status st = gf_sampler_validate(r->params);
    if (st != GF_OK)
        return gf_error_prefix(st, "speculate");
    for (int32_t i = 0; i < r->K; i++) {
        if (r->draft[i] < 0 || r->draft[i] >= r->V)
            return gf_error_set(GF_E_INVALID_ARG, "speculate: draft[%d] = %d outside [0, %d)", i, r->draft[i], r->V);
        if (!(r->u_accept[i] > 0 && r->u_accept[i] < 1))
            return gf_error_set(GF_E_INVALID_ARG, "speculate: u_accept[%d] = %g outside (0, 1)", i, r->u_accept[i]);
        if (!r->draft_probs)
            continue;
        const double *q = r->draft_probs + (size_t)i * (size_t)r->V;
        double sum = 0.0;
        for (int32_t j = 0; j < r->V; j++) {
            if (!(q[j] >= 0) || isinf(q[j]))
                return gf_error_set(GF_E_INVALID_ARG, "speculate: draft_probs[%d][%d] = %g is no probability", i, j,
                                    q[j]);
            sum += q[j];
        }
        if (!(fabs(sum - 1.0) <= 1e-6))
            return gf_error_set(GF_E_INVALID_ARG, "speculate: draft_probs row %d sums to %.17g, not 1", i, sum);
    }
    for (int32_t i = 0; i <= r->K; i++)
        if (!(r->u_draw[i] > 0 && r->u_draw[i] < 1))
            return gf_error_set(GF_E_INVALID_ARG, "speculate: u_draw[%d] = %g outside (0, 1)", i, r->u_draw[i]);
    return GF_OK;
}

gf_status gf_spec_round(const gf_spec_request *r, int32_t *accepted_out, int32_t *next_out)
{
    gf_status st = spec_check(r);
    if (st != GF_OK)
        return st;
    if (!accepted_out || !next_out)
        return gf_error_set(GF_E_INVALID_ARG, "speculate: NULL output");
    const int32_t K = r->K, V = r->V;
    double *p = malloc((size_t)V * sizeof *p);     /* (V) the target's distribution at row i */
    double *res = malloc((size_t)V * sizeof *res); /* (V) the residual max(0, p - q) */
    if (!p || !res) {
        free(p);
        free(res);
        return gf_error_set(GF_E_NOMEM, "speculate: out of memory for V %d", V);
    }
    int32_t acc = 0, next = -1;
    for (int32_t i = 0; i <= K && next < 0 && st == GF_OK; i++) {
        st = gf_sampler_probs(r->target_logits + (size_t)i * (size_t)V, V, r->params, p);
        if (st != GF_OK) {
            gf_error_prefix(st, "speculate: target row %d", i);
            break;
        }
        if (i == K) { /* everything accepted: the bonus token from the last row */
            next = gf_spec_draw(p, V, r->u_draw[K]);
            break;
        }
        const int32_t x = r->draft[i];
        if (r->rule == GF_PROFILE_LLAMACPP) {
            const int32_t y = gf_spec_draw(p, V, r->u_draw[i]);
            if (y == x)
                acc++;
            else
                next = y;
            continue;
        }
        const double *q = r->draft_probs ? r->draft_probs + (size_t)i * (size_t)V : NULL;
        const double qx = q ? q[x] : 1.0;
        const int ok = qx > 0 ? r->u_accept[i] * qx <= p[x] : (r->rule != GF_PROFILE_VLLM && p[x] > 0);
        if (ok) {
            acc++;
            continue;
        }
        double mass = 0.0;
        for (int32_t j = 0; j < V; j++) {
            const double qj = q ? q[j] : (j == x ? 1.0 : 0.0);
            res[j] = p[j] > qj ? p[j] - qj : 0.0;
            mass += res[j];
        }
        next = gf_spec_draw(mass > 0 ? res : p, V, r->u_draw[i]);
    }
    free(p);
    free(res);
    if (st == GF_OK && next < 0)
        st = gf_error_set(GF_E_INVALID_ARG, "speculate: no token has mass in the target's distribution");
    if (st == GF_OK) {
        *accepted_out = acc;
        *next_out = next;
    }
    return st;
}

int gf_backend_has_speculate(const gf_backend_ops *ops) { return ops && GF_OPS_HAS(ops, speculate); }

gf_status gf_backend_speculate(const gf_backend_ops *ops, void *model, const gf_spec_request *req,
                               int32_t *accepted_out, int32_t *next_out)
{
    if (!ops)
        return gf_error_set(GF_E_INVALID_ARG, "backend table is NULL");
    const char *name = ops->name ? ops->name : "(unnamed)";
    if (!gf_backend_has_speculate(ops))
        return gf_error_set(GF_E_UNSUPPORTED, "backend '%s' has no speculate slot", name);
    gf_status st = spec_check(req);
    if (st != GF_OK)
        return gf_error_prefix(st, "backend '%s'", name);
    if (!accepted_out || !next_out)
        return gf_error_set(GF_E_INVALID_ARG, "backend '%s' speculate: NULL output", name);
    int32_t acc = -1, next = -1;
    gf_error_clear();
    long long call = gf_trace_enter("speculate", 1, req->K + 1, -1);
    st = ops->speculate(model, req, &acc, &next);
    gf_trace_leave();
    (void)call;
    if (st != GF_OK) {
        const char *vendor = gf_backend_last_error(ops, model);
        return vendor[0] ? gf_error_prefix(st, "backend '%s' speculate slot (%s)", name, vendor)
                         : gf_error_prefix(st, "backend '%s' speculate slot", name);
    }
    if (acc < 0 || acc > req->K)
        return gf_error_set(GF_E_BACKEND, "backend '%s' speculate slot accepted %d of K %d draft tokens", name, acc,
                            req->K);
    if (next < 0 || next >= req->V)
        return gf_error_set(GF_E_BACKEND, "backend '%s' speculate slot returned next token %d (V %d)", name, next,
                            req->V);
    *accepted_out = acc;
    *next_out = next;
    return GF_OK;
}
