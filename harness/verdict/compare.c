/* The margin gate and per-step comparison metrics. */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the gate ---- */

gf_gate gf_gate_default(void)
{
    gf_gate g = {.abs = GF_GATE_ABS, .ulps = GF_GATE_ULPS};
    return g;
}

const char *gf_dtype_str(gf_compute_dtype dt)
{
    switch (dt) {
    case GF_COMPUTE_F32: return "fp32";
    case GF_COMPUTE_F16: return "fp16";
    case GF_COMPUTE_BF16: return "bf16";
    case GF_COMPUTE_F64: return "fp64";
    case GF_COMPUTE_TF32: return "tf32";
    }
    return "fp32";
}

double gf_ulp_at(double x, gf_compute_dtype dt)
{
    if (!isfinite(x))
        return NAN;
    int digits, emin; /* significand bits (with the implicit one), smallest normal exponent */
    switch (dt) {
    case GF_COMPUTE_F16:
        digits = 11;
        emin = -14;
        break;
    case GF_COMPUTE_BF16:
        digits = 8;
        emin = -126;
        break;
    case GF_COMPUTE_TF32:
        digits = 11;
        emin = -126;
        break;
    case GF_COMPUTE_F64:
        digits = 53;
        emin = -1022;
        break;
    case GF_COMPUTE_F32:
    default:
        digits = 24;
        emin = -126;
        break;
    }
    double ax = fabs(x);
    int e = 0;
    if (ax > 0)
        frexp(ax, &e); /* ax = m 2^e, m in [0.5, 1): the binade [2^(e-1), 2^e) */
    int binade = ax > 0 ? e - 1 : emin;
    if (binade < emin)
        binade = emin; /* subnormals share the smallest normal spacing */
    return ldexp(1.0, binade - (digits - 1));
}

double gf_dtype_atol_scale(gf_compute_dtype dt)
{
    /* ULP(dtype) / ULP(fp32) at the same value, never below 1 (fp64 keeps the
     * case's floor): fp32, fp64 1; fp16, tf32 2^13; bf16 2^16 */
    double r = gf_ulp_at(1.0, dt) / gf_ulp_at(1.0, GF_COMPUTE_F32);
    return r > 1.0 ? r : 1.0;
}

double gf_gate_threshold(const gf_gate *g, double ref_top1, gf_compute_dtype dt)
{
    double u = gf_ulp_at(ref_top1, dt);
    double t = isfinite(u) ? g->ulps * u : 0.0;
    return t > g->abs ? t : g->abs;
}

/* ---- comparison ---- */

void gf_cmp_init(gf_cmp *c, const gf_gate *g, gf_compute_dtype dt, gf_cmp_mode mode, double atol)
{
    memset(c, 0, sizeof *c);
    c->gate = g ? *g : gf_gate_default();
    c->dtype = dt ? dt : GF_COMPUTE_F32;
    c->mode = mode;
    c->atol_case = atol;
    c->atol = isnan(atol) ? atol : atol * gf_dtype_atol_scale(c->dtype);
    c->max_delta_step = -1;
    c->min_margin = INFINITY;
    c->min_margin_step = -1;
    c->min_margin_threshold = c->gate.abs;
    c->first_divergence = -1;
    c->first_unexcused = -1;
    c->first_over_atol = -1;
    c->first_nonfinite = -1;
    c->first_neg_margin = -1;
    c->first_failing = -1;
    c->divergence_margin = c->divergence_threshold = NAN;
    c->unexcused_margin = c->unexcused_threshold = NAN;
    c->over_atol_delta = NAN;
}

int gf_cmp_stopped(const gf_cmp *c) { return c->mode == GF_CMP_FREE_RUNNING && c->first_divergence >= 0; }

int gf_cmp_step(gf_cmp *c, int32_t step, double delta, int32_t ref_token, int32_t test_token, double ref_margin,
                double ref_top1)
{
    if (gf_cmp_stopped(c)) {
        c->ignored++;
        return 0;
    }
    int failed_before = c->first_failing >= 0;
    double thr = gf_gate_threshold(&c->gate, ref_top1, c->dtype);
    int first = c->steps == 0;
    c->steps++;
    if (!isnan(delta)) {
        if (!isfinite(delta) && c->first_nonfinite < 0)
            c->first_nonfinite = step;
        if (delta > c->max_delta || first) {
            c->max_delta = delta > c->max_delta ? delta : c->max_delta;
            c->max_delta_step = step;
        }
        if (!isnan(c->atol) && !(delta <= c->atol) && c->first_over_atol < 0) {
            c->first_over_atol = step;
            c->over_atol_delta = delta;
        }
    }
    if (!isnan(ref_margin) && ref_margin < c->min_margin) {
        c->min_margin = ref_margin;
        c->min_margin_step = step;
        c->min_margin_threshold = thr;
    }
    if (ref_margin < 0 && c->first_neg_margin < 0) { /* top1 - top2 of the reference: never negative */
        c->first_neg_margin = step;
        c->neg_margin = ref_margin;
    }
    if (ref_margin < thr)
        c->near_ties++;
    if (ref_token != test_token) {
        c->mismatches++;
        if (c->first_divergence < 0) {
            c->first_divergence = step;
            c->divergence_margin = ref_margin;
            c->divergence_threshold = thr;
        }
        if (ref_margin < thr) {
            c->excused++;
        } else if (c->first_unexcused < 0) {
            c->first_unexcused = step;
            c->unexcused_margin = ref_margin;
            c->unexcused_threshold = thr;
            c->unexcused_ref_token = ref_token;
            c->unexcused_test_token = test_token;
        }
    }
    int failed_now =
        c->first_unexcused >= 0 || c->first_over_atol >= 0 || c->first_nonfinite >= 0 || c->first_neg_margin >= 0;
    if (failed_now && !failed_before) {
        c->first_failing = step;
        return 1;
    }
    return 0;
}

int gf_cmp_logits(gf_cmp *c, int32_t step, const float *ref, const float *test, int32_t V)
{
    double top1, margin, t1, m1;
    int32_t a_ref = gf_row_top(ref, V, &top1, &margin);
    int32_t a_test = gf_row_top(test, V, &t1, &m1);
    double delta = gf_max_abs_delta(ref, test, (size_t)V, NULL);
    return gf_cmp_step(c, step, delta, a_ref, a_test, margin, top1);
}

void gf_cmp_verify(gf_cmp *c, const gf_verify_result *r)
{
    /* step 0 also covers the prompt positions before the last: gf_verify_cache
     * reports their delta only when it is the largest (max_delta_step -1) */
    for (int32_t t = 0; t < r->steps; t++) {
        double d = r->step_max_delta[t];
        if (t == 0 && r->max_delta_step < 0 && !(r->max_abs_delta <= d))
            d = r->max_abs_delta;
        gf_cmp_step(c, t, d, r->ref_tokens[t], r->tokens[t], r->step_margin[t], r->step_top1[t]);
    }
}

void gf_cmp_merge(gf_cmp *a, const gf_cmp *b)
{
    int a_empty = a->steps == 0;
    a->steps += b->steps;
    a->ignored += b->ignored;
    if (b->steps > 0 && (b->max_delta > a->max_delta || a_empty)) {
        a->max_delta = b->max_delta > a->max_delta || a_empty ? b->max_delta : a->max_delta;
        a->max_delta_step = b->max_delta_step;
    }
    if (b->min_margin < a->min_margin) {
        a->min_margin = b->min_margin;
        a->min_margin_step = b->min_margin_step;
        a->min_margin_threshold = b->min_margin_threshold;
    }
    a->near_ties += b->near_ties;
    a->mismatches += b->mismatches;
    a->excused += b->excused;
    if (a->first_divergence < 0 && b->first_divergence >= 0) {
        a->first_divergence = b->first_divergence;
        a->divergence_margin = b->divergence_margin;
        a->divergence_threshold = b->divergence_threshold;
    }
    if (a->first_unexcused < 0 && b->first_unexcused >= 0) {
        a->first_unexcused = b->first_unexcused;
        a->unexcused_margin = b->unexcused_margin;
        a->unexcused_threshold = b->unexcused_threshold;
        a->unexcused_ref_token = b->unexcused_ref_token;
        a->unexcused_test_token = b->unexcused_test_token;
    }
    if (a->first_over_atol < 0 && b->first_over_atol >= 0) {
        a->first_over_atol = b->first_over_atol;
        a->over_atol_delta = b->over_atol_delta;
    }
    if (a->first_nonfinite < 0)
        a->first_nonfinite = b->first_nonfinite;
    if (a->first_neg_margin < 0 && b->first_neg_margin >= 0) {
        a->first_neg_margin = b->first_neg_margin;
        a->neg_margin = b->neg_margin;
    }
    if (a->first_failing < 0)
        a->first_failing = b->first_failing;
}

double gf_cmp_safety_factor(const gf_cmp *c)
{
    if (c->max_delta == 0.0)
        return c->min_margin > 0 ? INFINITY : NAN;
    return c->min_margin / c->max_delta;
}

gf_verdict gf_cmp_verdict(const gf_cmp *c, char *why, size_t why_len)
{
    char tmp[768], tok[320] = "", atol[200] = "";
    gf_verdict v = GF_V_PASS;
    if (c->first_unexcused >= 0)
        snprintf(tok, sizeof tok,
                 "token differs at step %d (reference %d, test %d) with reference margin %.3g >= gate %.3g",
                 c->first_unexcused, c->unexcused_ref_token, c->unexcused_test_token, c->unexcused_margin,
                 c->unexcused_threshold);
    if (c->first_over_atol >= 0) {
        int n = snprintf(atol, sizeof atol, "max |delta| %.3g at step %d exceeds atol %.3g", c->over_atol_delta,
                         c->first_over_atol, c->atol);
        if (gf_dtype_atol_scale(c->dtype) != 1.0 && n > 0 && (size_t)n < sizeof atol)
            snprintf(atol + n, sizeof atol - (size_t)n, " (the case's %.3g x %.0f for %s)", c->atol_case,
                     gf_dtype_atol_scale(c->dtype), gf_dtype_str(c->dtype));
    }
    if (c->first_nonfinite >= 0) {
        snprintf(tmp, sizeof tmp, "non-finite logits delta at step %d", c->first_nonfinite);
        v = GF_V_FAIL;
    } else if (c->first_neg_margin >= 0) {
        snprintf(tmp, sizeof tmp,
                 "reference margin %.3g < 0 at step %d: a top-1 minus top-2 margin cannot be negative (the margin "
                 "or the argmax is computed wrong)",
                 c->neg_margin, c->first_neg_margin);
        v = GF_V_FAIL;
    } else if (tok[0] && atol[0]) {
        int tok_first = c->first_unexcused <= c->first_over_atol;
        snprintf(tmp, sizeof tmp, "%s; %s", tok_first ? tok : atol, tok_first ? atol : tok);
        v = GF_V_FAIL;
    } else if (tok[0] || atol[0]) {
        snprintf(tmp, sizeof tmp, "%s", tok[0] ? tok : atol);
        v = GF_V_FAIL;
    } else if (c->excused > 0) {
        snprintf(tmp, sizeof tmp, "token differs at step %d at a near tie: margin %.3g < gate %.3g",
                 c->first_divergence, c->divergence_margin, c->divergence_threshold);
        v = GF_V_PASS_NEAR_TIE;
    } else {
        snprintf(tmp, sizeof tmp, "%d steps agree", c->steps);
    }
    if (why && why_len)
        snprintf(why, why_len, "%s", tmp);
    return v;
}

/* ---- JSON ---- */

json_t *gf_cmp_json(const gf_cmp *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string(c->mode == GF_CMP_TEACHER_FORCED ? "teacher-forced" : "free-running"));
    json_object_set_new(
        o, "gate",
        json_pack("{s:f, s:f, s:s}", "abs", c->gate.abs, "ulps", c->gate.ulps, "dtype", gf_dtype_str(c->dtype)));
    gf_json_set_number(o, "atol", c->atol, "not checked");
    gf_json_set_number(o, "atol_case", c->atol_case, "not checked");
    json_object_set_new(o, "steps", json_integer(c->steps));
    json_object_set_new(o, "steps_ignored", json_integer(c->ignored));
    gf_json_set_number(o, "max_abs_delta", c->max_delta, "a side is not finite");
    json_object_set_new(o, "max_delta_step", json_integer(c->max_delta_step));
    gf_json_set_number(o, "min_margin", c->min_margin,
                       c->min_margin == INFINITY ? "+inf: a single candidate at every step" : NULL);
    json_object_set_new(o, "min_margin_step", json_integer(c->min_margin_step));
    gf_json_set_number(o, "gate_threshold", c->min_margin_threshold, NULL);
    double sf = gf_cmp_safety_factor(c);
    gf_json_set_number(o, "safety_factor", sf,
                       isinf(sf) ? "+inf: max |delta| is 0 (the sides are identical)" : "undefined");
    json_object_set_new(o, "near_ties", json_integer(c->near_ties));
    json_object_set_new(o, "mismatches", json_integer(c->mismatches));
    json_object_set_new(o, "excused", json_integer(c->excused));
    json_object_set_new(o, "first_divergence", json_integer(c->first_divergence));
    if (c->first_divergence >= 0) {
        gf_json_set_number(o, "divergence_margin", c->divergence_margin, NULL);
        gf_json_set_number(o, "divergence_threshold", c->divergence_threshold, NULL);
    }
    if (c->first_unexcused >= 0)
        json_object_set_new(o, "first_unexcused", json_integer(c->first_unexcused));
    if (c->first_over_atol >= 0)
        json_object_set_new(o, "first_over_atol", json_integer(c->first_over_atol));
    json_object_set_new(o, "failing_step", json_integer(c->first_failing));
    return o;
}
