/* generate's sampler plumbing (engine/generate.c -> gf_sample_row): the
 * extension's history is each row's own prompt + generated ids, the
 * min_new_tokens ban holds EOS back until then, stop_token_ids end a row,
 * and a case-level extension with no filters leaves generation unchanged. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "support_tiny_model.h"

static tiny_model g_m;
static gf_engine *g_e;
static void setup(void)
{
    g_e = tiny_engine(&g_m);
    cr_assert_not_null(g_e, "engine: %s", gf_error_msg());
}
static void teardown(void)
{
    gf_engine_destroy(g_e);
    tiny_model_free(&g_m);
}
TestSuite(generate_sampler, .init = setup, .fini = teardown);

static const int32_t P0[4] = {3, 17, 9, 40}, P1[2] = {5, 22};
static const int32_t *const PROMPTS[2] = {P0, P1};
static const int32_t LENS[2] = {4, 2};

static gf_generation *run(const gf_generate_params *p)
{
    gf_generation *g = NULL;
    gf_status st = gf_generate(g_e, 2, PROMPTS, LENS, p, &g);
    cr_assert_eq(st, GF_OK, "%s", gf_error_msg());
    return g;
}

Test(generate_sampler, plain_ext_changes_nothing)
{
    gf_generate_params p = gf_generate_defaults();
    p.max_new_tokens = 12;
    p.sampler.temperature = 0.9;
    p.sampler.seed = 4;
    gf_generation *a = run(&p);
    gf_sampler_ext e = gf_sampler_ext_defaults();
    p.sampler.ext = &e;
    gf_generation *b = run(&p);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(a->n_tokens[r], b->n_tokens[r]);
        cr_assert_eq(memcmp(a->tokens[r], b->tokens[r], (size_t)a->n_tokens[r] * sizeof(int32_t)), 0);
    }
    gf_generation_free(a);
    gf_generation_free(b);
}

Test(generate_sampler, the_ban_and_stop_ids_use_each_rows_history)
{
    /* greedy; pick as EOS the token row 0 emits first: without the ban it
     * stops at once; with min_new_tokens 3 it emits 3 other tokens first */
    gf_generate_params p = gf_generate_defaults();
    p.max_new_tokens = 10;
    gf_generation *g = run(&p);
    const int32_t eos = g->tokens[0][LENS[0]];
    gf_generation_free(g);
    p.eos_id = eos;
    g = run(&p);
    cr_assert_eq(g->stop[0], GF_STOP_EOS);
    cr_assert_eq(g->n_until_stop[0], LENS[0] + 1);
    gf_generation_free(g);
    gf_sampler_ext e = gf_sampler_ext_defaults();
    e.min_new_tokens = 3;
    p.sampler.ext = &e;
    g = run(&p);
    for (int r = 0; r < 2; r++) {
        int32_t first_eos = -1;
        for (int32_t t = LENS[r]; t < g->n_tokens[r]; t++)
            if (g->tokens[r][t] == eos && first_eos < 0)
                first_eos = t - LENS[r];
        cr_assert(first_eos < 0 || first_eos >= 3, "row %d: EOS at generated index %d (min_new_tokens 3)", r,
                  first_eos);
    }
    /* the history is the row's own: a repetition penalty that the prompt
     * alone would not trigger changes what greedy picks somewhere */
    gf_generation_free(g);
    e = gf_sampler_ext_defaults();
    p.eos_id = -1;
    g = run(&p);
    e.repetition_penalty = 1e6; /* every seen token (prompt or generated) pushed toward 0 */
    gf_generation *h = run(&p);
    for (int r = 0; r < 2; r++)
        for (int32_t t = LENS[r]; t < h->n_tokens[r]; t++)
            for (int32_t u = 0; u < t; u++)
                if (h->tokens[r][u] == h->tokens[r][t]) {
                    /* a repeat only where every alternative is at most 0 after
                     * the penalty; with V 64 random logits it does not happen */
                    cr_assert_fail("row %d repeats token %d at %d under repetition_penalty 1e6", r, h->tokens[r][t], t);
                }
    int repeats = 0; /* without the penalty greedy does repeat (so the check above means something) */
    for (int r = 0; r < 2; r++)
        for (int32_t t = LENS[r]; t < g->n_tokens[r]; t++)
            for (int32_t u = 0; u < t; u++)
                repeats += g->tokens[r][u] == g->tokens[r][t];
    cr_assert_gt(repeats, 0);
    gf_generation_free(g);
    gf_generation_free(h);
    /* stop_token_ids end a row like EOS (no eos_id set: it keeps emitting the stop id) */
    static int32_t stop[1];
    e = gf_sampler_ext_defaults();
    g = run(&p);
    stop[0] = g->tokens[1][LENS[1] + 2];
    gf_generation_free(g);
    e.stop_ids = stop;
    e.n_stop_ids = 1;
    g = run(&p);
    cr_assert_eq(g->stop[1], GF_STOP_EOS);
    cr_assert_leq(g->n_until_stop[1], LENS[1] + 3);
    cr_assert_eq(g->tokens[1][g->n_until_stop[1] - 1], stop[0]);
    cr_assert_eq(g->tokens[1][g->n_tokens[1] - 1], stop[0]);
    gf_generation_free(g);
}

/* llamacpp's mirostat carries mu from step to step (issue 34): each step's
 * tokens are gf_sample's at the mu this test keeps itself, mu -= eta *
 * (-log2 p_token - tau) over the step's kept distribution; and mu matters:
 * at some step the first step's mu (2 tau, what a generation that never
 * updated mu would use) keeps another set. Both versions, both rows. */
typedef struct miro_check {
    gf_sampler_params p;
    gf_sampler_ext e;
    double mu[2];
    long steps, moved;
} miro_check;

static gf_status miro_step(void *user, const gf_step_info *info)
{
    miro_check *c = user;
    for (int32_t b = 0; b < info->B; b++) {
        if (info->finished_before[b])
            continue;
        const float *L = info->logits + (size_t)b * info->V;
        gf_sampler_ext e = c->e;
        e.use_mirostat_mu = 1;
        e.mirostat_mu = c->mu[b];
        gf_sampler_params p = c->p;
        p.ext = &e;
        gf_sample_result r;
        cr_assert_eq(gf_sample(L, info->V, &p, (uint64_t)b, (uint64_t)info->step, &r), GF_OK, "%s", gf_error_msg());
        cr_assert_eq(r.token, info->tokens[b], "mirostat %d, row %d, step %d, mu %g: generate %d, gf_sample %d",
                     (int)e.mirostat, (int)b, (int)info->step, c->mu[b], (int)info->tokens[b], (int)r.token);
        double *pr = malloc((size_t)info->V * sizeof *pr), *p0 = malloc((size_t)info->V * sizeof *p0);
        cr_assert(pr && p0);
        cr_assert_eq(gf_sampler_probs(L, info->V, &p, pr), GF_OK);
        gf_sampler_ext e0 = c->e; /* mu never updated */
        gf_sampler_params q = c->p;
        q.ext = &e0;
        cr_assert_eq(gf_sampler_probs(L, info->V, &q, p0), GF_OK);
        for (int32_t i = 0; i < info->V; i++)
            if ((pr[i] > 0) != (p0[i] > 0)) {
                c->moved++;
                break;
            }
        cr_assert_gt(pr[r.token], 0.0);
        c->mu[b] -= c->e.mirostat_eta * (-log2(pr[r.token]) - c->e.mirostat_tau);
        free(pr);
        free(p0);
        c->steps++;
    }
    return GF_OK;
}

Test(generate_sampler, mirostat_mu_follows_the_draws)
{
    for (int32_t v = 1; v <= 2; v++) {
        miro_check c = {.p = gf_sampler_greedy(), .e = gf_sampler_ext_defaults()};
        c.e.profile = GF_PROFILE_LLAMACPP;
        c.e.mirostat = v;
        c.e.mirostat_tau = 2.0;
        c.e.mirostat_eta = 0.6;
        c.p.temperature = 0.7;
        c.p.seed = 11;
        c.mu[0] = c.mu[1] = 2.0 * c.e.mirostat_tau;
        gf_generate_params p = gf_generate_defaults();
        p.max_new_tokens = 16;
        p.sampler = c.p;
        p.sampler.ext = &c.e;
        p.on_step = miro_step;
        p.user = &c;
        gf_generation *g = run(&p);
        gf_generation_free(g);
        cr_assert_eq(c.steps, 32, "mirostat %d: %ld row-steps", (int)v, c.steps);
        cr_assert_gt(c.moved, 0, "mirostat %d: mu never changed the kept set", (int)v);
    }
}
