/* The sampler chain under a profile (include/genfence/sampler.h,
 * docs/sampler.md "Profiles" and "Filters"): logit bias, the min_new_tokens
 * EOS ban, penalties over the history, temperature, top-k, top-p, min-p,
 * typical-p and llamacpp's XTC, top-n-sigma and DRY, in the profile's order, each with that engine's rule. The draw
 * (the Philox race) is sampler.c's for every profile. Between the two other
 * sampler files: it reads the profile's names and extension
 * (sampler_profile.c), sampler.c calls it.
 *
 * All arithmetic is in double. z (V) holds the working logits; a dropped
 * token is -inf. Scratch is malloc'd per call and freed on every path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/rows.h"
#include "sampler_internal.h"

typedef gf_zi zi;

/* mirostat's place after temperature, hf's epsilon and eta after
 * typical_p: not stages a chain can name */
#define GF_STAGE_MIROSTAT_ 100
#define GF_STAGE_EPSILON_  101
#define GF_STAGE_ETA_      102
#define GF_STAGE_DECAY_    103 /* hf's exponential decay length penalty, after its repetition penalty */

int gf_zi_cmp_desc(const void *a, const void *b)
{
    const gf_zi *x = a, *y = b;
    if (x->z > y->z)
        return -1;
    if (x->z < y->z)
        return 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* ascending key, equal keys by ascending index */
static int cmp_zi_asc(const void *a, const void *b)
{
    const zi *x = a, *y = b;
    if (x->z < y->z)
        return -1;
    if (x->z > y->z)
        return 1;
    return (x->i > y->i) - (x->i < y->i);
}

typedef struct chain_ctx {
    const gf_sampler_params *p;
    const gf_sampler_ext *e;
    int32_t V;
    double *z; /* (V) */
    zi *s;     /* (V) scratch: the finite entries, sorted */
    int32_t n; /* entries in s */
    const char *pn;
} chain_ctx;

/* The finite z into c->s, sorted descending (ties: lower index first). */
static int32_t sort_finite(chain_ctx *c)
{
    int32_t n = 0;
    for (int32_t i = 0; i < c->V; i++)
        if (c->z[i] != -INFINITY) {
            c->s[n].z = c->z[i];
            c->s[n].i = i;
            n++;
        }
    qsort(c->s, (size_t)n, sizeof *c->s, gf_zi_cmp_desc);
    c->n = n;
    return n;
}

static int32_t count_finite(const double *z, int32_t V)
{
    int32_t k = 0;
    for (int32_t i = 0; i < V; i++)
        if (z[i] != -INFINITY)
            k++;
    return k;
}

/* probs of the sorted entries (softmax in sorted order, max subtracted):
 * written into pr (n); returns the total before normalising. */
static void sorted_probs(const chain_ctx *c, double *pr)
{
    const double zmax = c->s[0].z;
    double total = 0.0;
    for (int32_t j = 0; j < c->n; j++)
        total += exp(c->s[j].z - zmax);
    for (int32_t j = 0; j < c->n; j++)
        pr[j] = exp(c->s[j].z - zmax) / total;
}

static void drop_sorted_from(chain_ctx *c, const uint8_t *keep)
{
    for (int32_t j = 0; j < c->n; j++)
        if (!keep[j])
            c->z[c->s[j].i] = -INFINITY;
}

/* ---- stages ---- */

static gf_status stage_penalties(chain_ctx *c)
{
    const gf_sampler_ext *e = c->e;
    const int pr = e->profile;
    if (e->repetition_penalty == 1.0 && e->frequency_penalty == 0.0 && e->presence_penalty == 0.0)
        return GF_OK;
    if (e->n_history == 0)
        return GF_OK;
    for (int32_t i = 0; i < e->n_history; i++)
        if (e->history[i] >= c->V)
            return gf_error_set(GF_E_INVALID_ARG, "%s: history[%d] = %d is outside the vocabulary (%d)", c->pn, (int)i,
                                (int)e->history[i], (int)c->V);
    int32_t *all = calloc((size_t)c->V, sizeof *all), *out = calloc((size_t)c->V, sizeof *out);
    if (!all || !out) {
        free(all);
        free(out);
        return gf_error_set(GF_E_NOMEM, "sampler: penalty counts for %d tokens", (int)c->V);
    }
    int32_t from = 0;
    if (pr == GF_PROFILE_LLAMACPP) {
        if (e->penalty_last_n == 0) {
            free(all);
            free(out);
            return GF_OK;
        }
        if (e->penalty_last_n > 0 && e->penalty_last_n < e->n_history)
            from = e->n_history - e->penalty_last_n;
    }
    for (int32_t i = from; i < e->n_history; i++) {
        all[e->history[i]]++;
        if (i >= e->n_prompt)
            out[e->history[i]]++;
    }
    const double r = e->repetition_penalty, f = e->frequency_penalty, ps = e->presence_penalty;
    for (int32_t t = 0; t < c->V; t++) {
        double v = c->z[t];
        if (v == -INFINITY)
            continue;
        switch (pr) {
        case GF_PROFILE_LLAMACPP: /* one window: the last n accepted ids */
            if (all[t] > 0) {
                v = v <= 0 ? v * r : v / r;
                v -= (double)all[t] * f + ps;
            }
            break;
        case GF_PROFILE_VLLM: /* repetition: prompt + output; frequency, presence: output */
            if (all[t] > 0)
                v = v > 0 ? v / r : v * r;
            v -= f * (double)out[t] + (out[t] > 0 ? ps : 0.0);
            break;
        default: /* seed, hf: HF's repetition over the whole history */
            if (all[t] > 0)
                v = v < 0 ? v * r : v / r;
            if (out[t] > 0)
                v -= f * (double)out[t] + ps;
            break;
        }
        c->z[t] = v;
    }
    free(all);
    free(out);
    return GF_OK;
}

static gf_status stage_top_k(chain_ctx *c)
{
    const gf_sampler_params *p = c->p;
    if (!p->use_top_k)
        return GF_OK;
    int32_t k = p->top_k;
    const int pr = c->e->profile;
    if ((pr == GF_PROFILE_HF && k == 0) || (pr == GF_PROFILE_LLAMACPP && k <= 0) ||
        (pr == GF_PROFILE_VLLM && (k == -1 || k == 0)))
        return GF_OK;
    if (pr == GF_PROFILE_VLLM && k > c->V)
        return gf_error_set(GF_E_INVALID_ARG, "vllm: top_k cannot be greater than the vocabulary size (%d), got %d",
                            (int)c->V, (int)k);
    if (pr == GF_PROFILE_SEED || pr == GF_PROFILE_HF)
        k = k > c->e->min_tokens_to_keep ? k : c->e->min_tokens_to_keep;
    int32_t n = sort_finite(c);
    if (k >= n)
        return GF_OK;
    if (pr == GF_PROFILE_LLAMACPP) { /* exactly k: the array is truncated */
        for (int32_t j = k; j < n; j++)
            c->z[c->s[j].i] = -INFINITY;
        return GF_OK;
    }
    const double kth = c->s[k - 1].z; /* keep ties with the k-th */
    for (int32_t j = k; j < n; j++)
        if (c->s[j].z < kth)
            c->z[c->s[j].i] = -INFINITY;
    return GF_OK;
}

static gf_status stage_top_p(chain_ctx *c, double *pr_buf, uint8_t *keep)
{
    const gf_sampler_params *p = c->p;
    if (!p->use_top_p)
        return GF_OK;
    const double tp = p->top_p;
    const int pr = c->e->profile;
    if ((pr == GF_PROFILE_HF && (isnan(tp) || tp >= 1.0)) || (pr == GF_PROFILE_LLAMACPP && tp >= 1.0) ||
        (pr == GF_PROFILE_VLLM && tp == 1.0))
        return GF_OK;
    int32_t n = sort_finite(c);
    if (n == 0)
        return GF_OK;
    sorted_probs(c, pr_buf);
    const int32_t mtk = c->e->min_tokens_to_keep;
    if (pr == GF_PROFILE_SEED) { /* the seed's rule: drop once the exclusive prefix is >= p */
        double prefix = 0.0;
        for (int32_t j = 0; j < n; j++) {
            keep[j] = !(j > 0 && j >= mtk && prefix >= tp);
            prefix += pr_buf[j];
        }
    } else if (pr == GF_PROFILE_LLAMACPP) { /* the shortest prefix whose inclusive sum is >= p */
        double cum = 0.0;
        int32_t last = n;
        for (int32_t j = 0; j < n; j++) {
            cum += pr_buf[j];
            if (cum >= tp && j + 1 >= mtk) {
                last = j + 1;
                break;
            }
        }
        for (int32_t j = 0; j < n; j++)
            keep[j] = j < last;
    } else { /* hf, vllm: ascending inclusive cumsum <= 1 - p is dropped; the top mtk (vllm: 1) stay */
        const int32_t stay = pr == GF_PROFILE_VLLM ? 1 : mtk;
        double cum = 0.0;
        for (int32_t j = n - 1; j >= 0; j--) {
            cum += pr_buf[j];
            keep[j] = !(cum <= 1.0 - tp) || j < stay;
        }
    }
    drop_sorted_from(c, keep);
    return GF_OK;
}

static gf_status stage_min_p(chain_ctx *c, double *pr_buf, uint8_t *keep)
{
    const gf_sampler_ext *e = c->e;
    if (!e->use_min_p)
        return GF_OK;
    const int pr = e->profile;
    if (e->min_p <= 0.0) /* nothing is below 0 * p_max; llama.cpp and vLLM skip it */
        return GF_OK;
    int32_t n = sort_finite(c);
    if (n == 0)
        return GF_OK;
    int32_t stay = pr == GF_PROFILE_VLLM ? 0 : e->min_tokens_to_keep;
    if (pr == GF_PROFILE_LLAMACPP) {
        /* llama.cpp: z >= z_max + log(p); when fewer than max(1, min_keep)
         * pass (p > 1: none), its sorted fallback keeps the top
         * max(1, min_keep), then any further passing entry. NaN p: no
         * comparison stops that fallback, so every candidate stays. */
        if (isnan(e->min_p))
            return GF_OK;
        if (stay < 1)
            stay = 1;
        const double zmin = c->s[0].z + log(e->min_p);
        for (int32_t j = 0; j < n; j++)
            keep[j] = c->s[j].z >= zmin || j < stay;
    } else {
        sorted_probs(c, pr_buf);
        const double thr = e->min_p * pr_buf[0];
        for (int32_t j = 0; j < n; j++)
            keep[j] = !(pr_buf[j] < thr) || j < stay;
    }
    drop_sorted_from(c, keep);
    return GF_OK;
}

static gf_status stage_typical(chain_ctx *c, double *pr_buf, uint8_t *keep)
{
    const gf_sampler_ext *e = c->e;
    if (!e->use_typical_p)
        return GF_OK;
    const double mass = e->typical_p;
    const int pr = e->profile;
    if ((pr == GF_PROFILE_HF && (isnan(mass) || mass >= 1.0)) || mass >= 1.0)
        return GF_OK;
    int32_t n = sort_finite(c);
    if (n <= 0)
        return GF_OK;
    sorted_probs(c, pr_buf);
    /* entropy and each token's distance from it: |-log p_i - H| */
    const double zmax = c->s[0].z;
    double total = 0.0;
    for (int32_t j = 0; j < n; j++)
        total += exp(c->s[j].z - zmax);
    const double lse = zmax + log(total);
    double ent = 0.0;
    for (int32_t j = 0; j < n; j++)
        if (pr_buf[j] > 0)
            ent -= pr_buf[j] * (c->s[j].z - lse);
    zi *t = malloc((size_t)n * sizeof *t);
    double *tp = malloc((size_t)n * sizeof *tp);
    if (!t || !tp) {
        free(t);
        free(tp);
        return gf_error_set(GF_E_NOMEM, "sampler: typical-p scratch for %d tokens", (int)n);
    }
    for (int32_t j = 0; j < n; j++) {
        t[j].z = fabs(-(c->s[j].z - lse) - ent);
        t[j].i = j; /* position in s */
    }
    qsort(t, (size_t)n, sizeof *t, cmp_zi_asc);
    for (int32_t j = 0; j < n; j++)
        tp[j] = pr_buf[t[j].i];
    for (int32_t j = 0; j < n; j++)
        keep[j] = 0;
    const int32_t mtk = e->min_tokens_to_keep;
    if (pr == GF_PROFILE_LLAMACPP) { /* the first position whose cumsum exceeds p (strictly) */
        double cum = 0.0;
        int32_t last = n;
        for (int32_t j = 0; j < n; j++) {
            cum += tp[j];
            if (cum > mass && (mtk == 0 || j >= mtk - 1)) {
                last = j + 1;
                break;
            }
        }
        for (int32_t j = 0; j < last; j++)
            keep[t[j].i] = 1;
    } else { /* HF: last = #(cumsum < mass), keep distances <= the last one's, and the first mtk */
        double cum = 0.0;
        int32_t last = 0;
        for (int32_t j = 0; j < n; j++) {
            cum += tp[j];
            if (cum < mass)
                last++;
        }
        if (last > n - 1)
            last = n - 1;
        const double thr = t[last].z;
        for (int32_t j = 0; j < n; j++)
            if (!(t[j].z > thr) || j < mtk)
                keep[t[j].i] = 1;
    }
    free(t);
    free(tp);
    drop_sorted_from(c, keep);
    return GF_OK;
}

/* llama.cpp's XTC (exclude top choices): when it fires (probability >= 1:
 * every step; the validator refuses (0, 1)), the tokens whose probability
 * is >= threshold, but the least probable of them, are dropped, as long as
 * at least min_keep stay; threshold > 0.5 or fewer than 2 candidates: off.
 * The scan stops at the first token below the threshold (sorted order). */
static gf_status stage_xtc(chain_ctx *c, double *pr_buf, uint8_t *keep)
{
    const gf_sampler_ext *e = c->e;
    if (!(e->xtc_probability >= 1.0) || e->xtc_threshold > 0.5)
        return GF_OK;
    int32_t n = sort_finite(c);
    if (n < 2)
        return GF_OK;
    sorted_probs(c, pr_buf);
    int32_t last = 0; /* the last position with p >= threshold */
    for (int32_t j = 0; j < n && pr_buf[j] >= e->xtc_threshold; j++)
        last = j;
    if (last == 0 || n - last < e->xtc_min_keep)
        return GF_OK;
    for (int32_t j = 0; j < n; j++)
        keep[j] = j >= last;
    drop_sorted_from(c, keep);
    return GF_OK;
}

/* llama.cpp's top-n-sigma: with the mean and the population standard
 * deviation sigma of the finite z, every z < z_max - n * sigma goes (strict:
 * one exactly at the bound stays, and so do all ties with the maximum).
 * n <= 0 or fewer than 2 candidates: off. */
static gf_status stage_top_n_sigma(chain_ctx *c)
{
    const double n_sigma = c->e->top_n_sigma;
    if (!(n_sigma > 0.0) || count_finite(c->z, c->V) < 2)
        return GF_OK;
    double zmax = -INFINITY, sum = 0.0, acc = 0.0;
    int32_t n = 0;
    for (int32_t i = 0; i < c->V; i++)
        if (c->z[i] != -INFINITY) {
            zmax = c->z[i] > zmax ? c->z[i] : zmax;
            sum += c->z[i];
            n++;
        }
    const double mean = sum / n;
    for (int32_t i = 0; i < c->V; i++)
        if (c->z[i] != -INFINITY)
            acc += (c->z[i] - mean) * (c->z[i] - mean);
    const double bound = zmax - n_sigma * sqrt(acc / n);
    for (int32_t i = 0; i < c->V; i++)
        if (c->z[i] < bound)
            c->z[i] = -INFINITY;
    return GF_OK;
}

/* llama.cpp's DRY over the last dry_penalty_last_n ids of the history
 * (-1: all), h[0] the most recent (llama.cpp's ring buffer read from the
 * end, rat()). Off: multiplier 0, base < 1, window 0, or a window no longer
 * than allowed_length. The repeat limit is the distance back to the nearest
 * breaker (none: the window); under allowed_length: off. For each k in
 * [1, L), n is the length of the longest common run of h[0..] and h[k..]
 * (n + k < L), capped at the limit; when n >= allowed_length the token that
 * followed that earlier run, h[k - 1], would extend the repeat to n + 1: it
 * gets the largest such n over k. Every such token but a breaker loses
 * multiplier * base^(n - allowed_length) (the exponent capped, as llama.cpp
 * caps it, at 88.7228391 / ln base when base > 1.000001). */
static int is_breaker(const gf_sampler_ext *e, int32_t t)
{
    for (int32_t b = 0; b < e->n_dry_breakers; b++)
        if (e->dry_breakers[b] == t)
            return 1;
    return 0;
}

static gf_status stage_dry(chain_ctx *c)
{
    const gf_sampler_ext *e = c->e;
    if (e->dry_multiplier == 0.0 || !(e->dry_base >= 1.0) || e->dry_penalty_last_n == 0)
        return GF_OK;
    int32_t L =
        e->dry_penalty_last_n < 0 || e->dry_penalty_last_n > e->n_history ? e->n_history : e->dry_penalty_last_n;
    const int32_t allowed = e->dry_allowed_length;
    if (L <= allowed)
        return GF_OK;
    const int32_t *h0 = e->history + e->n_history - 1; /* h(i) = h0[-i] */
#define H(i) (h0[-(i)])
    int32_t limit = L;
    for (int32_t i = 0; i < L; i++)
        if (is_breaker(e, H(i))) {
            limit = i;
            break;
        }
    if (limit < allowed)
        return GF_OK;
    int32_t *longest = malloc((size_t)c->V * sizeof *longest); /* (V) the largest n per token, -1 none */
    if (!longest)
        return gf_error_set(GF_E_NOMEM, "sampler: DRY scratch for %d tokens", (int)c->V);
    for (int32_t t = 0; t < c->V; t++)
        longest[t] = -1;
    int any = 0;
    for (int32_t k = 1; k < L; k++) {
        int32_t n = 0;
        while (n + k < L && H(n) == H(n + k))
            n++;
        if (n > limit)
            n = limit;
        if (n >= allowed) { /* allowed 0: even n 0 counts, as in llama.cpp */
            const int32_t t = H(k - 1);
            if (t >= 0 && t < c->V && n > longest[t]) {
                longest[t] = n;
                any = 1;
            }
        }
    }
    int32_t max_exp = 0;
    if (e->dry_base > 1.000001)
        max_exp = (int32_t)(88.7228391 / log(e->dry_base));
    for (int32_t t = 0; any && t < c->V; t++) {
        if (longest[t] < 0 || is_breaker(e, t) || c->z[t] == -INFINITY)
            continue;
        int32_t x = longest[t] - allowed;
        if (max_exp > 0 && x > max_exp)
            x = max_exp;
        c->z[t] -= e->dry_multiplier * pow(e->dry_base, (double)x);
    }
#undef H
    free(longest);
    return GF_OK;
}

/* llama.cpp's mirostat at the step's mu (unset: 2 * tau), on the finite z
 * in descending order with their softmax p. v2: keep the leading run with
 * surprise -log2 p <= mu (at least one). v1 (m = 100): s_hat, the
 * least-squares Zipf exponent of the top m ratios (sum t_i b_i / sum t_i^2,
 * t_i = ln((i + 2) / (i + 1)), b_i = ln(p_i / p_{i+1})), then k =
 * ((s_hat - 1) 2^mu / (1 - V^(1 - s_hat)))^(1 / s_hat), and llama.cpp's
 * exact top-k at max((int)k, 1). One candidate: kept. */
static gf_status stage_mirostat(chain_ctx *c, double *pr_buf, uint8_t *keep)
{
    const gf_sampler_ext *e = c->e;
    int32_t n = sort_finite(c);
    if (n < 2)
        return GF_OK;
    sorted_probs(c, pr_buf);
    const double mu = e->use_mirostat_mu ? e->mirostat_mu : 2.0 * e->mirostat_tau;
    int32_t last = n; /* keep positions [0, last) */
    if (e->mirostat == 2) {
        last = 0;
        while (last < n && !(-log2(pr_buf[last]) > mu))
            last++;
    } else {
        double tb = 0.0, tt = 0.0;
        for (int32_t i = 0; i < 100 - 1 && i < n - 1; i++) {
            const double t = log((double)(i + 2) / (double)(i + 1)), b = log(pr_buf[i] / pr_buf[i + 1]);
            tb += t * b;
            tt += t * t;
        }
        double s_hat = tb / tt;
        /* llama.cpp's array keeps the dropped tokens (p 0) after the finite
         * ones: a pair reaching one within the first m makes b_i inf or NaN */
        if (n < c->V && n < 100)
            s_hat = NAN;
        const double eps = s_hat - 1.0;
        const double k = pow(eps * pow(2.0, mu) / (1.0 - pow((double)c->V, -eps)), 1.0 / s_hat);
        /* llama.cpp's max(int(k), 1): a k that no int holds (NaN, >= 2^31) converts to
         * INT_MIN on x86, so one token stays */
        if (!(k < 2147483648.0))
            last = 1;
        else
            last = k >= (double)n ? n : (k >= 1.0 ? (int32_t)k : 1);
    }
    if (last < 1)
        last = 1;
    for (int32_t j = 0; j < n; j++)
        keep[j] = j < last;
    drop_sorted_from(c, keep);
    return GF_OK;
}

/* hf's epsilon (eta 0) or eta cutoff (eta 1) on the finite z: drop p_j <
 * cut unless z_j is at least the min_tokens_to_keep-th largest z (torch.topk
 * counts the -inf entries: with fewer finite ones than that, all stay).
 * epsilon: cut = epsilon; eta: cut = min(eta, sqrt(eta) exp(-H)), H the
 * entropy of p. generate() adds each only for a value in (0, 1). */
static gf_status stage_cutoff(chain_ctx *c, int eta, double *pr_buf, uint8_t *keep)
{
    const gf_sampler_ext *e = c->e;
    const double x = eta ? e->eta_cutoff : e->epsilon_cutoff;
    if (!(x > 0.0 && x < 1.0))
        return GF_OK;
    int32_t n = sort_finite(c);
    const int32_t mtk = e->min_tokens_to_keep;
    if (n == 0 || mtk > n)
        return GF_OK;
    sorted_probs(c, pr_buf);
    double cut = x;
    if (eta) {
        double ent = 0.0;
        for (int32_t j = 0; j < n; j++)
            if (pr_buf[j] > 0)
                ent -= pr_buf[j] * log(pr_buf[j]);
        const double dyn = sqrt(x) * exp(-ent);
        cut = dyn < x ? dyn : x;
    }
    const double kth = c->s[(mtk < 1 ? 1 : mtk) - 1].z;
    for (int32_t j = 0; j < n; j++)
        keep[j] = !(pr_buf[j] < cut && c->s[j].z < kth);
    drop_sorted_from(c, keep);
    return GF_OK;
}

/* hf's ExponentialDecayLengthPenalty (transformers 4.47.1): with cur_len
 * the history's length and regulation_start = start_index + the prompt's,
 * once cur_len > regulation_start, z[eos] += |z[eos]| (factor^k - 1), k =
 * cur_len - regulation_start. A banned EOS (-inf) stays banned: HF's own
 * arithmetic gives -inf + inf = NaN there for a factor above 1. */
static gf_status stage_decay(chain_ctx *c)
{
    const gf_sampler_ext *e = c->e;
    if (e->exp_decay_start < 0 || e->eos_id < 0 || e->eos_id >= c->V)
        return GF_OK;
    const long long k = (long long)e->n_history - e->n_prompt - e->exp_decay_start;
    double *z = &c->z[e->eos_id];
    if (k > 0 && isfinite(*z))
        *z += fabs(*z) * (pow(e->exp_decay_factor, (double)k) - 1.0);
    return GF_OK;
}

/* Greedy over z (V): the argmax and its margin (genfence/rows.h). */
static void greedy_pick_z(const double *z, int32_t V, gf_sample_result *out)
{
    gf_top2 t;
    gf_row_top2_d(z, V, &t);
    out->token = t.token;
    out->runner_up = t.runner_up;
    out->margin = gf_top2_margin(&t);
    out->kept = V;
}

static void one_hot(double *z, int32_t V, int32_t tok, double v)
{
    for (int32_t i = 0; i < V; i++)
        z[i] = -INFINITY;
    z[tok] = v;
}

/* Temperature; greedy sets *greedy and fills res. */
static gf_status stage_temperature(chain_ctx *c, int *greedy, gf_sample_result *res)
{
    const double T = c->p->temperature;
    const int pr = c->e->profile;
    int is_greedy = (pr == GF_PROFILE_SEED && T == 0.0) || (pr == GF_PROFILE_LLAMACPP && T <= 0.0) ||
                    (pr == GF_PROFILE_VLLM && T < 1e-5);
    if (is_greedy) {
        greedy_pick_z(c->z, c->V, res);
        one_hot(c->z, c->V, res->token, c->z[res->token]);
        *greedy = 1;
        return GF_OK;
    }
    if (pr == GF_PROFILE_HF && T == 1.0) /* HF adds no warper at 1.0 */
        return GF_OK;
    for (int32_t i = 0; i < c->V; i++) {
        double x = c->z[i];
        if (x == -INFINITY)
            continue;
        double v = x / T;
        if (isinf(v))
            return gf_error_set(GF_E_INVALID_ARG, "temperature %.17g overflows logits[%d] = %.9g / temperature", T,
                                (int)i, x);
        c->z[i] = v;
    }
    return GF_OK;
}

static const int32_t k_order_seed[] = {GF_STAGE_PENALTIES, GF_STAGE_TEMPERATURE, GF_STAGE_TOP_K,
                                       GF_STAGE_TOP_P,     GF_STAGE_MIN_P,       GF_STAGE_TYPICAL_P};
/* HF's warpers: the seed's order, then epsilon and eta (generate()'s list) */
static const int32_t k_order_hf[] = {GF_STAGE_PENALTIES, GF_STAGE_DECAY_,   GF_STAGE_TEMPERATURE,
                                     GF_STAGE_TOP_K,     GF_STAGE_TOP_P,    GF_STAGE_MIN_P,
                                     GF_STAGE_TYPICAL_P, GF_STAGE_EPSILON_, GF_STAGE_ETA_};
/* llama.cpp's common order (common/sampling.cpp) over the stages genfence has */
static const int32_t k_order_llamacpp[] = {GF_STAGE_PENALTIES, GF_STAGE_DRY,       GF_STAGE_TOP_N_SIGMA,
                                           GF_STAGE_TOP_K,     GF_STAGE_TYPICAL_P, GF_STAGE_TOP_P,
                                           GF_STAGE_MIN_P,     GF_STAGE_XTC,       GF_STAGE_TEMPERATURE};
static const int32_t k_order_vllm[] = {GF_STAGE_PENALTIES, GF_STAGE_TEMPERATURE, GF_STAGE_MIN_P, GF_STAGE_TOP_K,
                                       GF_STAGE_TOP_P};

/* vLLM on a poisoned row: torch.argmax's choice (the first NaN, else the first +inf, else 0). */
static int32_t vllm_poison_id(const float *logits, int32_t V)
{
    for (int32_t i = 0; i < V; i++)
        if (isnan(logits[i]))
            return i;
    for (int32_t i = 0; i < V; i++)
        if (isinf(logits[i]) && logits[i] > 0)
            return i;
    return 0;
}

static gf_status check_row(const float *logits, int32_t V, int profile, int *poisoned)
{
    *poisoned = 0;
    if (logits == NULL)
        return gf_error_set(GF_E_INVALID_ARG, "logits: NULL");
    if (V < 1)
        return gf_error_set(GF_E_INVALID_ARG, "vocabulary size V must be >= 1, got %d", (int)V);
    int32_t finite = 0;
    for (int32_t i = 0; i < V; i++) {
        float x = logits[i];
        if (isnan(x) || (isinf(x) && x > 0)) {
            if (profile == GF_PROFILE_VLLM) {
                *poisoned = 1;
                return GF_OK;
            }
            return gf_error_set(GF_E_INVALID_ARG, "logits[%d] is %s", (int)i, isnan(x) ? "NaN" : "+inf");
        }
        if (!isinf(x))
            finite++;
    }
    if (finite == 0) {
        if (profile == GF_PROFILE_VLLM) {
            *poisoned = 1;
            return GF_OK;
        }
        return gf_error_set(GF_E_INVALID_ARG, "all %d logits are -inf: nothing to sample", (int)V);
    }
    return GF_OK;
}

/* vLLM's fallback id for a row the chain cannot draw from. A NaN / +inf
 * row leaves z a one-hot at that id (where torch.argmax goes); an all -inf
 * row (as given, or once the filters dropped everything) leaves z all -inf:
 * the filters are no-ops and nothing is kept (kept 0, docs/sampler.md). */
static void poison_result(double *z, int32_t V, int32_t tok, int nan_or_inf, int *poisoned, gf_sample_result *res)
{
    if (nan_or_inf)
        one_hot(z, V, tok, 0.0);
    else
        for (int32_t i = 0; i < V; i++)
            z[i] = -INFINITY;
    *poisoned = 1;
    res->token = tok;
    res->runner_up = -1;
    res->margin = NAN;
    res->kept = 0;
}

static gf_status run_stages(chain_ctx *c, int *greedy, int *poisoned, gf_sample_result *res, double *pr_buf,
                            uint8_t *keep)
{
    const gf_sampler_ext *e = c->e;
    const int pr = e->profile;
    /* the bans and biases over the history: vllm's masks and bad words, logit bias, the EOS bans, hf's
     * sequence_bias, n-gram ban, bad words, forced BOS / EOS (sampler_bans.c) */
    gf_status bst = gf_sampler_bans_run(e, c->V, c->z, c->pn);
    if (bst != GF_OK)
        return bst;
    const int32_t *order;
    int32_t n_order;
    static const int32_t k_order_mirostat[] = {GF_STAGE_TEMPERATURE, GF_STAGE_MIROSTAT_};
    switch (pr) {
    case GF_PROFILE_LLAMACPP:
        if (e->mirostat) { /* common/sampling: temperature, then mirostat instead of the chain */
            order = k_order_mirostat;
            n_order = 2;
            break;
        }
        order = e->n_chain > 0 ? e->chain : k_order_llamacpp;
        n_order = e->n_chain > 0 ? e->n_chain : (int32_t)(sizeof k_order_llamacpp / sizeof k_order_llamacpp[0]);
        break;
    case GF_PROFILE_VLLM:
        order = k_order_vllm;
        n_order = (int32_t)(sizeof k_order_vllm / sizeof k_order_vllm[0]);
        break;
    case GF_PROFILE_HF:
        order = k_order_hf;
        n_order = (int32_t)(sizeof k_order_hf / sizeof k_order_hf[0]);
        break;
    default:
        order = k_order_seed;
        n_order = (int32_t)(sizeof k_order_seed / sizeof k_order_seed[0]);
        break;
    }
    for (int32_t s = 0; s < n_order; s++) {
        if (count_finite(c->z, c->V) == 0)
            break;
        gf_status st = GF_OK;
        switch (order[s]) {
        case GF_STAGE_PENALTIES: st = stage_penalties(c); break;
        case GF_STAGE_TOP_K: st = stage_top_k(c); break;
        case GF_STAGE_TOP_P: st = stage_top_p(c, pr_buf, keep); break;
        case GF_STAGE_MIN_P: st = stage_min_p(c, pr_buf, keep); break;
        case GF_STAGE_TYPICAL_P: st = stage_typical(c, pr_buf, keep); break;
        case GF_STAGE_TEMPERATURE: st = stage_temperature(c, greedy, res); break;
        case GF_STAGE_XTC: st = stage_xtc(c, pr_buf, keep); break;
        case GF_STAGE_TOP_N_SIGMA: st = stage_top_n_sigma(c); break;
        case GF_STAGE_DRY: st = stage_dry(c); break;
        case GF_STAGE_MIROSTAT_: st = stage_mirostat(c, pr_buf, keep); break;
        case GF_STAGE_EPSILON_: st = stage_cutoff(c, 0, pr_buf, keep); break;
        case GF_STAGE_ETA_: st = stage_cutoff(c, 1, pr_buf, keep); break;
        case GF_STAGE_DECAY_: st = stage_decay(c); break;
        default: st = gf_error_set(GF_E_INTERNAL, "sampler: stage %d", (int)order[s]);
        }
        if (st != GF_OK)
            return st;
        /* seed and vllm decide greedy before any later filter (HF's and
         * vLLM's greedy paths skip the warpers); llamacpp's greedy keeps one
         * token, which later stages keep too */
        if (*greedy && pr != GF_PROFILE_LLAMACPP)
            return GF_OK;
    }
    if (count_finite(c->z, c->V) == 0) {
        if (pr == GF_PROFILE_VLLM) { /* softmax of all -inf is NaN; argmax gives 0 */
            poison_result(c->z, c->V, 0, 0, poisoned, res);
            return GF_OK;
        }
        return gf_error_set(GF_E_INVALID_ARG,
                            "%s: every token was filtered out (logit_bias, the EOS ban or "
                            "penalties left no finite logit)",
                            c->pn);
    }
    return GF_OK;
}

gf_status gf_sampler_chain_run(const float *logits, int32_t V, const gf_sampler_params *p, const gf_sampler_ext *e,
                               double *z, int *greedy, int *poisoned, gf_sample_result *res)
{
    *greedy = 0;
    gf_status st = check_row(logits, V, e->profile, poisoned);
    if (st != GF_OK)
        return st;
    if (*poisoned) {
        int nan_or_inf = 0;
        for (int32_t i = 0; i < V && !nan_or_inf; i++)
            nan_or_inf = isnan(logits[i]) || (isinf(logits[i]) && logits[i] > 0);
        poison_result(z, V, vllm_poison_id(logits, V), nan_or_inf, poisoned, res);
        return GF_OK;
    }
    for (int32_t i = 0; i < V; i++)
        z[i] = (double)logits[i];
    chain_ctx c = {.p = p, .e = e, .V = V, .z = z, .pn = gf_sampler_profile_name(e->profile)};
    c.s = malloc((size_t)V * sizeof *c.s);
    double *pr_buf = malloc((size_t)V * sizeof *pr_buf);
    uint8_t *keep = malloc((size_t)V);
    if (!c.s || !pr_buf || !keep)
        st = gf_error_set(GF_E_NOMEM, "sampler: scratch for %d logits", (int)V);
    else
        st = run_stages(&c, greedy, poisoned, res, pr_buf, keep);
    free(c.s);
    free(pr_buf);
    free(keep);
    return st;
}
