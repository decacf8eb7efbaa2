/* Engine and reference backend: KV cache, left padding, context limit, EOS,
 * seeded sampling through generate, and the ABI checks. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "ref/ref.h"
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

TestSuite(engine, .init = setup, .fini = teardown);

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

Test(engine, cache_bytes_formula)
{
    void *cache = NULL;
    cr_assert_eq(gf_engine_cache_create(g_e, 3, 128, &cache), GF_OK);
    const gf_model_config *c = gf_engine_config(g_e);
    size_t want = 2ull * c->n_layer * 3 * c->n_head * 128 * c->d_head * 4;
    cr_assert_eq(gf_engine_ops(g_e)->cache_bytes(cache), want);
    cr_assert_eq(gf_engine_ops(g_e)->cache_length(cache), 0);
    gf_engine_cache_free(g_e, cache);
}

/* Fence 3 on the real forward: prefill 2, then one by one, equals recomputation. */
Test(engine, cache_equals_recompute_prefill_2_then_1)
{
    enum { T = 6, V = 64 };
    int32_t tok[T] = {5, 17, 3, 60, 22, 9}, pos[T] = {0, 1, 2, 3, 4, 5};
    float full[T * V], step[T * V];
    gf_batch all = {.B = 1, .T = T, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    cr_assert_eq(gf_engine_forward(g_e, NULL, &all, full), GF_OK);
    void *cache = NULL;
    cr_assert_eq(gf_engine_cache_create(g_e, 1, 128, &cache), GF_OK);
    int at = 0;
    const int chunks[] = {2, 1, 1, 1, 1};
    for (int c = 0; c < 5; c++) {
        gf_batch in = {
            .B = 1, .T = chunks[c], .tokens = tok + at, .position_ids = pos + at, .logits_mode = GF_LOGITS_ALL};
        cr_assert_eq(gf_engine_forward(g_e, cache, &in, step + at * V), GF_OK);
        at += chunks[c];
        cr_assert_eq(gf_engine_ops(g_e)->cache_length(cache), at, "length advances once per call");
    }
    cr_expect_leq(max_diff(full, step, T * V), 1e-5, "cached vs recomputed: %g", max_diff(full, step, T * V));
    gf_engine_cache_free(g_e, cache);
}

Test(engine, cache_overflow_is_an_error)
{
    void *cache = NULL;
    cr_assert_eq(gf_engine_cache_create(g_e, 1, 4, &cache), GF_OK);
    int32_t tok[5] = {1, 2, 3, 4, 5}, pos[5] = {0, 1, 2, 3, 4};
    float out[5 * 64];
    gf_batch in = {.B = 1, .T = 5, .tokens = tok, .position_ids = pos};
    cr_expect_eq(gf_engine_forward(g_e, cache, &in, out), GF_E_CONTEXT_LIMIT);
    cr_expect(strstr(gf_error_msg(), "ref"), "message names the backend: %s", gf_error_msg());
    gf_engine_cache_free(g_e, cache);
}

Test(engine, verify_cache_chunked)
{
    int32_t prompt[6] = {1, 2, 3, 4, 5, 6};
    int32_t chunks[3] = {2, 1, 3};
    gf_verify_result r;
    cr_assert_eq(gf_verify_cache(g_e, prompt, 6, 32, chunks, 3, NULL, &r), GF_OK, "%s", gf_error_msg());
    cr_expect(r.tokens_equal);
    cr_expect_leq(r.max_abs_delta, 1e-5, "%g", r.max_abs_delta);
    cr_expect_gt(r.min_margin, 0);
    gf_verify_result_clear(&r);
}

/* Fence 4: positions from the mask. */
Test(engine, left_padding_positions)
{
    uint8_t mask[15] = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1};
    int32_t pos[15], next[3];
    const int32_t want[15] = {0, 0, 0, 1, 2, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0};
    gf_positions_from_mask(mask, 3, 5, pos, next);
    cr_assert_arr_eq(pos, want, sizeof want);
    cr_expect_eq(next[0], 3);
    cr_expect_eq(next[1], 5);
    cr_expect_eq(next[2], 1);
}

/* A padded row's logits equal its unpadded run: the key mask and positions work. */
Test(engine, padded_row_equals_unpadded)
{
    enum { V = 64 };
    int32_t alone[2] = {7, 8}, apos[2] = {0, 1};
    float ref_logits[V];
    gf_batch a = {.B = 1, .T = 2, .tokens = alone, .position_ids = apos, .logits_mode = GF_LOGITS_LAST};
    cr_assert_eq(gf_engine_forward(g_e, NULL, &a, ref_logits), GF_OK);
    int32_t tok[10] = {0, 0, 0, 7, 8, 1, 2, 3, 4, 5};
    uint8_t mask[10] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
    int32_t pos[10];
    gf_positions_from_mask(mask, 2, 5, pos, NULL);
    float out[2 * V];
    gf_batch b = {.B = 2, .T = 5, .tokens = tok, .position_ids = pos, .key_mask = mask, .logits_mode = GF_LOGITS_LAST};
    cr_assert_eq(gf_engine_forward(g_e, NULL, &b, out), GF_OK);
    cr_expect_leq(max_diff(out, ref_logits, V), 1e-5);
    /* and without the mask it differs: the test can fail */
    b.key_mask = NULL;
    cr_assert_eq(gf_engine_forward(g_e, NULL, &b, out), GF_OK);
    cr_expect_gt(max_diff(out, ref_logits, V), 1e-3);
}

static gf_generation *gen1(int32_t plen, int32_t max_new, int cached, int raise, gf_status *st)
{
    int32_t *prompt = malloc((size_t)plen * sizeof *prompt);
    for (int i = 0; i < plen; i++)
        prompt[i] = (i * 7 + 3) % 64;
    gf_generate_params p = gf_generate_defaults();
    p.max_new_tokens = max_new;
    p.use_cache = cached;
    p.raise_on_context_limit = raise;
    const int32_t *pp = prompt;
    gf_generation *g = NULL;
    *st = gf_generate(g_e, 1, &pp, &plen, &p, &g);
    free(prompt);
    return g;
}

Test(engine, context_limit_129)
{
    gf_status st;
    gf_generation *g = gen1(120, 20, 1, 0, &st);
    cr_assert_eq(st, GF_OK, "%s", gf_error_msg());
    cr_expect_eq(g->n_tokens[0], 129);
    cr_expect_eq(g->stop[0], GF_STOP_CONTEXT_LIMIT);
    gf_generation_free(g);
}

Test(engine, context_limit_raise)
{
    gf_status st;
    gf_generation *g = gen1(120, 20, 1, 1, &st);
    cr_expect_eq(st, GF_E_CONTEXT_LIMIT);
    cr_expect_null(g);
    cr_expect(strstr(gf_error_msg(), "context limit"), "%s", gf_error_msg());
}

Test(engine, uncached_slides_to_140)
{
    gf_status st;
    gf_generation *g = gen1(120, 20, 0, 0, &st);
    cr_assert_eq(st, GF_OK, "%s", gf_error_msg());
    cr_expect_eq(g->n_tokens[0], 140);
    cr_expect_eq(g->stop[0], GF_STOP_LENGTH);
    gf_generation_free(g);
}

Test(engine, cached_equals_uncached_greedy)
{
    gf_status st;
    gf_generation *a = gen1(10, 40, 1, 0, &st), *b = gen1(10, 40, 0, 0, &st);
    cr_assert(a && b);
    cr_expect_arr_eq(a->tokens[0], b->tokens[0], 50 * sizeof(int32_t));
    gf_generation_free(a);
    gf_generation_free(b);
}

static gf_generation *gen_batch(int32_t B, const int32_t *const *prompts, const int32_t *lens,
                                const gf_generate_params *p)
{
    gf_generation *g = NULL;
    gf_status st = gf_generate(g_e, B, prompts, lens, p, &g);
    cr_assert_eq(st, GF_OK, "%s", gf_error_msg());
    return g;
}

static const int32_t P0[] = {3, 9}, P1[] = {1, 4, 1, 5, 9, 2, 6, 5, 3, 5},
                     P2[] = {2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9};
static const int32_t *const PROMPTS[3] = {P0, P1, P2};
static const int32_t LENS[3] = {2, 10, 13};

Test(engine, sticky_eos)
{
    gf_generate_params p = gf_generate_defaults();
    p.max_new_tokens = 24;
    p.sampler.temperature = 1.0;
    p.sampler.seed = 11;
    gf_generation *free_run = gen_batch(3, PROMPTS, LENS, &p);
    /* choose as EOS the token row 0 emits at step 3: row 0 must stop there */
    int32_t eos = free_run->tokens[0][LENS[0] + 3];
    p.eos_id = eos;
    gf_generation *g = gen_batch(3, PROMPTS, LENS, &p);
    cr_assert_eq(g->stop[0], GF_STOP_EOS);
    cr_expect_leq(g->n_until_stop[0], LENS[0] + 4);
    for (int b = 0; b < 3; b++) {
        if (g->stop[b] != GF_STOP_EOS)
            continue;
        for (int32_t i = g->n_until_stop[b]; i < g->n_tokens[b]; i++)
            cr_expect_eq(g->tokens[b][i], eos, "row %d emits only eos after finishing", b);
        cr_expect_eq(g->tokens[b][g->n_until_stop[b] - 1], eos);
    }
    gf_generation_free(free_run);
    gf_generation_free(g);
}

Test(engine, sampled_batch_equals_single_runs)
{
    gf_generate_params p = gf_generate_defaults();
    p.max_new_tokens = 24;
    p.sampler.temperature = 0.9;
    p.sampler.use_top_k = 1;
    p.sampler.top_k = 20;
    p.sampler.use_top_p = 1;
    p.sampler.top_p = 0.95;
    p.sampler.seed = 1337;
    const uint64_t ids[3] = {100, 200, 300};
    p.seq_ids = ids;
    gf_generation *batch = gen_batch(3, PROMPTS, LENS, &p);
    for (int b = 0; b < 3; b++) {
        gf_generate_params sp = p;
        sp.seq_ids = &ids[b];
        gf_generation *one = gen_batch(1, &PROMPTS[b], &LENS[b], &sp);
        cr_expect_arr_eq(one->tokens[0], batch->tokens[b], (size_t)one->n_tokens[0] * sizeof(int32_t), "row %d", b);
        gf_generation_free(one);
    }
    /* same seed repeats; a different seed differs */
    gf_generation *again = gen_batch(3, PROMPTS, LENS, &p);
    cr_expect_arr_eq(again->tokens[2], batch->tokens[2], (size_t)batch->n_tokens[2] * sizeof(int32_t));
    p.sampler.seed = 1338;
    gf_generation *other = gen_batch(3, PROMPTS, LENS, &p);
    int differ = 0;
    for (int b = 0; b < 3; b++)
        differ |= memcmp(other->tokens[b], batch->tokens[b], (size_t)batch->n_tokens[b] * sizeof(int32_t)) != 0;
    cr_expect(differ, "a different seed gives different tokens");
    gf_generation_free(batch);
    gf_generation_free(again);
    gf_generation_free(other);
}

Test(engine, greedy_batch_equals_single_runs_both_modes)
{
    for (int cached = 0; cached < 2; cached++) {
        gf_generate_params p = gf_generate_defaults();
        p.max_new_tokens = 24;
        p.use_cache = cached;
        gf_generation *batch = gen_batch(3, PROMPTS, LENS, &p);
        for (int b = 0; b < 3; b++) {
            gf_generation *one = gen_batch(1, &PROMPTS[b], &LENS[b], &p);
            cr_expect_arr_eq(one->tokens[0], batch->tokens[b], (size_t)one->n_tokens[0] * sizeof(int32_t),
                             "row %d cached %d", b, cached);
            gf_generation_free(one);
        }
        gf_generation_free(batch);
    }
}

Test(engine, invalid_sampler_params_refused)
{
    gf_generate_params p = gf_generate_defaults();
    p.sampler.temperature = -1;
    gf_generation *g = NULL;
    cr_expect_eq(gf_generate(g_e, 3, PROMPTS, LENS, &p, &g), GF_E_INVALID_ARG);
    cr_expect_null(g);
}

Test(abi, wrong_version_and_missing_slot_refused)
{
    gf_backend_ops ops = *gf_backend_ref();
    cr_expect_eq(gf_backend_check_ops(&ops), GF_OK);
    ops.abi_version = 99;
    cr_expect_eq(gf_backend_check_ops(&ops), GF_E_ABI);
    cr_expect(strstr(gf_error_msg(), "99"), "%s", gf_error_msg());
    ops = *gf_backend_ref();
    ops.forward = NULL;
    cr_expect_eq(gf_backend_check_ops(&ops), GF_E_ABI);
    cr_expect(strstr(gf_error_msg(), "forward"), "%s", gf_error_msg());
    cr_expect_eq(gf_backend_check_ops(NULL), GF_E_ABI);
}
