/* Sampler profiles and filters (include/genfence/sampler.h, docs/sampler.md
 * "Profiles", "Filters"): hand-computed kept sets and probabilities for each
 * filter under each profile, the places where the profiles differ, and the
 * seed profile through the extension equal to the plain sampler bit for bit. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/sampler.h"

static const double PROBS5[5] = {0.5, 0.3, 0.1, 0.06, 0.04};
static float L5[5];

static void init_l5(void)
{
    for (int i = 0; i < 5; i++)
        L5[i] = (float)log(PROBS5[i]);
}

static gf_sampler_ext E[GF_PROFILE_COUNT];

static gf_sampler_params prof(int profile, double temperature)
{
    E[profile] = gf_sampler_ext_defaults();
    E[profile].profile = profile;
    gf_sampler_params p = gf_sampler_greedy();
    p.temperature = temperature;
    p.ext = &E[profile];
    return p;
}

static gf_sampler_ext *ext_of(gf_sampler_params *p) { return (gf_sampler_ext *)p->ext; }

/* kept set of gf_sampler_filter as a bitmask over V <= 32; -1 on error */
static long kept_mask(const float *logits, int V, const gf_sampler_params *p)
{
    double z[32];
    if (gf_sampler_filter(logits, V, p, z) != GF_OK)
        return -1;
    long m = 0;
    for (int i = 0; i < V; i++)
        if (z[i] != -INFINITY)
            m |= 1L << i;
    return m;
}

#define B(i) (1L << (i))

static void expect_mask(const float *logits, int V, const gf_sampler_params *p, long want, const char *what)
{
    long got = kept_mask(logits, V, p);
    cr_assert(got >= 0, "%s: %s", what, gf_error_msg());
    cr_assert_eq(got, want, "%s: kept mask 0x%lx, want 0x%lx", what, got, want);
}

static void expect_error(const float *logits, int V, const gf_sampler_params *p, const char *needle)
{
    double z[32];
    cr_assert_eq(gf_sampler_filter(logits, V, p, z), GF_E_INVALID_ARG, "accepted (want an error naming '%s')", needle);
    cr_assert(strstr(gf_error_msg(), needle), "message '%s' lacks '%s'", gf_error_msg(), needle);
    gf_sample_result r;
    cr_assert_eq(gf_sample(logits, V, p, 0, 0, &r), GF_E_INVALID_ARG);
}

TestSuite(sampler_profiles, .init = init_l5);

/* ---- the seed profile through the extension is the plain sampler ---- */

Test(sampler_profiles, seed_ext_is_plain_bit_for_bit)
{
    enum { V = 24 };
    float L[V];
    for (int i = 0; i < V; i++)
        L[i] = (float)(2.0 * gf_rng_uniform(9, 1, 2, (uint32_t)i) - 1.0) * 4.0f;
    L[5] = -INFINITY;
    L[7] = L[3]; /* a tie */
    const double temps[] = {0.0, 0.3, 1.0, 1.7};
    const int ks[] = {0, 1, 3, 8, 40};
    const double ps[] = {0.0, 0.2, 0.5, 0.9, 1.0};
    int n = 0;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 5; b++)
            for (size_t c = 0; c < 5; c++) {
                gf_sampler_params plain = gf_sampler_greedy();
                plain.temperature = temps[a];
                plain.use_top_k = ks[b] > 0;
                plain.top_k = ks[b];
                plain.use_top_p = ps[c] > 0;
                plain.top_p = ps[c];
                plain.seed = 77 + b;
                gf_sampler_params ext = prof(GF_PROFILE_SEED, temps[a]);
                ext.use_top_k = plain.use_top_k;
                ext.top_k = plain.top_k;
                ext.use_top_p = plain.use_top_p;
                ext.top_p = plain.top_p;
                ext.seed = plain.seed;
                cr_assert(gf_sampler_params_plain(&ext));
                double z1[V], z2[V];
                cr_assert_eq(gf_sampler_filter(L, V, &plain, z1), GF_OK);
                cr_assert_eq(gf_sampler_filter(L, V, &ext, z2), GF_OK);
                cr_assert_eq(memcmp(z1, z2, sizeof z1), 0, "filter differs (T %g k %d p %g)", temps[a], ks[b], ps[c]);
                for (uint64_t step = 0; step < 20; step++) {
                    gf_sample_result r1, r2;
                    cr_assert_eq(gf_sample(L, V, &plain, 3, step, &r1), GF_OK);
                    cr_assert_eq(gf_sample(L, V, &ext, 3, step, &r2), GF_OK);
                    cr_assert_eq(r1.token, r2.token);
                    cr_assert_eq(r1.runner_up, r2.runner_up);
                    cr_assert_eq(r1.kept, r2.kept);
                    cr_assert_eq(memcmp(&r1.margin, &r2.margin, sizeof r1.margin), 0);
                    n++;
                }
            }
    cr_assert_eq(n, 4 * 5 * 5 * 20);
    /* and the same errors, word for word */
    gf_sampler_params bad = gf_sampler_greedy(), bad_ext = prof(GF_PROFILE_SEED, 1.0);
    bad.temperature = 1.0;
    bad.use_top_p = bad_ext.use_top_p = 1;
    bad.top_p = bad_ext.top_p = 0.0;
    cr_assert_eq(gf_sampler_validate(&bad), GF_E_INVALID_ARG);
    char m1[256];
    strncpy(m1, gf_error_msg(), sizeof m1 - 1);
    m1[sizeof m1 - 1] = 0;
    cr_assert_eq(gf_sampler_validate(&bad_ext), GF_E_INVALID_ARG);
    cr_assert_str_eq(m1, gf_error_msg());
}

Test(sampler_profiles, plain_means_no_further_filter)
{
    gf_sampler_params p = prof(GF_PROFILE_SEED, 1.0);
    cr_assert(gf_sampler_params_plain(&p));
    ext_of(&p)->use_min_p = 1;
    cr_assert(!gf_sampler_params_plain(&p));
    gf_sampler_params h = prof(GF_PROFILE_HF, 1.0);
    cr_assert(!gf_sampler_params_plain(&h));
    gf_sampler_params none = gf_sampler_greedy();
    cr_assert(none.ext == NULL && gf_sampler_params_plain(&none));
    cr_assert_eq(gf_sampler_params_profile(&none), GF_PROFILE_SEED);
    cr_assert_eq(gf_sampler_params_profile(&h), GF_PROFILE_HF);
}

/* ---- argument semantics: the off values and the errors ---- */

Test(sampler_profiles, top_p_zero)
{
    /* seed and vllm: an error; hf: keeps min_tokens_to_keep (1, then 2); llamacpp: keeps one */
    gf_sampler_params s = prof(GF_PROFILE_SEED, 1.0), h = prof(GF_PROFILE_HF, 1.0), l = prof(GF_PROFILE_LLAMACPP, 1.0),
                      v = prof(GF_PROFILE_VLLM, 1.0);
    s.use_top_p = h.use_top_p = l.use_top_p = v.use_top_p = 1;
    s.top_p = h.top_p = l.top_p = v.top_p = 0.0;
    expect_error(L5, 5, &s, "top_p must lie in (0, 1]");
    expect_error(L5, 5, &v, "vllm: top_p must be in (0, 1]");
    expect_mask(L5, 5, &h, B(0), "hf top_p 0");
    expect_mask(L5, 5, &l, B(0), "llamacpp top_p 0");
    ext_of(&h)->min_tokens_to_keep = 2;
    expect_mask(L5, 5, &h, B(0) | B(1), "hf top_p 0, min_tokens_to_keep 2");
    ext_of(&l)->min_tokens_to_keep = 3;
    expect_mask(L5, 5, &l, B(0) | B(1) | B(2), "llamacpp top_p 0, min_keep 3");
}

Test(sampler_profiles, top_p_nan_and_one)
{
    gf_sampler_params s = prof(GF_PROFILE_SEED, 1.0), h = prof(GF_PROFILE_HF, 1.0), l = prof(GF_PROFILE_LLAMACPP, 1.0),
                      v = prof(GF_PROFILE_VLLM, 1.0);
    s.use_top_p = h.use_top_p = l.use_top_p = v.use_top_p = 1;
    s.top_p = h.top_p = l.top_p = v.top_p = NAN;
    expect_error(L5, 5, &s, "got NaN");
    expect_error(L5, 5, &v, "vllm: top_p");
    expect_mask(L5, 5, &h, 0x1f, "hf top_p NaN is a no-op");
    expect_mask(L5, 5, &l, 0x1f, "llamacpp top_p NaN keeps all");
    /* top_p 1.0 is not 'keep all' under seed when a tail mass rounds away:
     * p_1 = e^-40 = 4e-18 < eps/2, so the prefix before token 1 is 1.0 >= p */
    const float tail[3] = {0.0f, -40.0f, -41.0f};
    s.top_p = h.top_p = l.top_p = v.top_p = 1.0;
    expect_mask(tail, 3, &s, B(0), "seed top_p 1.0 drops the underflowing tail");
    expect_mask(tail, 3, &h, 0x7, "hf top_p 1.0 is off");
    expect_mask(tail, 3, &l, 0x7, "llamacpp top_p 1.0 is off");
    expect_mask(tail, 3, &v, 0x7, "vllm top_p 1.0 is off");
    /* top_p > 1: seed and vllm refuse, hf's generate() adds no warper, llama.cpp returns early */
    s.top_p = h.top_p = l.top_p = v.top_p = 1.5;
    expect_error(L5, 5, &s, "top_p must lie in (0, 1]");
    expect_error(L5, 5, &v, "vllm: top_p");
    expect_mask(L5, 5, &h, 0x1f, "hf top_p 1.5");
    expect_mask(L5, 5, &l, 0x1f, "llamacpp top_p 1.5");
    h.top_p = -0.1;
    expect_error(L5, 5, &h, "hf: top_p");
}

Test(sampler_profiles, top_k_off_values_and_ties)
{
    gf_sampler_params s = prof(GF_PROFILE_SEED, 1.0), h = prof(GF_PROFILE_HF, 1.0), l = prof(GF_PROFILE_LLAMACPP, 1.0),
                      v = prof(GF_PROFILE_VLLM, 1.0);
    s.use_top_k = h.use_top_k = l.use_top_k = v.use_top_k = 1;
    s.top_k = h.top_k = l.top_k = v.top_k = 0;
    expect_error(L5, 5, &s, "top_k must be >= 1");
    expect_mask(L5, 5, &h, 0x1f, "hf top_k 0 is off");
    expect_mask(L5, 5, &l, 0x1f, "llamacpp top_k 0 is off");
    expect_mask(L5, 5, &v, 0x1f, "vllm top_k 0 is off");
    s.top_k = h.top_k = l.top_k = v.top_k = -1;
    expect_error(L5, 5, &s, "top_k must be >= 1");
    expect_error(L5, 5, &h, "hf: top_k");
    expect_mask(L5, 5, &l, 0x1f, "llamacpp top_k -1 is off");
    expect_mask(L5, 5, &v, 0x1f, "vllm top_k -1 is off");
    v.top_k = -2;
    expect_error(L5, 5, &v, "vllm: top_k must be -1 or 0");
    v.top_k = 6;
    expect_error(L5, 5, &v, "greater than the vocabulary");
    /* ties with the k-th: kept by seed, hf and vllm (value threshold), cut by llama.cpp (exactly k) */
    const float tie[4] = {2.0f, 1.0f, 1.0f, 0.0f};
    s.top_k = h.top_k = l.top_k = v.top_k = 2;
    expect_mask(tie, 4, &s, 0x7, "seed ties");
    expect_mask(tie, 4, &h, 0x7, "hf ties");
    expect_mask(tie, 4, &v, 0x7, "vllm ties");
    expect_mask(tie, 4, &l, 0x3, "llamacpp exactly k, lower index first");
    /* hf: top_k = max(top_k, min_tokens_to_keep) */
    h.top_k = 1;
    ext_of(&h)->min_tokens_to_keep = 3;
    expect_mask(L5, 5, &h, 0x7, "hf top_k 1 with min_tokens_to_keep 3");
}

Test(sampler_profiles, temperature_zero_and_limits)
{
    gf_sampler_params s = prof(GF_PROFILE_SEED, 0.0), h = prof(GF_PROFILE_HF, 0.0), l = prof(GF_PROFILE_LLAMACPP, 0.0),
                      v = prof(GF_PROFILE_VLLM, 0.0);
    expect_mask(L5, 5, &s, B(0), "seed greedy");
    expect_error(L5, 5, &h, "do_sample=False");
    expect_mask(L5, 5, &l, B(0), "llamacpp greedy");
    expect_mask(L5, 5, &v, B(0), "vllm greedy");
    /* vLLM's epsilon: 5e-6 is greedy there, a (very cold) sampler elsewhere */
    s.temperature = v.temperature = l.temperature = 5e-6;
    expect_mask(L5, 5, &v, B(0), "vllm T < 1e-5 is greedy");
    expect_mask(L5, 5, &s, 0x1f, "seed T 5e-6 samples over all");
    /* negative: llama.cpp's temp <= 0 keeps the maximum; the others refuse */
    s.temperature = h.temperature = l.temperature = v.temperature = -1.0;
    expect_error(L5, 5, &s, "temperature");
    expect_error(L5, 5, &h, "hf: temperature");
    expect_error(L5, 5, &v, "vllm: temperature must be a non-negative finite number");
    expect_mask(L5, 5, &l, B(0), "llamacpp T -1 is greedy");
    /* +inf: uniform under hf and llamacpp, an error under seed and vllm (a finite number) */
    s.temperature = h.temperature = l.temperature = v.temperature = INFINITY;
    expect_error(L5, 5, &s, "inf");
    expect_error(L5, 5, &v, "got inf");
    cr_assert_eq(gf_sampler_probs(L5, 5, &l, (double[5]){0}), GF_OK, "%s", gf_error_msg());
    double pr[5];
    cr_assert_eq(gf_sampler_probs(L5, 5, &h, pr), GF_OK, "%s", gf_error_msg());
    for (int i = 0; i < 5; i++)
        cr_assert_float_eq(pr[i], 0.2, 1e-15);
    /* NaN: refused everywhere */
    s.temperature = h.temperature = l.temperature = v.temperature = NAN;
    expect_error(L5, 5, &s, "NaN");
    expect_error(L5, 5, &h, "hf: temperature");
    expect_error(L5, 5, &l, "llamacpp: temperature is NaN");
    expect_error(L5, 5, &v, "vllm: temperature must be a non-negative finite number, got NaN");
}

/* ---- chain order ---- */

Test(sampler_profiles, llamacpp_applies_temperature_last)
{
    /* T = 2, top_p 0.7 over PROBS5. seed/hf/vllm: top-p sees T = 2 probabilities
     * (.3507, .2717, .1569, .1215, .0992): prefixes 0, .351, .622, .779 -> keep
     * {0, 1, 2}. llamacpp (default chain, temperature last): top-p sees T = 1:
     * .5, .8 >= .7 -> keep {0, 1}; then T = 2 renormalises to sqrt(.5) : sqrt(.3). */
    gf_sampler_params s = prof(GF_PROFILE_SEED, 2.0), h = prof(GF_PROFILE_HF, 2.0), l = prof(GF_PROFILE_LLAMACPP, 2.0),
                      v = prof(GF_PROFILE_VLLM, 2.0);
    s.use_top_p = h.use_top_p = l.use_top_p = v.use_top_p = 1;
    s.top_p = h.top_p = l.top_p = v.top_p = 0.7;
    expect_mask(L5, 5, &s, 0x7, "seed");
    expect_mask(L5, 5, &h, 0x7, "hf");
    expect_mask(L5, 5, &v, 0x7, "vllm");
    expect_mask(L5, 5, &l, 0x3, "llamacpp default chain");
    double pr[5];
    cr_assert_eq(gf_sampler_probs(L5, 5, &l, pr), GF_OK, "%s", gf_error_msg());
    cr_assert_float_eq(pr[0], 0.5635083268962915, 1e-6);
    cr_assert_float_eq(pr[1], 0.43649167310370834, 1e-6);
    cr_assert_eq(pr[2], 0.0);
    cr_assert_eq(gf_sampler_probs(L5, 5, &s, pr), GF_OK);
    const double t2[3] = {0.35074635367265333, 0.27168695730343256, 0.15685853793444715};
    const double mass = t2[0] + t2[1] + t2[2];
    for (int i = 0; i < 3; i++)
        cr_assert_float_eq(pr[i], t2[i] / mass, 1e-6);
    /* an explicit chain with temperature first gives the seed's set */
    gf_sampler_ext *e = ext_of(&l);
    e->n_chain = 2;
    e->chain[0] = GF_STAGE_TEMPERATURE;
    e->chain[1] = GF_STAGE_TOP_P;
    expect_mask(L5, 5, &l, 0x7, "llamacpp chain [temperature, top_p]");
}

Test(sampler_profiles, llamacpp_chain_validation)
{
    gf_sampler_params l = prof(GF_PROFILE_LLAMACPP, 1.0);
    gf_sampler_ext *e = ext_of(&l);
    e->n_chain = 1;
    e->chain[0] = GF_STAGE_TOP_K;
    expect_error(L5, 5, &l, "lacks 'temperature'");
    e->n_chain = 2;
    e->chain[1] = GF_STAGE_TOP_K;
    expect_error(L5, 5, &l, "names 'top_k' twice");
    e->chain[1] = GF_STAGE_TEMPERATURE;
    l.use_top_p = 1;
    l.top_p = 0.5;
    expect_error(L5, 5, &l, "'top_p' is set but not in the chain");
    gf_sampler_params h = prof(GF_PROFILE_HF, 1.0);
    ext_of(&h)->n_chain = 1;
    ext_of(&h)->chain[0] = GF_STAGE_TEMPERATURE;
    expect_error(L5, 5, &h, "fixed order");
}

/* ---- min_p ---- */

Test(sampler_profiles, min_p)
{
    /* T = 1, min_p 0.15: threshold .075 -> keep {0, 1, 2}, renormalised .5/.9, .3/.9, .1/.9 */
    for (int pr = 0; pr < GF_PROFILE_COUNT; pr++) {
        gf_sampler_params p = prof(pr, 1.0);
        ext_of(&p)->use_min_p = 1;
        ext_of(&p)->min_p = 0.15;
        expect_mask(L5, 5, &p, 0x7, gf_sampler_profile_name(pr));
        double q[5];
        cr_assert_eq(gf_sampler_probs(L5, 5, &p, q), GF_OK);
        cr_assert_float_eq(q[0], 0.5 / 0.9, 1e-6);
        cr_assert_float_eq(q[1], 0.3 / 0.9, 1e-6);
        cr_assert_float_eq(q[2], 0.1 / 0.9, 1e-6);
    }
    /* T = 2, min_p 0.4: after temperature (seed, hf, vllm) the threshold is
     * .4 * .3507 = .1403 -> {0, 1, 2}; llama.cpp's min-p runs before
     * temperature: .4 * .5 = .2 -> {0, 1} */
    for (int pr = 0; pr < GF_PROFILE_COUNT; pr++) {
        gf_sampler_params p = prof(pr, 2.0);
        ext_of(&p)->use_min_p = 1;
        ext_of(&p)->min_p = 0.4;
        expect_mask(L5, 5, &p, pr == GF_PROFILE_LLAMACPP ? 0x3 : 0x7, gf_sampler_profile_name(pr));
    }
    /* min_tokens_to_keep: hf keeps 3 of a min_p that keeps 1; vllm has none */
    gf_sampler_params h = prof(GF_PROFILE_HF, 1.0), v = prof(GF_PROFILE_VLLM, 1.0), s = prof(GF_PROFILE_SEED, 1.0),
                      l = prof(GF_PROFILE_LLAMACPP, 1.0);
    ext_of(&h)->use_min_p = ext_of(&v)->use_min_p = ext_of(&s)->use_min_p = ext_of(&l)->use_min_p = 1;
    ext_of(&h)->min_p = 0.9;
    ext_of(&h)->min_tokens_to_keep = 3;
    expect_mask(L5, 5, &h, 0x7, "hf min_p .9, min_tokens_to_keep 3");
    ext_of(&v)->min_p = 0.9;
    ext_of(&v)->min_tokens_to_keep = 3;
    expect_error(L5, 5, &v, "vllm: vLLM has no min_tokens_to_keep");
    ext_of(&s)->min_p = 1.5;
    expect_error(L5, 5, &s, "seed: min_p must lie in [0, 1]");
    /* llamacpp above 1 (llama.cpp's test_min_p at 1.05): nothing passes, its
     * fallback keeps the top max(1, min_keep); NaN keeps all */
    ext_of(&l)->min_p = 1.5;
    expect_mask(L5, 5, &l, 0x1, "llamacpp min_p 1.5 keeps the top");
    ext_of(&l)->min_tokens_to_keep = 0;
    expect_mask(L5, 5, &l, 0x1, "llamacpp min_p 1.5, min_keep 0 keeps the top");
    ext_of(&l)->min_tokens_to_keep = 3;
    expect_mask(L5, 5, &l, 0x7, "llamacpp min_p 1.5, min_keep 3 keeps the top 3");
    ext_of(&l)->min_p = 0.5; /* passes {0, 1} (.3 >= .25); min_keep 3 adds the third */
    expect_mask(L5, 5, &l, 0x7, "llamacpp min_p .5, min_keep 3");
    ext_of(&l)->min_tokens_to_keep = 1;
    expect_mask(L5, 5, &l, 0x3, "llamacpp min_p .5");
    ext_of(&l)->min_p = NAN;
    expect_mask(L5, 5, &l, 0x1f, "llamacpp min_p NaN keeps all");
    ext_of(&l)->min_p = 0.0;
    expect_mask(L5, 5, &l, 0x1f, "llamacpp min_p 0 is off");
    ext_of(&l)->min_p = -1.0;
    expect_mask(L5, 5, &l, 0x1f, "llamacpp min_p < 0 is off");
}

/* ---- typical_p ---- */

Test(sampler_profiles, typical_p)
{
    /* PROBS5: H = 1.23558; |-ln p - H| = .5424, .0316, 1.0670, 1.5778, 1.9833:
     * typicality order 1, 0, 2, 3, 4 with cumulative mass .3, .8, .9, .96, 1.
     * mass .5 keeps {1, 0}; mass .85 keeps {1, 0, 2}; mass .25 keeps {1}. */
    const double masses[] = {0.5, 0.85, 0.25};
    const long want[] = {0x3, 0x7, 0x2};
    for (int pr = 0; pr < 3; pr++) /* seed, hf, llamacpp */
        for (int m = 0; m < 3; m++) {
            gf_sampler_params p = prof(pr, 1.0);
            ext_of(&p)->use_typical_p = 1;
            ext_of(&p)->typical_p = masses[m];
            expect_mask(L5, 5, &p, want[m], gf_sampler_profile_name(pr));
        }
    gf_sampler_params v = prof(GF_PROFILE_VLLM, 1.0);
    ext_of(&v)->use_typical_p = 1;
    ext_of(&v)->typical_p = 0.5;
    expect_error(L5, 5, &v, "vllm: vLLM has no typical_p");
    /* greedy: llama.cpp's temperature 0 runs after typical, so it picks the
     * most typical token (1); seed's greedy skips the warpers (0) */
    gf_sampler_params l = prof(GF_PROFILE_LLAMACPP, 0.0), s = prof(GF_PROFILE_SEED, 0.0);
    ext_of(&l)->use_typical_p = ext_of(&s)->use_typical_p = 1;
    ext_of(&l)->typical_p = ext_of(&s)->typical_p = 0.25;
    gf_sample_result r;
    cr_assert_eq(gf_sample(L5, 5, &l, 0, 0, &r), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(r.token, 1);
    cr_assert_eq(gf_sample(L5, 5, &s, 0, 0, &r), GF_OK);
    cr_assert_eq(r.token, 0);
    /* off values: hf >= 1 and NaN off, <= 0 refused; llamacpp NaN keeps all */
    gf_sampler_params h = prof(GF_PROFILE_HF, 1.0);
    ext_of(&h)->use_typical_p = 1;
    ext_of(&h)->typical_p = NAN;
    expect_mask(L5, 5, &h, 0x1f, "hf typical NaN");
    ext_of(&h)->typical_p = 0.0;
    expect_error(L5, 5, &h, "hf: typical_p");
    l.temperature = 1.0;
    ext_of(&l)->typical_p = NAN;
    expect_mask(L5, 5, &l, 0x1f, "llamacpp typical NaN");
}

/* ---- penalties over a history ---- */

static void expect_z(const float *L, int V, const gf_sampler_params *p, const double *want, const char *what)
{
    double z[8];
    cr_assert_eq(gf_sampler_filter(L, V, p, z), GF_OK, "%s: %s", what, gf_error_msg());
    for (int i = 0; i < V; i++)
        cr_assert_float_eq(z[i], want[i], 1e-12, "%s: z[%d] = %.17g, want %.17g", what, i, z[i], want[i]);
}

Test(sampler_profiles, penalties)
{
    const float L[4] = {2.0f, 1.0f, -1.0f, 0.5f};
    static const int32_t hist[4] = {0, 2, 2, 3}; /* prompt [0], generated [2, 2, 3] */
    /* repetition 2: seen {0, 2, 3}: 2/2, -1*2, .5/2 under every profile */
    const double rep[4] = {1.0, 1.0, -2.0, 0.25};
    for (int pr = 0; pr < GF_PROFILE_COUNT; pr++) {
        gf_sampler_params p = prof(pr, 1.0);
        gf_sampler_ext *e = ext_of(&p);
        e->repetition_penalty = 2.0;
        e->history = hist;
        e->n_history = 4;
        e->n_prompt = 1;
        expect_z(L, 4, &p, rep, gf_sampler_profile_name(pr));
    }
    /* frequency .5, presence .25: seed and vllm count the generated ids only
     * (token 0 is prompt): z2 = -1 - 2*.5 - .25, z3 = .5 - .5 - .25;
     * llamacpp counts its whole window, the prompt's 0 too: z0 = 2 - .5 - .25 */
    const double out_only[4] = {2.0, 1.0, -2.25, -0.25}, window[4] = {1.25, 1.0, -2.25, -0.25},
                 last2[4] = {2.0, 1.0, -1.75, -0.25};
    for (int pr = 0; pr < GF_PROFILE_COUNT; pr++) {
        gf_sampler_params p = prof(pr, 1.0);
        gf_sampler_ext *e = ext_of(&p);
        e->frequency_penalty = 0.5;
        e->presence_penalty = 0.25;
        e->history = hist;
        e->n_history = 4;
        e->n_prompt = 1;
        if (pr == GF_PROFILE_HF) {
            expect_error(L, 4, &p, "hf: transformers has no frequency_penalty");
            continue;
        }
        expect_z(L, 4, &p, pr == GF_PROFILE_LLAMACPP ? window : out_only, gf_sampler_profile_name(pr));
        if (pr == GF_PROFILE_LLAMACPP) { /* the last 2 ids [2, 3]: one each */
            e->penalty_last_n = 2;
            expect_z(L, 4, &p, last2, "llamacpp penalty_last_n 2");
            e->penalty_last_n = 0;
            expect_z(L, 4, &p, (const double[]){2.0, 1.0, -1.0, 0.5}, "llamacpp penalty_last_n 0 is off");
        }
        if (pr == GF_PROFILE_VLLM) {
            e->frequency_penalty = 2.5;
            expect_error(L, 4, &p, "vllm: frequency_penalty must be in [-2, 2]");
        }
    }
    /* history ids are checked against V */
    static const int32_t bad_hist[1] = {9};
    gf_sampler_params p = prof(GF_PROFILE_SEED, 1.0);
    ext_of(&p)->repetition_penalty = 1.5;
    ext_of(&p)->history = bad_hist;
    ext_of(&p)->n_history = 1;
    expect_error(L, 4, &p, "outside the vocabulary");
    ext_of(&p)->repetition_penalty = 0.0;
    expect_error(L, 4, &p, "repetition_penalty");
}

/* ---- logit bias, the EOS ban ---- */

Test(sampler_profiles, logit_bias)
{
    const float L[3] = {0.0f, 0.0f, 0.0f};
    static const gf_logit_bias one[1] = {{1, 1.0f}}, big[1] = {{1, 500.0f}}, bad[1] = {{3, 1.0f}};
    static const gf_logit_bias ban[3] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
    for (int pr = 0; pr < GF_PROFILE_COUNT; pr++) {
        gf_sampler_params p = prof(pr, 1.0);
        ext_of(&p)->bias = one;
        ext_of(&p)->n_bias = 1;
        expect_z(L, 3, &p, (const double[]){0.0, 1.0, 0.0}, gf_sampler_profile_name(pr));
        ext_of(&p)->bias = big; /* not clamped (vLLM's SamplingParams does not; its OpenAI server does) */
        expect_z(L, 3, &p, (const double[]){0.0, 500.0, 0.0}, gf_sampler_profile_name(pr));
        ext_of(&p)->bias = bad;
        expect_error(L, 3, &p, "outside the vocabulary");
        ext_of(&p)->bias = ban;
        ext_of(&p)->n_bias = 3;
        if (pr == GF_PROFILE_VLLM) { /* a valid id all the same */
            gf_sample_result r;
            cr_assert_eq(gf_sample(L, 3, &p, 0, 0, &r), GF_OK, "%s", gf_error_msg());
            cr_assert_eq(r.token, 0);
        } else {
            expect_error(L, 3, &p, "every token was filtered out");
        }
    }
}

Test(sampler_profiles, min_new_tokens_bans_eos)
{
    const float L[3] = {1.0f, 3.0f, 2.0f};
    static const int32_t h1[2] = {0, 2}, h2[3] = {0, 2, 2}, stop[1] = {2};
    for (int pr = 0; pr < GF_PROFILE_COUNT; pr++) {
        gf_sampler_params p = prof(pr, pr == GF_PROFILE_HF ? 1.0 : 0.0);
        gf_sampler_ext *e = ext_of(&p);
        e->eos_id = 1;
        e->min_new_tokens = 2;
        e->n_prompt = 1;
        e->history = h1;
        e->n_history = 2; /* one generated: eos banned */
        if (pr == GF_PROFILE_LLAMACPP) {
            expect_error(L, 3, &p, "llamacpp: llama.cpp's sampler has no min_new_tokens");
            continue;
        }
        expect_mask(L, 3, &p, pr == GF_PROFILE_HF ? (B(0) | B(2)) : B(2), gf_sampler_profile_name(pr));
        e->history = h2;
        e->n_history = 3; /* two generated: allowed */
        expect_mask(L, 3, &p, pr == GF_PROFILE_HF ? 0x7 : B(1), gf_sampler_profile_name(pr));
        /* vLLM's min_tokens also holds back the stop ids; HF's min_new_tokens only EOS */
        e->history = h1;
        e->n_history = 2;
        e->stop_ids = stop;
        e->n_stop_ids = 1;
        expect_mask(L, 3, &p,
                    pr == GF_PROFILE_VLLM ? B(0)
                    : pr == GF_PROFILE_HF ? (B(0) | B(2))
                                          : B(2),
                    gf_sampler_profile_name(pr));
    }
}

/* ---- poisoned rows ---- */

Test(sampler_profiles, vllm_poisoned_rows_give_a_valid_id)
{
    const float nan_row[3] = {0.0f, NAN, 1.0f}, inf_row[3] = {0.0f, 1.0f, INFINITY},
                ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
    const struct {
        const float *L;
        int want;
    } rows[] = {{nan_row, 1}, {inf_row, 2}, {ninf, 0}};
    for (size_t i = 0; i < 3; i++)
        for (int pr = 0; pr < GF_PROFILE_COUNT; pr++)
            for (int greedy = 0; greedy < 2; greedy++) {
                gf_sampler_params p = prof(pr, greedy ? 0.0 : 0.8);
                p.use_top_p = 1;
                p.top_p = 0.9;
                if (pr == GF_PROFILE_HF && greedy)
                    continue;
                gf_sample_result r;
                gf_status st = gf_sample(rows[i].L, 3, &p, 0, 0, &r);
                if (pr != GF_PROFILE_VLLM) {
                    cr_assert_eq(st, GF_E_INVALID_ARG, "%s accepted row %zu", gf_sampler_profile_name(pr), i);
                    continue;
                }
                cr_assert_eq(st, GF_OK, "%s", gf_error_msg());
                cr_assert_eq(r.token, rows[i].want, "row %zu: token %d", i, r.token);
                cr_assert_eq(r.kept, 0);
                double q[3], z[3];
                cr_assert_eq(gf_sampler_probs(rows[i].L, 3, &p, q), GF_OK);
                cr_assert_eq(gf_sampler_filter(rows[i].L, 3, &p, z), GF_OK);
                if (rows[i].L == ninf) { /* issue 34: the filters are no-ops, nothing is kept */
                    for (int t = 0; t < 3; t++) {
                        cr_assert_eq(q[t], 0.0, "all -inf row: probs[%d] = %g (a one-hot at 0?)", t, q[t]);
                        cr_assert(z[t] == -INFINITY, "all -inf row: z[%d] = %g, want -inf (kept 0)", t, z[t]);
                    }
                } else {
                    cr_assert_eq(q[rows[i].want], 1.0);
                }
            }
}

/* issue 34: a row the filters empty (the EOS ban on the only finite logit)
 * is vllm's all -inf row too: token 0, kept 0, z all -inf, probs all 0. */
Test(sampler_profiles, vllm_row_filtered_to_nothing_keeps_nothing)
{
    const float L[3] = {-INFINITY, -INFINITY, 2.0f};
    gf_sampler_params p = prof(GF_PROFILE_VLLM, 0.8);
    gf_sampler_ext *e = ext_of(&p);
    static const int32_t hist[1] = {1};
    e->history = hist;
    e->n_history = 1;
    e->n_prompt = 1;
    e->min_new_tokens = 4;
    e->eos_id = 2;
    gf_sample_result r;
    cr_assert_eq(gf_sample(L, 3, &p, 0, 0, &r), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(r.token, 0);
    cr_assert_eq(r.kept, 0);
    double z[3], q[3];
    cr_assert_eq(gf_sampler_filter(L, 3, &p, z), GF_OK);
    cr_assert_eq(gf_sampler_probs(L, 3, &p, q), GF_OK);
    for (int t = 0; t < 3; t++) {
        cr_assert(z[t] == -INFINITY, "z[%d] = %g", t, z[t]);
        cr_assert_eq(q[t], 0.0, "probs[%d] = %g", t, q[t]);
    }
}

/* ---- the draw is the Philox race for every profile ---- */

Test(sampler_profiles, the_race_draws_for_every_profile)
{
    enum { V = 16 };
    float L[V];
    for (int i = 0; i < V; i++)
        L[i] = (float)(3.0 * gf_rng_uniform(5, 0, 0, (uint32_t)i));
    static const int32_t hist[3] = {1, 4, 4};
    for (int pr = 0; pr < GF_PROFILE_COUNT; pr++) {
        gf_sampler_params p = prof(pr, 0.9);
        p.use_top_k = 1;
        p.top_k = 10;
        p.use_top_p = 1;
        p.top_p = 0.8;
        p.seed = 1234;
        gf_sampler_ext *e = ext_of(&p);
        e->use_min_p = 1;
        e->min_p = 0.05;
        e->repetition_penalty = 1.3;
        e->history = hist;
        e->n_history = 3;
        for (uint64_t step = 0; step < 64; step++) {
            double z[V], u[V];
            cr_assert_eq(gf_sampler_filter(L, V, &p, z), GF_OK, "%s", gf_error_msg());
            gf_rng_uniforms(p.seed, 7, step, V, u);
            gf_sample_result want, got;
            gf_sampler_race(z, u, V, &want);
            cr_assert_eq(gf_sample(L, V, &p, 7, step, &got), GF_OK);
            cr_assert_eq(got.token, want.token);
            cr_assert_eq(got.kept, want.kept);
            cr_assert_eq(memcmp(&got.margin, &want.margin, sizeof got.margin), 0);
        }
    }
}

Test(sampler_profiles, names_and_table)
{
    for (int i = 0; i < GF_PROFILE_COUNT; i++)
        cr_assert_eq(gf_sampler_profile_from_name(gf_sampler_profile_name(i)), i);
    cr_assert_eq(gf_sampler_profile_from_name("torch"), -1);
    cr_assert_null(gf_sampler_profile_name(GF_PROFILE_COUNT));
    for (int s = GF_STAGE_PENALTIES; s <= GF_STAGE_TEMPERATURE; s++)
        cr_assert_eq(gf_sampler_stage_from_name(gf_sampler_stage_name(s)), s);
    size_t n = 0;
    const gf_profile_row *rows = gf_sampler_profile_rows(&n);
    cr_assert_gt(n, 10);
    for (size_t i = 0; i < n; i++)
        for (int p = 0; p < GF_PROFILE_COUNT; p++)
            cr_assert(rows[i].by_profile[p] && rows[i].by_profile[p][0]);
    /* an extension from an older caller (struct_size up to eos_id): the rest default */
    gf_sampler_ext e = gf_sampler_ext_defaults();
    e.profile = GF_PROFILE_HF;
    e.struct_size = (uint32_t)offsetof(gf_sampler_ext, n_stop_ids);
    e.n_stop_ids = 5; /* past struct_size: not read */
    gf_sampler_params p = gf_sampler_greedy();
    p.temperature = 1.0;
    p.ext = &e;
    cr_assert_eq(gf_sampler_validate(&p), GF_OK, "%s", gf_error_msg());
    e.struct_size = 2;
    cr_assert_eq(gf_sampler_validate(&p), GF_E_INVALID_ARG);
}
