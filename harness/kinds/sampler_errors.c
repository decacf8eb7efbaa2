/* sampler_errors: invalid sampler parameters are errors; degenerate ones
 * give the argmax. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/sampler.h"
#include "genfence/sampler_fields.h"
#include "keys.h"
#include "slot.h"

enum { EXPECT_ERROR = 0, EXPECT_ARGMAX = 1, EXPECT_OK = 2 };
static const char *const k_expect_words[] = {"error", "argmax", "ok", NULL};

typedef struct err_call {
    gf_sampler_params p;
    int expect;
    int line;
} err_call;

typedef struct err_spec {
    float *logits;
    int32_t V;
    long long vocab, seed;
    err_call *calls;
    size_t n_calls;
} err_spec;

static void err_free(void *p)
{
    err_spec *s = p;
    if (s) {
        free(s->logits);
        free(s->calls);
    }
    free(s);
}

/* "in a 'calls' entry (known: temperature, top_k, ..., expect)": every key a
 * call reads, from the field table (gf_y_sampler_raw reads each row). */
static const char *calls_known(void)
{
    static char buf[2048];
    if (buf[0])
        return buf;
    size_t n = (size_t)snprintf(buf, sizeof buf, "in a 'calls' entry (known: ");
    for (int k = 0; k < GF_SF_COUNT && n < sizeof buf; k++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s, ", gf_sampler_fields[k].name);
    if (n < sizeof buf)
        snprintf(buf + n, sizeof buf - n, "expect)");
    return buf;
}

static int parse_err(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    err_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->vocab = 64;
    s->seed = 35;
    int from_probs = 0;
    int bad = gf_y_probs_or_logits(ctx, m, GF_Y_ANY_LOGITS, &s->logits, &s->V, &from_probs) < 0;
    bad |= gf_y_int(ctx, m, "vocab", 0, 2, 1 << 20, &s->vocab) < 0;
    bad |= gf_y_int(ctx, m, "seed", 0, 0, 0x7fffffffffffffffLL, &s->seed) < 0;
    const gf_ynode *calls = gf_y_get(ctx, m, "calls", GF_Y_REQUIRED);
    if (!calls || !gf_y_node_is_seq(ctx, calls, "'calls'"))
        return -1;
    s->calls = calloc(calls->n ? calls->n : 1, sizeof *s->calls);
    if (!s->calls)
        return -1;
    s->n_calls = calls->n;
    for (size_t i = 0; i < calls->n; i++) {
        const gf_ynode *e = calls->items[i];
        if (!gf_y_node_is_map(ctx, e, "a 'calls' entry")) {
            bad = 1;
            continue;
        }
        s->calls[i].p = gf_sampler_greedy();
        s->calls[i].p.temperature = 1.0;
        s->calls[i].p.seed = (uint64_t)s->seed;
        s->calls[i].line = e->line;
        bad |= gf_y_sampler_raw(ctx, e, &s->calls[i].p) < 0;
        bad |= gf_y_enum(ctx, e, "expect", GF_Y_REQUIRED, k_expect_words, &s->calls[i].expect) < 0;
        gf_y_check_unknown(ctx, e, calls_known());
    }
    return bad ? -1 : 0;
}

static void run_err(const gf_case *c, gf_krun *k)
{
    const err_spec *s = c->spec;
    gf_k_note_sampler(k);
    int32_t V = s->logits ? s->V : (int32_t)s->vocab;
    float *L = malloc((size_t)V * sizeof *L);
    double *nrm = malloc((size_t)V * sizeof *nrm);
    if (!L || !nrm) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    if (s->logits) {
        memcpy(L, s->logits, (size_t)V * sizeof *L);
    } else {
        gf_k_seed(k, "logits", (uint64_t)s->seed);
        gf_k_normals((uint64_t)s->seed, 0, nrm, (size_t)V);
        for (int32_t i = 0; i < V; i++)
            L[i] = (float)(3.0 * nrm[i]);
    }
    int32_t am = gf_row_top(L, V, NULL, NULL);
    int n_ok = 0;
    for (size_t i = 0; i < s->n_calls; i++) {
        const err_call *e = &s->calls[i];
        gf_sample_result r;
        gf_error_clear();
        gf_status st = gf_sample(L, V, &e->p, 0, i, &r);
        char name[256], ps[160];
        const int prof = gf_sampler_params_profile(&e->p);
        snprintf(ps, sizeof ps, "%s%stemperature=%g top_k=%s%d top_p=%s%g", prof ? gf_sampler_profile_name(prof) : "",
                 prof ? " " : "", e->p.temperature, e->p.use_top_k ? "" : "off/", e->p.top_k,
                 e->p.use_top_p ? "" : "off/", e->p.top_p);
        snprintf(name, sizeof name, "line %d: %s -> %s", e->line, ps, k_expect_words[e->expect]);
        int ok;
        if (e->expect == EXPECT_ERROR)
            ok = gf_k_check(k, st == GF_E_INVALID_ARG && gf_error_msg()[0], name, "%s",
                            st == GF_OK ? "accepted (returned a token)" : gf_error_msg());
        else if (e->expect == EXPECT_ARGMAX)
            ok = gf_k_check(k, st == GF_OK && r.token == am, name, "got %d, argmax %d%s%s", st == GF_OK ? r.token : -1,
                            am, st == GF_OK ? "" : ": ", st == GF_OK ? "" : gf_error_msg());
        else
            ok = gf_k_check(k, st == GF_OK, name, "%s", st == GF_OK ? "accepted" : gf_error_msg());
        n_ok += ok;
        if (st == GF_OK) { /* accepted calls through the slot too (rejected ones never reach it) */
            const uint64_t seq = 0;
            gf_k_slot_rows(k, name, L, 1, V, &e->p, &seq, i, &r.token);
        }
    }
    gf_k_metric_int(k, "calls", (long long)s->n_calls);
    gf_k_metric_int(k, "calls_as_expected", n_ok);
done:
    free(L);
    free(nrm);
}

const gf_kind_def gf_kind_sampler_errors = {
    .name = "sampler_errors",
    .summary = "invalid sampler parameters are errors; degenerate ones give argmax",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_SAMPLE,
    .parse = parse_err,
    .free_spec = err_free,
    .run = run_err,
};
