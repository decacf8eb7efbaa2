/* The host forward's vectorised activations (backends/host_forward/gfv_act.h)
 * against the functions in double precision: the error bound its header
 * states, over the floats a forward feeds them, and the special values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../backends/host_forward/gfv_act.h"

/* u is rounded to float as the kernel (and libm's route, 0.5 v (1 +
 * tanhf(u)), which computes the same u) round it: near v = -9 that rounding
 * alone moves e^(2u) by ~150 ulp, for either route. The bound is on what
 * follows u. 0.5 v (1 + tanh u) in double would itself cancel below v = -6
 * (1 + tanh u under double's epsilon); the same function without it: */
static double gelu_d(float v)
{
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return (double)v / (1.0 + exp(-2.0 * (double)u));
}
static double silu_d(float v) { return (double)v / (1.0 + exp(-(double)v)); }

/* |got - want| in units of the last place of want as a float */
static double ulps(float got, double want)
{
    const float w = (float)fabs(want);
    const double ulp = (double)nextafterf(w, INFINITY) - (double)w;
    return fabs((double)got - want) / ulp;
}

typedef struct worst {
    double ulp, abs_tiny;
    float at_ulp, at_tiny;
} worst;

static void judge(worst *w, float v, float got, double want)
{
    if (fabs(want) >= GFV_ACT_TINY) {
        const double e = ulps(got, want);
        if (!(e <= w->ulp)) {
            w->ulp = e;
            w->at_ulp = v;
        }
    } else if (!(fabs((double)got - want) <= w->abs_tiny)) {
        w->abs_tiny = fabs((double)got - want);
        w->at_tiny = v;
    }
}

/* every `step`-th float from lo up to hi (bit patterns, both signs) */
static void sweep(float lo, float hi, uint32_t step, worst *g, worst *s)
{
    for (float v = lo; v <= hi;) {
        judge(g, v, gfv_gelu_tanh(v), gelu_d(v));
        judge(s, v, gfv_silu(v), silu_d(v));
        uint32_t b;
        memcpy(&b, &v, sizeof b);
        float next;
        if (v < 0) { /* toward zero: the magnitude's bits go down */
            b = b > 0x80000000u + step ? b - step : 0u;
            memcpy(&next, &b, sizeof next);
        } else {
            b = v == 0 ? 1u : b + step;
            memcpy(&next, &b, sizeof next);
        }
        if (!(next > v))
            break;
        v = next;
    }
}

Test(gfv_act, gelu_and_silu_within_the_stated_bound)
{
    worst g = {0}, s = {0};
    sweep(-30.0f, 30.0f, 509, &g, &s);      /* the floats a layer's activation meets, 1 in 509 */
    sweep(-1e30f, 1e30f, 1u << 14, &g, &s); /* the rest of the range, coarser */
    cr_log_info("gelu_tanh: worst %.3f ulp at %.9g, %.3g absolute below %.0e at %.9g", g.ulp, (double)g.at_ulp,
                g.abs_tiny, GFV_ACT_TINY, (double)g.at_tiny);
    cr_log_info("silu: worst %.3f ulp at %.9g, %.3g absolute below %.0e at %.9g", s.ulp, (double)s.at_ulp, s.abs_tiny,
                GFV_ACT_TINY, (double)s.at_tiny);
    cr_expect(g.ulp <= GFV_ACT_MAX_ULP, "gelu_tanh: %.3f ulp at %.9g, bound %d", g.ulp, (double)g.at_ulp,
              GFV_ACT_MAX_ULP);
    cr_expect(s.ulp <= GFV_ACT_MAX_ULP, "silu: %.3f ulp at %.9g, bound %d", s.ulp, (double)s.at_ulp, GFV_ACT_MAX_ULP);
    cr_expect(g.abs_tiny <= GFV_ACT_TINY, "gelu_tanh: %.3g absolute at %.9g", g.abs_tiny, (double)g.at_tiny);
    cr_expect(s.abs_tiny <= GFV_ACT_TINY, "silu: %.3g absolute at %.9g", s.abs_tiny, (double)s.at_tiny);
}

Test(gfv_act, exp_within_two_ulp_on_its_range)
{
    double worst = 0;
    float at = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.000731f) {
        const double e = ulps(gfv_expf(x), exp((double)x));
        if (e > worst) {
            worst = e;
            at = x;
        }
    }
    cr_expect(worst <= 2.0, "gfv_expf: %.3f ulp at %.9g", worst, (double)at);
}

Test(gfv_act, special_values)
{
    cr_expect(isnan(gfv_gelu_tanh(NAN)) && isnan(gfv_silu(NAN)), "NaN in, NaN out");
    cr_expect(gfv_gelu_tanh(INFINITY) == INFINITY && gfv_silu(INFINITY) == INFINITY);
    cr_expect(gfv_gelu_tanh(0.0f) == 0.0f && gfv_silu(0.0f) == 0.0f);
    cr_expect(gfv_gelu_tanh(1e-30f) == 5e-31f, "tiny v: v/2 (%.9g)", (double)gfv_gelu_tanh(1e-30f));
    cr_expect(gfv_gelu_tanh(-200.0f) <= 0.0f && gfv_gelu_tanh(-200.0f) > -GFV_ACT_TINY);
}
