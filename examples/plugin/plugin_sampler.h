/* The example plugin's sampler under every profile (seed, hf, llamacpp,
 * vllm) with every filter of gf_sampler_ext (genfence/sampler.h,
 * docs/sampler.md), for its `sample_ex` slot. Included once by plugin.c:
 * the plugin links nothing of genfence, so this is its own implementation
 * of the documented semantics, in double, over the engine's uniforms.
 *
 * Per row: logit bias, the min_new_tokens ban, then the profile's stages
 * (penalties, temperature, top_k, top_p, min_p, typical_p, llamacpp's XTC,
 * top-n-sigma and DRY in the profile's order; llamacpp's order may come from ext->chain), then the race
 * argmax z_i - log(-log u_i). Built with GF_PLUGIN_BAD_SAMPLE the race
 * returns its runner-up (plugin.c's deliberately wrong variant). The
 * GF_PLUGIN_BUG_* switches are the sample_ex mistakes the default suite's
 * cases/sampler_profiles.yaml must catch (test faults 174-178,
 * tests/backends/CMakeLists.txt; off in the plugin as it ships):
 *   MIN_P_ONE           min_p relative to 1, not to the top probability
 *   TYPICAL_NO_LSE      typical_p's entropy without the log-sum-exp
 *   EOS_BAN_LATE        the min_new_tokens EOS ban lifted one step late
 *   PENALTY_WINDOW_SHORT llamacpp's penalty window one id short
 *   VLLM_SEED_ORDER     vllm's stages in the seed's order (min_p last) */
#ifndef GENFENCE_EXAMPLE_PLUGIN_SAMPLER_H
#define GENFENCE_EXAMPLE_PLUGIN_SAMPLER_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <genfence/sampler.h>

/* GF_PX_MUTANT: 0 as shipped. tests/backends builds this file once per
 * number (250-263, its one table of test faults) with one deliberate,
 * realistic sampler bug each; cases/detect/sampler_mutants.yaml must fail
 * on every one. The bugs are plain `if`s on the constant, so a normal
 * build compiles none of them. */
#ifndef GF_PX_MUTANT
#define GF_PX_MUTANT 0
#endif

typedef struct px_zi {
    double z;
    int32_t i;
} px_zi;

static int px_desc(const void *a, const void *b) /* z descending, index ascending */
{
    const px_zi *x = a, *y = b;
    if (x->z != y->z)
        return x->z > y->z ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int px_asc(const void *a, const void *b) /* key ascending, index ascending */
{
    const px_zi *x = a, *y = b;
    if (x->z != y->z)
        return x->z < y->z ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

typedef struct px_row {
    const gf_sampler_params *p;
    const gf_sampler_ext *e;
    int32_t V;
    double *z;    /* (V) */
    px_zi *s;     /* (V) the finite z, sorted */
    px_zi *t;     /* (V) typical-p order */
    double *pr;   /* (V) probabilities in s order */
    int32_t *cnt; /* (2V) counts: window/all, then generated */
    int32_t n;
} px_row;

static int32_t px_sort(px_row *r)
{
    r->n = 0;
    for (int32_t i = 0; i < r->V; i++)
        if (r->z[i] != -INFINITY)
            r->s[r->n++] = (px_zi){r->z[i], i};
    qsort(r->s, (size_t)r->n, sizeof *r->s, px_desc);
    double total = 0.0;
    for (int32_t j = 0; j < r->n; j++)
        total += exp(r->s[j].z - r->s[0].z);
    for (int32_t j = 0; j < r->n; j++)
        r->pr[j] = exp(r->s[j].z - r->s[0].z) / total;
    return r->n;
}

static void px_penalties(px_row *r)
{
    const gf_sampler_ext *e = r->e;
    const int pf = e->profile;
    if (e->n_history == 0 ||
        (e->repetition_penalty == 1.0 && e->frequency_penalty == 0.0 && e->presence_penalty == 0.0))
        return;
    if (pf == GF_PROFILE_LLAMACPP && e->penalty_last_n == 0)
        return;
    int32_t *all = r->cnt, *gen = r->cnt + r->V;
    memset(r->cnt, 0, 2 * (size_t)r->V * sizeof *r->cnt);
    int32_t from = 0;
    if (pf == GF_PROFILE_LLAMACPP && e->penalty_last_n > 0 && e->penalty_last_n < e->n_history)
        from = e->n_history - e->penalty_last_n;
#ifdef GF_PLUGIN_BUG_PENALTY_WINDOW_SHORT
    if (from > 0)
        from++; /* the bug: the window's oldest id left out */
#endif
    for (int32_t i = from; i < e->n_history; i++) {
        all[e->history[i]]++;
        gen[e->history[i]] += i >= e->n_prompt;
    }
    const double rp = e->repetition_penalty, f = e->frequency_penalty, pp = e->presence_penalty;
    for (int32_t t = 0; t < r->V; t++) {
        double v = r->z[t];
        if (v == -INFINITY)
            continue;
        if (pf == GF_PROFILE_LLAMACPP) {
            if (all[t]) {
                v = v <= 0 ? v * rp : v / rp;
                v -= all[t] * f + pp;
            }
        } else if (pf == GF_PROFILE_VLLM) {
            if (all[t])
                v = v > 0 ? v / rp : v * rp;
            v -= f * gen[t] + (gen[t] ? pp : 0.0);
        } else {
            if (all[t])
                v = v < 0 ? v * rp : v / rp;
            if (gen[t])
                v -= f * gen[t] + pp;
        }
        r->z[t] = v;
    }
}

static void px_top_k(px_row *r)
{
    const int pf = r->e->profile;
    int32_t k = r->p->top_k;
    if (!r->p->use_top_k || (pf == GF_PROFILE_HF && k == 0) || (pf == GF_PROFILE_LLAMACPP && k <= 0) ||
        (pf == GF_PROFILE_VLLM && k <= 0))
        return;
    if ((pf == GF_PROFILE_SEED || pf == GF_PROFILE_HF) && k < r->e->min_tokens_to_keep)
        k = r->e->min_tokens_to_keep;
    if (k >= px_sort(r))
        return;
    for (int32_t j = k; j < r->n; j++)
        if (pf == GF_PROFILE_LLAMACPP || r->s[j].z < r->s[k - 1].z)
            r->z[r->s[j].i] = -INFINITY;
}

static void px_top_p(px_row *r)
{
    const int pf = r->e->profile;
    const double p = r->p->top_p;
    if (!r->p->use_top_p || (pf == GF_PROFILE_HF && !(p < 1.0)) || (pf == GF_PROFILE_LLAMACPP && p >= 1.0) ||
        (pf == GF_PROFILE_VLLM && p == 1.0) || px_sort(r) == 0)
        return;
    const int32_t keep_min = pf == GF_PROFILE_VLLM ? 1 : r->e->min_tokens_to_keep;
    if (pf == GF_PROFILE_SEED) { /* exclusive prefix >= p drops */
        double before = 0.0;
        for (int32_t j = 0; j < r->n; j++) {
            if (j > 0 && j >= keep_min && before >= p)
                r->z[r->s[j].i] = -INFINITY;
            before += r->pr[j];
        }
    } else if (pf == GF_PROFILE_LLAMACPP) { /* inclusive sum reaching p ends the set */
        double cum = 0.0;
        int32_t j = 0;
        for (; j < r->n; j++) {
            cum += r->pr[j];
            if (cum >= p && j + 1 >= keep_min)
                break;
        }
        for (j = j + 1; j < r->n; j++)
            r->z[r->s[j].i] = -INFINITY;
    } else { /* ascending cumulative <= 1 - p drops, the top keep_min stay */
        double cum = 0.0;
        for (int32_t j = r->n - 1; j >= keep_min; j--) {
            cum += r->pr[j];
            if (cum <= 1.0 - p)
                r->z[r->s[j].i] = -INFINITY;
        }
    }
}

static void px_min_p(px_row *r)
{
    const gf_sampler_ext *e = r->e;
    if (!e->use_min_p || e->min_p <= 0.0 || px_sort(r) == 0)
        return;
    int32_t keep_min = e->profile == GF_PROFILE_VLLM ? 0 : e->min_tokens_to_keep;
    if (e->profile == GF_PROFILE_LLAMACPP && keep_min < 1)
        keep_min = 1; /* llama.cpp's min-p always keeps its top (p > 1: only the top max(1, min_keep)) */
    for (int32_t j = 0; j < r->n; j++) {
#ifdef GF_PLUGIN_BUG_MIN_P_ONE
        const double top = 1.0; /* the bug: min_p times 1, not times the top probability */
#else
        const double top = r->pr[0];
#endif
        int drop =
            e->profile == GF_PROFILE_LLAMACPP ? r->s[j].z < r->s[0].z + log(e->min_p) : r->pr[j] < e->min_p * top;
        if (drop && j >= keep_min)
            r->z[r->s[j].i] = -INFINITY;
    }
}

/* llamacpp's XTC when it fires (probability >= 1): m leading tokens reach
 * the threshold; all but the m-th go, if then at least min_keep remain. */
static void px_xtc(px_row *r)
{
    const gf_sampler_ext *e = r->e;
    if (e->xtc_probability < 1.0 || e->xtc_threshold > 0.5 || px_sort(r) < 2)
        return;
    int32_t m = 0;
    while (m < r->n && (GF_PX_MUTANT == 251 ? r->pr[m] > e->xtc_threshold : r->pr[m] >= e->xtc_threshold))
        m++;
    if (m < 2 || r->n - (m - 1) < e->xtc_min_keep)
        return;
    for (int32_t j = 0; j + 1 < m; j++)
        r->z[r->s[j].i] = -INFINITY;
}

/* llamacpp's top-n-sigma: Welford's running mean and variance over the
 * finite z; drop what lies below max - n * sigma (population sigma). */
static void px_top_n_sigma(px_row *r)
{
    const double ns = r->e->top_n_sigma;
    if (!(ns > 0.0))
        return;
    double mean = 0.0, m2 = 0.0, top = -INFINITY;
    int32_t k = 0;
    for (int32_t i = 0; i < r->V; i++) {
        const double x = r->z[i];
        if (x == -INFINITY)
            continue;
        k++;
        const double d = x - mean;
        mean += d / k;
        m2 += d * (x - mean);
        if (x > top)
            top = x;
    }
    if (k < 2)
        return;
    const double cut = top - ns * sqrt(m2 / k);
    for (int32_t i = 0; i < r->V; i++)
        if (r->z[i] != -INFINITY && r->z[i] < cut)
            r->z[i] = -INFINITY;
}

static int px_in(const int32_t *ids, int32_t n, int32_t t)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == t)
            return 1;
    return 0;
}

/* llamacpp's DRY, read forwards: w the last L ids of the history; for each
 * earlier position j, n = how many ids before w[j] equal the ids before the
 * end (capped at the ids since the last breaker); w[j] then would extend a
 * repeat of n. The largest n per token, if >= allowed, costs
 * multiplier * base^(n - allowed) (exponent capped at 88.7228391 / ln base). */
static void px_dry(px_row *r)
{
    const gf_sampler_ext *e = r->e;
    if (e->dry_multiplier == 0.0 || !(e->dry_base >= 1.0) || e->dry_penalty_last_n == 0)
        return;
    int32_t L = e->n_history;
    if (e->dry_penalty_last_n > 0 && e->dry_penalty_last_n < L)
        L = e->dry_penalty_last_n;
    if (L <= e->dry_allowed_length)
        return;
    const int32_t *w = e->history + (e->n_history - L);
    int32_t cap = L;
    for (int32_t b = L - 1; b >= 0 && GF_PX_MUTANT != 250; b--)
        if (px_in(e->dry_breakers, e->n_dry_breakers, w[b])) {
            cap = L - 1 - b;
            break;
        }
    if (cap < e->dry_allowed_length)
        return;
    int32_t *best = r->cnt; /* (V) the longest repeat per token, -1 none */
    for (int32_t t = 0; t < r->V; t++)
        best[t] = -1;
    for (int32_t j = 1; j < L; j++) {
        int32_t n = 0;
        while (j - 1 - n >= 0 && w[j - 1 - n] == w[L - 1 - n])
            n++;
        if (n > cap)
            n = cap;
        if (n >= e->dry_allowed_length && w[j] < r->V && n > best[w[j]])
            best[w[j]] = n;
    }
    const int32_t top = e->dry_base > 1.000001 ? (int32_t)(88.7228391 / log(e->dry_base)) : 0;
    for (int32_t t = 0; t < r->V; t++) {
        if (best[t] < 0 || r->z[t] == -INFINITY ||
            (GF_PX_MUTANT != 250 && px_in(e->dry_breakers, e->n_dry_breakers, t)))
            continue;
        int32_t x = best[t] - e->dry_allowed_length;
        r->z[t] -= e->dry_multiplier * pow(e->dry_base, top > 0 && x > top ? top : x);
    }
}

/* llamacpp's mirostat at the step's mu (unset: 2 tau). v2: a token stays
 * while ln p >= -mu ln 2 (surprise within mu bits), the first always; v1:
 * the top k with k from the Zipf fit of the leading 100 ratios, x86's
 * int conversion (k past INT_MAX or NaN: one token). */
static void px_mirostat(px_row *r)
{
    const gf_sampler_ext *e = r->e;
    if (px_sort(r) < 2)
        return;
    const double mu = e->use_mirostat_mu && GF_PX_MUTANT != 252 ? e->mirostat_mu : 2.0 * e->mirostat_tau;
    int32_t keep = 1;
    if (e->mirostat == 2) {
        while (keep < r->n && log(r->pr[keep]) >= -mu * log(2.0))
            keep++;
        if (log(r->pr[0]) < -mu * log(2.0))
            keep = 1;
    } else {
        double num = 0.0, den = 0.0;
        for (int32_t i = 0; i + 1 < r->n && i < 99; i++) {
            const double t = log1p(1.0 / (i + 1.0));
            num += t * (log(r->pr[i]) - log(r->pr[i + 1]));
            den += t * t;
        }
        /* a p = 0 entry (dropped, still in llama.cpp's array) within the top 100 */
        const double s = (r->n < r->V && r->n < 100) ? NAN : num / den;
        const double k = exp((log((s - 1.0) / (1.0 - exp(-(s - 1.0) * log((double)r->V)))) + mu * log(2.0)) / s);
        keep = (isnan(k) || k >= 2147483648.0) ? 1 : (k < 1.0 ? 1 : (k > r->n ? r->n : (int32_t)k));
    }
    for (int32_t j = keep; j < r->n; j++)
        r->z[r->s[j].i] = -INFINITY;
}

/* hf's no_repeat_ngram_size: the (n-1)-id suffix of the history, then each
 * earlier place it occurs with an id after it: that id is banned. */
static void px_ngram(px_row *r)
{
    const gf_sampler_ext *e = r->e;
    const int32_t n = e->no_repeat_ngram_size, L = e->n_history;
    if (n < 1 || L + 1 < n)
        return;
    const int32_t *suffix = e->history + L - (n - 1);
    const int32_t cmp = GF_PX_MUTANT == 253 && n > 1 ? n - 2 : n - 1; /* 253: one id of the suffix too few */
    for (int32_t end = n - 1; end < L; end++) { /* the id at `end` follows history[end - n + 1, end) */
        if (memcmp(e->history + end - cmp, suffix + (n - 1 - cmp), (size_t)cmp * sizeof *suffix) == 0 &&
            e->history[end] < r->V)
            r->z[e->history[end]] = -INFINITY;
    }
}

/* 1 when history h (len L) ends in w's ids but its last: compared from the end */
static int px_ends_in(const int32_t *h, int32_t L, const gf_token_seq *w)
{
    int32_t need = w->n - 1;
    if (need > L)
        return 0;
    for (int32_t k = 1; k <= need; k++)
        if (h[L - k] != w->ids[need - k])
            return 0;
    return 1;
}

/* hf: sequence_bias (a one-id entry always; a longer one when it fits the
 * history and the history ends in its prefix), bad_words_ids (the same
 * rule, -inf, [eos] ignored), min_length, forced BOS then EOS. vllm:
 * the given mask and allowed_token_ids keep their ids only; bad words look
 * at the generated ids and need a prefix no longer than them. -1: an id
 * outside the vocabulary (genfence's engine refuses such a row too). */
static int px_token_rules(px_row *r, int before_bias)
{
    const gf_sampler_ext *e = r->e;
    const int pf = e->profile;
    const int32_t V = r->V;
    if (before_bias) {
        if (pf != GF_PROFILE_VLLM)
            return 0;
        const int32_t *sets[2] = {e->mask_ids, e->allowed_ids};
        const int32_t ns[2] = {e->n_mask_ids, e->n_allowed_ids};
        for (int k = 0; k < 2; k++) {
            if (!ns[k] || (GF_PX_MUTANT == 262 && k == 1 && ns[0])) /* 262: a mask replaces the allowed ids */
                continue;
            for (int32_t t = 0; t < V; t++) {
                int in = 0;
                for (int32_t i = 0; i < ns[k] && !in; i++)
                    in = sets[k][i] == t;
                if (GF_PX_MUTANT == 263 && k == 0) /* 263: the mask's ids read as banned (vLLM's bool mask polarity) */
                    in = !in;
                if (!in)
                    r->z[t] = -INFINITY;
            }
            for (int32_t i = 0; i < ns[k]; i++)
                if (sets[k][i] >= V)
                    return -1;
        }
        const int32_t from = GF_PX_MUTANT == 256 ? 0 : e->n_prompt; /* 256: the prompt counts too */
        const int32_t gen = e->n_history - from;
        for (int32_t i = 0; i < e->n_bad_words; i++) {
            const gf_token_seq *w = &e->bad_words[i];
            for (int32_t j = 0; j < w->n; j++)
                if (w->ids[j] >= V)
                    return -1;
            if (w->n - 1 <= gen && px_ends_in(e->history + from, gen, w))
                r->z[w->ids[w->n - 1]] = -INFINITY;
        }
        return 0;
    }
    if (pf != GF_PROFILE_HF)
        return 0;
    const int32_t L = e->n_history;
    for (int32_t i = 0; i < e->n_sequence_bias; i++) {
        const gf_token_seq *w = &e->sequence_bias[i];
        for (int32_t j = 0; j < w->n; j++)
            if (w->ids[j] >= V)
                return -1;
        if (w->n == 1 || ((w->n <= L || GF_PX_MUTANT == 257) && px_ends_in(e->history, L, w)))
            r->z[w->ids[w->n - 1]] += w->bias;
    }
    px_ngram(r);
    for (int32_t i = 0; i < e->n_bad_words; i++) {
        const gf_token_seq *w = &e->bad_words[i];
        for (int32_t j = 0; j < w->n; j++)
            if (w->ids[j] >= V)
                return -1;
        if (w->n == 1 && w->ids[0] == e->eos_id && GF_PX_MUTANT != 258)
            continue;
        if (w->n == 1 || (w->n <= L && px_ends_in(e->history, L, w)))
            r->z[w->ids[w->n - 1]] = -INFINITY;
    }
    if (e->eos_id >= 0 && e->eos_id < V && (GF_PX_MUTANT == 259 ? L - e->n_prompt : L) < e->min_length)
        r->z[e->eos_id] = -INFINITY;
    int32_t forced = -1;
    if (e->forced_bos_id >= V || e->forced_eos_id >= V)
        return -1;
    if (e->forced_bos_id >= 0 && L == (GF_PX_MUTANT == 260 ? 0 : 1))
        forced = e->forced_bos_id;
    if (e->forced_eos_id >= 0 && L + (GF_PX_MUTANT == 261 ? 0 : 1) == e->max_length)
        forced = e->forced_eos_id;
    if (forced >= 0)
        for (int32_t t = 0; t < V; t++)
            r->z[t] = t == forced ? 0.0 : -INFINITY;
    return 0;
}

/* hf's exponential_decay_length_penalty (start, factor), after its
 * repetition penalty: past start generated ids, the EOS logit moves away
 * from zero's side by |z| (factor^k - 1), k the generated ids past start.
 * 266: k counted from the history's start (the prompt's length left out);
 * 267 runs it before the penalty (px_filter_row). */
static void px_decay(px_row *r)
{
    const gf_sampler_ext *e = r->e;
    if (e->exp_decay_start < 0 || e->eos_id < 0 || e->eos_id >= r->V || isinf(r->z[e->eos_id]))
        return;
    const int32_t generated = e->n_history - (GF_PX_MUTANT == 266 ? 0 : e->n_prompt);
    const int32_t k = generated - e->exp_decay_start;
    if (k > 0)
        r->z[e->eos_id] += fabs(r->z[e->eos_id]) * (pow(e->exp_decay_factor, k) - 1.0);
}

/* hf's epsilon (eta 0) and eta (1) cutoffs: generate() adds each for a value
 * in (0, 1); a token goes when its probability is under the cut and it is
 * not among the top min_tokens_to_keep (ties with the last of those stay). */
static void px_cutoff(px_row *r, int eta)
{
    const gf_sampler_ext *e = r->e;
    const double x = eta ? e->eta_cutoff : e->epsilon_cutoff;
    if (!(x > 0.0 && x < 1.0) || px_sort(r) == 0 || e->min_tokens_to_keep > r->n)
        return;
    double cut = x;
    if (eta) {
        double h = 0.0;
        for (int32_t j = 0; j < r->n; j++)
            h += r->pr[j] > 0 ? -r->pr[j] * log(r->pr[j]) : 0.0;
        const double dyn = GF_PX_MUTANT == 255 ? sqrt(x * exp(-h)) : sqrt(x) * exp(-h); /* 255: the docstring's */
        if (dyn < cut)
            cut = dyn;
    }
    const int32_t mk = e->min_tokens_to_keep < 1 || (GF_PX_MUTANT == 254 && !eta) ? 1 : e->min_tokens_to_keep;
    const double floor_z = r->s[mk - 1].z;
    for (int32_t j = 0; j < r->n; j++)
        if (r->pr[j] < cut && r->s[j].z < floor_z)
            r->z[r->s[j].i] = -INFINITY;
}

static void px_typical(px_row *r)
{
    const gf_sampler_ext *e = r->e;
    const double mass = e->typical_p;
    if (!e->use_typical_p || !(mass < 1.0 || (e->profile == GF_PROFILE_LLAMACPP && isnan(mass))) || px_sort(r) == 0)
        return;
    double total = 0.0;
    for (int32_t j = 0; j < r->n; j++)
        total += exp(r->s[j].z - r->s[0].z);
    const double lse = r->s[0].z + log(total);
    double ent = 0.0;
    for (int32_t j = 0; j < r->n; j++)
#ifdef GF_PLUGIN_BUG_TYPICAL_NO_LSE
        if (r->pr[j] > 0)
            ent -= r->pr[j] * r->s[j].z; /* the bug: z taken for log p (right only on log-probabilities) */
#else
        if (r->pr[j] > 0)
            ent -= r->pr[j] * (r->s[j].z - lse);
#endif
    for (int32_t j = 0; j < r->n; j++)
        r->t[j] = (px_zi){fabs(lse - r->s[j].z - ent), j};
    qsort(r->t, (size_t)r->n, sizeof *r->t, px_asc);
    const int32_t mk = e->min_tokens_to_keep;
    int32_t last; /* t[0 .. last] kept (llamacpp), or the threshold position (HF) */
    double cum = 0.0;
    if (e->profile == GF_PROFILE_LLAMACPP) {
        last = r->n - 1;
        for (int32_t j = 0; j < r->n; j++) {
            cum += r->pr[r->t[j].i];
            if (cum > mass && (mk == 0 || j >= mk - 1)) {
                last = j;
                break;
            }
        }
        for (int32_t j = last + 1; j < r->n; j++)
            r->z[r->s[r->t[j].i].i] = -INFINITY;
        return;
    }
    last = 0;
    for (int32_t j = 0; j < r->n; j++) {
        cum += r->pr[r->t[j].i];
        last += cum < mass;
    }
    if (last > r->n - 1)
        last = r->n - 1;
    for (int32_t j = 0; j < r->n; j++)
        if (r->t[j].z > r->t[last].z && j >= mk)
            r->z[r->s[r->t[j].i].i] = -INFINITY;
}

/* temperature; returns 1 when the profile is greedy here (z then holds only
 * the first maximum) */
static int px_temperature(px_row *r)
{
    const double T = r->p->temperature;
    const int pf = r->e->profile;
    if ((pf == GF_PROFILE_SEED && T == 0.0) || (pf == GF_PROFILE_LLAMACPP && T <= 0.0) ||
        (pf == GF_PROFILE_VLLM && T < 1e-5)) {
        int32_t best = -1;
        for (int32_t i = 0; i < r->V; i++)
            if (r->z[i] != -INFINITY && (best < 0 || r->z[i] > r->z[best]))
                best = i;
        for (int32_t i = 0; i < r->V; i++)
            if (i != best)
                r->z[i] = -INFINITY;
        return 1;
    }
    if (pf == GF_PROFILE_HF && T == 1.0)
        return 0;
    for (int32_t i = 0; i < r->V; i++)
        if (r->z[i] != -INFINITY)
            r->z[i] /= T;
    return 0;
}

static int32_t px_any_finite(const px_row *r)
{
    for (int32_t i = 0; i < r->V; i++)
        if (r->z[i] != -INFINITY)
            return 1;
    return 0;
}

/* ext with the fields past its struct_size at their documented defaults
 * (gf_sampler_ext_defaults, which the plugin does not link). 0 if too short. */
static int px_ext_load(const gf_sampler_ext *in, gf_sampler_ext *out)
{
    memset(out, 0, sizeof *out);
    out->typical_p = 1.0;
    out->repetition_penalty = 1.0;
    out->penalty_last_n = -1;
    out->min_tokens_to_keep = 1;
    out->eos_id = -1;
    out->xtc_threshold = 0.1;
    out->xtc_min_keep = 1;
    out->top_n_sigma = -1.0;
    out->dry_base = 1.75;
    out->dry_allowed_length = 2;
    out->dry_penalty_last_n = -1;
    out->mirostat_tau = 5.0;
    out->mirostat_eta = 0.1;
    out->forced_bos_id = -1;
    out->forced_eos_id = -1;
    out->max_length = 20;
    out->exp_decay_start = -1;
    out->exp_decay_factor = 1.0;
    if (in->struct_size < 2 * sizeof(int32_t))
        return 0;
    memcpy(out, in, in->struct_size < sizeof *out ? in->struct_size : sizeof *out);
    out->struct_size = sizeof *out;
    return 1;
}

/* The row's filtered z under params with an extension, in r->z: the
 * profile's chain. Returns 1 when the profile is greedy here (z then holds
 * the first maximum alone), 0 when sampled, -2 when a token rule refused. */
static int px_filter_row(px_row *r, const float *logits)
{
    const gf_sampler_ext *e = r->e;
    const int pf = e->profile;
    const int32_t V = r->V;
    for (int32_t i = 0; i < V; i++)
        r->z[i] = logits[i];
    if (px_token_rules(r, 1) < 0)
        return -2;
    for (int32_t b = 0; b < e->n_bias; b++)
        r->z[e->bias[b].token] += e->bias[b].bias;
#ifdef GF_PLUGIN_BUG_EOS_BAN_LATE
    if (e->min_new_tokens > 0 && e->n_history - e->n_prompt <= e->min_new_tokens) { /* the bug: <= */
#else
    if (e->min_new_tokens > 0 && e->n_history - e->n_prompt < e->min_new_tokens) {
#endif
        if (e->eos_id >= 0 && e->eos_id < V)
            r->z[e->eos_id] = -INFINITY;
        for (int32_t i = 0; pf == GF_PROFILE_VLLM && i < e->n_stop_ids; i++)
            if (e->stop_ids[i] < V)
                r->z[e->stop_ids[i]] = -INFINITY;
    }
    if (pf == GF_PROFILE_HF) {
        if (px_token_rules(r, 0) < 0)
            return -2;
    } else {
        px_ngram(r);
    }
    static const int32_t seed_order[] = {GF_STAGE_PENALTIES, GF_STAGE_TEMPERATURE, GF_STAGE_TOP_K,
                                         GF_STAGE_TOP_P,     GF_STAGE_MIN_P,       GF_STAGE_TYPICAL_P};
    static const int32_t llama_order[] = {GF_STAGE_PENALTIES, GF_STAGE_DRY,       GF_STAGE_TOP_N_SIGMA,
                                          GF_STAGE_TOP_K,     GF_STAGE_TYPICAL_P, GF_STAGE_TOP_P,
                                          GF_STAGE_MIN_P,     GF_STAGE_XTC,       GF_STAGE_TEMPERATURE};
    static const int32_t vllm_order[] = {GF_STAGE_PENALTIES, GF_STAGE_TEMPERATURE, GF_STAGE_MIN_P, GF_STAGE_TOP_K,
                                         GF_STAGE_TOP_P};
    static const int32_t miro_order[] = {GF_STAGE_TEMPERATURE, -2};
    static const int32_t hf_order[] = {GF_PX_MUTANT == 267 ? -5 : GF_STAGE_PENALTIES,
                                       GF_PX_MUTANT == 267 ? GF_STAGE_PENALTIES : -5,
                                       GF_STAGE_TEMPERATURE,
                                       GF_STAGE_TOP_K,
                                       GF_STAGE_TOP_P,
                                       GF_STAGE_MIN_P,
                                       GF_STAGE_TYPICAL_P,
                                       -3,
                                       -4};
    const int32_t *order = seed_order;
    int32_t n_order = 6;
    if (pf == GF_PROFILE_LLAMACPP && e->mirostat) {
        order = miro_order;
        n_order = 2;
    } else if (pf == GF_PROFILE_LLAMACPP) {
        order = e->n_chain > 0 ? e->chain : llama_order;
        n_order = e->n_chain > 0 ? e->n_chain : (int32_t)(sizeof llama_order / sizeof llama_order[0]);
    } else if (pf == GF_PROFILE_VLLM) {
#ifndef GF_PLUGIN_BUG_VLLM_SEED_ORDER
        order = vllm_order;
        n_order = 5;
#else
        (void)vllm_order; /* the bug: the seed's order, min_p after top_k and top_p */
#endif
    } else if (pf == GF_PROFILE_HF) {
        order = hf_order;
        n_order = 9;
    }
    int greedy = 0;
    for (int32_t s = 0; s < n_order && px_any_finite(r); s++) {
        switch (order[s]) {
        case GF_STAGE_PENALTIES: px_penalties(r); break;
        case GF_STAGE_TOP_K: px_top_k(r); break;
        case GF_STAGE_TOP_P: px_top_p(r); break;
        case GF_STAGE_MIN_P: px_min_p(r); break;
        case GF_STAGE_TYPICAL_P: px_typical(r); break;
        case GF_STAGE_XTC: px_xtc(r); break;
        case GF_STAGE_TOP_N_SIGMA: px_top_n_sigma(r); break;
        case GF_STAGE_DRY: px_dry(r); break;
        case -2: px_mirostat(r); break;
        case -3: px_cutoff(r, 0); break;
        case -4: px_cutoff(r, 1); break;
        case -5: px_decay(r); break;
        case GF_STAGE_TEMPERATURE: greedy = px_temperature(r); break;
        default: break;
        }
        if (greedy && pf != GF_PROFILE_LLAMACPP)
            break;
    }
    return greedy;
}

/* One row under params with an extension; -1 when nothing is left (genfence
 * validated the row, so only vllm reaches the poisoned cases). */
static int32_t px_sample_row(px_row *r, const float *logits, const double *u)
{
    const int pf = r->e->profile;
    const int32_t V = r->V;
    if (pf == GF_PROFILE_VLLM) { /* torch.argmax's choice on NaN / +inf / all -inf rows */
        int32_t nan_at = -1, inf_at = -1, finite = 0;
        for (int32_t i = 0; i < V; i++) {
            if (isnan(logits[i]) && nan_at < 0)
                nan_at = i;
            else if (isinf(logits[i]) && logits[i] > 0 && inf_at < 0)
                inf_at = i;
            finite += isfinite(logits[i]) != 0;
        }
        if (nan_at >= 0)
            return nan_at;
        if (inf_at >= 0)
            return inf_at;
        if (!finite)
            return 0;
    }
    const int greedy = px_filter_row(r, logits);
    if (greedy < 0)
        return -2;
    int32_t best = -1, second = -1;
    double bs = -INFINITY, ss = -INFINITY;
    for (int32_t i = 0; i < V; i++) {
        if (r->z[i] == -INFINITY)
            continue;
        double score = greedy ? r->z[i] : r->z[i] - log(-log(u[i]));
        if (best < 0 || score > bs) {
            second = best, ss = bs;
            best = i, bs = score;
        } else if (second < 0 || score > ss) {
            second = i, ss = score;
        }
    }
    (void)ss;
    if (best < 0)
        return pf == GF_PROFILE_VLLM ? 0 : -1;
#ifdef GF_PLUGIN_BAD_SAMPLE
    if (second >= 0)
        return second;
#endif
    return best;
}

#endif
