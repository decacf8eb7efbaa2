/* The sampler (include/genfence/sampler.h, docs/sampler.md): the seed's fences
 * (top-p kept sets, temperature limits), argument errors, greedy ties and
 * margins, the race, reproducibility and goodness of fit. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/sampler.h"

static const double PROBS5[5] = {0.5, 0.3, 0.1, 0.06, 0.04};

static void probs_to_logits(const double *p, int n, float *out)
{
    for (int i = 0; i < n; i++)
        out[i] = (float)log(p[i]);
}

static gf_sampler_params sampled(double temperature)
{
    gf_sampler_params p = gf_sampler_greedy();
    p.temperature = temperature;
    p.seed = 35;
    return p;
}

static gf_sampler_params with_top_p(double temperature, double top_p)
{
    gf_sampler_params p = sampled(temperature);
    p.use_top_p = 1;
    p.top_p = top_p;
    return p;
}

static gf_sampler_params with_top_k(double temperature, int32_t k)
{
    gf_sampler_params p = sampled(temperature);
    p.use_top_k = 1;
    p.top_k = k;
    return p;
}

/* The finite entries of gf_sampler_filter's output, as an index list; returns the count. */
static int kept_set(const float *logits, int V, const gf_sampler_params *p, int *idx)
{
    double *z = malloc((size_t)V * sizeof *z);
    cr_assert_not_null(z);
    gf_status st = gf_sampler_filter(logits, V, p, z);
    cr_assert(st == GF_OK, "filter: %s", gf_error_msg());
    int n = 0;
    for (int i = 0; i < V; i++) {
        cr_assert(!isnan(z[i]) && z[i] != INFINITY, "z[%d] = %g", i, z[i]);
        if (z[i] != -INFINITY)
            idx[n++] = i;
    }
    free(z);
    return n;
}

static void assert_kept(const float *logits, int V, const gf_sampler_params *p, const int *want, int nwant,
                        const char *what)
{
    int got[64];
    cr_assert(V <= 64);
    int n = kept_set(logits, V, p, got);
    cr_assert(n == nwant, "%s: kept %d tokens, want %d", what, n, nwant);
    for (int i = 0; i < n; i++)
        cr_assert(got[i] == want[i], "%s: kept[%d] = %d, want %d", what, i, got[i], want[i]);
    /* gf_sample agrees on the count */
    gf_sample_result r;
    cr_assert(gf_sample(logits, V, p, 0, 0, &r) == GF_OK, "%s", gf_error_msg());
    if (p->temperature != 0.0)
        cr_assert(r.kept == nwant, "%s: gf_sample kept %d, want %d", what, r.kept, nwant);
}

/* ---- fence 1: the top-p kept set ---- */

Test(top_p, kept_sets_and_renormalisation)
{
    float logits[5];
    probs_to_logits(PROBS5, 5, logits);
    const double ps[3] = {0.45, 0.85, 1.0};
    const int keep[3][5] = {{0}, {0, 1, 2}, {0, 1, 2, 3, 4}};
    const int nkeep[3] = {1, 3, 5};
    for (int c = 0; c < 3; c++) {
        gf_sampler_params p = with_top_p(1.0, ps[c]);
        assert_kept(logits, 5, &p, keep[c], nkeep[c], "top-p");
        double pr[5];
        cr_assert(gf_sampler_probs(logits, 5, &p, pr) == GF_OK, "%s", gf_error_msg());
        double total = 0.0, ref = 0.0;
        for (int i = 0; i < 5; i++)
            total += pr[i];
        cr_assert(fabs(total - 1.0) <= 1e-6, "p=%g: renormalised sum %.9g", ps[c], total);
        for (int j = 0; j < nkeep[c]; j++)
            ref += PROBS5[keep[c][j]];
        for (int j = 0; j < nkeep[c]; j++) {
            int i = keep[c][j];
            cr_assert(fabs(pr[i] - PROBS5[i] / ref) <= 1e-6, "p=%g: prob[%d] %.9g want %.9g", ps[c], i, pr[i],
                      PROBS5[i] / ref);
        }
        for (int i = nkeep[c]; i < 5; i++)
            cr_assert(pr[i] == 0.0, "p=%g: dropped token %d has prob %g", ps[c], i, pr[i]);
    }
}

Test(top_p, order_does_not_matter)
{
    float logits[5], shuffled[5];
    probs_to_logits(PROBS5, 5, logits);
    const int perm[5] = {3, 0, 4, 2, 1};
    for (int i = 0; i < 5; i++)
        shuffled[i] = logits[perm[i]];
    gf_sampler_params p = with_top_p(1.0, 0.85);
    const int want[3] = {1, 3, 4};
    assert_kept(shuffled, 5, &p, want, 3, "shuffled top-p");
}

Test(top_p, always_keeps_the_top_token)
{
    float logits[5];
    probs_to_logits(PROBS5, 5, logits);
    gf_sampler_params p = with_top_p(1.0, 1e-12);
    const int want[1] = {0};
    assert_kept(logits, 5, &p, want, 1, "tiny p");
}

Test(top_p, equal_logits_break_by_index)
{
    /* four equal logits: 0.25 each; p = 0.3 keeps the first two by index
     * (mass before the 2nd is 0.25 < 0.3, before the 3rd 0.5 >= 0.3). */
    const float logits[6] = {-INFINITY, 1.0f, 1.0f, -INFINITY, 1.0f, 1.0f};
    gf_sampler_params p = with_top_p(1.0, 0.3);
    const int want[2] = {1, 2};
    assert_kept(logits, 6, &p, want, 2, "ties");
}

Test(top_p, temperature_applies_first)
{
    /* At T = 0.5 the probabilities become p^2 / sum: [0.704, 0.253, ...], so
     * p = 0.85 keeps only {0, 1} (it keeps {0, 1, 2} at T = 1). */
    float logits[5];
    probs_to_logits(PROBS5, 5, logits);
    gf_sampler_params p = with_top_p(0.5, 0.85);
    const int want[2] = {0, 1};
    assert_kept(logits, 5, &p, want, 2, "T=0.5 top-p");
}

Test(top_p, after_top_k)
{
    /* top-k 3 renormalises to [5/9, 3/9, 1/9]; the mass before token 2 is then
     * 0.889 >= 0.85, so top-p drops it (without top-k it would stay). */
    float logits[5];
    probs_to_logits(PROBS5, 5, logits);
    gf_sampler_params p = with_top_p(1.0, 0.85);
    p.use_top_k = 1;
    p.top_k = 3;
    const int want[2] = {0, 1};
    assert_kept(logits, 5, &p, want, 2, "top-k 3 then top-p 0.85");
}

/* ---- top-k ---- */

Test(top_k, kept_sets)
{
    const float logits[5] = {0.1f, 2.0f, 0.5f, 1.0f, -1.0f};
    gf_sampler_params p = with_top_k(1.0, 1);
    const int w1[1] = {1}, w2[2] = {1, 3}, w5[5] = {0, 1, 2, 3, 4};
    assert_kept(logits, 5, &p, w1, 1, "k=1");
    p.top_k = 2;
    assert_kept(logits, 5, &p, w2, 2, "k=2");
    p.top_k = 5;
    assert_kept(logits, 5, &p, w5, 5, "k=5");
    p.top_k = 7; /* clamps to V */
    assert_kept(logits, 5, &p, w5, 5, "k=7");
    p.top_k = INT32_MAX;
    assert_kept(logits, 5, &p, w5, 5, "k=INT32_MAX");
}

Test(top_k, ties_with_the_kth_are_kept)
{
    const float logits[6] = {1.0f, 2.0f, 2.0f, 0.0f, 2.0f, -1.0f};
    gf_sampler_params p = with_top_k(1.0, 2);
    const int w2[3] = {1, 2, 4}, w4[4] = {0, 1, 2, 4};
    assert_kept(logits, 6, &p, w2, 3, "k=2 with a three-way tie");
    p.top_k = 1;
    assert_kept(logits, 6, &p, w2, 3, "k=1 with a three-way tie at the top");
    p.top_k = 4;
    assert_kept(logits, 6, &p, w4, 4, "k=4");
}

Test(top_k, minus_inf_counts_but_stays_dropped)
{
    const float logits[4] = {0.0f, -INFINITY, 1.0f, -INFINITY};
    gf_sampler_params p = with_top_k(1.0, 3);
    const int w[2] = {0, 2};
    assert_kept(logits, 4, &p, w, 2, "k=3 over two finite");
}

Test(top_k, one_is_argmax_at_any_temperature)
{
    float logits[40];
    double u[40];
    gf_rng_uniforms(9, 0, 0, 40, u);
    for (int i = 0; i < 40; i++)
        logits[i] = (float)(4.0 * u[i]);
    int arg = 0;
    for (int i = 1; i < 40; i++)
        if (logits[i] > logits[arg])
            arg = i;
    const double temps[] = {0.0, 1e-3, 0.7, 1.0, 5.0, 1e3};
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++)
        for (uint64_t step = 0; step < 16; step++) {
            gf_sampler_params p = with_top_k(temps[t], 1);
            gf_sample_result r;
            cr_assert(gf_sample(logits, 40, &p, 1, step, &r) == GF_OK, "%s", gf_error_msg());
            cr_assert(r.token == arg, "T=%g step %llu: token %d, argmax %d", temps[t], (unsigned long long)step,
                      r.token, arg);
            if (temps[t] != 0.0) {
                cr_assert(r.kept == 1 && r.runner_up == -1 && r.margin == INFINITY);
            }
        }
}

/* ---- fence 2: temperature limits ---- */

/* 3 rows x 512 normal-ish logits * 3 (Box-Muller over our own uniforms), plus
 * 1 on each row's argmax: a clear winner. */
static void fence2_logits(float rows[3][512], int arg[3])
{
    double u[1024];
    for (int r = 0; r < 3; r++) {
        gf_rng_uniforms(35, (uint64_t)r, 0, 1024, u);
        for (int i = 0; i < 512; i++) {
            double n = sqrt(-2.0 * log(u[2 * i])) * cos(2.0 * M_PI * u[2 * i + 1]);
            rows[r][i] = (float)(3.0 * n);
        }
        arg[r] = 0;
        for (int i = 1; i < 512; i++)
            if (rows[r][i] > rows[r][arg[r]])
                arg[r] = i;
        rows[r][arg[r]] += 1.0f;
    }
}

Test(temperature, limits)
{
    float rows[3][512];
    int arg[3];
    fence2_logits(rows, arg);
    double pr[512];
    for (int r = 0; r < 3; r++) {
        gf_sampler_params cold = sampled(1e-3), hot = sampled(1e3);
        cr_assert(gf_sampler_probs(rows[r], 512, &cold, pr) == GF_OK, "%s", gf_error_msg());
        double mx = 0.0;
        for (int i = 0; i < 512; i++)
            mx = pr[i] > mx ? pr[i] : mx;
        cr_assert(mx > 0.999, "row %d: cold max prob %.6f", r, mx);
        cr_assert(pr[arg[r]] == mx);

        cr_assert(gf_sampler_probs(rows[r], 512, &hot, pr) == GF_OK, "%s", gf_error_msg());
        double lo = 1.0, hi = 0.0;
        for (int i = 0; i < 512; i++) {
            lo = pr[i] < lo ? pr[i] : lo;
            hi = pr[i] > hi ? pr[i] : hi;
        }
        cr_assert(hi - lo < 1e-2, "row %d: hot spread %g", r, hi - lo);

        gf_sampler_params greedy = gf_sampler_greedy();
        gf_sample_result g, c;
        cr_assert(gf_sample(rows[r], 512, &greedy, (uint64_t)r, 0, &g) == GF_OK);
        cr_assert(g.token == arg[r], "row %d: greedy %d, argmax %d", r, g.token, arg[r]);
        cr_assert(g.kept == 512);
        for (uint64_t step = 0; step < 8; step++) {
            cr_assert(gf_sample(rows[r], 512, &cold, (uint64_t)r, step, &c) == GF_OK);
            cr_assert(c.token == g.token, "row %d step %llu: cold sample %d, greedy %d", r, (unsigned long long)step,
                      c.token, g.token);
        }
    }
}

Test(temperature, zero_is_argmax_first_on_ties)
{
    const float logits[5] = {1.0f, 3.0f, 2.5f, 3.0f, -INFINITY};
    gf_sampler_params p = gf_sampler_greedy();
    gf_sample_result r;
    cr_assert(gf_sample(logits, 5, &p, 0, 0, &r) == GF_OK);
    cr_assert(r.token == 1 && r.runner_up == 3 && r.margin == 0.0, "token %d runner-up %d margin %g", r.token,
              r.runner_up, r.margin);
    cr_assert(r.kept == 5);
    /* filter and probs: only the argmax, one-hot */
    double z[5], pr[5];
    cr_assert(gf_sampler_filter(logits, 5, &p, z) == GF_OK);
    cr_assert(gf_sampler_probs(logits, 5, &p, pr) == GF_OK);
    for (int i = 0; i < 5; i++) {
        cr_assert(i == 1 ? z[i] == 3.0 : z[i] == -INFINITY, "z[%d] = %g", i, z[i]);
        cr_assert(pr[i] == (i == 1 ? 1.0 : 0.0), "probs[%d] = %g", i, pr[i]);
    }
    /* the seed plays no part */
    p.seed = 99;
    gf_sample_result r2;
    cr_assert(gf_sample(logits, 5, &p, 4, 17, &r2) == GF_OK);
    cr_assert(r2.token == 1);
}

Test(temperature, greedy_margin_in_double)
{
    const float logits[4] = {0.1f, 0.3f, -2.0f, 0.2999f};
    gf_sampler_params p = gf_sampler_greedy();
    gf_sample_result r;
    cr_assert(gf_sample(logits, 4, &p, 0, 0, &r) == GF_OK);
    cr_assert(r.token == 1 && r.runner_up == 3);
    cr_assert(r.margin == (double)0.3f - (double)0.2999f, "margin %.17g", r.margin);

    const float one[3] = {-INFINITY, 2.0f, -INFINITY};
    cr_assert(gf_sample(one, 3, &p, 0, 0, &r) == GF_OK);
    cr_assert(r.token == 1 && r.runner_up == -1 && r.margin == INFINITY);
    cr_assert(gf_sample(one + 1, 1, &p, 0, 0, &r) == GF_OK);
    cr_assert(r.token == 0 && r.runner_up == -1 && r.margin == INFINITY);

    /* runner-up is the lowest index of the second value, even before the top */
    const float later[4] = {1.0f, 0.0f, 1.0f, 5.0f};
    cr_assert(gf_sample(later, 4, &p, 0, 0, &r) == GF_OK);
    cr_assert(r.token == 3 && r.runner_up == 0 && r.margin == 4.0);
}

/* ---- argument errors ---- */

static void expect_invalid(const gf_sampler_params *p, const char *param, const char *value)
{
    const float logits[3] = {0.0f, 1.0f, 2.0f};
    gf_sample_result r;
    double z[3];
    gf_error_clear();
    cr_assert(gf_sampler_validate(p) == GF_E_INVALID_ARG, "%s %s accepted", param, value);
    cr_assert(strstr(gf_error_msg(), param) != NULL, "message '%s' lacks '%s'", gf_error_msg(), param);
    cr_assert(strstr(gf_error_msg(), value) != NULL, "message '%s' lacks '%s'", gf_error_msg(), value);
    gf_error_clear();
    cr_assert(gf_sample(logits, 3, p, 0, 0, &r) == GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), param) != NULL, "gf_sample message '%s'", gf_error_msg());
    gf_error_clear();
    cr_assert(gf_sampler_filter(logits, 3, p, z) == GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), param) != NULL);
    gf_error_clear();
    cr_assert(gf_sampler_probs(logits, 3, p, z) == GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), param) != NULL);
}

Test(errors, temperature)
{
    gf_sampler_params p = sampled(-1.0);
    expect_invalid(&p, "temperature", "-1");
    p.temperature = NAN;
    expect_invalid(&p, "temperature", "NaN");
    p.temperature = INFINITY;
    expect_invalid(&p, "temperature", "inf");
    p.temperature = -INFINITY;
    expect_invalid(&p, "temperature", "-inf");
    p.temperature = -1e-300;
    expect_invalid(&p, "temperature", "e-300");
}

Test(errors, top_p)
{
    const double temps[2] = {1.0, 0.0}; /* validated even when greedy */
    for (int t = 0; t < 2; t++) {
        gf_sampler_params p = with_top_p(temps[t], 0.0);
        expect_invalid(&p, "top_p", "0");
        p.top_p = 1.5;
        expect_invalid(&p, "top_p", "1.5");
        p.top_p = NAN;
        expect_invalid(&p, "top_p", "NaN");
        p.top_p = -0.2;
        expect_invalid(&p, "top_p", "-0.2");
        p.top_p = 1.0000000000000002;
        expect_invalid(&p, "top_p", "1.0000000000000002");
    }
    /* off: not checked */
    gf_sampler_params p = sampled(1.0);
    p.use_top_p = 0;
    p.top_p = 7.0;
    cr_assert(gf_sampler_validate(&p) == GF_OK);
}

Test(errors, top_k)
{
    const double temps[2] = {1.0, 0.0};
    for (int t = 0; t < 2; t++) {
        gf_sampler_params p = with_top_k(temps[t], 0);
        expect_invalid(&p, "top_k", "0");
        p.top_k = -3;
        expect_invalid(&p, "top_k", "-3");
        p.top_k = INT32_MIN;
        expect_invalid(&p, "top_k", "-2147483648");
    }
    gf_sampler_params p = sampled(1.0);
    p.use_top_k = 0;
    p.top_k = -3;
    cr_assert(gf_sampler_validate(&p) == GF_OK);
}

Test(errors, valid_edges_accepted)
{
    gf_sampler_params p = with_top_p(0.0, 1.0);
    p.use_top_k = 1;
    p.top_k = 1;
    cr_assert(gf_sampler_validate(&p) == GF_OK, "%s", gf_error_msg());
    p.temperature = 1e-300;
    p.top_p = 5e-324;
    cr_assert(gf_sampler_validate(&p) == GF_OK, "%s", gf_error_msg());
    gf_sampler_params g = gf_sampler_greedy();
    cr_assert(g.temperature == 0.0 && !g.use_top_k && !g.use_top_p && g.seed == 0);
    cr_assert(gf_sampler_validate(&g) == GF_OK);
    cr_assert(gf_sampler_validate(NULL) == GF_E_INVALID_ARG);
}

static void expect_bad_logits(const float *logits, int32_t V, const char *needle)
{
    const double temps[2] = {0.0, 1.0};
    for (int t = 0; t < 2; t++) {
        gf_sampler_params p = sampled(temps[t]);
        gf_sample_result r;
        double z[8];
        gf_error_clear();
        cr_assert(gf_sample(logits, V, &p, 0, 0, &r) == GF_E_INVALID_ARG, "%s accepted", needle);
        cr_assert(strstr(gf_error_msg(), needle) != NULL, "message '%s' lacks '%s'", gf_error_msg(), needle);
        gf_error_clear();
        cr_assert(gf_sampler_filter(logits, V, &p, z) == GF_E_INVALID_ARG);
        cr_assert(strstr(gf_error_msg(), needle) != NULL);
        cr_assert(gf_sampler_probs(logits, V, &p, z) == GF_E_INVALID_ARG);
    }
}

Test(errors, logits)
{
    const float nan_at_3[5] = {0.0f, 1.0f, 2.0f, NAN, 0.5f};
    expect_bad_logits(nan_at_3, 5, "logits[3]");
    expect_bad_logits(nan_at_3, 5, "NaN");
    const float inf_at_1[3] = {0.0f, INFINITY, 2.0f};
    expect_bad_logits(inf_at_1, 3, "logits[1]");
    expect_bad_logits(inf_at_1, 3, "+inf");
    const float all_minf[3] = {-INFINITY, -INFINITY, -INFINITY};
    expect_bad_logits(all_minf, 3, "-inf");
    expect_bad_logits(all_minf, 0, "V");
    expect_bad_logits(NULL, 3, "logits");
}

Test(errors, temperature_overflow)
{
    /* a subnormal temperature turns a finite logit into inf: an error, not NaN scores */
    const float logits[2] = {0.0f, 1.0f};
    gf_sampler_params p = sampled(1e-310);
    gf_sample_result r;
    cr_assert(gf_sample(logits, 2, &p, 0, 0, &r) == GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), "temperature") != NULL, "%s", gf_error_msg());
}

/* ---- the draw: reproducibility, independence, margin ---- */

static void flatish(float *logits, int V)
{
    double u[256];
    cr_assert(V <= 256);
    gf_rng_uniforms(1234, 99, 0, V, u);
    for (int i = 0; i < V; i++)
        logits[i] = (float)(u[i] - 0.5); /* within one nat: nearly flat */
}

Test(draw, reproducible_and_seed_dependent)
{
    enum { V = 64, STEPS = 32 };
    float logits[V];
    flatish(logits, V);
    int a[STEPS], b[STEPS], c[STEPS];
    gf_sampler_params p1 = sampled(1.0), p2 = sampled(1.0);
    p1.seed = 1;
    p2.seed = 2;
    for (int s = 0; s < STEPS; s++) {
        gf_sample_result r;
        cr_assert(gf_sample(logits, V, &p1, 0, (uint64_t)s, &r) == GF_OK);
        a[s] = r.token;
        cr_assert(gf_sample(logits, V, &p2, 0, (uint64_t)s, &r) == GF_OK);
        b[s] = r.token;
        cr_assert(gf_sample(logits, V, &p1, 0, (uint64_t)s, &r) == GF_OK);
        c[s] = r.token;
    }
    int same12 = 0, distinct = 0;
    for (int s = 0; s < STEPS; s++) {
        cr_assert(a[s] == c[s], "step %d not reproducible: %d vs %d", s, a[s], c[s]);
        same12 += a[s] == b[s];
        int seen = 0;
        for (int t = 0; t < s; t++)
            seen |= a[t] == a[s];
        distinct += !seen;
    }
    cr_assert(same12 < STEPS / 2, "seeds 1 and 2 agree on %d of %d steps", same12, STEPS);
    cr_assert(distinct > 8, "only %d distinct tokens in %d steps", distinct, STEPS);
}

Test(draw, call_order_independent)
{
    enum { V = 50, SEQS = 4, STEPS = 8 };
    float logits[V], other[V];
    flatish(logits, V);
    for (int i = 0; i < V; i++)
        other[i] = -logits[i];
    gf_sampler_params p = with_top_p(0.9, 0.95);
    p.seed = 77;
    int fwd[SEQS][STEPS];
    gf_sample_result r;
    for (int s = 0; s < SEQS; s++)
        for (int t = 0; t < STEPS; t++) {
            cr_assert(gf_sample(logits, V, &p, (uint64_t)s, (uint64_t)t, &r) == GF_OK);
            fwd[s][t] = r.token;
        }
    /* reverse order, interleaved with unrelated draws on other rows, params and seeds */
    gf_sampler_params q = sampled(2.0);
    for (int t = STEPS - 1; t >= 0; t--)
        for (int s = SEQS - 1; s >= 0; s--) {
            cr_assert(gf_sample(other, V, &q, (uint64_t)(s + 100), (uint64_t)t, &r) == GF_OK);
            cr_assert(gf_sample(logits, V, &p, (uint64_t)s, (uint64_t)t, &r) == GF_OK);
            cr_assert(r.token == fwd[s][t], "seq %d step %d: %d then %d", s, t, fwd[s][t], r.token);
        }
}

Test(draw, independent_of_excluded_tail)
{
    /* u_i depends on i only, not on V: appending -inf logits changes nothing */
    enum { V = 30 };
    float logits[V + 20];
    flatish(logits, V);
    for (int i = V; i < V + 20; i++)
        logits[i] = -INFINITY;
    gf_sampler_params p = sampled(1.3);
    for (uint64_t step = 0; step < 16; step++) {
        gf_sample_result a, b;
        cr_assert(gf_sample(logits, V, &p, 5, step, &a) == GF_OK);
        cr_assert(gf_sample(logits, V + 20, &p, 5, step, &b) == GF_OK);
        cr_assert(a.token == b.token && a.runner_up == b.runner_up && a.margin == b.margin && a.kept == b.kept);
        cr_assert(b.token < V);
    }
}

Test(draw, race_margin_by_hand)
{
    enum { V = 12 };
    float logits[V];
    flatish(logits, V);
    logits[4] = -INFINITY;
    gf_sampler_params p = with_top_k(0.8, 7);
    p.seed = 4242;
    for (uint64_t step = 0; step < 20; step++) {
        double z[V], u[V];
        cr_assert(gf_sampler_filter(logits, V, &p, z) == GF_OK);
        gf_rng_uniforms(p.seed, 3, step, V, u);
        int best = -1, second = -1, kept = 0;
        double bs = 0.0, ss = 0.0;
        for (int i = 0; i < V; i++) {
            if (z[i] == -INFINITY)
                continue;
            cr_assert(z[i] == (double)logits[i] / 0.8);
            kept++;
            double s = z[i] - log(-log(u[i]));
            if (best < 0 || s > bs) {
                second = best;
                ss = bs;
                best = i;
                bs = s;
            } else if (second < 0 || s > ss) {
                second = i;
                ss = s;
            }
        }
        gf_sample_result r, rr;
        cr_assert(gf_sample(logits, V, &p, 3, step, &r) == GF_OK);
        cr_assert(kept == 7 && r.kept == 7);
        cr_assert(r.token == best && r.runner_up == second, "step %llu: %d/%d vs %d/%d", (unsigned long long)step,
                  r.token, r.runner_up, best, second);
        cr_assert(r.margin == bs - ss, "margin %.17g by hand %.17g", r.margin, bs - ss);
        cr_assert(r.margin > 0.0);
        gf_sampler_race(z, u, V, &rr);
        cr_assert(rr.token == r.token && rr.runner_up == r.runner_up && rr.margin == r.margin && rr.kept == r.kept);
    }
}

Test(draw, race_ties_and_edges)
{
    /* exact score tie: the lower index wins, margin 0 */
    const double z[4] = {1.0, -INFINITY, 1.0, 0.0};
    const double u[4] = {0.5, 0.5, 0.5, 0.5};
    gf_sample_result r;
    gf_sampler_race(z, u, 4, &r);
    cr_assert(r.token == 0 && r.runner_up == 2 && r.margin == 0.0 && r.kept == 3);
    /* the race can pick a lower-probability token: that is the point */
    const double z2[2] = {0.0, -0.1};
    const double u2[2] = {0.001, 0.999}; /* large u = small E = high score */
    gf_sampler_race(z2, u2, 2, &r);
    cr_assert(r.token == 1 && r.runner_up == 0);
    cr_assert(r.margin == (-0.1 - log(-log(0.999))) - (0.0 - log(-log(0.001))));
    /* nothing kept */
    const double none[2] = {-INFINITY, -INFINITY};
    gf_sampler_race(none, u, 2, &r);
    cr_assert(r.token == -1 && r.runner_up == -1 && r.kept == 0 && isnan(r.margin));
}

Test(draw, never_picks_excluded)
{
    enum { V = 16 };
    float logits[V];
    flatish(logits, V);
    for (int i = 0; i < V; i += 3)
        logits[i] = -INFINITY;
    gf_sampler_params p = sampled(1.0);
    for (uint64_t step = 0; step < 500; step++) {
        gf_sample_result r;
        cr_assert(gf_sample(logits, V, &p, 0, step, &r) == GF_OK);
        cr_assert(r.token % 3 != 0, "step %llu picked excluded %d", (unsigned long long)step, r.token);
        cr_assert(r.runner_up % 3 != 0);
    }
}

/* ---- the documented draw, end to end, against tools/reference/gf_random.py ---- */

struct golden_row {
    int token, runner_up;
    const char *margin;
    int kept;
};

static void check_golden_race(double temperature, int top_k, double top_p, const struct golden_row rows[8])
{
    const float logits[8] = {0.5f, -1.25f, 2.0f, 0.0f, 1.5f, -0.75f, 1.0f, -3.0f};
    gf_sampler_params p = sampled(temperature);
    p.seed = 1337;
    if (top_k > 0) {
        p.use_top_k = 1;
        p.top_k = top_k;
    }
    if (top_p > 0.0) {
        p.use_top_p = 1;
        p.top_p = top_p;
    }
    for (int step = 0; step < 8; step++) {
        gf_sample_result r;
        cr_assert(gf_sample(logits, 8, &p, 3, (uint64_t)step, &r) == GF_OK, "%s", gf_error_msg());
        double m = strtod(rows[step].margin, NULL);
        cr_assert(r.token == rows[step].token && r.runner_up == rows[step].runner_up && r.kept == rows[step].kept,
                  "step %d: got %d/%d kept %d, python %d/%d kept %d", step, r.token, r.runner_up, r.kept,
                  rows[step].token, rows[step].runner_up, rows[step].kept);
        cr_assert(fabs(r.margin - m) <= 1e-12, "step %d: margin %.17g, python %s", step, r.margin, rows[step].margin);
    }
}

Test(draw, golden_matches_python)
{
    /* printed by tools/reference/gf_random.py, which hard-codes the same table (GOLDEN_RACE) */
    static const struct golden_row a[8] = {
        {2, 4, "1.5000499795116995", 5},  {4, 2, "0.94124498695388725", 5}, {6, 2, "0.89593341331757514", 5},
        {2, 4, "0.69938055648774045", 5}, {2, 6, "1.2624975538457082", 5},  {2, 4, "0.2710624871987104", 5},
        {2, 4, "1.1183173510314368", 5},  {2, 0, "1.5127515385117383", 5},
    };
    static const struct golden_row b[8] = {
        {2, 4, "1.2917166461783665", 5},  {4, 0, "0.98004734438819341", 5}, {6, 2, "1.3126000799842421", 5},
        {2, 4, "0.49104722315440696", 5}, {2, 0, "0.73347930958480312", 5}, {2, 0, "0.030083473835924135", 5},
        {2, 4, "0.90998401769810378", 5}, {2, 0, "0.88775153851173849", 5},
    };
    check_golden_race(0.8, 5, 0.0, a);
    check_golden_race(1.2, 0, 0.9, b);
}

/* ---- goodness of fit ---- */

/* chi-square of `draws` sampled tokens against `expect` (probabilities). */
static double chi_square(const float *logits, int V, const gf_sampler_params *p, int draws, const double *expect)
{
    int counts[16] = {0};
    cr_assert(V <= 16);
    for (int s = 0; s < draws; s++) {
        gf_sample_result r;
        cr_assert(gf_sample(logits, V, p, 0, (uint64_t)s, &r) == GF_OK);
        cr_assert(r.token >= 0 && r.token < V);
        counts[r.token]++;
    }
    double chi = 0.0;
    for (int i = 0; i < V; i++) {
        if (expect[i] == 0.0) {
            cr_assert(counts[i] == 0, "token %d dropped but drawn %d times", i, counts[i]);
            continue;
        }
        double e = expect[i] * draws;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    cr_log_info("chi-square %.3f over %d draws", chi, draws);
    return chi;
}

Test(fit, top_p_085)
{
    float logits[5];
    probs_to_logits(PROBS5, 5, logits);
    gf_sampler_params p = with_top_p(1.0, 0.85);
    p.seed = 1337;
    const double expect[5] = {0.5 / 0.9, 0.3 / 0.9, 0.1 / 0.9, 0.0, 0.0};
    double chi = chi_square(logits, 5, &p, 20000, expect);
    cr_assert(chi < 13.82, "chi-square %.3f >= 13.82 (2 dof, 0.999)", chi);
}

Test(fit, top_k_2_temperature_07)
{
    float logits[5];
    probs_to_logits(PROBS5, 5, logits);
    gf_sampler_params p = with_top_k(0.7, 2);
    p.seed = 2718;
    /* independently: p_i ∝ probs_i^(1/0.7) over the top two */
    double a = pow(0.5, 1.0 / 0.7), b = pow(0.3, 1.0 / 0.7);
    const double expect[5] = {a / (a + b), b / (a + b), 0.0, 0.0, 0.0};
    double chi = chi_square(logits, 5, &p, 20000, expect);
    cr_assert(chi < 10.83, "chi-square %.3f >= 10.83 (1 dof, 0.999)", chi);
    /* and gf_sampler_probs reports the same distribution */
    double pr[5];
    cr_assert(gf_sampler_probs(logits, 5, &p, pr) == GF_OK);
    for (int i = 0; i < 5; i++)
        cr_assert(fabs(pr[i] - expect[i]) < 1e-6, "probs[%d] %.9g want %.9g", i, pr[i], expect[i]);
}

Test(fit, unfiltered)
{
    float logits[5];
    probs_to_logits(PROBS5, 5, logits);
    gf_sampler_params p = sampled(1.0);
    p.seed = 5;
    double chi = chi_square(logits, 5, &p, 20000, PROBS5);
    cr_assert(chi < 18.47, "chi-square %.3f >= 18.47 (4 dof, 0.999)", chi);
}

/* ---- size ---- */

Test(size, large_vocabulary)
{
    enum { V = 256000 };
    float *logits = malloc(V * sizeof *logits);
    double *u = malloc(V * sizeof *u);
    cr_assert(logits && u);
    gf_rng_uniforms(8, 8, 8, V, u);
    for (int i = 0; i < V; i++)
        logits[i] = (float)(10.0 * u[i]);
    gf_sampler_params p = with_top_p(1.0, 0.9);
    p.use_top_k = 1;
    p.top_k = 5000;
    gf_sample_result r;
    cr_assert(gf_sample(logits, V, &p, 0, 0, &r) == GF_OK, "%s", gf_error_msg());
    cr_assert(r.kept >= 1 && r.kept <= 5000, "kept %d", r.kept);
    cr_assert(r.token >= 0 && r.token < V);
    p.use_top_k = 0;
    cr_assert(gf_sample(logits, V, &p, 0, 1, &r) == GF_OK);
    cr_assert(r.kept > 5000 && r.kept < V, "kept %d", r.kept);
    free(logits);
    free(u);
}
