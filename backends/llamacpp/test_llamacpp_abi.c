/* The llamacpp module's ABI mapping, slot by slot, against ref (the CLI tests
 * only reach it through whole generations):
 *   - left padding, uncached, GF_LOGITS_ALL: every position, the padding
 *     queries' too (they see only their own key), within tol of ref;
 *   - the same cached, then a decode step: logits within tol, cache_length
 *     the positions held (pads included) on both;
 *   - a padding key in the middle of a row with GF_LOGITS_LAST: within tol;
 *   - cache_reset, then the same prefill again: the same logits, bit for bit;
 *   - held keys masked after decoding (a sliding window): evicted, the next
 *     step within tol of ref;
 *   - refusals, with ref accepting the same batch: non-consecutive positions,
 *     a padding or evicted key masked real again, the logits of a padding
 *     query with a real key before it (GF_E_UNSUPPORTED); a full cache
 *     (GF_E_CONTEXT_LIMIT), a batch of the wrong size (GF_E_INVALID_ARG);
 *   - a cache with no cell to spare (2 x 128 cells, one padding query):
 *     within tol cached and uncached, no more cells than those padded to 256;
 *   - the sample slot (llama.cpp's samplers) equal to the engine's sampler
 *     over 2000 draws; and, as a note, how often each draws a token tied at
 *     the top-k threshold (llama.cpp keeps exactly k).
 *
 *     test_llamacpp_abi MODEL_DIR MODULE.so TOL [CONFIG]
 *
 * TOL "note:X": a figure of llama.cpp's beyond X (a max |delta| or NaN, the
 * sample slot's differing draws, a repeat after cache_reset within X but not
 * bit for bit) is printed as a note, not a failure: what the engine computes
 * on this CPU is a finding (issue 24); the mapping's statuses, cache
 * lengths, a reset that did not reset and the refusals still fail. The CTest and tests/cli/llamacpp_llama.sh run it so.
 *
 * Exit 0 all passed, 1 a check failed, 2 usage or setup. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/model.h"
#include "genfence/sampler.h"
#include "ref/ref.h"

typedef struct side {
    const gf_backend_ops *ops;
    void *model;
    const char *name;
} side;

static int g_failed;
static double g_tol;
static int g_notes; /* TOL was "note:X" */

#define CHECK(cond, ...)     \
    do {                     \
        if (cond) {          \
            printf("ok   "); \
        } else {             \
            printf("FAIL "); \
            g_failed = 1;    \
        }                    \
        printf(__VA_ARGS__); \
        printf("\n");        \
    } while (0)

/* a figure of the engine's: d is a max |delta| (-1: a call failed, reported) */
#define CHECK_NUM(d, ...)                                                        \
    do {                                                                         \
        if (g_notes && (d) != -1.0 && !((d) <= g_tol)) {                         \
            printf("note ");                                                     \
            printf(__VA_ARGS__);                                                 \
            printf(" (beyond the tolerance: llama.cpp's figure on this CPU)\n"); \
        } else {                                                                 \
            CHECK((d) >= 0 && (d) <= g_tol, __VA_ARGS__);                        \
        }                                                                        \
    } while (0)

static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m))
            m = d; /* NaN propagates */
    }
    return m;
}

static const char *why(const side *s)
{
    const char *e = s->ops->last_error ? s->ops->last_error(s->model) : NULL;
    return e && e[0] ? e : gf_error_msg();
}

/* Both sides run the batch (on their cache or uncached); returns max |delta|
 * over n floats of logits, or -1 when either failed (reported). */
static double both(side s[2], void *cache[2], const gf_batch *in, float *out[2], size_t n)
{
    for (int i = 0; i < 2; i++) {
        gf_status st = s[i].ops->forward(s[i].model, cache ? cache[i] : NULL, in, out[i]);
        if (st != GF_OK) {
            printf("     %s forward: %s: %s\n", s[i].name, gf_status_str(st), why(&s[i]));
            return -1;
        }
    }
    return max_diff(out[0], out[1], n);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL_DIR MODULE.so TOL [CONFIG]\n", argv[0]);
        return 2;
    }
    g_notes = strncmp(argv[3], "note:", 5) == 0;
    g_tol = atof(argv[3] + (g_notes ? 5 : 0));
    gf_model *gm = NULL;
    if (gf_model_load(argv[1], &gm) != GF_OK) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], gf_error_msg());
        return 2;
    }
    const gf_model_desc *desc = gf_model_desc_get(gm);
    void *dl = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "cannot load %s: %s\n", argv[2], dlerror());
        return 2;
    }
    gf_backend_entry_fn entry;
    void *sym = dlsym(dl, GF_BACKEND_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    side s[2] = {{gf_backend_ref(), NULL, "ref"}, {sym ? entry() : NULL, NULL, "llamacpp"}};
    if (!s[1].ops) {
        fprintf(stderr, "%s exports no %s\n", argv[2], GF_BACKEND_ENTRY_SYMBOL);
        return 2;
    }
    gf_backend_options o[2] = {{.struct_size = sizeof o[0], .threads = 1, .config = NULL},
                               {.struct_size = sizeof o[1], .threads = 1, .config = argc > 4 ? argv[4] : "f32"}};
    for (int i = 0; i < 2; i++)
        if (s[i].ops->model_load(desc, &o[i], &s[i].model) != GF_OK) {
            fprintf(stderr, "%s model_load: %s\n", s[i].name, why(&s[i]));
            return 2;
        }
    const int32_t V = desc->config.vocab_size;
    enum { B = 2, T = 6, CAP = 10 };
    float *out[2];
    for (int i = 0; i < 2; i++)
        out[i] = calloc((size_t)B * CAP * V, sizeof(float));
    /* row 0: six real tokens; row 1: two pads (token 0), then four */
    const int32_t tok[B * T] = {50, 372, 482, 448, 406, 11, 0, 0, 261, 287, 282, 353};
    const uint8_t mask[B * T] = {1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1};
    int32_t pos[B * T];
    gf_positions_from_mask(mask, B, T, pos, NULL);
    gf_batch in = {.B = B, .T = T, .tokens = tok, .position_ids = pos, .key_mask = mask, .logits_mode = GF_LOGITS_ALL};
    double d = both(s, NULL, &in, out, (size_t)B * T * V);
    CHECK_NUM(d, "uncached left-padded batch, every position (pads too): max |delta| %.3g (tol %g)", d, g_tol);
    double pad_d = d >= 0 ? max_diff(out[0] + (size_t)T * V, out[1] + (size_t)T * V, (size_t)2 * V) : -1;
    CHECK_NUM(pad_d, "  of which the padding queries: %.3g", pad_d);

    void *cache[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (s[i].ops->cache_create(s[i].model, B, CAP, &cache[i]) != GF_OK) {
            fprintf(stderr, "%s cache_create: %s\n", s[i].name, why(&s[i]));
            return 2;
        }
    d = both(s, cache, &in, out, (size_t)B * T * V);
    CHECK_NUM(d, "cached prefill of the same batch: max |delta| %.3g", d);
    float *first = malloc((size_t)B * T * V * sizeof *first);
    memcpy(first, out[1], (size_t)B * T * V * sizeof *first);
    /* one decode step: keys (B, T + 1), positions continuing each row */
    const int32_t tok1[B] = {265, 275};
    const int32_t pos1[B] = {6, 4};
    uint8_t mask1[B * (T + 1)];
    for (int b = 0; b < B; b++) {
        memcpy(mask1 + b * (T + 1), mask + b * T, T);
        mask1[b * (T + 1) + T] = 1;
    }
    gf_batch step = {
        .B = B, .T = 1, .tokens = tok1, .position_ids = pos1, .key_mask = mask1, .logits_mode = GF_LOGITS_LAST};
    d = both(s, cache, &step, out, (size_t)B * V);
    CHECK_NUM(d, "cached decode step: max |delta| %.3g", d);
    int32_t len0 = s[0].ops->cache_length(cache[0]), len1 = s[1].ops->cache_length(cache[1]);
    CHECK(len0 == T + 1 && len1 == T + 1, "cache_length after 6 + 1 positions: ref %d, llamacpp %d", len0, len1);

    /* a key decoded as real, now masked (a sliding window): llamacpp evicts
     * it from the sequence; the next step agrees with ref's masked attention */
    uint8_t mask2[B * (T + 2)];
    for (int b = 0; b < B; b++) {
        memcpy(mask2 + b * (T + 2), mask1 + b * (T + 1), T + 1);
        mask2[b * (T + 2) + T + 1] = 1;
    }
    mask2[0] = mask2[1] = 0;
    const int32_t pos2[B] = {7, 5};
    gf_batch flip = {
        .B = B, .T = 1, .tokens = tok1, .position_ids = pos2, .key_mask = mask2, .logits_mode = GF_LOGITS_LAST};
    d = both(s, cache, &flip, out, (size_t)B * V);
    CHECK_NUM(d, "row 0's keys 0 and 1 masked after decoding (evicted): max |delta| %.3g", d);
    /* a padding key, or an evicted one, masked real again: refused */
    uint8_t mask3[B * (T + 3)];
    for (int b = 0; b < B; b++) {
        memcpy(mask3 + b * (T + 3), mask2 + b * (T + 2), T + 2);
        mask3[b * (T + 3) + T + 2] = 1;
    }
    const int32_t pos3[B] = {8, 6};
    gf_batch back = {
        .B = B, .T = 1, .tokens = tok1, .position_ids = pos3, .key_mask = mask3, .logits_mode = GF_LOGITS_LAST};
    mask3[(T + 3) + 0] = 1; /* row 1's first pad */
    gf_status st = s[1].ops->forward(s[1].model, cache[1], &back, out[1]);
    CHECK(st == GF_E_UNSUPPORTED, "a padding key masked real after decoding: %s (%s)", gf_status_str(st), why(&s[1]));
    mask3[(T + 3) + 0] = 0;
    mask3[1] = 1; /* row 0's evicted key 1 */
    st = s[1].ops->forward(s[1].model, cache[1], &back, out[1]);
    CHECK(st == GF_E_UNSUPPORTED, "an evicted key masked real again: %s (%s)", gf_status_str(st), why(&s[1]));

    /* reset, then the same prefill: the same logits exactly */
    for (int i = 0; i < 2; i++)
        s[i].ops->cache_reset(cache[i]);
    CHECK(s[1].ops->cache_length(cache[1]) == 0, "cache_reset: length %d", s[1].ops->cache_length(cache[1]));
    st = s[1].ops->forward(s[1].model, cache[1], &in, out[1]);
    d = st == GF_OK ? max_diff(first, out[1], (size_t)B * T * V) : -1;
    /* a reset that kept the cache differs by far more than any tolerance;
     * within it but not bit for bit is the engine's nondeterminism */
    if (g_notes && d > 0 && d <= g_tol)
        printf("note prefill after cache_reset differs from the first by %.3g (not bit for bit: llama.cpp on this "
               "CPU)\n",
               d);
    else
        CHECK(d == 0, "prefill after cache_reset equals the first: max |delta| %.3g", d);

    /* wrong B; a full cache */
    gf_batch one_row = {.B = 1, .T = 1, .tokens = tok1, .position_ids = pos1, .logits_mode = GF_LOGITS_LAST};
    st = s[1].ops->forward(s[1].model, cache[1], &one_row, out[1]);
    CHECK(st == GF_E_INVALID_ARG, "a 1-row batch on a 2-row cache: %s", gf_status_str(st));
    int32_t tok5[B * 5] = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5}, pos5[B * 5] = {6, 7, 8, 9, 10, 4, 5, 6, 7, 8};
    gf_batch over = {.B = B, .T = 5, .tokens = tok5, .position_ids = pos5, .logits_mode = GF_LOGITS_LAST};
    st = s[1].ops->forward(s[1].model, cache[1], &over, out[1]);
    CHECK(st == GF_E_CONTEXT_LIMIT, "6 + 5 positions in a 10-position cache: %s", gf_status_str(st));

    /* a padding key inside a row; positions from the mask (0, 0, 1, 2) */
    const int32_t tokm[4] = {50, 0, 372, 482};
    const uint8_t maskm[4] = {1, 0, 1, 1};
    int32_t posm[4];
    gf_positions_from_mask(maskm, 1, 4, posm, NULL);
    gf_batch mid = {
        .B = 1, .T = 4, .tokens = tokm, .position_ids = posm, .key_mask = maskm, .logits_mode = GF_LOGITS_LAST};
    d = both(s, NULL, &mid, out, (size_t)V);
    CHECK_NUM(d, "a padding key inside a row, last position: max |delta| %.3g", d);
    mid.logits_mode = GF_LOGITS_ALL;
    st = s[0].ops->forward(s[0].model, NULL, &mid, out[0]);
    gf_status st1 = s[1].ops->forward(s[1].model, NULL, &mid, out[1]);
    CHECK(st == GF_OK && st1 == GF_E_UNSUPPORTED,
          "logits of a padding query after a real key: ref %s, llamacpp %s (%s)", gf_status_str(st), gf_status_str(st1),
          why(&s[1]));

    /* positions that skip one */
    const int32_t posg[3] = {0, 2, 3};
    gf_batch gap = {.B = 1, .T = 3, .tokens = tokm, .position_ids = posg, .logits_mode = GF_LOGITS_LAST};
    st = s[0].ops->forward(s[0].model, NULL, &gap, out[0]);
    st1 = s[1].ops->forward(s[1].model, NULL, &gap, out[1]);
    CHECK(st == GF_OK && st1 == GF_E_UNSUPPORTED, "positions 0, 2, 3: ref %s, llamacpp %s (%s)", gf_status_str(st),
          gf_status_str(st1), why(&s[1]));

    /* a cache with no cell to spare: 2 rows of 128 positions (256 cells,
     * llama.cpp's padding unit; the whole context when it is shorter), row
     * 0 all real, row 1 one pad then real, every position's logits: the
     * padding query is decoded when 255 cells are held (its row holds at
     * most len - 1, so one is free). Cached and uncached; the cache holds
     * at most ref's bytes per cell times 2 x 128 rounded up to 256 cells,
     * where a spare cell would have doubled them. */
    {
        const int32_t L = desc->config.n_positions < 128 ? desc->config.n_positions : 128, N = 2 * L;
        int32_t *tk = malloc((size_t)N * sizeof *tk), *ps = malloc((size_t)N * sizeof *ps);
        uint8_t *mk = malloc((size_t)N);
        float *full[2] = {malloc((size_t)N * V * sizeof(float)), malloc((size_t)N * V * sizeof(float))};
        for (int32_t i = 0; i < N; i++) {
            tk[i] = i == L ? 0 : (int32_t)((11 + 37 * (int64_t)i) % V);
            mk[i] = i != L;
        }
        gf_positions_from_mask(mk, 2, L, ps, NULL);
        gf_batch edge = {
            .B = 2, .T = L, .tokens = tk, .position_ids = ps, .key_mask = mk, .logits_mode = GF_LOGITS_ALL};
        void *ec[2] = {NULL, NULL};
        for (int i = 0; i < 2; i++)
            if (s[i].ops->cache_create(s[i].model, 2, L, &ec[i]) != GF_OK) {
                fprintf(stderr, "%s cache_create(2, %d): %s\n", s[i].name, L, why(&s[i]));
                return 2;
            }
        size_t bytes[2] = {s[0].ops->cache_bytes(ec[0]), s[1].ops->cache_bytes(ec[1])};
        size_t most = bytes[0] / (size_t)N * (((size_t)N + 255) / 256 * 256);
        CHECK(bytes[1] <= most,
              "a 2 x %d cache: llamacpp %zu bytes, at most %zu (ref's %zu for %d cells, padded to 256)", L, bytes[1],
              most, bytes[0], N);
        d = both(s, ec, &edge, full, (size_t)N * V);
        CHECK_NUM(d, "2 x %d positions cached, all held but one pad, every position: max |delta| %.3g", L, d);
        d = both(s, NULL, &edge, full, (size_t)N * V);
        CHECK_NUM(d, "the same uncached: max |delta| %.3g", d);
        for (int i = 0; i < 2; i++) {
            s[i].ops->cache_free(ec[i]);
            free(full[i]);
        }
        free(tk);
        free(ps);
        free(mk);
    }

    /* the sample slot (llama.cpp's temp / top-k / top-p samplers, then the
     * race) against the engine's sampler, draw for draw */
    {
        enum { SV = 64, DRAWS = 2000 };
        float lg[SV];
        for (int i = 0; i < SV; i++)
            lg[i] = (float)(3.0 * sin(0.7 * i + 0.3) + 0.01 * i); /* no ties */
        gf_sampler_params sp = {
            .temperature = 0.8, .use_top_k = 1, .top_k = 10, .use_top_p = 1, .top_p = 0.9, .seed = 7};
        long diff = 0, calls_failed = 0;
        for (uint64_t step = 0; step < DRAWS; step++) {
            uint64_t seq = 3;
            int32_t id = -1;
            gf_sample_result r;
            if (gf_backend_sample(s[1].ops, NULL, lg, 1, SV, &sp, &seq, step, &id) != GF_OK ||
                gf_sample(lg, SV, &sp, seq, step, &r) != GF_OK)
                calls_failed++;
            else if (id != r.token)
                diff++;
        }
        if (g_notes && diff && !calls_failed)
            printf("note sample slot, T 0.8 top-k 10 top-p 0.9: %d draws, %ld differ (llama.cpp's draws on this CPU)\n",
                   DRAWS, diff);
        else
            CHECK(diff == 0 && calls_failed == 0,
                  "sample slot, T 0.8 top-k 10 top-p 0.9: %d draws, %ld differ, %ld failed", DRAWS, diff, calls_failed);
        /* ties at the k-th value: the contract (and torch) keep them all;
         * llama.cpp's top-k keeps exactly k (a finding, docs/llamacpp.md) */
        float tie[8] = {2, 2, 2, 0, 0, 0, 0, 0};
        gf_sampler_params tp = {.temperature = 1.0, .use_top_k = 1, .top_k = 2, .seed = 7};
        long third_engine = 0, third_slot = 0;
        for (uint64_t step = 0; step < DRAWS; step++) {
            uint64_t seq = 3;
            int32_t id = -1;
            gf_sample_result r;
            if (gf_backend_sample(s[1].ops, NULL, tie, 1, 8, &tp, &seq, step, &id) == GF_OK &&
                gf_sample(tie, 8, &tp, seq, step, &r) == GF_OK) {
                third_engine += r.token == 2;
                third_slot += id == 2;
            }
        }
        printf("note top-k 2 over logits (2, 2, 2, 0 ...): the engine draws the third tied token %ld of %d times, "
               "the llama.cpp slot %ld\n",
               third_engine, DRAWS, third_slot);
    }

    for (int i = 0; i < 2; i++) {
        s[i].ops->cache_free(cache[i]);
        s[i].ops->model_free(s[i].model);
        free(out[i]);
    }
    free(first);
    gf_model_free(gm);
    printf("%s\n", g_failed ? "FAILED" : "all passed");
    return g_failed;
}
