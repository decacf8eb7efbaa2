/* The host forward's elementwise activations (gfv.c), written so that the
 * compiler vectorises their loops without -ffast-math (gfv.c is built with
 * -fno-trapping-math only, which changes no value): no libm call inside
 * (libm's tanhf / expf are scalar calls, a third of the tiny model's decode
 * instructions under callgrind), one exponential of our own.
 *
 *   gfv_expf(x)      e^x, 0 below -87, x clamped to 88 (NaN stays NaN):
 *                    x = k ln2 + r, |r| <= ln2/2 (Cody-Waite, ln2 in two
 *                    parts), e^r by its Taylor polynomial to degree 7
 *                    (truncation below 6e-9 relative), times 2^k built from
 *                    the exponent bits.
 *   gelu_tanh(v)     0.5 v (1 + tanh(u)), u = sqrt(2/pi) (v + 0.044715 v^3),
 *                    computed as v sigmoid(2u): the same function
 *                    (1 + tanh u = 2 / (1 + e^(-2u))), with no cancellation
 *                    where 1 + tanh u is near 0 (v very negative), so the
 *                    error is relative everywhere.
 *   silu(v)          v sigmoid(v).
 *
 * The error bound (after u, which is rounded to float as libm's route
 * rounds it), checked against the functions in double precision over
 * the floats an activation meets (tests/unit/test_gfv_act.c: [-30, 30] at
 * every 509th float, and a coarser sweep of the whole finite range): at most
 * GFV_ACT_MAX_ULP ulp of the true value where that is at least
 * GFV_ACT_TINY, at most GFV_ACT_TINY absolute below it (where e^x flushes to 0:
 * GELU of v below about -10, SiLU below -87). libm's
 * route, 0.5 v (1 + tanhf(u)), loses everything where 1 + tanh u cancels
 * (190 ulp at v = -3, 1.7e7 ulp at v = -7.5, measured against the same
 * reference); its absolute error is about as small as ours.
 * Either is orders of magnitude inside the 1e-4 logit gate. */
#ifndef GENFENCE_GFV_ACT_H
#define GENFENCE_GFV_ACT_H

#include <math.h> /* fabsf: a bit mask, no call */
#include <stdint.h>
#include <string.h>

#define GFV_ACT_MAX_ULP 4
#define GFV_ACT_TINY    1e-30

/* e^x: 0 below -87 (true value under 1.7e-38), x clamped to 88 above */
static inline float gfv_expf(float x)
{
    const int under = x < -87.0f; /* NaN: no, and stays NaN below */
    x = under ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    /* k = round(x / ln2) by the 1.5 * 2^23 shift: t's low mantissa bits
     * hold k (no float-to-int conversion, which keeps the loop from
     * vectorising under the default -ftrapping-math) */
    const float shift = 12582912.0f;
    const float t = x * 1.44269504088896341f + shift;
    const float kf = t - shift;
    uint32_t tb; /* unsigned: a NaN's bits wrap instead of overflowing */
    memcpy(&tb, &t, sizeof tb);
    float r = x - kf * 0.693145751953125f;   /* ln2's high part: 16 bits, kf * it is exact */
    r = r - kf * 1.42860682030941723212e-6f; /* ln2 - the high part */
    float p = 1.0f / 5040.0f;                /* e^r, Taylor to degree 7 */
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^k: k = tb - bits(shift), in [-126, 127] for any number; for a
     * NaN the bits are garbage and p is NaN already */
    const uint32_t bits = (tb - 0x4B400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return under ? 0.0f : p * scale;
}

/* the logistic 1 / (1 + e^-z) from e = e^-|z| <= 1: 1 / (1 + e) for z >= 0,
 * e / (1 + e) below, so neither side overflows or cancels */
static inline float gfv_sigmoid(float z)
{
    const float e = gfv_expf(-fabsf(z));
    return (z >= 0.0f ? 1.0f : e) / (1.0f + e);
}

static inline float gfv_gelu_tanh(float v)
{
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return v * gfv_sigmoid(2.0f * u); /* 0.5 v (1 + tanh u) */
}

static inline float gfv_silu(float v) { return v * gfv_sigmoid(v); }

#endif
