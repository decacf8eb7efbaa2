/* The filter-boundary excuse of a sampled golden step (docs/goldens.md "The
 * tolerance rule"): the race gate, scaled by the declared dtype like the
 * greedy gate, also covers the top-k / top-p boundary. */
#include <math.h>
#include <stdlib.h>

#include "genfence/sampler.h"
#include "golden_case.h"

typedef struct zi {
    double z;
    int32_t i;
} zi;

static int zi_desc(const void *a, const void *b)
{
    const zi *x = a, *y = b;
    if (x->z != y->z)
        return x->z > y->z ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Race over z with token `tok` added (add) or dropped; 1 if `want` wins. */
static int race_with(double *z, const double *u, int32_t V, int32_t tok, double z_tok, int add, int32_t want)
{
    double keep = z[tok];
    z[tok] = add ? z_tok : -INFINITY;
    gf_sample_result r;
    gf_sampler_race(z, u, V, &r);
    z[tok] = keep;
    return r.token == want;
}

int gf_golden_boundary_excuse(const float *logits, int32_t V, const gf_sampler_params *sp, uint64_t seq_id,
                              uint64_t step, int32_t test_token, double thr, double *margin_out)
{
    if (!(sp->temperature > 0) || sp->ext || test_token < 0 || test_token >= V || !(thr > 0))
        return 0;
    int excused = 0;
    double T = sp->temperature, best = INFINITY;
    double *z = malloc((size_t)V * sizeof *z), *u = malloc((size_t)V * sizeof *u);
    zi *o = malloc((size_t)V * sizeof *o);
    if (!z || !u || !o || gf_sampler_filter(logits, V, sp, z) != GF_OK)
        goto done;
    gf_rng_uniforms(sp->seed, seq_id, step, V, u);
    for (int32_t i = 0; i < V; i++) {
        o[i].z = (double)logits[i] / T;
        o[i].i = i;
    }
    qsort(o, (size_t)V, sizeof *o, zi_desc);
    /* candidates: (token, margin in z units, add?) */
    int32_t n = V;
    if (sp->use_top_k && sp->top_k < V) {
        n = sp->top_k;
        double m = o[n - 1].z - o[n].z; /* the k-th and the first dropped swap */
        if (m < thr && (race_with(z, u, V, o[n].i, o[n].z, 1, test_token) ||
                        race_with(z, u, V, o[n - 1].i, o[n - 1].z, 0, test_token)))
            best = m < best ? m : best;
    }
    if (sp->use_top_p && sp->top_p < 1.0 && n > 1) {
        /* inclusion of the first dropped token j (prefix S = p_0..p_{j-1} >= p)
         * and of the last kept (S0 = p_0..p_{j-2} < p): the smallest uniform
         * perturbation d of z that moves S below p (or S0 to p) is
         * 1/2 ln(S (1 - p) / (p (1 - S))) (resp. 1/2 ln(p (1 - S0) / (S0 (1 - p)))) */
        double total = 0, zmax = o[0].z, p = sp->top_p;
        for (int32_t j = 0; j < n; j++)
            total += exp(o[j].z - zmax);
        double prefix = 0, prev = 0;
        int32_t j = 1;
        prefix = exp(o[0].z - zmax) / total;
        for (; j < n && prefix < p; j++) {
            prev = prefix;
            prefix += exp(o[j].z - zmax) / total;
        }
        if (j < n) {
            double add = prefix < 1.0 ? 0.5 * log(prefix * (1 - p) / (p * (1 - prefix))) : INFINITY;
            double drop = j - 1 > 0 && prev > 0 ? 0.5 * log(p * (1 - prev) / (prev * (1 - p))) : INFINITY;
            if (add < thr && race_with(z, u, V, o[j].i, o[j].z, 1, test_token))
                best = add < best ? add : best;
            if (drop < thr && race_with(z, u, V, o[j - 1].i, o[j - 1].z, 0, test_token))
                best = drop < best ? drop : best;
        }
    }
    if (best < thr) {
        excused = 1;
        *margin_out = best;
    }
done:
    free(z);
    free(u);
    free(o);
    return excused;
}
