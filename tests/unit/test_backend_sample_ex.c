/* gf_backend_sample's choice of slot (include/genfence/backend.h): plain
 * params reach the old `sample` slot with ext NULL, anything else the
 * `sample_ex` slot and only for a profile `sample_profiles` declares;
 * a table without the new slots keeps working for plain params and answers
 * GF_E_UNSUPPORTED for the rest. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "genfence/engine.h"

enum { B = 2, V = 6 };
static const uint64_t k_seq[B] = {3, 9};
static int g_old_calls, g_ex_calls, g_ext_seen_by_old;

/* both slots: gf_sample over the given u, i.e. a correct implementation */
static gf_status run_rows(const float *logits, int32_t nb, const gf_sampler_params *p, const gf_rng_draws *d,
                          int32_t *ids)
{
    for (int32_t b = 0; b < nb; b++) {
        gf_sample_result r;
        double z[V];
        gf_status st = gf_sampler_filter(logits + (size_t)b * V, V, p, z);
        if (st != GF_OK)
            return st;
        int one = 0, at = -1;
        for (int i = 0; i < V; i++)
            if (z[i] != -INFINITY)
                one++, at = i;
        if (one == 1) /* greedy or a single survivor */
            r.token = at;
        else
            gf_sampler_race(z, d->u + (size_t)b * V, V, &r);
        ids[b] = r.token;
    }
    return GF_OK;
}

static gf_status old_slot(void *m, const float *l, int32_t nb, const gf_sampler_params *p, const gf_rng_draws *d,
                          int32_t *ids)
{
    (void)m;
    g_old_calls++;
    g_ext_seen_by_old += p->ext != NULL;
    return run_rows(l, nb, p, d, ids);
}

static gf_status ex_slot(void *m, const float *l, int32_t nb, const gf_sampler_params *p, const gf_rng_draws *d,
                         int32_t *ids)
{
    (void)m;
    g_ex_calls++;
    return run_rows(l, nb, p, d, ids);
}

static uint32_t hf_and_seed(void) { return GF_PROFILE_BIT(GF_PROFILE_HF) | GF_PROFILE_BIT(GF_PROFILE_SEED); }

static gf_backend_ops table(int with_ex)
{
    gf_backend_ops o;
    memset(&o, 0, sizeof o);
    o.abi_version = GF_BACKEND_ABI_VERSION;
    o.name = "tiny-ex";
    o.sample = old_slot;
    if (with_ex) {
        o.sample_profiles = hf_and_seed;
        o.sample_ex = ex_slot;
        o.struct_size = sizeof o;
    } else { /* built before the new slots: the table ends at last_error */
        o.struct_size = (uint32_t)(offsetof(gf_backend_ops, last_error) + sizeof o.last_error);
        o.sample_ex = ex_slot; /* past struct_size: must not be read */
    }
    return o;
}

static const float L[B * V] = {1.0f, 0.5f, 0.2f, -0.3f, 2.0f, 0.0f, 0.1f, 0.1f, 3.0f, -1.0f, 0.4f, 0.9f};

static gf_sampler_ext g_e;
static gf_sampler_params with_profile(int profile)
{
    g_e = gf_sampler_ext_defaults();
    g_e.profile = profile;
    gf_sampler_params p = gf_sampler_greedy();
    p.temperature = 0.9;
    p.seed = 11;
    p.ext = &g_e;
    return p;
}

static void expect_engine(const gf_sampler_params *p, const int32_t *ids)
{
    for (int b = 0; b < B; b++) {
        gf_sample_result r;
        cr_assert_eq(gf_sample(L + (size_t)b * V, V, p, k_seq[b], 4, &r), GF_OK, "%s", gf_error_msg());
        cr_assert_eq(ids[b], r.token, "row %d: slot %d, engine %d", b, ids[b], r.token);
    }
}

static void reset(void) { g_old_calls = g_ex_calls = g_ext_seen_by_old = 0; }

Test(backend_sample_ex, plain_params_reach_the_old_slot_without_ext)
{
    reset();
    gf_backend_ops o = table(1);
    gf_sampler_params p = with_profile(GF_PROFILE_SEED); /* seed, nothing further: plain */
    int32_t ids[B];
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &p, k_seq, 4, ids), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(g_old_calls, 1);
    cr_assert_eq(g_ex_calls, 0);
    cr_assert_eq(g_ext_seen_by_old, 0, "the old slot saw an ext pointer");
    expect_engine(&p, ids);
}

Test(backend_sample_ex, a_profile_reaches_sample_ex)
{
    reset();
    gf_backend_ops o = table(1);
    gf_sampler_params p = with_profile(GF_PROFILE_HF);
    p.use_top_p = 1;
    p.top_p = 0.0; /* hf: keeps one */
    int32_t ids[B];
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &p, k_seq, 4, ids), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(g_ex_calls, 1);
    cr_assert_eq(g_old_calls, 0);
    cr_assert_eq(ids[0], 4);
    cr_assert_eq(ids[1], 2);
    expect_engine(&p, ids);
    /* seed with a further filter also needs sample_ex */
    reset();
    gf_sampler_params s = with_profile(GF_PROFILE_SEED);
    g_e.use_min_p = 1;
    g_e.min_p = 0.3;
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &s, k_seq, 4, ids), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(g_ex_calls, 1);
    expect_engine(&s, ids);
}

Test(backend_sample_ex, an_undeclared_profile_is_unsupported)
{
    reset();
    gf_backend_ops o = table(1);
    gf_sampler_params p = with_profile(GF_PROFILE_LLAMACPP);
    int32_t ids[B];
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &p, k_seq, 4, ids), GF_E_UNSUPPORTED);
    cr_assert(strstr(gf_error_msg(), "profile 'llamacpp'"), "%s", gf_error_msg());
    cr_assert_eq(g_ex_calls + g_old_calls, 0);
}

Test(backend_sample_ex, an_old_table_keeps_working_and_is_never_read_past_its_size)
{
    reset();
    gf_backend_ops o = table(0);
    gf_sampler_params plain = gf_sampler_greedy(), hf = with_profile(GF_PROFILE_HF);
    plain.temperature = 0.7;
    plain.seed = 2;
    int32_t ids[B];
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &plain, k_seq, 4, ids), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(g_old_calls, 1);
    expect_engine(&plain, ids);
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &hf, k_seq, 4, ids), GF_E_UNSUPPORTED);
    cr_assert_eq(g_ex_calls, 0, "sample_ex past struct_size was called");
}

Test(backend_sample_ex, vllm_poisoned_rows_reach_the_slot)
{
    static const float P[B * V] = {0.0f,      NAN,       1.0f,      0.0f,      0.0f,      0.0f,
                                   -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    gf_backend_ops o = table(1);
    gf_sampler_params v = with_profile(GF_PROFILE_VLLM);
    int32_t ids[B];
    cr_assert_eq(gf_backend_sample(&o, NULL, P, B, V, &v, k_seq, 0, ids), GF_E_UNSUPPORTED); /* not declared */
    gf_sampler_params s = gf_sampler_greedy();
    s.temperature = 1.0;
    cr_assert_eq(gf_backend_sample(&o, NULL, P, B, V, &s, k_seq, 0, ids), GF_E_INVALID_ARG); /* seed refuses NaN */
}
