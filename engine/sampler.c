/* The sampler: temperature -> top-k -> top-p -> exponential race
 * (include/genfence/sampler.h, docs/sampler.md, docs/random.md), and the
 * entry points of every profile: gf_sample, gf_sample_row, the filter and
 * probs. The top of the three sampler files: the rules are
 * sampler_profile.c's (gf_sampler_validate), a profile's chain
 * sampler_chain.c's.
 *
 * All arithmetic is in double on float logits. Scratch memory is malloc'd per
 * call and freed on every path; there is no global mutable state. */
#include "genfence/sampler.h"
#include "genfence/rows.h"

#include "sampler_internal.h"

#include <math.h>
#include <string.h>
#include <stddef.h>
#include <stdlib.h>

gf_sampler_params gf_sampler_greedy(void)
{
    gf_sampler_params p;
    p.temperature = 0.0;
    p.use_top_k = 0;
    p.top_k = 0;
    p.use_top_p = 0;
    p.top_p = 1.0;
    p.seed = 0;
    p.ext = NULL;
    return p;
}

/* Logits: V >= 1, no NaN, no +inf, at least one finite (-inf = excluded). */
static gf_status check_logits(const float *logits, int32_t V)
{
    if (logits == NULL)
        return gf_error_set(GF_E_INVALID_ARG, "logits: NULL");
    if (V < 1)
        return gf_error_set(GF_E_INVALID_ARG, "vocabulary size V must be >= 1, got %d", (int)V);
    int32_t finite = 0;
    for (int32_t i = 0; i < V; i++) {
        float x = logits[i];
        if (isnan(x))
            return gf_error_set(GF_E_INVALID_ARG, "logits[%d] is NaN", (int)i);
        if (isinf(x)) {
            if (x > 0)
                return gf_error_set(GF_E_INVALID_ARG, "logits[%d] is +inf", (int)i);
            continue;
        }
        finite++;
    }
    if (finite == 0)
        return gf_error_set(GF_E_INVALID_ARG, "all %d logits are -inf: nothing to sample", (int)V);
    return GF_OK;
}

/* Greedy over raw logits (already checked): the argmax and its margin
 * (genfence/rows.h, the one definition). */
void gf_sampler_greedy_pick(const float *logits, int32_t V, gf_sample_result *out)
{
    gf_top2 t;
    gf_row_top2(logits, V, &t);
    out->token = t.token;
    out->runner_up = t.runner_up;
    out->margin = gf_top2_margin(&t);
    out->kept = V;
}

/* The k-th largest of a[0..n) (1 <= k <= n; no NaN: check_logits refuses
 * them), a reordered: what a[k - 1] is after sorting a descending, found by
 * selection (Hoare's partition, the middle element as pivot) instead of a
 * sort of the whole vocabulary at every step */
static double kth_largest(double *a, int32_t n, int32_t k)
{
    int32_t lo = 0, hi = n - 1;
    const int32_t want = k - 1;
    while (lo < hi) {
        const double pivot = a[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot)
                i++;
            while (a[j] < pivot)
                j--;
            if (i <= j) {
                const double t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        /* a[lo..j] >= pivot >= a[i..hi], and a[j+1..i-1] == pivot */
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return pivot;
    }
    return a[want];
}

/* Steps 1-3 for a non-greedy temperature: z = logits / T, then top-k, then
 * top-p. Writes z (V) with -inf where dropped; *kept = finite entries. */
static gf_status filter_sampled(const float *logits, int32_t V, const gf_sampler_params *p, double *z, int32_t *kept)
{
    const double T = p->temperature;
    for (int32_t i = 0; i < V; i++) {
        double x = (double)logits[i];
        double v = x / T;
        if (isinf(v) && !isinf(x))
            return gf_error_set(GF_E_INVALID_ARG, "temperature %.17g overflows logits[%d] = %.9g / temperature", T,
                                (int)i, (double)logits[i]);
        z[i] = v;
    }

    if (p->use_top_k && p->top_k < V) {
        /* The k-th largest z (-inf included, as torch.topk does); keep ties. */
        double *tmp = malloc((size_t)V * sizeof *tmp);
        if (tmp == NULL)
            return gf_error_set(GF_E_NOMEM, "sampler: top-k scratch for %d logits", (int)V);
        for (int32_t i = 0; i < V; i++)
            tmp[i] = z[i];
        double kth = kth_largest(tmp, V, p->top_k);
        free(tmp);
        for (int32_t i = 0; i < V; i++)
            if (z[i] < kth)
                z[i] = -INFINITY;
    }

    if (p->use_top_p) {
        /* Only finite entries carry mass; -inf ones stay dropped. */
        int32_t n = 0;
        for (int32_t i = 0; i < V; i++)
            if (z[i] != -INFINITY)
                n++;
        if (n == 0) /* cannot happen: check_logits found a finite logit */
            return gf_error_set(GF_E_INTERNAL, "sampler: top-p found no candidates");
        gf_zi *s = malloc((size_t)n * sizeof *s);
        if (s == NULL)
            return gf_error_set(GF_E_NOMEM, "sampler: top-p scratch for %d logits", (int)n);
        n = 0;
        for (int32_t i = 0; i < V; i++)
            if (z[i] != -INFINITY) {
                s[n].z = z[i];
                s[n].i = i;
                n++;
            }
        qsort(s, (size_t)n, sizeof *s, gf_zi_cmp_desc);
        /* softmax in sorted order (subtract the max), then the exclusive
         * prefix sum: drop a token once the mass before it is >= p. */
        const double zmax = s[0].z;
        double total = 0.0;
        for (int32_t j = 0; j < n; j++)
            total += exp(s[j].z - zmax);
        double prefix = 0.0;
        for (int32_t j = 0; j < n; j++) {
            double pj = exp(s[j].z - zmax) / total;
            if (j > 0 && prefix >= p->top_p)
                z[s[j].i] = -INFINITY;
            prefix += pj;
        }
        free(s);
    }

    int32_t k = 0;
    for (int32_t i = 0; i < V; i++)
        if (z[i] != -INFINITY)
            k++;
    *kept = k;
    return GF_OK;
}

/* Validation of params and logits, then z (V). Greedy keeps only the argmax,
 * at its raw logit. */
/* A params with an extension: validated, then the profile's chain
 * (sampler_chain.c). */
static gf_status chain_impl(const float *logits, int32_t V, const gf_sampler_params *p, double *z, int *greedy,
                            int *poisoned, gf_sample_result *res, int valid)
{
    gf_sampler_ext e;
    gf_status st = gf_sampler_ext_load(p, &e);
    if (st == GF_OK && !valid)
        st = gf_sampler_validate(p);
    if (st != GF_OK)
        return st;
    if (z == NULL)
        return gf_error_set(GF_E_INVALID_ARG, "sampler: NULL output buffer");
    return gf_sampler_chain_run(logits, V, p, &e, z, greedy, poisoned, res);
}

static gf_status filter_impl(const float *logits, int32_t V, const gf_sampler_params *p, double *z, int32_t *kept,
                             gf_sample_result *greedy, int valid)
{
    if (p && p->ext) {
        int g = 0, poisoned = 0;
        gf_sample_result r;
        gf_status st = chain_impl(logits, V, p, z, &g, &poisoned, &r, valid);
        if (st == GF_OK) {
            *kept = 0;
            for (int32_t i = 0; i < V; i++)
                *kept += z[i] != -INFINITY;
            if (g && greedy)
                *greedy = r;
        }
        return st;
    }
    gf_status st = valid ? GF_OK : gf_sampler_validate(p);
    if (st != GF_OK)
        return st;
    st = check_logits(logits, V);
    if (st != GF_OK)
        return st;
    if (z == NULL)
        return gf_error_set(GF_E_INVALID_ARG, "sampler: NULL output buffer");
    if (p->temperature == 0.0) {
        gf_sample_result g;
        gf_sampler_greedy_pick(logits, V, &g);
        for (int32_t i = 0; i < V; i++)
            z[i] = -INFINITY;
        z[g.token] = (double)logits[g.token];
        *kept = 1;
        if (greedy)
            *greedy = g;
        return GF_OK;
    }
    return filter_sampled(logits, V, p, z, kept);
}

gf_status gf_sampler_filter(const float *logits, int32_t V, const gf_sampler_params *p, double *z_out)
{
    int32_t kept;
    return filter_impl(logits, V, p, z_out, &kept, NULL, 0);
}

gf_status gf_sampler_filter_valid(const float *logits, int32_t V, const gf_sampler_params *p, double *z_out)
{
    int32_t kept;
    return filter_impl(logits, V, p, z_out, &kept, NULL, 1);
}

gf_status gf_sampler_probs(const float *logits, int32_t V, const gf_sampler_params *p, double *probs_out)
{
    int32_t kept;
    gf_status st = filter_impl(logits, V, p, probs_out, &kept, NULL, 0);
    if (st != GF_OK)
        return st;
    double zmax = -INFINITY;
    for (int32_t i = 0; i < V; i++)
        if (probs_out[i] > zmax)
            zmax = probs_out[i];
    double total = 0.0;
    for (int32_t i = 0; i < V; i++) {
        double e = probs_out[i] == -INFINITY ? 0.0 : exp(probs_out[i] - zmax);
        probs_out[i] = e;
        total += e;
    }
    for (int32_t i = 0; i < V; i++) /* nothing kept (vllm's all -inf row): every probability 0, not NaN */
        probs_out[i] = total > 0 ? probs_out[i] / total : 0.0;
    return GF_OK;
}

static const char *const k_lp_modes[] = {
#define GF_LPM_NAME_(ID, name) name,
    GF_LOGPROB_MODE_LIST(GF_LPM_NAME_)
#undef GF_LPM_NAME_
};

const char *gf_logprob_mode_name(int mode) { return mode >= 0 && mode < GF_LOGPROBS_COUNT ? k_lp_modes[mode] : NULL; }

int gf_logprob_mode_from_name(const char *name)
{
    for (int i = 0; name && i < GF_LOGPROBS_COUNT; i++)
        if (!strcmp(name, k_lp_modes[i]))
            return i;
    return -1;
}

/* out (V) = x - logsumexp(x) over the finite x; -inf stays -inf */
static void log_softmax_d(double *x, int32_t V)
{
    double m = -INFINITY, t = 0.0;
    for (int32_t i = 0; i < V; i++)
        if (x[i] > m)
            m = x[i];
    for (int32_t i = 0; i < V; i++)
        if (x[i] != -INFINITY)
            t += exp(x[i] - m);
    const double lse = m + log(t);
    for (int32_t i = 0; i < V; i++)
        if (x[i] != -INFINITY)
            x[i] -= lse;
}

gf_status gf_sampler_logprobs(const float *logits, int32_t V, const gf_sampler_params *p, int mode, double *out)
{
    if (!gf_logprob_mode_name(mode))
        return gf_error_set(GF_E_INVALID_ARG,
                            "logprobs: mode %d is not one of raw, raw_logits, scaled, processed, "
                            "processed_logits",
                            mode);
    int32_t kept;
    gf_sample_result gr;
    gr.token = -2;                                                /* filter_impl fills it when the row is greedy */
    gf_status st = filter_impl(logits, V, p, out, &kept, &gr, 0); /* validates p and the row */
    if (st != GF_OK)
        return st;
    const int greedy = gr.token != -2;
    if (mode == GF_LOGPROBS_RAW || mode == GF_LOGPROBS_RAW_LOGITS) {
        for (int32_t i = 0; i < V; i++)
            out[i] = (double)logits[i];
        if (mode == GF_LOGPROBS_RAW)
            log_softmax_d(out, V);
        return GF_OK;
    }
    if (greedy)
        return gf_error_set(GF_E_INVALID_ARG,
                            "logprobs: %s of a greedy row (temperature %g under %s) are not modelled: greedy applies "
                            "no temperature, and what a profile reports for it is its own choice",
                            gf_logprob_mode_name(mode), p->temperature,
                            gf_sampler_profile_name(gf_sampler_params_profile(p)));
    if (mode == GF_LOGPROBS_SCALED) {
        const int hf_one = gf_sampler_params_profile(p) == GF_PROFILE_HF && p->temperature == 1.0;
        for (int32_t i = 0; i < V; i++)
            out[i] = hf_one ? (double)logits[i] : (double)logits[i] / p->temperature;
        log_softmax_d(out, V);
        return GF_OK;
    }
    if (mode == GF_LOGPROBS_PROCESSED && kept > 0)
        log_softmax_d(out, V);
    return GF_OK;
}

void gf_sampler_race(const double *z, const double *u, int32_t V, gf_sample_result *out)
{
    gf_top2 t;
    gf_top2_init(&t);
    int32_t kept = 0;
    for (int32_t i = 0; i < V; i++) {
        if (!isfinite(z[i]))
            continue;
        kept++;
        gf_top2_push(&t, i, z[i] - log(-log(u[i])));
    }
    out->token = t.token;
    out->runner_up = t.runner_up;
    out->margin = t.token < 0 ? NAN : gf_top2_margin(&t);
    out->kept = kept;
}

/* gf_sample under a profile: the chain, then the same race. */
static gf_status sample_chain(const float *logits, int32_t V, const gf_sampler_params *p, uint64_t seq_id,
                              uint64_t step, gf_sample_result *out, int valid)
{
    if (V < 1 || logits == NULL)
        return gf_error_set(GF_E_INVALID_ARG, logits ? "vocabulary size V must be >= 1, got %d" : "logits: NULL",
                            (int)V);
    double *z = malloc((size_t)V * sizeof *z);
    double *u = malloc((size_t)V * sizeof *u);
    if (z == NULL || u == NULL) {
        free(z);
        free(u);
        return gf_error_set(GF_E_NOMEM, "sampler: scratch for %d logits", (int)V);
    }
    int greedy = 0, poisoned = 0;
    gf_sample_result r;
    gf_status st = chain_impl(logits, V, p, z, &greedy, &poisoned, &r, valid);
    if (st == GF_OK) {
        if (greedy || poisoned) {
            *out = r;
        } else {
            gf_rng_uniforms(p->seed, seq_id, step, V, u);
            gf_sampler_race(z, u, V, out);
        }
    }
    free(z);
    free(u);
    return st;
}

/* valid: p has passed gf_sampler_validate (the caller's entry point did it
 * once; the rules are not re-read per row and step) */
static gf_status sample_impl(const float *logits, int32_t V, const gf_sampler_params *p, uint64_t seq_id, uint64_t step,
                             gf_sample_result *out, int valid)
{
    if (out == NULL)
        return gf_error_set(GF_E_INVALID_ARG, "sampler: NULL result");
    if (p && p->ext)
        return sample_chain(logits, V, p, seq_id, step, out, valid);
    gf_status st = valid ? GF_OK : gf_sampler_validate(p);
    if (st != GF_OK)
        return st;
    st = check_logits(logits, V);
    if (st != GF_OK)
        return st;
    if (p->temperature == 0.0) {
        gf_sampler_greedy_pick(logits, V, out);
        return GF_OK;
    }
    double *z = malloc((size_t)V * sizeof *z);
    double *u = malloc((size_t)V * sizeof *u);
    if (z == NULL || u == NULL) {
        free(z);
        free(u);
        return gf_error_set(GF_E_NOMEM, "sampler: scratch for %d logits", (int)V);
    }
    int32_t kept = 0;
    st = filter_sampled(logits, V, p, z, &kept);
    if (st == GF_OK) {
        gf_rng_uniforms(p->seed, seq_id, step, V, u);
        gf_sampler_race(z, u, V, out);
    }
    free(z);
    free(u);
    return st;
}

gf_status gf_sample(const float *logits, int32_t V, const gf_sampler_params *p, uint64_t seq_id, uint64_t step,
                    gf_sample_result *out)
{
    return sample_impl(logits, V, p, seq_id, step, out, 0);
}

static gf_status row_impl(const float *logits, int32_t V, const gf_sampler_params *p, const int32_t *tokens,
                          int32_t n_tokens, int32_t n_prompt, int32_t eos_id, uint64_t seq_id, uint64_t step,
                          gf_sample_result *out, int valid)
{
    if (!p || !p->ext)
        return sample_impl(logits, V, p, seq_id, step, out, valid);
    gf_sampler_ext e;
    gf_status st = gf_sampler_ext_load(p, &e);
    if (st != GF_OK)
        return st;
    e.history = tokens;
    e.n_history = n_tokens;
    e.n_prompt = n_prompt;
    if (e.eos_id < 0)
        e.eos_id = eos_id;
    gf_sampler_params q = *p;
    q.ext = &e;
    return sample_impl(logits, V, &q, seq_id, step, out, valid);
}

gf_status gf_sample_row(const float *logits, int32_t V, const gf_sampler_params *p, const int32_t *tokens,
                        int32_t n_tokens, int32_t n_prompt, int32_t eos_id, uint64_t seq_id, uint64_t step,
                        gf_sample_result *out)
{
    return row_impl(logits, V, p, tokens, n_tokens, n_prompt, eos_id, seq_id, step, out, 0);
}

gf_status gf_sample_row_valid(const float *logits, int32_t V, const gf_sampler_params *p, const int32_t *tokens,
                              int32_t n_tokens, int32_t n_prompt, int32_t eos_id, uint64_t seq_id, uint64_t step,
                              gf_sample_result *out)
{
    return row_impl(logits, V, p, tokens, n_tokens, n_prompt, eos_id, seq_id, step, out, 1);
}
int gf_sampler_is_stop(const gf_sampler_params *p, int32_t token)
{
    gf_sampler_ext e;
    if (!p || !p->ext || gf_sampler_ext_load(p, &e) != GF_OK)
        return 0;
    for (int32_t i = 0; i < e.n_stop_ids; i++)
        if (e.stop_ids[i] == token)
            return 1;
    return 0;
}

gf_status gf_sampler_mirostat_mu(const float *logits, int32_t V, const gf_sampler_params *p, int32_t token,
                                 double *mu_out)
{
    if (!p || !mu_out)
        return gf_error_set(GF_E_INVALID_ARG, "mirostat mu: NULL params or output");
    gf_sampler_ext e;
    gf_status st = gf_sampler_ext_load(p, &e);
    if (st != GF_OK)
        return st;
    if (!p->ext || e.profile != GF_PROFILE_LLAMACPP || !e.mirostat)
        return gf_error_set(GF_E_INVALID_ARG, "mirostat mu: mirostat is off (llamacpp's mirostat 1 or 2)");
    if (token < 0 || token >= V)
        return gf_error_set(GF_E_INVALID_ARG, "mirostat mu: token %d is outside the vocabulary (%d)", (int)token,
                            (int)V);
    double *probs = malloc((size_t)V * sizeof *probs); /* (V) */
    if (!probs)
        return gf_error_set(GF_E_NOMEM, "mirostat mu: %d probabilities", (int)V);
    st = gf_sampler_probs(logits, V, p, probs);
    const double pt = st == GF_OK ? probs[token] : 0.0;
    free(probs);
    if (st != GF_OK)
        return st;
    if (!(pt > 0.0))
        return gf_error_set(GF_E_INVALID_ARG, "mirostat mu: token %d was not kept at this step", (int)token);
    const double mu = e.use_mirostat_mu ? e.mirostat_mu : 2.0 * e.mirostat_tau;
    *mu_out = mu - e.mirostat_eta * (-log2(pt) - e.mirostat_tau);
    return GF_OK;
}
