/* multi_sample: vLLM's n > 1 and best_of on one prompt. Sample i draws from
 * the Philox stream of its own sequence id (docs/random.md), never its batch
 * row: the m samples (m = best_of, else n) generated together in one batch,
 * in reverse order (row r holds sample m - 1 - r), equal each sample
 * generated alone (gated, as every batch against single runs); samples with
 * distinct sequence ids are not all one sequence (where the sampler's
 * distribution makes that unlikely); best_of returns the sample with the
 * highest declared score (cumulative or mean raw log-probability of its
 * generated tokens, the engine's gf_sampler_logprobs), the lowest sample index
 * on equal scores, and the pick made on the batch equals the pick made on
 * the alone runs. A backend's sample slot draws every step's rows too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/beam.h"
#include "genfence/engine.h"
#include "batch.h"
#include "keys.h"
#include "slot.h"

/* the chance below which m samples that are all one sequence are a failure */
#define MS_SAME_CHANCE 1e-6

typedef struct ms_spec {
    gf_prompt_spec prompt;
    long long n, best_of, max_new, eos_id;
    uint64_t *seq_ids; /* (m) */
    int has_seq_ids, score;
    gf_sampler_params p;
    double atol;
    gf_gate gate;
} ms_spec;

static const char *const k_scores[] = {"cumulative_logprob", "mean_logprob", NULL};

static void ms_free(void *v)
{
    ms_spec *s = v;
    if (s) {
        free(s->prompt.text);
        free(s->prompt.ids);
        free(s->seq_ids);
    }
    free(s);
}

static int parse_ms(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    ms_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->best_of = 0;
    s->max_new = 8;
    s->eos_id = -1;
    s->atol = GF_ATOL_DEFAULT;
    s->p = gf_sampler_greedy();
    s->p.temperature = 1.0;
    int bad = gf_y_one_prompt(ctx, m, &s->prompt) < 0;
    bad |= gf_y_int(ctx, m, "n", GF_Y_REQUIRED, 1, 64, &s->n) < 0;
    bad |= gf_y_int(ctx, m, "best_of", 0, 1, 64, &s->best_of) < 0;
    bad |= gf_y_enum(ctx, m, "score", 0, k_scores, &s->score) < 0;
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 16, &s->max_new) < 0;
    bad |= gf_y_int(ctx, m, "eos_id", 0, 0, 2147483647LL, &s->eos_id) < 0;
    bad |= gf_y_sampler(ctx, m, &s->p) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int r = gf_y_ints(ctx, m, "seq_ids", 0, 0, 2147483647LL, 1, &ids, &n_ids);
    bad |= r < 0;
    const long long M = s->best_of ? s->best_of : s->n;
    if (!bad && s->best_of && s->best_of < s->n) {
        gf_y_error(ctx, gf_y_get(ctx, m, "best_of", 0), "'best_of' %lld is below n %lld (vLLM: best_of >= n)",
                   s->best_of, s->n);
        bad = 1;
    }
    if (!bad && M < 2) {
        gf_y_error(ctx, gf_y_get(ctx, m, s->best_of ? "best_of" : "n", 0),
                   "multi_sample needs at least 2 samples (n or best_of >= 2)");
        bad = 1;
    }
    if (!bad && s->p.temperature <= 0) {
        gf_y_error(ctx, gf_y_get(ctx, m, "temperature", 0), "multi_sample needs a sampled temperature (> 0)");
        bad = 1;
    }
    if (!bad && r > 0 && n_ids != (size_t)M) {
        gf_y_error(ctx, gf_y_get(ctx, m, "seq_ids", 0), "'seq_ids' holds %zu ids; the case draws %lld samples", n_ids,
                   M);
        bad = 1;
    }
    if (!bad && (!(s->atol >= 0) || !isfinite(s->atol))) {
        gf_y_error(ctx, gf_y_get(ctx, m, "atol", 0), "'atol' must be a finite number >= 0");
        bad = 1;
    }
    if (!bad) {
        s->seq_ids = calloc((size_t)M, sizeof *s->seq_ids);
        s->has_seq_ids = r > 0;
        for (long long i = 0; s->seq_ids && i < M; i++)
            s->seq_ids[i] = r > 0 ? (uint64_t)ids[i] : (uint64_t)i;
        bad = !s->seq_ids;
    }
    free(ids);
    return bad ? -1 : 0;
}

/* on_step: each row's raw log-probability of its token summed (rows still
 * running), and the rows through the backend's slot */
typedef struct scorer {
    gf_krun *k;
    const gf_generate_params *gp;
    double *sum;  /* (B) raw log-probabilities of the row's tokens */
    double *psum; /* (B) processed (the sampler's distribution) */
    int32_t *count;
    gf_status err;
} scorer;

static gf_status score_step(void *user, const gf_step_info *info)
{
    scorer *sc = user;
    double *lp = malloc((size_t)info->V * sizeof *lp);
    if (!lp)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t b = 0; b < info->B; b++) {
        if (info->finished_before[b])
            continue;
        gf_status st =
            gf_sampler_logprobs(info->logits + (size_t)b * info->V, info->V, &sc->gp->sampler, GF_LOGPROBS_RAW, lp);
        if (st != GF_OK) {
            free(lp);
            return st;
        }
        sc->sum[b] += lp[info->tokens[b]];
        sc->count[b]++;
        st = gf_sampler_logprobs(info->logits + (size_t)b * info->V, info->V, &sc->gp->sampler, GF_LOGPROBS_PROCESSED,
                                 lp);
        if (st != GF_OK) {
            free(lp);
            return st;
        }
        sc->psum[b] += lp[info->tokens[b]];
    }
    free(lp);
    gf_k_slot_steps ss = {.k = sc->k, .gp = sc->gp};
    return gf_k_slot_on_step(&ss, info);
}

static gf_status scored_run(gf_krun *k, int32_t B, int32_t *const *prompts, const int32_t *lens,
                            const gf_generate_params *base, const uint64_t *ids, double *sum, double *psum,
                            int32_t *count, gf_generation **out)
{
    gf_generate_params gp = *base;
    gp.seq_ids = ids;
    scorer sc = {.k = k, .gp = &gp, .sum = sum, .psum = psum, .count = count};
    gp.on_step = score_step;
    gp.user = &sc;
    memset(sum, 0, (size_t)B * sizeof *sum);
    memset(psum, 0, (size_t)B * sizeof *psum);
    memset(count, 0, (size_t)B * sizeof *count);
    return gf_generate(k->session->engine, B, (const int32_t *const *)prompts, lens, &gp, out);
}

/* order[0..M): what best_of returns, best first: the engine's pick
 * (gf_best_of), then its pick among the rest, ... */
static void rank_engine(const double *score, int32_t M, int32_t *order)
{
    double left[64];
    memcpy(left, score, (size_t)M * sizeof *left);
    for (int32_t j = 0; j < M; j++) {
        order[j] = gf_best_of(left, M);
        if (order[j] >= 0)
            left[order[j]] = NAN;
    }
}

/* The same order worked out here, apart from the engine (a sort by score
 * descending, the lower sample index first on equal scores), so that a wrong
 * pick in gf_best_of cannot judge itself. */
static const double *g_rank_scores;
static int rank_cmp(const void *a, const void *b)
{
    const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    const double x = g_rank_scores[i], y = g_rank_scores[j];
    if (x != y)
        return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

static void rank_reference(const double *score, int32_t M, int32_t *order)
{
    for (int32_t i = 0; i < M; i++)
        order[i] = i;
    g_rank_scores = score; /* the child runs one case at a time */
    qsort(order, (size_t)M, sizeof *order, rank_cmp);
}

static int same_row(const gf_generation *a, int32_t ra, const gf_generation *b, int32_t rb)
{
    return a->n_until_stop[ra] == b->n_until_stop[rb] &&
           !memcmp(a->tokens[ra], b->tokens[rb], (size_t)a->n_until_stop[ra] * sizeof(int32_t));
}

static void run_ms(const gf_case *c, gf_krun *k)
{
    const ms_spec *s = c->spec;
    const int32_t M = (int32_t)(s->best_of ? s->best_of : s->n);
    int32_t *prompt = NULL, P = 0;
    int32_t **prompts = calloc((size_t)M, sizeof *prompts), *lens = calloc((size_t)M, sizeof *lens);
    uint64_t *row_ids = calloc((size_t)M, sizeof *row_ids);
    double *bsum = calloc((size_t)M, sizeof(double)), *asum = calloc((size_t)M, sizeof(double));
    double *bscore = calloc((size_t)M, sizeof(double)), *ascore = calloc((size_t)M, sizeof(double));
    int32_t *bcount = calloc((size_t)M, sizeof(int32_t)), *acount = calloc((size_t)M, sizeof(int32_t));
    gf_generation *batch = NULL, **alone = calloc((size_t)M, sizeof *alone);
    if (!prompts || !lens || !row_ids || !bsum || !asum || !bscore || !ascore || !bcount || !acount || !alone) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    gf_status st = gf_prompt_tokens(k->session, &s->prompt, &prompt, &P);
    if (st != GF_OK) {
        gf_k_error(k, "%s", gf_error_msg());
        goto done;
    }
    for (int32_t r = 0; r < M; r++) {
        prompts[r] = prompt;
        lens[r] = P;
        row_ids[r] = s->seq_ids[M - 1 - r]; /* row r holds sample M - 1 - r */
    }
    gf_k_metric_int(k, "prompt_tokens", P);
    gf_k_metric_json(k, "sampler_params", gf_sampler_json(&s->p));
    gf_k_seed(k, "sampler", s->p.seed);
    json_t *jids = json_array();
    for (int32_t i = 0; i < M; i++)
        json_array_append_new(jids, json_integer((json_int_t)s->seq_ids[i]));
    gf_k_metric_json(k, "seq_ids", jids);
    gf_k_metric_json(k, "batch_rows", json_string("reversed: row r holds sample m - 1 - r"));
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = (int32_t)s->max_new;
    gp.sampler = s->p;
    gp.eos_id = (int32_t)s->eos_id;
    gp.seq_ids = row_ids;

    /* (a) the batch against each sample alone, gated (rows labelled batch/row<r>) */
    st = gf_kind_batch_vs_single(k, "batch", M, prompts, lens, &gp, &s->gate, s->atol, NULL);
    if (st != GF_OK) {
        gf_k_status(k, st, "batch against alone");
        goto done;
    }
    /* the scored runs, every step also through a backend's sample slot */
    gf_k_slot_attach(k);
    gf_k_note_sampler(k);
    double *bpsum = calloc((size_t)M, sizeof *bpsum), apsum0 = 0;
    if (!bpsum) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    st = scored_run(k, M, prompts, lens, &gp, row_ids, bsum, bpsum, bcount, &batch);
    free(bpsum);
    if (st != GF_OK) {
        gf_k_status(k, st, "scored batch");
        goto done;
    }
    for (int32_t i = 0; i < M; i++) {
        double sum1, psum1;
        int32_t cnt1;
        st = scored_run(k, 1, &prompts[0], &lens[0], &gp, &s->seq_ids[i], &sum1, &psum1, &cnt1, &alone[i]);
        if (i == 0)
            apsum0 = psum1;
        if (st != GF_OK) {
            gf_k_status(k, st, "scored sample alone");
            goto done;
        }
        asum[i] = sum1;
        acount[i] = cnt1;
        const int32_t r = M - 1 - i;
        bscore[i] = s->score == 0 ? bsum[r] : bsum[r] / (bcount[r] > 0 ? bcount[r] : 1);
        ascore[i] = s->score == 0 ? asum[i] : asum[i] / (acount[i] > 0 ? acount[i] : 1);
    }
    gf_k_slot_finish(k);
    json_t *toks = json_array(), *jsc = json_array();
    for (int32_t i = 0; i < M; i++) {
        json_array_append_new(toks, gf_json_ints(alone[i]->tokens[0] + P, (size_t)(alone[i]->n_until_stop[0] - P)));
        json_array_append_new(jsc, json_real(ascore[i]));
    }
    gf_k_metric_json(k, "samples", toks);
    gf_k_metric_json(k, "scores", jsc);

    /* (b) distinct sequence ids, distinct streams: not all one sequence, unless the distribution allows little else */
    int distinct = 0, dup_ids = 0;
    for (int32_t i = 1; i < M; i++) {
        distinct += !same_row(alone[0], 0, alone[i], 0);
        dup_ids += s->seq_ids[i] == s->seq_ids[0];
    }
    if (distinct)
        gf_k_check(k, 1, "samples draw distinct streams", "%d of %d samples differ from sample 0", distinct, M - 1);
    else {
        /* the chance that M - 1 honest samples repeat sample 0: the processed
         * probability of its path, to the power M - 1 */
        const double chance = exp(apsum0 * (M - 1));
        gf_k_metric(k, "same_sequence_chance", chance);
        gf_k_check(k, chance >= MS_SAME_CHANCE, "samples draw distinct streams",
                   "all %d samples are one sequence; an honest sampler repeats sample 0's path %d times with chance "
                   "%.3g (%s %.0e)%s",
                   M, M - 1, chance, chance >= MS_SAME_CHANCE ? "the distribution allows little else: >=" : "<",
                   MS_SAME_CHANCE, dup_ids == M - 1 ? "; every sample has sample 0's sequence id" : "");
    }
    if (s->best_of) {
        /* (c) best_of returns the n highest declared scores: the engine's picks on the batch (gf_best_of
         * again and again) against the alone runs' scores ranked apart from the engine */
        const int32_t N = (int32_t)s->n;
        int32_t pick[64], ref[64];
        rank_engine(bscore, M, pick);
        rank_reference(ascore, M, ref);
        int ok = 1, bad_j = -1;
        double tol_j = 0;
        for (int32_t j = 0; j < N && ok; j++) {
            const int32_t nj = acount[ref[j]] > 0 ? acount[ref[j]] : 1;
            tol_j = s->atol * (s->score == 0 ? nj : 1);
            ok = pick[j] == ref[j] || (pick[j] >= 0 && fabs(ascore[pick[j]] - ascore[ref[j]]) <= tol_j);
            bad_j = ok ? -1 : j;
        }
        const double gap =
            ref[N - 1] < 0 ? NAN : ascore[ref[N - 1]] - (N < M && ref[N] >= 0 ? ascore[ref[N]] : -INFINITY);
        json_t *ret = json_array(), *ret_ids = json_array();
        for (int32_t j = 0; j < N; j++) {
            json_array_append_new(ret, json_integer(pick[j]));
            json_array_append_new(ret_ids, json_integer(pick[j] >= 0 ? (json_int_t)s->seq_ids[pick[j]] : -1));
        }
        json_t *o = json_pack("{s:o, s:o, s:s, s:o}", "returned", ret, "returned_seq_ids", ret_ids, "score",
                              k_scores[s->score], "gap", isfinite(gap) ? json_real(gap) : json_null());
        gf_k_metric_json(k, "best_of", o);
        if (ok)
            gf_k_check(k, 1, "best_of returns the highest scores",
                       "returned sample%s %s of %d, by %s: the highest on the batch and alone; the best, sample %d "
                       "(seq id %llu), %.6g; the last returned leads the first left out by %.3g",
                       N == 1 ? "" : "s", gf_k_ids_str((char[256]){0}, 256, pick, (size_t)N), M, k_scores[s->score],
                       pick[0], pick[0] >= 0 ? (unsigned long long)s->seq_ids[pick[0]] : 0ULL,
                       pick[0] >= 0 ? ascore[pick[0]] : NAN, gap);
        else
            gf_k_check(k, 0, "best_of returns the highest scores",
                       "place %d: sample %d on the batch's %s (%.6g), but alone the place is sample %d's (%.6g), "
                       "beyond the tolerance %.3g",
                       bad_j, pick[bad_j], k_scores[s->score], pick[bad_j] >= 0 ? ascore[pick[bad_j]] : NAN, ref[bad_j],
                       ref[bad_j] >= 0 ? ascore[ref[bad_j]] : NAN, tol_j);
        /* the scores best_of compares: the batch's are the alone runs' (atol per scored token) */
        int32_t worst = 0;
        double wd = 0, wt = 0;
        for (int32_t i = 0; i < M; i++) {
            const int32_t ni = acount[i] > 0 ? acount[i] : 1;
            const double ti = s->atol * (s->score == 0 ? ni : 1), d = fabs(bscore[i] - ascore[i]);
            if (!(d <= ti) && (wd <= wt || d / ti > wd / wt)) {
                worst = i;
                wd = d;
                wt = ti;
            }
        }
        if (wd <= wt)
            gf_k_check(k, 1, "best_of scores: batch equals alone", "every sample's %s within atol per scored token",
                       k_scores[s->score]);
        else
            gf_k_check(k, 0, "best_of scores: batch equals alone",
                       "sample %d: %s %.9g in the batch, %.9g alone: |delta| %.3g > %.3g", worst, k_scores[s->score],
                       bscore[worst], ascore[worst], wd, wt);
    }
done:
    gf_generation_free(batch);
    for (int32_t i = 0; alone && i < M; i++)
        gf_generation_free(alone[i]);
    free(alone);
    free(prompt);
    free(prompts);
    free(lens);
    free(row_ids);
    free(bsum);
    free(asum);
    free(bscore);
    free(ascore);
    free(bcount);
    free(acount);
}

/* served_skip (case.h): the samples are genfence's draws over the rows, and a
 * served backend's rows are its top-k log-probabilities plus an even remainder,
 * not the model's distribution (golden_generation's sampled goldens likewise). */
static const char *ms_served_skip(const gf_case *c)
{
    (void)c;
    return "n > 1 and best_of draw with genfence's sampler over full logits: a served backend reports only its "
           "top-k log-probabilities and an even remainder, not the model's distribution";
}

const gf_kind_def gf_kind_multi_sample = {
    .name = "multi_sample",
    .summary = "n > 1 and best_of: n seeded samples of one prompt on their sequence ids' streams, a batch equal to "
               "each alone, best_of's pick by the declared score",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .served_skip = ms_served_skip,
    .parse = parse_ms,
    .free_spec = ms_free,
    .run = run_ms,
};
