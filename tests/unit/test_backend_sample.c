/* gf_backend_sample: a backend's own `sample` slot fed the engine sampler's
 * uniforms (docs/backends.md), and the harness's slot check (gf_k_slot_rows /
 * gf_k_slot_finish) catching a slot that is wrong on one token. The backends
 * here are tiny in-test tables with only the slots under test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "kinds.h"
#include "keys.h"
#include "slot.h"

enum { B = 3, V = 9 };
static const uint64_t k_seq[B] = {5, 7, 1u << 20};

static int g_calls, g_wrong_row = -1;
static void *g_model_seen = (void *)1;
static double g_u_seen[B * V];
static int32_t g_v_seen;

/* A correct slot built from the engine's own pieces over the given u. */
static gf_status good_sample(void *model, const float *logits, int32_t nb, const gf_sampler_params *p,
                             const gf_rng_draws *d, int32_t *ids)
{
    g_calls++;
    g_model_seen = model;
    g_v_seen = d->V;
    memcpy(g_u_seen, d->u, sizeof(double) * (size_t)nb * (size_t)d->V);
    double z[V];
    for (int32_t b = 0; b < nb; b++) {
        gf_sample_result r;
        cr_assert_eq(gf_sampler_filter(logits + (size_t)b * d->V, d->V, p, z), GF_OK);
        if (p->temperature == 0)
            gf_sampler_greedy_pick(logits + (size_t)b * d->V, d->V, &r);
        else
            gf_sampler_race(z, d->u + (size_t)b * d->V, d->V, &r);
        ids[b] = r.token;
        if (b == g_wrong_row) /* the deliberate fault: the runner-up on one row */
            ids[b] = r.runner_up;
    }
    return GF_OK;
}

static const char *vendor_text(void *model)
{
    (void)model;
    return "device lost";
}

static gf_status failing_sample(void *model, const float *logits, int32_t nb, const gf_sampler_params *p,
                                const gf_rng_draws *d, int32_t *ids)
{
    (void)model, (void)logits, (void)nb, (void)p, (void)d, (void)ids;
    return GF_E_BACKEND;
}

static gf_backend_ops ops_with(gf_status (*slot)(void *, const float *, int32_t, const gf_sampler_params *,
                                                 const gf_rng_draws *, int32_t *))
{
    gf_backend_ops o;
    memset(&o, 0, sizeof o);
    o.abi_version = GF_BACKEND_ABI_VERSION;
    o.struct_size = sizeof o;
    o.name = "tiny-slot";
    o.sample = slot;
    return o;
}

static void rows(float *L)
{
    double n[B * V];
    gf_k_normals(42, 0, n, B * V);
    for (int i = 0; i < B * V; i++)
        L[i] = (float)(2.0 * n[i]);
    L[1 * V + 4] = -INFINITY; /* an excluded token */
}

static gf_sampler_params params(double t, int k, double p, uint64_t seed)
{
    gf_sampler_params s = gf_sampler_greedy();
    s.temperature = t;
    s.use_top_k = k > 0;
    s.top_k = k;
    s.use_top_p = p > 0;
    s.top_p = p;
    s.seed = seed;
    return s;
}

static void engine_tokens(const float *L, const gf_sampler_params *p, uint64_t step, int32_t *out)
{
    for (int b = 0; b < B; b++) {
        gf_sample_result r;
        cr_assert_eq(gf_sample(L + (size_t)b * V, V, p, k_seq[b], step, &r), GF_OK, "%s", gf_error_msg());
        out[b] = r.token;
    }
}

Test(backend_sample, no_slot_is_unsupported)
{
    gf_backend_ops o = ops_with(NULL);
    float L[B * V];
    int32_t ids[B];
    rows(L);
    gf_sampler_params p = params(1.0, 0, 0, 1);
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &p, k_seq, 0, ids), GF_E_UNSUPPORTED);
    cr_assert(strstr(gf_error_msg(), "tiny-slot"), "%s", gf_error_msg());
}

Test(backend_sample, slot_gets_the_engine_uniforms_and_no_model)
{
    gf_backend_ops o = ops_with(good_sample);
    float L[B * V];
    int32_t ids[B];
    rows(L);
    gf_sampler_params p = params(0.8, 0, 0, 1337);
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &p, k_seq, 6, ids), GF_OK, "%s", gf_error_msg());
    cr_assert_null(g_model_seen);
    cr_assert_eq(g_v_seen, V);
    for (int b = 0; b < B; b++) {
        double u[V];
        gf_rng_uniforms(1337, k_seq[b], 6, V, u);
        cr_assert(!memcmp(u, g_u_seen + (size_t)b * V, sizeof u), "row %d uniforms differ", b);
    }
}

Test(backend_sample, correct_slot_equals_gf_sample)
{
    g_wrong_row = -1;
    gf_backend_ops o = ops_with(good_sample);
    float L[B * V];
    rows(L);
    const gf_sampler_params ps[] = {params(0, 0, 0, 0), params(1.0, 0, 0, 3), params(0.7, 4, 0, 9),
                                    params(1.3, 0, 0.8, 11), params(2.0, 5, 0.9, 12)};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (uint64_t step = 0; step < 8; step++) {
            int32_t want[B], got[B];
            engine_tokens(L, &ps[i], step, want);
            cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &ps[i], k_seq, step, got), GF_OK, "%s", gf_error_msg());
            cr_assert(!memcmp(want, got, sizeof want), "params %zu step %llu", i, (unsigned long long)step);
        }
}

Test(backend_sample, invalid_input_never_reaches_the_slot)
{
    gf_backend_ops o = ops_with(good_sample);
    float L[B * V];
    int32_t ids[B];
    rows(L);
    g_calls = 0;
    gf_sampler_params p = params(1.0, 0, 1.5, 0);
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &p, k_seq, 0, ids), GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), "tiny-slot") && strstr(gf_error_msg(), "top_p"), "%s", gf_error_msg());
    p = params(1.0, 0, 0, 0);
    L[2 * V + 3] = NAN;
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &p, k_seq, 0, ids), GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), "tiny-slot") && strstr(gf_error_msg(), "row 2"), "%s", gf_error_msg());
    cr_assert_eq(g_calls, 0);
}

Test(backend_sample, slot_errors_name_the_backend)
{
    gf_backend_ops o = ops_with(failing_sample);
    o.last_error = vendor_text;
    float L[B * V];
    int32_t ids[B];
    rows(L);
    gf_sampler_params p = params(1.0, 0, 0, 0);
    cr_assert_eq(gf_backend_sample(&o, NULL, L, B, V, &p, k_seq, 0, ids), GF_E_BACKEND);
    cr_assert(strstr(gf_error_msg(), "tiny-slot") && strstr(gf_error_msg(), "device lost"), "%s", gf_error_msg());
}

/* The harness: the same calls through gf_k_slot_rows; one wrong row fails the
 * run with the slot check, naming the row and both tokens. */
static gf_verdict harness_run(int wrong_row, json_t **checks_out)
{
    g_wrong_row = wrong_row;
    gf_backend_ops o = ops_with(good_sample);
    gf_krun k;
    gf_krun_init(&k);
    k.backend_has_sample = 1;
    k.sample_ops = &o;
    gf_k_note_sampler(&k);
    float L[B * V];
    rows(L);
    gf_sampler_params p = params(1.0, 0, 0, 77);
    for (uint64_t step = 0; step < 4; step++) {
        int32_t want[B];
        engine_tokens(L, &p, step, want);
        gf_k_slot_rows(&k, "draw", L, B, V, &p, k_seq, step, want);
    }
    gf_k_slot_finish(&k);
    json_t *slot = json_object_get(k.metrics, "backend_sample_slot");
    cr_assert_eq(json_integer_value(json_object_get(slot, "rows")), 4 * B);
    cr_assert_str_eq(json_string_value(json_object_get(k.metrics, "sampler")), "engine + backend slot");
    gf_verdict v = k.verdict;
    *checks_out = json_incref(k.checks);
    gf_krun_clear(&k);
    g_wrong_row = -1;
    return v;
}

Test(backend_sample, harness_catches_one_wrong_token)
{
    json_t *checks;
    cr_assert_eq(harness_run(-1, &checks), GF_V_PASS);
    json_decref(checks);
    cr_assert_eq(harness_run(1, &checks), GF_V_FAIL);
    json_t *c = json_array_get(checks, json_array_size(checks) - 1);
    cr_assert_str_eq(json_string_value(json_object_get(c, "name")), "backend sample slot equals engine sampler");
    cr_assert(json_is_false(json_object_get(c, "passed")));
    const char *d = json_string_value(json_object_get(c, "detail"));
    cr_assert(d && strstr(d, "4 of 12 rows differ") && strstr(d, "row 1"), "%s", d);
    json_decref(checks);
}
