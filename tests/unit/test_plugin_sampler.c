/* The example plugin's sample_ex (examples/plugin/plugin_sampler.h, its own
 * implementation: the plugin links nothing of genfence) gives gf_sample's
 * token draw for draw under every profile and filter; the plugin built
 * with -DGF_PLUGIN_BAD_SAMPLE (tests/backends) must not. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>

#include "genfence/backend.h"
#include "genfence/engine.h"
#include "../../examples/plugin/plugin_sampler.h"

enum { V = 12 };

typedef struct grid_counts {
    long rows, valid, differ;
} grid_counts;

/* every valid combination over a grid; compare(slot) counts rows */
static void run_grid(gf_status (*slot)(const float *, const gf_sampler_params *, const double *, int32_t *),
                     grid_counts *c)
{
    float L[V];
    for (int i = 0; i < V; i++)
        L[i] = (float)(3.0 * gf_rng_uniform(21, 4, 0, (uint32_t)i) - 1.5);
    L[7] = -INFINITY;
    L[4] = L[2];
    static const int32_t hist[5] = {1, 3, 3, 9, 2};
    static const gf_logit_bias bias[2] = {{0, 0.75f}, {5, -INFINITY}};
    const double temps[] = {0.0, 0.7, 1.6};
    const int ks[] = {-99, 0, 3, -1};
    const double ps[] = {-99, 0.0, 0.6, 1.0};
    for (int pf = 0; pf < GF_PROFILE_COUNT; pf++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 4; b++)
                for (int d = 0; d < 4; d++)
                    for (int f = 0; f < 4; f++) { /* f: bit 0 min_p + typical, bit 1 penalties + bias */
                        gf_sampler_ext e = gf_sampler_ext_defaults();
                        e.profile = pf;
                        gf_sampler_params p = gf_sampler_greedy();
                        p.temperature = temps[a];
                        p.use_top_k = ks[b] != -99;
                        p.top_k = ks[b];
                        p.use_top_p = ps[d] != -99;
                        p.top_p = ps[d];
                        p.seed = 5 + (uint64_t)f;
                        p.ext = &e;
                        if (f & 1) {
                            e.use_min_p = 1;
                            e.min_p = 0.1;
                            e.use_typical_p = pf != GF_PROFILE_VLLM;
                            e.typical_p = 0.7;
                        }
                        if (f & 2) {
                            e.repetition_penalty = 1.4;
                            e.frequency_penalty = pf == GF_PROFILE_HF ? 0.0 : 0.3;
                            e.presence_penalty = pf == GF_PROFILE_HF ? 0.0 : 0.2;
                            e.history = hist;
                            e.n_history = 5;
                            e.n_prompt = 2;
                            e.bias = bias;
                            e.n_bias = 2;
                        }
                        if (gf_sampler_validate(&p) != GF_OK)
                            continue;
                        c->valid++;
                        for (uint64_t step = 0; step < 8; step++) {
                            gf_sample_result r;
                            cr_assert_eq(gf_sample(L, V, &p, 6, step, &r), GF_OK, "%s", gf_error_msg());
                            double u[V];
                            gf_rng_uniforms(p.seed, 6, step, V, u);
                            int32_t id = -1;
                            cr_assert_eq(slot(L, &p, u, &id), GF_OK);
                            c->rows++;
                            c->differ += id != r.token;
                        }
                    }
}

static gf_status in_tree(const float *L, const gf_sampler_params *p, const double *u, int32_t *id)
{
    gf_sampler_ext e;
    cr_assert(px_ext_load(p->ext, &e));
    double z[V], pr[V];
    px_zi s[V], t[V];
    int32_t cnt[2 * V];
    px_row r = {.p = p, .e = &e, .V = V, .z = z, .s = s, .t = t, .pr = pr, .cnt = cnt};
    *id = px_sample_row(&r, L, u);
    return GF_OK;
}

Test(plugin_sampler, sample_ex_equals_gf_sample_draw_for_draw)
{
    grid_counts c = {0, 0, 0};
    run_grid(in_tree, &c);
    cr_assert_gt(c.valid, 200, "only %ld valid combinations", c.valid);
    cr_assert_eq(c.differ, 0, "%ld of %ld rows differ", c.differ, c.rows);
}

/* llamacpp min_p above 1 and NaN (llama.cpp's fallback: the top max(1,
 * min_keep) kept; NaN keeps all), every min_keep, greedy and sampled */
Test(plugin_sampler, llamacpp_min_p_above_one_and_nan)
{
    float L[V];
    for (int i = 0; i < V; i++)
        L[i] = (float)(3.0 * gf_rng_uniform(22, 4, 0, (uint32_t)i) - 1.5);
    const double mps[] = {1.5, 1.0000001, NAN, 1.0};
    long rows = 0;
    for (int m = 0; m < 4; m++)
        for (int32_t keep = 0; keep <= 4; keep++)
            for (int a = 0; a < 2; a++) {
                gf_sampler_ext e = gf_sampler_ext_defaults();
                e.profile = GF_PROFILE_LLAMACPP;
                e.use_min_p = 1;
                e.min_p = mps[m];
                e.min_tokens_to_keep = keep;
                gf_sampler_params p = gf_sampler_greedy();
                p.temperature = a ? 0.9 : 0.0;
                p.seed = 3;
                p.ext = &e;
                cr_assert_eq(gf_sampler_validate(&p), GF_OK, "%s", gf_error_msg());
                for (uint64_t step = 0; step < 8; step++) {
                    gf_sample_result r;
                    cr_assert_eq(gf_sample(L, V, &p, 2, step, &r), GF_OK, "%s", gf_error_msg());
                    double u[V];
                    gf_rng_uniforms(p.seed, 2, step, V, u);
                    int32_t id = -1;
                    cr_assert_eq(in_tree(L, &p, u, &id), GF_OK);
                    cr_assert_eq(id, r.token, "min_p %g, min_keep %d, T %g, step %d: plugin %d, gf_sample %d", mps[m],
                                 (int)keep, p.temperature, (int)step, (int)id, (int)r.token);
                    cr_assert(!a || isnan(mps[m]) || mps[m] <= 1.0 || r.kept == (keep > 1 ? keep : 1),
                              "min_p %g, min_keep %d: kept %d", mps[m], (int)keep, (int)r.kept);
                    rows++;
                }
            }
    cr_assert_eq(rows, 4 * 5 * 2 * 8);
}

/* llamacpp's XTC (issue 34): thresholds below, at and above the cut, every
 * min_keep, alone and after top_k, greedy and sampled, and a row of ties
 * exactly at the threshold: the plugin's own XTC draws what gf_sample does,
 * and XTC did cut on some rows (the grid is not vacuous). */
Test(plugin_sampler, llamacpp_xtc)
{
    float L[2][V];
    for (int i = 0; i < V; i++) {
        L[0][i] = (float)(3.0 * gf_rng_uniform(31, 4, 0, (uint32_t)i) - 1.5);
        L[1][i] = i < 2 ? 0.0f : -INFINITY; /* two tokens at exactly 0.5 */
    }
    const double ts[] = {0.02, 0.05, 0.1, 0.2, 0.5, 0.51};
    long rows = 0, cut = 0;
    for (int row = 0; row < 2; row++)
        for (int t = 0; t < 6; t++)
            for (int32_t keep = 0; keep <= 4; keep++)
                for (int a = 0; a < 4; a++) {
                    gf_sampler_ext e = gf_sampler_ext_defaults();
                    e.profile = GF_PROFILE_LLAMACPP;
                    e.xtc_probability = 1.0;
                    e.xtc_threshold = ts[t];
                    e.xtc_min_keep = keep;
                    gf_sampler_params p = gf_sampler_greedy();
                    p.temperature = (a & 1) ? 0.9 : 0.0;
                    p.use_top_k = (a & 2) != 0;
                    p.top_k = 3;
                    p.seed = 5;
                    p.ext = &e;
                    cr_assert_eq(gf_sampler_validate(&p), GF_OK, "%s", gf_error_msg());
                    gf_sampler_ext off = e;
                    off.xtc_probability = 0.0;
                    gf_sampler_params po = p;
                    po.ext = &off;
                    for (uint64_t step = 0; step < 4; step++) {
                        gf_sample_result r, ro;
                        cr_assert_eq(gf_sample(L[row], V, &p, 2, step, &r), GF_OK, "%s", gf_error_msg());
                        cr_assert_eq(gf_sample(L[row], V, &po, 2, step, &ro), GF_OK, "%s", gf_error_msg());
                        cut += r.kept < ro.kept || r.token != ro.token;
                        double u[V];
                        gf_rng_uniforms(p.seed, 2, step, V, u);
                        int32_t id = -1;
                        cr_assert_eq(in_tree(L[row], &p, u, &id), GF_OK);
                        cr_assert_eq(id, r.token,
                                     "row %d, threshold %g, min_keep %d, T %g, top_k %d, step %d: plugin %d, "
                                     "gf_sample %d",
                                     row, ts[t], (int)keep, p.temperature, p.use_top_k, (int)step, (int)id,
                                     (int)r.token);
                        rows++;
                    }
                }
    cr_assert_eq(rows, 2 * 6 * 5 * 4 * 4);
    cr_assert_gt(cut, 50, "XTC changed only %ld of %ld draws", cut, rows);
}

/* llamacpp's top-n-sigma and DRY (issue 34): n sigma off, small and large;
 * DRY over histories with repeats, every allowed length, window and breaker
 * set, bases above, at and below 1; alone, together and after top_k, greedy
 * and sampled. The plugin's own top-n-sigma (Welford) and DRY (read
 * forwards) draw what gf_sample does, and each filter changed some draws. */
Test(plugin_sampler, llamacpp_top_n_sigma_and_dry)
{
    float L[V];
    for (int i = 0; i < V; i++)
        L[i] = (float)(2.0 * gf_rng_uniform(41, 4, 0, (uint32_t)i) - 1.0);
    L[6] = -INFINITY;
    static const int32_t hist[2][10] = {{1, 3, 1, 3, 2, 1, 3, 1, 3, 1}, {4, 0, 4, 0, 9, 4, 0, 9, 4, 0}};
    static const int32_t brk[2][2] = {{3, 11}, {9, 2}};
    const double sig[] = {-1.0, 0.4, 1.0, 2.5};
    const double mul[] = {0.0, 0.8, 3.0};
    const double base[] = {1.75, 1.1, 0.9};
    const int32_t lastn[] = {-1, 0, 4, 7};
    long rows = 0, cut_sigma = 0, cut_dry = 0;
    for (int h = 0; h < 2; h++)
        for (int a = 0; a < 4; a++)
            for (int m = 0; m < 3; m++)
                for (int b = 0; b < 3; b++)
                    for (int32_t al = 0; al <= 3; al++)
                        for (int w = 0; w < 4; w++)
                            for (int nb = 0; nb <= 2; nb++) {
                                gf_sampler_ext e = gf_sampler_ext_defaults();
                                e.profile = GF_PROFILE_LLAMACPP;
                                e.top_n_sigma = sig[a];
                                e.dry_multiplier = mul[m];
                                e.dry_base = base[b];
                                e.dry_allowed_length = al;
                                e.dry_penalty_last_n = lastn[w];
                                e.dry_breakers = brk[h];
                                e.n_dry_breakers = nb;
                                e.history = hist[h];
                                e.n_history = 10;
                                gf_sampler_params p = gf_sampler_greedy();
                                p.temperature = (al & 1) ? 0.8 : 0.0;
                                p.use_top_k = (w & 1) != 0;
                                p.top_k = 7;
                                p.seed = 9;
                                p.ext = &e;
                                cr_assert_eq(gf_sampler_validate(&p), GF_OK, "%s", gf_error_msg());
                                gf_sampler_ext off = e;
                                off.top_n_sigma = -1.0;
                                gf_sampler_params ps = p;
                                ps.ext = &off;
                                gf_sampler_ext nodry = e;
                                nodry.dry_multiplier = 0.0;
                                gf_sampler_params pd = p;
                                pd.ext = &nodry;
                                for (uint64_t step = 0; step < 2; step++) {
                                    gf_sample_result r, rs, rd;
                                    cr_assert_eq(gf_sample(L, V, &p, 3, step, &r), GF_OK, "%s", gf_error_msg());
                                    cr_assert_eq(gf_sample(L, V, &ps, 3, step, &rs), GF_OK, "%s", gf_error_msg());
                                    cr_assert_eq(gf_sample(L, V, &pd, 3, step, &rd), GF_OK, "%s", gf_error_msg());
                                    cut_sigma += r.kept < rs.kept;
                                    cut_dry += r.token != rd.token;
                                    double u[V];
                                    gf_rng_uniforms(p.seed, 3, step, V, u);
                                    int32_t id = -1;
                                    cr_assert_eq(in_tree(L, &p, u, &id), GF_OK);
                                    cr_assert_eq(
                                        id, r.token,
                                        "history %d, n_sigma %g, dry %g * %g^(n - %d), last_n %d, %d breakers, "
                                        "T %g, step %d: plugin %d, gf_sample %d",
                                        h, sig[a], mul[m], base[b], (int)al, (int)lastn[w], nb, p.temperature,
                                        (int)step, (int)id, (int)r.token);
                                    rows++;
                                }
                            }
    cr_assert_eq(rows, 2L * 4 * 3 * 3 * 4 * 4 * 3 * 2);
    cr_assert_gt(cut_sigma, 100, "top-n-sigma cut only %ld of %ld draws", cut_sigma, rows);
    cr_assert_gt(cut_dry, 50, "DRY changed only %ld of %ld draws", cut_dry, rows);
}

/* llamacpp's mirostat v1 and v2 (issue 34) over tau, mu (unset and set,
 * below every surprise and past all), eta, greedy and sampled: the plugin's
 * own mirostat draws what gf_sample does, and the kept set moved with mu. */
Test(plugin_sampler, llamacpp_mirostat)
{
    float L[2][V];
    for (int i = 0; i < V; i++)
        L[0][i] = L[1][i] = (float)(4.0 * gf_rng_uniform(43, 4, 0, (uint32_t)i) - 2.0);
    L[1][3] = -INFINITY; /* v1: one token (llama.cpp's p = 0 entry) */
    const double taus[] = {0.5, 1.5, 3.0, 5.0};
    const double mus[] = {-99, -1.0, 0.8, 2.0, 3.3, 4.5, 40.0};
    long rows = 0, sizes = 0;
    int32_t seen[V + 1] = {0};
    for (int row = 0; row < 2; row++)
        for (int32_t v = 1; v <= 2; v++)
            for (int t = 0; t < 4; t++)
                for (int m = 0; m < 7; m++)
                    for (int a = 0; a < 3; a++) {
                        gf_sampler_ext e = gf_sampler_ext_defaults();
                        e.profile = GF_PROFILE_LLAMACPP;
                        e.mirostat = v;
                        e.mirostat_tau = taus[t];
                        e.use_mirostat_mu = mus[m] != -99;
                        e.mirostat_mu = mus[m];
                        gf_sampler_params p = gf_sampler_greedy();
                        p.temperature = a == 0 ? 0.0 : a == 1 ? 0.6 : 1.3;
                        p.seed = 13;
                        p.ext = &e;
                        cr_assert_eq(gf_sampler_validate(&p), GF_OK, "%s", gf_error_msg());
                        for (uint64_t step = 0; step < 4; step++) {
                            gf_sample_result r;
                            cr_assert_eq(gf_sample(L[row], V, &p, 1, step, &r), GF_OK, "%s", gf_error_msg());
                            cr_assert(!(row == 1 && v == 1 && a > 0 && r.kept != 1), "v1 with a -inf entry kept %d",
                                      (int)r.kept);
                            if (!seen[r.kept]++)
                                sizes++;
                            double u[V];
                            gf_rng_uniforms(p.seed, 1, step, V, u);
                            int32_t id = -1;
                            cr_assert_eq(in_tree(L[row], &p, u, &id), GF_OK);
                            cr_assert_eq(id, r.token,
                                         "row %d, mirostat %d, tau %g, mu %g, T %g, step %d: plugin %d, gf_sample %d",
                                         row, (int)v, taus[t], mus[m], p.temperature, (int)step, (int)id, (int)r.token);
                            rows++;
                        }
                    }
    cr_assert_eq(rows, 2 * 2 * 4 * 7 * 3 * 4);
    cr_assert_geq(sizes, 4, "mirostat kept only %ld distinct set sizes", sizes);
}

/* hf's no_repeat_ngram_size (issue 34): n 0 to 5 over histories with and
 * without repeats, greedy and sampled, with top_k: the plugin's own n-gram
 * ban draws what gf_sample does, and the ban changed some draws. */
Test(plugin_sampler, hf_no_repeat_ngram)
{
    float L[V];
    for (int i = 0; i < V; i++)
        L[i] = (float)(2.0 * gf_rng_uniform(47, 4, 0, (uint32_t)i) - 1.0);
    static const int32_t hist[3][9] = {
        {2, 5, 2, 5, 2, 7, 2, 5, 2}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {0, 3, 6, 9, 0, 3, 6, 11, 0}};
    long rows = 0, banned = 0;
    for (int h = 0; h < 3; h++)
        for (int32_t n = 0; n <= 5; n++)
            for (int a = 0; a < 4; a++) {
                gf_sampler_ext e = gf_sampler_ext_defaults();
                e.profile = GF_PROFILE_HF;
                e.no_repeat_ngram_size = n;
                e.history = hist[h];
                e.n_history = 9;
                gf_sampler_params p = gf_sampler_greedy();
                p.temperature = (a & 1) ? 0.8 : 1.0;
                p.use_top_k = (a & 2) != 0;
                p.top_k = 4;
                p.seed = 17;
                p.ext = &e;
                cr_assert_eq(gf_sampler_validate(&p), GF_OK, "%s", gf_error_msg());
                gf_sampler_ext off = e;
                off.no_repeat_ngram_size = 0;
                gf_sampler_params po = p;
                po.ext = &off;
                for (uint64_t step = 0; step < 4; step++) {
                    gf_sample_result r, ro;
                    cr_assert_eq(gf_sample(L, V, &p, 4, step, &r), GF_OK, "%s", gf_error_msg());
                    cr_assert_eq(gf_sample(L, V, &po, 4, step, &ro), GF_OK, "%s", gf_error_msg());
                    banned += r.token != ro.token;
                    double u[V];
                    gf_rng_uniforms(p.seed, 4, step, V, u);
                    int32_t id = -1;
                    cr_assert_eq(in_tree(L, &p, u, &id), GF_OK);
                    cr_assert_eq(id, r.token, "history %d, n %d, T %g, top_k %d, step %d: plugin %d, gf_sample %d", h,
                                 (int)n, p.temperature, p.use_top_k, (int)step, (int)id, (int)r.token);
                    rows++;
                }
            }
    cr_assert_eq(rows, 3 * 6 * 4 * 4);
    cr_assert_gt(banned, 10, "the n-gram ban changed only %ld of %ld draws", banned, rows);
}

/* issue 34's further filters: hf's epsilon / eta cutoffs (every value kind
 * and min_tokens_to_keep), sequence_bias and bad_words_ids over histories
 * that do and do not end in their prefixes (the eos entry dropped),
 * min_length and forced BOS / EOS at the lengths that trigger them; vllm's
 * allowed_token_ids, a given mask (also one that allows nothing) and bad
 * words over the generated ids: the plugin's own code draws what gf_sample
 * does, greedy and sampled, and the filters changed some draws. */
Test(plugin_sampler, hf_and_vllm_token_filters)
{
    float L[V];
    for (int i = 0; i < V; i++)
        L[i] = (float)(2.5 * gf_rng_uniform(53, 4, 0, (uint32_t)i) - 1.25);
    static const int32_t hist[4][6] = {{4, 1, 2, 4, 1, 2}, {3, 3, 3, 3, 3, 3}, {9, 0, 5, 4, 1, 0}, {1, 2, 1, 2, 1, 2}};
    static const int32_t lens[] = {1, 2, 4, 6};
    static const int32_t w0[] = {1, 2, 3}, w1[] = {2, 4}, w2[] = {6}, w3[] = {11}, w4[] = {0, 5};
    static const gf_token_seq words[] = {{3, w0, 0.0f}, {2, w1, 0.0f}, {1, w2, 0.0f}, {1, w3, 0.0f}, {2, w4, 0.0f}};
    static const gf_token_seq sbias[] = {{3, w0, 2.5f}, {2, w1, -1.5f}, {1, w2, 1.0f}, {2, w4, -INFINITY}};
    static const int32_t allowed[] = {0, 2, 3, 5, 7, 8, 11}, mask[] = {2, 3, 4, 5, 6}, none[] = {10};
    const double cuts[] = {0.0, 0.05, 0.2, 1.5, NAN, -0.1};
    long rows = 0, changed = 0;
    for (int pf = GF_PROFILE_HF; pf <= GF_PROFILE_VLLM; pf += 2)
        for (int h = 0; h < 4; h++)
            for (int li = 0; li < 4; li++)
                for (int f = 0; f < 12; f++)
                    for (int a = 0; a < 3; a++) {
                        gf_sampler_ext e = gf_sampler_ext_defaults();
                        e.profile = pf;
                        e.history = hist[h];
                        e.n_history = lens[li];
                        e.n_prompt = lens[li] > 2 ? 2 : 0;
                        e.eos_id = 11;
                        gf_sampler_params p = gf_sampler_greedy();
                        p.temperature = pf == GF_PROFILE_HF ? (a == 0   ? 1.0
                                                               : a == 1 ? 0.6
                                                                        : 2.0)
                                                            : (a == 0 ? 0.0 : 0.9);
                        p.use_top_k = a == 2;
                        p.top_k = 6;
                        p.seed = 29 + (uint64_t)f;
                        p.ext = &e;
                        if (pf == GF_PROFILE_HF) {
                            e.epsilon_cutoff = cuts[f % 6];
                            e.eta_cutoff = cuts[(f + 2) % 6];
                            e.min_tokens_to_keep = 1 + f % 3;
                            if (f & 1) {
                                e.sequence_bias = sbias;
                                e.n_sequence_bias = 4;
                            }
                            if (f & 2) {
                                e.bad_words = words;
                                e.n_bad_words = 5;
                            }
                            e.min_length = (f & 4) ? 5 : 0;
                            e.forced_bos_id = f == 8 ? 3 : -1;
                            e.forced_eos_id = f >= 9 ? 7 : -1;
                            e.max_length = 3 + f % 4;
                        } else {
                            if (f & 1) {
                                e.allowed_ids = allowed;
                                e.n_allowed_ids = 7;
                            }
                            if (f & 2) {
                                e.mask_ids = f == 11 ? none : mask;
                                e.n_mask_ids = f == 11 ? 1 : 5; /* 11: with allowed_ids, nothing left */
                            }
                            if (f & 4) {
                                e.bad_words = words;
                                e.n_bad_words = 5;
                            }
                        }
                        cr_assert_eq(gf_sampler_validate(&p), GF_OK, "%s", gf_error_msg());
                        gf_sampler_ext off = gf_sampler_ext_defaults();
                        off.profile = pf;
                        gf_sampler_params po = p;
                        po.ext = &off;
                        for (uint64_t step = 0; step < 3; step++) {
                            gf_sample_result r, ro;
                            cr_assert_eq(gf_sample(L, V, &p, 8, step, &r), GF_OK, "%s", gf_error_msg());
                            cr_assert_eq(gf_sample(L, V, &po, 8, step, &ro), GF_OK, "%s", gf_error_msg());
                            changed += r.token != ro.token;
                            double u[V];
                            gf_rng_uniforms(p.seed, 8, step, V, u);
                            int32_t id = -1;
                            cr_assert_eq(in_tree(L, &p, u, &id), GF_OK);
                            cr_assert_eq(
                                id, r.token, "%s history %d len %d filters %d a %d step %d: plugin %d, gf_sample %d",
                                gf_sampler_profile_name(pf), h, (int)lens[li], f, a, (int)step, (int)id, (int)r.token);
                            rows++;
                        }
                    }
    cr_assert_eq(rows, 2 * 4 * 4 * 12 * 3 * 3);
    cr_assert_gt(changed, rows / 5, "the filters changed only %ld of %ld draws", changed, rows);
}

static const gf_backend_ops *g_bad;
static gf_status bad_slot(const float *L, const gf_sampler_params *p, const double *u, int32_t *id)
{
    gf_rng_draws d = {.u = u, .V = V};
    return g_bad->sample_ex(NULL, L, 1, p, &d, id);
}

Test(plugin_sampler, the_bad_sample_build_differs)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/backends/libgenfence_test_example_bad_sample.so", GF_TEST_BINARY_DIR);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "%s: %s", path, dlerror());
    gf_backend_entry_fn entry = (gf_backend_entry_fn)dlsym(h, GF_BACKEND_ENTRY_SYMBOL);
    cr_assert_not_null(entry);
    g_bad = entry();
    cr_assert(GF_OPS_HAS(g_bad, sample_ex) && GF_OPS_HAS(g_bad, sample_profiles));
    cr_assert_eq(g_bad->sample_profiles(), 0xfu);
    grid_counts c = {0, 0, 0};
    run_grid(bad_slot, &c);
    cr_assert_gt(c.differ, c.rows / 4, "the bad build agreed on %ld of %ld rows", c.rows - c.differ, c.rows);
    dlclose(h);
}
