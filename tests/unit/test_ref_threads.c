/* ref's threads change no bit (ref.c's threading rule): the same logits,
 * byte for byte, at 1, 2, 3, 9 and 17 threads, through every split the pool
 * makes: GPT-2's one-row [in, out] products split by a dot product's lanes
 * (and by columns past 8 threads), several rows' products and the LM head
 * split by output, the activation split by element. The tiny suite models
 * never reach these splits (every product of theirs is below the pool's
 * REF_PAR_MIN_WORK, so it runs on one thread): the model here is sized so
 * that every product but the attention output's is above it, with K not a
 * multiple of 64 (the lanes' tail rows) nor of 8 (dot()'s tail lanes). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "ref/ref.h"
#include "ref/ref_pool.h" /* REF_PAR_MIN_WORK */
#include "support_tiny_model.h"

enum { V = 700, NP = 64, D = 324, L = 2, H = 4, F = 4 * D };
enum { T0 = 5, STEPS = 6, B = 2 };

/* 5 prompt tokens, 6 cached one-row steps, then a 2-row step of a second
 * cache (rows of GPT-2's several-row product); every logit in `out`:
 * (T0 + STEPS + B, V) */
static void run(const tiny_model *m, int threads, float *out)
{
    gf_engine *e = NULL;
    gf_backend_options o = {.struct_size = sizeof o, .threads = threads};
    cr_assert_eq(gf_engine_create(gf_backend_ref(), &m->desc, &o, &e), GF_OK, "engine: %s", gf_error_msg());
    void *cache = NULL, *cache2 = NULL;
    cr_assert_eq(gf_engine_cache_create(e, 1, NP, &cache), GF_OK);
    int32_t tok[T0 + STEPS] = {5, 17, 3, 60, 22, 9, 640, 1, 333, 2, 699}, pos[T0 + STEPS];
    for (int i = 0; i < T0 + STEPS; i++)
        pos[i] = i;
    gf_batch pre = {.B = 1, .T = T0, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    cr_assert_eq(gf_engine_forward(e, cache, &pre, out), GF_OK);
    for (int s = 0; s < STEPS; s++) {
        gf_batch one = {
            .B = 1, .T = 1, .tokens = tok + T0 + s, .position_ids = pos + T0 + s, .logits_mode = GF_LOGITS_ALL};
        cr_assert_eq(gf_engine_forward(e, cache, &one, out + (size_t)(T0 + s) * V), GF_OK);
    }
    cr_assert_eq(gf_engine_cache_create(e, B, NP, &cache2), GF_OK);
    int32_t tok2[B] = {7, 8}, pos2[B] = {0, 0};
    gf_batch two = {.B = B, .T = 1, .tokens = tok2, .position_ids = pos2, .logits_mode = GF_LOGITS_ALL};
    cr_assert_eq(gf_engine_forward(e, cache2, &two, out + (size_t)(T0 + STEPS) * V), GF_OK);
    gf_engine_cache_free(e, cache2);
    gf_engine_cache_free(e, cache);
    gf_engine_destroy(e);
}

Test(ref_threads, the_same_bytes_at_any_thread_count)
{
    /* the products the pool splits: above its threshold, or the test proves nothing */
    cr_assert_geq((double)3 * D * D, REF_PAR_MIN_WORK, "c_attn");
    cr_assert_geq((double)F * D, REF_PAR_MIN_WORK, "c_fc and the MLP's projection");
    cr_assert_geq((double)V * D, REF_PAR_MIN_WORK, "the LM head");
    cr_assert_geq(100.0 * T0 * F, REF_PAR_MIN_WORK, "the prompt's activation");
    cr_assert(D % 64 != 0 && D % 8 != 0 && F % 64 != 0, "tails");
    tiny_model m;
    tiny_model_make(&m, V, NP, D, L, H, 7);
    const size_t n = (size_t)(T0 + STEPS + B) * V;
    float *one = malloc(n * sizeof *one), *many = malloc(n * sizeof *many);
    cr_assert(one && many);
    run(&m, 1, one);
    const int counts[] = {2, 3, 9, 17};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        memset(many, 0xff, n * sizeof *many);
        run(&m, counts[c], many);
        size_t first = n;
        for (size_t i = 0; i < n && first == n; i++)
            if (memcmp(&one[i], &many[i], sizeof *one) != 0)
                first = i;
        cr_expect_eq(first, n, "%d threads: logit %zu (row %zu) differs from 1 thread: %a vs %a", counts[c], first,
                     first / V, first < n ? (double)many[first] : 0.0, first < n ? (double)one[first] : 0.0);
    }
    free(one);
    free(many);
    tiny_model_free(&m);
}
