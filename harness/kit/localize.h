/* Localization on failure: where a failing case first diverges from ref.
 *
 * While a model case runs on a backend with the trace slot, the engine logs
 * its cache and forward calls (gf_call_log). When the case fails (or always,
 * under `genfence trace`), the child replays the log with tracing on, on the
 * backend and on ref, call by call in order, and compares the hidden state at
 * every trace point (backend.h: the embedding, each block's attention output
 * before and after its residual add, its MLP output before and after its
 * add, the final norm), and each block's keys and values as its attention
 * reads them (backend.h, kv_out: where a cache written at the wrong
 * positions first shows), by NMSE = sum (b - r)^2 / sum r^2 over the call's
 * rows, real positions and channels. The first call and point whose NMSE
 * exceeds its bound is the localization: its layer and sublayer, the rows
 * and positions past the bound there, the worst (row, position, channel),
 * and the NMSE of every earlier point of that call (all below their
 * bounds). Every point below its bound in every call replayed: the trace
 * matches ref, and the divergence lies after the final norm (the output
 * head, the logits, a slot outside forward).
 *
 * The bound of point p (0-based, in the order above) for a backend whose
 * unit roundoff is u (gf_trace_unit) over a model of width
 * W = max(n_embd, d_ff, n_head d_head):
 *     bound(p) = GF_TRACE_SAFETY (p + 1) W u^2
 * a dot product of K terms rounded at u carries a relative error whose
 * variance is at most about K u^2 (independent roundings add in variance),
 * so one sublayer adds at most about W u^2 to the NMSE of the stream, and
 * p + 1 sublayers their sum; GF_TRACE_SAFETY covers correlated roundings
 * and the norms' rescaling (docs/backends.md, "The trace slot"). */
#ifndef GENFENCE_HARNESS_LOCALIZE_H
#define GENFENCE_HARNESS_LOCALIZE_H

#include <jansson.h>

#include "session.h"

#define GF_TRACE_SAFETY 64.0

/* The most floats of keys and values (L 2 B Tk H_kv d_head) one replayed
 * call copies per side (128 MiB); past it they are not asked for. */
#define GF_TRACE_KV_MAX_FLOATS ((size_t)32 << 20)

/* The unit roundoff a backend is judged with: its compute dtype's, or its
 * weights' or KV cache's when those are coarser ("f16", "bf16", "q8_0",
 * "q4_k", ...; NULL or "": as the compute dtype). */
double gf_trace_unit(gf_compute_dtype dtype, const char *weights, const char *kv_cache);

/* Replays log on s's engine and on ref (model_dir, threads), stopping at
 * the first divergent call or once budget_s seconds have passed. Returns
 * the localization (an object: status "diverged", "matched" or
 * "not_localized", summary, call, first, points, ...), never NULL. */
json_t *gf_localize(gf_session *s, const gf_call_log *log, const char *model_dir, int threads, double u,
                    double budget_s);

/* The key reach (key_reach.c): does the hidden state at trace point `point`
 * of (row b, new position t) in the cached forward log->v[fail_i] depend on
 * the token at cache position j (< the call's cache length)? The calls on
 * its cache since its creation or last reset are replayed on e with that
 * token changed; *depends = the state differs from base (D floats: the
 * unchanged replay's) by an NMSE above bound. 0, or -1 with why. */
int gf_key_reach(gf_engine *e, const gf_call_log *log, size_t fail_i, int32_t point, int32_t b, int32_t t, int32_t j,
                 const float *base, double bound, int *depends, char *why, size_t cap);

#endif
