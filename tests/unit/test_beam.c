/* gf_beam_search (engine/beam.c, transformers 4.47.1's rules) on a scripted
 * model whose next-token log-probabilities depend on the last token only,
 * small enough to work out by hand: an EOS within num_beams finishing a
 * hypothesis whose generated_len counts the EOS, the keep-the-best rule, the
 * finalize step, length_penalty 0 and 1, early_stopping true; and gf_best_of. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "genfence/beam.h"
#include "ref/ref.h"
#include "support_tiny_model.h"

enum { EOS = 2 };

/* log p(next | last) as the logits (the rest at -60: e^-60 x 60 is far below
 * the tolerances here) */
static void script_row(int32_t last, float *row, int32_t V)
{
    for (int32_t i = 0; i < V; i++)
        row[i] = -60.0f;
    switch (last) {
    case 1: /* the prompt: EOS 0.5, 3 0.3, 4 0.2 */
        row[EOS] = logf(0.5f), row[3] = logf(0.3f), row[4] = logf(0.2f);
        break;
    case 3: /* 5 0.9, EOS 0.1 */ row[5] = logf(0.9f), row[EOS] = logf(0.1f); break;
    case 4: /* EOS 0.6, 6 0.4 */ row[EOS] = logf(0.6f), row[6] = logf(0.4f); break;
    default: /* 7 0.7, 8 0.3 */ row[7] = logf(0.7f), row[8] = logf(0.3f); break;
    }
}

static gf_status script_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    (void)model;
    (void)cache;
    const int32_t V = 64;
    for (int32_t b = 0; b < in->B; b++)
        for (int32_t t = 0; t < (in->logits_mode == GF_LOGITS_LAST ? 1 : in->T); t++) {
            int32_t pos = in->logits_mode == GF_LOGITS_LAST ? in->T - 1 : t;
            script_row(in->tokens[(size_t)b * in->T + pos],
                       logits_out + ((size_t)b * (in->logits_mode ? 1 : in->T) + t) * V, V);
        }
    return GF_OK;
}

static gf_backend_ops g_ops;
static tiny_model g_m;
static gf_engine *g_e;

static void init(void)
{
    g_ops = *gf_backend_ref();
    g_ops.name = "ref-scripted";
    g_ops.forward = script_forward;
    tiny_model_make(&g_m, 64, 128, 16, 2, 2, 42);
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    cr_assert_eq(gf_engine_create(&g_ops, &g_m.desc, &o, &g_e), GF_OK, "%s", gf_error_msg());
}

static void fini(void)
{
    gf_engine_destroy(g_e);
    g_e = NULL;
    tiny_model_free(&g_m);
}

static void search(double lp, int early, int32_t n_ret, int32_t max_new, gf_beam_result *r)
{
    const int32_t prompt[1] = {1};
    gf_beam_params p = {.num_beams = 2,
                        .num_return = n_ret,
                        .max_new_tokens = max_new,
                        .length_penalty = lp,
                        .early_stopping = early,
                        .eos_id = EOS};
    cr_assert_eq(gf_beam_search(g_e, prompt, 1, &p, r), GF_OK, "%s", gf_error_msg());
}

static void expect_seq(const gf_beam_result *r, int32_t i, const int32_t *want, int32_t n, double score)
{
    cr_assert_eq(r->n_tokens[i], n, "sequence %d: %d tokens, want %d", i, r->n_tokens[i], n);
    for (int32_t t = 0; t < n; t++)
        cr_assert_eq(r->tokens[i][t], want[t], "sequence %d token %d: %d, want %d", i, t, r->tokens[i][t], want[t]);
    cr_assert(fabs(r->scores[i] - score) < 1e-6, "sequence %d: score %.9g, want %.9g", i, r->scores[i], score);
}

/* Step 0: EOS (rank 0) finishes [1, EOS] (sum log .5, generated_len 1); 3 and
 * 4 run. Step 1: [1 3 5] log .27 runs, [1 4 EOS] log .12 finishes
 * (generated_len 2), [1 4 6] log .08 runs. Not done: the worst kept, log .12 / 2,
 * is below the best candidate's log .27 / 2. At max length [1 3 5] (log .27 / 2)
 * displaces [1 4 EOS]; [1 4 6] (log .08 / 2) is below the worst. */
Test(beam, eos_generated_len_and_finalize, .init = init, .fini = fini)
{
    gf_beam_result r;
    search(1.0, GF_BEAM_EARLY_FALSE, 2, 2, &r);
    cr_assert_eq(r.n, 2);
    expect_seq(&r, 0, (const int32_t[]){1, 3, 5}, 3, log(0.27) / 2);
    expect_seq(&r, 1, (const int32_t[]){1, EOS}, 2, log(0.5));
    cr_assert_eq(r.finished[0], 0);
    cr_assert_eq(r.finished[1], 1);
    cr_assert_eq(r.generated_len[1], 1, "the EOS counts in generated_len");
    cr_assert_eq(r.steps, 2);
    gf_beam_result_clear(&r);
}

/* length_penalty 0: plain sums; [1, EOS] (log .5) is best, then [1 3 5] (log .27) */
Test(beam, no_length_penalty, .init = init, .fini = fini)
{
    gf_beam_result r;
    search(0.0, GF_BEAM_EARLY_FALSE, 2, 2, &r);
    expect_seq(&r, 0, (const int32_t[]){1, EOS}, 2, log(0.5));
    expect_seq(&r, 1, (const int32_t[]){1, 3, 5}, 3, log(0.27));
    gf_beam_result_clear(&r);
}

/* early_stopping true: done once two hypotheses finished (step 1); the running
 * beams are not added, so [1 4 EOS] stays */
Test(beam, early_stopping_true, .init = init, .fini = fini)
{
    gf_beam_result r;
    search(1.0, GF_BEAM_EARLY_TRUE, 2, 5, &r);
    cr_assert_eq(r.steps, 2, "done after step 1, not at max length");
    expect_seq(&r, 0, (const int32_t[]){1, EOS}, 2, log(0.5));
    expect_seq(&r, 1, (const int32_t[]){1, 4, EOS}, 3, log(0.12) / 2);
    gf_beam_result_clear(&r);
}

Test(beam, refuses_bad_params, .init = init, .fini = fini)
{
    const int32_t prompt[1] = {1};
    gf_beam_result r;
    gf_beam_params p = {.num_beams = 1, .num_return = 1, .max_new_tokens = 2, .length_penalty = 1, .eos_id = EOS};
    cr_assert_eq(gf_beam_search(g_e, prompt, 1, &p, &r), GF_E_INVALID_ARG);
    p.num_beams = 2;
    p.num_return = 3;
    cr_assert_eq(gf_beam_search(g_e, prompt, 1, &p, &r), GF_E_INVALID_ARG);
    p.num_return = 1;
    p.max_new_tokens = 129;
    cr_assert_eq(gf_beam_search(g_e, prompt, 1, &p, &r), GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), "n_positions 128"), "%s", gf_error_msg());
}

Test(beam, best_of_highest_lowest_index_nan_never)
{
    cr_assert_eq(gf_best_of((const double[]){-3, -1, -2}, 3), 1);
    cr_assert_eq(gf_best_of((const double[]){-1, -2, -1}, 3), 0, "equal scores: the lowest index");
    cr_assert_eq(gf_best_of((const double[]){NAN, -5, NAN}, 3), 1, "NaN never wins");
    cr_assert_eq(gf_best_of((const double[]){NAN}, 1), -1);
    cr_assert_eq(gf_best_of(NULL, 0), -1);
}
