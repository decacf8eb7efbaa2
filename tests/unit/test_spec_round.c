/* gf_spec_round, the engine's reference rejection sampler (engine/spec_round.c,
 * docs/speculative.md), on rounds small enough to work out by hand: each
 * rule's acceptance at both sides of its threshold, the residual draw, the
 * bonus row, the greedy target, and the requests it refuses. */
#include <criterion/criterion.h>
#include <math.h>

#include "genfence/engine.h"

/* one round: K 1, V 2; row 0 uniform (p = 0.5, 0.5), row 1 p = (0.75, 0.25) */
static const float k_rows[] = {0.0f, 0.0f, 1.0986123f, 0.0f}; /* log 3 */

static void round1(int rule, const double *q, int32_t x, double ua, double ud0, double ud1, int32_t *acc, int32_t *next)
{
    gf_sampler_params p = gf_sampler_greedy();
    p.temperature = 1.0;
    const int32_t draft[1] = {x};
    const double u_accept[1] = {ua}, u_draw[2] = {ud0, ud1};
    gf_spec_request rq = {.struct_size = sizeof rq,
                          .K = 1,
                          .V = 2,
                          .rule = rule,
                          .target_logits = k_rows,
                          .draft = draft,
                          .draft_probs = q,
                          .params = &p,
                          .u_accept = u_accept,
                          .u_draw = u_draw};
    cr_assert_eq(gf_spec_round(&rq, acc, next), GF_OK, "%s", gf_error_msg());
}

Test(spec_round, leviathan_accepts_below_p_over_q_and_draws_the_residual)
{
    const double q[2] = {0.8, 0.2}; /* p/q for token 0: 0.5 / 0.8 = 0.625 */
    int32_t a, n;
    round1(GF_PROFILE_SEED, q, 0, 0.6, 0.5, 0.7, &a, &n);
    cr_assert_eq(a, 1);
    cr_assert_eq(n, 0, "bonus from row 1 (0.75, 0.25) at u 0.7: token 0, got %d", n);
    round1(GF_PROFILE_SEED, q, 0, 0.6, 0.5, 0.8, &a, &n);
    cr_assert_eq(n, 1, "bonus at u 0.8: token 1, got %d", n);
    round1(GF_PROFILE_HF, q, 0, 0.65, 0.01, 0.5, &a, &n);
    cr_assert_eq(a, 0);
    cr_assert_eq(n, 1, "the residual max(0, p - q) = (0, 0.3) holds token 1 only, got %d", n);
    /* token 1: p/q = 2.5, always accepted */
    round1(GF_PROFILE_SEED, q, 1, 0.999, 0.5, 0.1, &a, &n);
    cr_assert_eq(a, 1);
}

Test(spec_round, a_draft_token_the_draft_gave_no_mass)
{
    const double q[2] = {1.0, 0.0};
    int32_t a, n;
    round1(GF_PROFILE_SEED, q, 1, 0.5, 0.5, 0.5, &a, &n); /* q 0, p 0.5 > 0: accepted */
    cr_assert_eq(a, 1);
    round1(GF_PROFILE_VLLM, q, 1, 0.5, 0.5, 0.5, &a, &n); /* vLLM: q 0 rejects */
    cr_assert_eq(a, 0);
    cr_assert_eq(n, 1, "residual (0, 0.5): token 1, got %d", n);
}

Test(spec_round, llamacpp_takes_the_targets_own_draw)
{
    const double q[2] = {0.9, 0.1}; /* not read */
    int32_t a, n;
    round1(GF_PROFILE_LLAMACPP, q, 0, 0.999, 0.3, 0.9, &a, &n); /* y = 0 at u 0.3 equals the draft */
    cr_assert_eq(a, 1);
    cr_assert_eq(n, 1, "bonus at u 0.9 from (0.75, 0.25): token 1, got %d", n);
    round1(GF_PROFILE_LLAMACPP, q, 0, 0.001, 0.7, 0.5, &a, &n); /* y = 1: rejected, y is next */
    cr_assert_eq(a, 0);
    cr_assert_eq(n, 1);
}

Test(spec_round, greedy_target_and_deterministic_draft)
{
    gf_sampler_params p = gf_sampler_greedy();
    const float rows[] = {0.0f, 2.0f, 1.0f, 3.0f, 0.0f, 0.0f, 5.0f, 1.0f, 0.0f}; /* argmax 1, 0, 0 */
    const int32_t draft[2] = {1, 2};
    const double ua[2] = {0.5, 0.5}, ud[3] = {0.5, 0.5, 0.5};
    gf_spec_request rq = {.struct_size = sizeof rq,
                          .K = 2,
                          .V = 3,
                          .rule = GF_PROFILE_SEED,
                          .target_logits = rows,
                          .draft = draft,
                          .params = &p,
                          .u_accept = ua,
                          .u_draw = ud};
    int32_t a, n;
    cr_assert_eq(gf_spec_round(&rq, &a, &n), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(a, 1, "draft 1 is row 0's argmax, draft 2 is not row 1's");
    cr_assert_eq(n, 0, "row 1's argmax, got %d", n);
}

Test(spec_round, refuses_what_the_slot_may_not_be_handed)
{
    gf_sampler_params p = gf_sampler_greedy();
    p.temperature = 1.0;
    int32_t draft[1] = {0}, a, n;
    double ua[1] = {0.5}, ud[2] = {0.5, 0.5}, q[2] = {0.6, 0.3};
    gf_spec_request rq = {.struct_size = sizeof rq,
                          .K = 1,
                          .V = 2,
                          .target_logits = k_rows,
                          .draft = draft,
                          .draft_probs = q,
                          .params = &p,
                          .u_accept = ua,
                          .u_draw = ud};
    cr_assert_eq(gf_spec_round(&rq, &a, &n), GF_E_INVALID_ARG, "a q row summing to 0.9");
    cr_assert(strstr(gf_error_msg(), "sums to"), "%s", gf_error_msg());
    q[1] = 0.4;
    draft[0] = 2;
    cr_assert_eq(gf_spec_round(&rq, &a, &n), GF_E_INVALID_ARG, "a draft token outside V");
    draft[0] = 0;
    ud[1] = 1.0;
    cr_assert_eq(gf_spec_round(&rq, &a, &n), GF_E_INVALID_ARG, "a uniform of 1");
    ud[1] = 0.5;
    rq.rule = 9;
    cr_assert_eq(gf_spec_round(&rq, &a, &n), GF_E_INVALID_ARG, "rule 9");
    rq.rule = GF_PROFILE_SEED;
    cr_assert_eq(gf_spec_round(&rq, &a, &n), GF_OK, "%s", gf_error_msg());
}
