/* The margin gate, per-step comparison metrics and verdicts (harness/compare.h). */
#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

#include "compare.h"

Test(ulp, fp32_at_powers_of_two_and_zero)
{
    cr_assert_eq(gf_ulp_at(1.0, GF_COMPUTE_F32), ldexp(1.0, -23));
    cr_assert_eq(gf_ulp_at(-1.0, GF_COMPUTE_F32), ldexp(1.0, -23));
    cr_assert_eq(gf_ulp_at(1.5, GF_COMPUTE_F32), ldexp(1.0, -23));
    cr_assert_eq(gf_ulp_at(2.0, GF_COMPUTE_F32), ldexp(1.0, -22));
    cr_assert_eq(gf_ulp_at(3.0, GF_COMPUTE_F32), ldexp(1.0, -22));
    cr_assert_eq(gf_ulp_at(1000.0, GF_COMPUTE_F32), ldexp(1.0, -14));
    cr_assert_eq(gf_ulp_at(0.0, GF_COMPUTE_F32), ldexp(1.0, -149));
    cr_assert_eq(gf_ulp_at(1e-45, GF_COMPUTE_F32), ldexp(1.0, -149));
    cr_assert(isnan(gf_ulp_at(INFINITY, GF_COMPUTE_F32)));
    cr_assert(isnan(gf_ulp_at(NAN, GF_COMPUTE_F32)));
}

Test(ulp, other_dtypes)
{
    cr_assert_eq(gf_ulp_at(1.0, GF_COMPUTE_F16), ldexp(1.0, -10));
    cr_assert_eq(gf_ulp_at(10.0, GF_COMPUTE_F16), ldexp(1.0, -7));
    cr_assert_eq(gf_ulp_at(0.0, GF_COMPUTE_F16), ldexp(1.0, -24));
    cr_assert_eq(gf_ulp_at(1.0, GF_COMPUTE_BF16), ldexp(1.0, -7));
    cr_assert_eq(gf_ulp_at(1.0, GF_COMPUTE_F64), ldexp(1.0, -52));
}

Test(gate, threshold_is_the_larger_of_abs_and_ulps)
{
    gf_gate g = gf_gate_default();
    cr_assert_eq(g.abs, 1e-4);
    cr_assert_eq(g.ulps, 4.0);
    /* |top1| = 10 in fp32: 4 ulp = 4 * 2^-20 = 3.8e-6 < 1e-4 */
    cr_assert_eq(gf_gate_threshold(&g, 10.0, GF_COMPUTE_F32), 1e-4);
    /* |top1| = 1000 in fp32: 4 * 2^-14 = 2.44e-4 > 1e-4 */
    cr_assert_eq(gf_gate_threshold(&g, 1000.0, GF_COMPUTE_F32), 4 * ldexp(1.0, -14));
    /* fp16 at 10: 4 * 2^-7 */
    cr_assert_eq(gf_gate_threshold(&g, -10.0, GF_COMPUTE_F16), 4 * ldexp(1.0, -7));
    /* an unknown top-1 leaves the absolute part */
    cr_assert_eq(gf_gate_threshold(&g, NAN, GF_COMPUTE_BF16), 1e-4);
}

Test(rows, top_and_margin)
{
    float x[5] = {0.5f, 2.0f, -INFINITY, 1.5f, 2.0f};
    double top1, margin;
    cr_assert_eq(gf_row_top(x, 5, &top1, &margin), 1); /* lowest index on ties */
    cr_assert_eq(top1, 2.0);
    cr_assert_eq(margin, 0.0);
    float y[3] = {1.0f, -INFINITY, -INFINITY};
    gf_row_top(y, 3, &top1, &margin);
    cr_assert(isinf(margin) && margin > 0);
    float a[3] = {1, 2, 3}, b[3] = {1, 2.5f, NAN};
    size_t at;
    cr_assert(isinf(gf_max_abs_delta(a, b, 3, &at)));
    cr_assert_eq(at, 2);
    cr_assert_eq(gf_max_abs_delta(a, b, 2, &at), 0.5);
}

/* genfence/rows.h's rules for what is not a finite number: one definition
 * for the engine (sampler, verify_cache, sliding window) and the gate */
Test(rows, non_finite_rules)
{
    /* equal infinities agree, as do two NaNs; NaN against a number or
     * opposite infinities do not */
    float p[4] = {INFINITY, -INFINITY, NAN, 1.0f}, q[4] = {INFINITY, -INFINITY, NAN, 1.0f};
    size_t at = 9;
    cr_assert_eq(gf_max_abs_delta(p, q, 4, &at), 0.0);
    cr_assert_eq(at, 0);
    float r[4] = {-INFINITY, -INFINITY, NAN, 1.0f};
    cr_assert(isinf(gf_max_abs_delta(p, r, 4, &at)) && at == 0);
    float s[4] = {INFINITY, -INFINITY, 2.0f, 1.0f};
    cr_assert(isinf(gf_max_abs_delta(p, s, 4, &at)) && at == 2);
    /* NaN and -inf never win nor run up; nothing counts: -1 */
    float x[4] = {NAN, 1.0f, NAN, 0.25f};
    double top1, margin;
    cr_assert_eq(gf_row_top(x, 4, &top1, &margin), 1);
    cr_assert_eq(top1, 1.0);
    cr_assert_eq(margin, 0.75);
    float none[3] = {NAN, -INFINITY, NAN};
    cr_assert_eq(gf_row_top(none, 3, &top1, &margin), -1);
    cr_assert(isnan(top1) && isinf(margin) && margin > 0);
    /* the double rows and the accumulator follow the same rule */
    double z[4] = {-INFINITY, 3.0, 3.0, NAN};
    gf_top2 t;
    gf_row_top2_d(z, 4, &t);
    cr_assert(t.token == 1 && t.runner_up == 2 && gf_top2_margin(&t) == 0.0);
    gf_top2_init(&t);
    cr_assert(t.token == -1 && isinf(gf_top2_margin(&t)));
    /* the sampler's greedy pick is the same argmax */
    gf_sample_result g;
    gf_sampler_greedy_pick(x, 4, &g);
    cr_assert(g.token == 1 && g.runner_up == 3 && g.margin == 0.75);
}

static gf_cmp make(gf_cmp_mode mode, double atol)
{
    gf_cmp c;
    gf_gate g = gf_gate_default();
    gf_cmp_init(&c, &g, GF_COMPUTE_F32, mode, atol);
    return c;
}

Test(cmp, agreeing_steps_pass_with_metrics)
{
    gf_cmp c = make(GF_CMP_TEACHER_FORCED, 1e-4);
    gf_cmp_step(&c, 0, 1e-6, 7, 7, 0.5, 10.0);
    gf_cmp_step(&c, 1, 3e-6, 8, 8, 0.02, 10.0);
    gf_cmp_step(&c, 2, 2e-6, 9, 9, 5e-5, 10.0); /* a near tie, tokens agree */
    char why[256];
    cr_assert_eq(gf_cmp_verdict(&c, why, sizeof why), GF_V_PASS);
    cr_assert_eq(c.steps, 3);
    cr_assert_eq(c.max_delta, 3e-6);
    cr_assert_eq(c.max_delta_step, 1);
    cr_assert_eq(c.min_margin, 5e-5);
    cr_assert_eq(c.min_margin_step, 2);
    cr_assert_eq(c.near_ties, 1);
    cr_assert_float_eq(gf_cmp_safety_factor(&c), 5e-5 / 3e-6, 1e-12);
}

Test(cmp, mismatch_below_gate_is_a_near_tie)
{
    gf_cmp c = make(GF_CMP_TEACHER_FORCED, 1e-4);
    gf_cmp_step(&c, 0, 1e-6, 7, 7, 0.5, 10.0);
    gf_cmp_step(&c, 1, 2e-5, 8, 3, 4e-5, 10.0);
    char why[256];
    cr_assert_eq(gf_cmp_verdict(&c, why, sizeof why), GF_V_PASS_NEAR_TIE);
    cr_assert(strstr(why, "near tie"), "%s", why);
    cr_assert_eq(c.first_divergence, 1);
    cr_assert_eq(c.divergence_margin, 4e-5);
    cr_assert_eq(c.excused, 1);
}

Test(cmp, mismatch_above_gate_fails_and_names_the_step)
{
    gf_cmp c = make(GF_CMP_TEACHER_FORCED, NAN);
    cr_assert_eq(gf_cmp_step(&c, 0, 1e-6, 7, 7, 0.5, 10.0), 0);
    cr_assert_eq(gf_cmp_step(&c, 1, 1e-6, 8, 3, 0.019, 10.0), 1); /* the failing step */
    cr_assert_eq(gf_cmp_step(&c, 2, 1e-6, 5, 4, 0.3, 10.0), 0);   /* later failures are counted, not re-reported */
    char why[256];
    cr_assert_eq(gf_cmp_verdict(&c, why, sizeof why), GF_V_FAIL);
    cr_assert(strstr(why, "step 1"), "%s", why);
    cr_assert_eq(c.first_failing, 1);
    cr_assert_eq(c.mismatches, 2);
}

Test(cmp, teacher_forced_gates_every_step)
{
    /* an excused near tie first, then a real mismatch: teacher-forced still fails */
    gf_cmp c = make(GF_CMP_TEACHER_FORCED, NAN);
    gf_cmp_step(&c, 0, 1e-6, 8, 3, 1e-5, 10.0);
    gf_cmp_step(&c, 1, 1e-6, 4, 6, 0.2, 10.0);
    cr_assert_eq(gf_cmp_verdict(&c, NULL, 0), GF_V_FAIL);
    cr_assert_eq(c.first_unexcused, 1);
}

Test(cmp, free_running_stops_at_the_first_divergence)
{
    gf_cmp c = make(GF_CMP_FREE_RUNNING, 1e-4);
    gf_cmp_step(&c, 0, 1e-6, 8, 8, 0.5, 10.0);
    gf_cmp_step(&c, 1, 1e-6, 8, 3, 1e-5, 10.0); /* near tie: excused, comparison stops */
    cr_assert(gf_cmp_stopped(&c));
    gf_cmp_step(&c, 2, 5.0, 1, 2, 3.0, 10.0); /* different prefixes: not compared */
    gf_cmp_step(&c, 3, 5.0, 1, 2, 3.0, 10.0);
    cr_assert_eq(gf_cmp_verdict(&c, NULL, 0), GF_V_PASS_NEAR_TIE);
    cr_assert_eq(c.steps, 2);
    cr_assert_eq(c.ignored, 2);
    cr_assert_eq(c.max_delta, 1e-6);
}

Test(cmp, free_running_unexcused_divergence_fails)
{
    gf_cmp c = make(GF_CMP_FREE_RUNNING, NAN);
    gf_cmp_step(&c, 0, 1e-6, 8, 3, 0.02, 10.0);
    cr_assert_eq(gf_cmp_verdict(&c, NULL, 0), GF_V_FAIL);
}

Test(cmp, atol_and_nonfinite)
{
    gf_cmp c = make(GF_CMP_TEACHER_FORCED, 1e-4);
    gf_cmp_step(&c, 0, 1e-6, 8, 8, 0.5, 10.0);
    cr_assert_eq(gf_cmp_step(&c, 1, 2e-4, 8, 8, 0.5, 10.0), 1);
    char why[256];
    cr_assert_eq(gf_cmp_verdict(&c, why, sizeof why), GF_V_FAIL);
    cr_assert(strstr(why, "atol"), "%s", why);
    gf_cmp d = make(GF_CMP_TEACHER_FORCED, NAN);
    gf_cmp_step(&d, 0, INFINITY, 8, 8, 0.5, 10.0);
    cr_assert_eq(gf_cmp_verdict(&d, why, sizeof why), GF_V_FAIL);
    cr_assert(strstr(why, "non-finite"), "%s", why);
}

Test(cmp, gate_uses_the_dtype_ulp)
{
    /* fp16 backend, top-1 logit 10: threshold 4 * 2^-7 = 0.03125; margin 0.02 is excused */
    gf_cmp c;
    gf_gate g = gf_gate_default();
    gf_cmp_init(&c, &g, GF_COMPUTE_F16, GF_CMP_TEACHER_FORCED, NAN);
    gf_cmp_step(&c, 0, 0.01, 1, 2, 0.02, 10.0);
    cr_assert_eq(gf_cmp_verdict(&c, NULL, 0), GF_V_PASS_NEAR_TIE);
    gf_cmp_init(&c, &g, GF_COMPUTE_F32, GF_CMP_TEACHER_FORCED, NAN);
    gf_cmp_step(&c, 0, 0.01, 1, 2, 0.02, 10.0);
    cr_assert_eq(gf_cmp_verdict(&c, NULL, 0), GF_V_FAIL);
}

Test(cmp, logits_rows_and_merge)
{
    float ref[4] = {1.0f, 3.0f, 2.0f, 0.0f}, test[4] = {1.0f, 3.00001f, 2.0f, 0.0f};
    gf_cmp a = make(GF_CMP_FREE_RUNNING, 1e-4), b = make(GF_CMP_FREE_RUNNING, 1e-4);
    gf_cmp_logits(&a, 0, ref, test, 4);
    cr_assert_float_eq(a.max_delta, 1e-5, 1e-6);
    cr_assert_eq(a.min_margin, 1.0);
    gf_cmp_step(&b, 0, 0.5, 1, 1, 0.25, 3.0);
    gf_cmp_merge(&a, &b);
    cr_assert_eq(a.steps, 2);
    cr_assert_eq(a.max_delta, 0.5);
    cr_assert_eq(a.min_margin, 0.25);
    cr_assert_eq(gf_cmp_verdict(&a, NULL, 0), GF_V_FAIL); /* b exceeded atol */
}

Test(cmp, safety_factor_of_identical_sides_is_infinite)
{
    gf_cmp c = make(GF_CMP_TEACHER_FORCED, 1e-4);
    gf_cmp_step(&c, 0, 0.0, 1, 1, 0.019, 10.0);
    cr_assert(isinf(gf_cmp_safety_factor(&c)));
    json_t *j = gf_cmp_json(&c);
    cr_assert(json_is_null(json_object_get(j, "safety_factor")));
    cr_assert(json_is_string(json_object_get(j, "safety_factor_reason")));
    cr_assert(json_is_number(json_object_get(j, "min_margin")));
    json_decref(j);
}

Test(verdicts, exit_status_and_names)
{
    cr_assert_eq(gf_verdict_exit(GF_V_PASS, 0), 0);
    cr_assert_eq(gf_verdict_exit(GF_V_PASS_NEAR_TIE, 0), 0);
    cr_assert_eq(gf_verdict_exit(GF_V_SKIP, 0), 0);
    cr_assert_eq(gf_verdict_exit(GF_V_SKIP, 1), 1);
    cr_assert_eq(gf_verdict_exit(GF_V_FAIL, 0), 1);
    cr_assert_eq(gf_verdict_exit(GF_V_CRASH, 0), 1);
    cr_assert_eq(gf_verdict_exit(GF_V_TIMEOUT, 0), 1);
    cr_assert_eq(gf_verdict_exit(GF_V_ERROR, 0), 2);
    cr_assert_eq(gf_exit_combine(1, 2), 2);
    cr_assert_eq(gf_exit_combine(2, 1), 2);
    cr_assert_eq(gf_exit_combine(0, 1), 1);
    cr_assert_eq(gf_exit_combine(0, 0), 0);
    for (int v = 0; v < GF_V_COUNT; v++) {
        gf_verdict back;
        cr_assert(gf_verdict_parse(gf_verdict_str((gf_verdict)v), &back));
        cr_assert_eq(back, (gf_verdict)v);
    }
    cr_assert_str_eq(gf_verdict_str(GF_V_PASS_NEAR_TIE), "pass-near-tie");
    cr_assert_eq(gf_verdict_worse(GF_V_FAIL, GF_V_ERROR), GF_V_ERROR);
    cr_assert_eq(gf_verdict_worse(GF_V_PASS_NEAR_TIE, GF_V_PASS), GF_V_PASS_NEAR_TIE);
}

/* known / fixed: given by a baseline only; fixed exits 0 once allowed (a sticky
 * process setting: Criterion runs each test in its own process) */
Test(verdicts, baseline_known_and_fixed)
{
    cr_assert_eq(gf_verdict_exit(GF_V_KNOWN, 0), 0);
    cr_assert_eq(gf_verdict_exit(GF_V_FIXED, 0), 1);
    cr_assert_eq(gf_verdict_junit(GF_V_KNOWN, 0), GF_JUNIT_SKIPPED);
    cr_assert_eq(gf_verdict_junit(GF_V_FIXED, 0), GF_JUNIT_FAILURE);
    cr_assert(gf_verdict_skipped(GF_V_KNOWN, 0) && !gf_verdict_passed(GF_V_KNOWN));
    cr_assert(!gf_verdict_passed(GF_V_FIXED) && !gf_verdict_skipped(GF_V_FIXED, 0));
    cr_assert(gf_verdict_of_baseline(GF_V_KNOWN) && gf_verdict_of_baseline(GF_V_FIXED));
    cr_assert(!gf_verdict_of_baseline(GF_V_FAIL) && !gf_verdict_of_baseline(GF_V_PASS));
    cr_assert_eq(gf_verdict_worse(GF_V_KNOWN, GF_V_FAIL), GF_V_FAIL);
    gf_verdict_allow_fixed(1);
    cr_assert_eq(gf_verdict_exit(GF_V_FIXED, 0), 0);
    cr_assert_eq(gf_verdict_junit(GF_V_FIXED, 0), GF_JUNIT_NONE);
    cr_assert(gf_verdict_passed(GF_V_FIXED));
    cr_assert_eq(gf_verdict_exit(GF_V_FAIL, 0), 1);
}

Test(json, non_finite_numbers_become_null_with_a_reason)
{
    json_t *o = json_object();
    gf_json_set_number(o, "a", 1.5, NULL);
    gf_json_set_number(o, "b", INFINITY, NULL);
    gf_json_set_number(o, "c", NAN, "no steps");
    cr_assert_eq(json_real_value(json_object_get(o, "a")), 1.5);
    cr_assert(json_is_null(json_object_get(o, "b")));
    cr_assert_str_eq(json_string_value(json_object_get(o, "b_reason")), "+inf");
    cr_assert_str_eq(json_string_value(json_object_get(o, "c_reason")), "no steps");
    char *s = json_dumps(o, 0);
    cr_assert(s != NULL);
    free(s);
    json_decref(o);
}

/* TF32: fp16's 11 significant bits, fp32's exponent range; a case's atol
 * scales by ULP(dtype) / ULP(fp32), never below 1 (issue 11). */
Test(compare, tf32_and_atol_scale)
{
    cr_assert_str_eq(gf_dtype_str(GF_COMPUTE_TF32), "tf32");
    cr_assert_eq(gf_ulp_at(1.0, GF_COMPUTE_TF32), ldexp(1.0, -10));
    cr_assert_eq(gf_ulp_at(1.0, GF_COMPUTE_TF32), gf_ulp_at(1.0, GF_COMPUTE_F16));
    cr_assert_eq(gf_ulp_at(ldexp(1.0, -20), GF_COMPUTE_F16), ldexp(1.0, -24));  /* fp16: subnormal spacing */
    cr_assert_eq(gf_ulp_at(ldexp(1.0, -20), GF_COMPUTE_TF32), ldexp(1.0, -30)); /* tf32: still normal */
    cr_assert_eq(gf_dtype_atol_scale(GF_COMPUTE_F32), 1.0);
    cr_assert_eq(gf_dtype_atol_scale(GF_COMPUTE_F64), 1.0);
    cr_assert_eq(gf_dtype_atol_scale(GF_COMPUTE_F16), 8192.0);
    cr_assert_eq(gf_dtype_atol_scale(GF_COMPUTE_TF32), 8192.0);
    cr_assert_eq(gf_dtype_atol_scale(GF_COMPUTE_BF16), 65536.0);
    gf_cmp c;
    gf_cmp_init(&c, NULL, GF_COMPUTE_BF16, GF_CMP_TEACHER_FORCED, 1e-4);
    cr_assert_float_eq(c.atol, 1e-4 * 65536.0, 1e-12);
    cr_assert_eq(c.atol_case, 1e-4);
    gf_cmp_init(&c, NULL, GF_COMPUTE_F32, GF_CMP_TEACHER_FORCED, 1e-4);
    cr_assert_eq(c.atol, 1e-4);
}
