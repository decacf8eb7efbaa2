/* sampling_distribution: the sampler's draws against the filtered
 * distribution (a chi-square test on seeded draws). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/sampler.h"
#include "chi2.h"
#include "keys.h"
#include "slot.h"

typedef struct dist_spec {
    float *logits;
    int32_t V;
    gf_sampler_params p;
    long long draws;
    double alpha;
    double *expect_probs;
    size_t n_expect;
} dist_spec;

static void dist_free(void *p)
{
    dist_spec *s = p;
    if (s) {
        free(s->logits);
        free(s->expect_probs);
    }
    free(s);
}

static int parse_dist(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    dist_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->p = gf_sampler_greedy();
    s->p.temperature = 1.0;
    s->draws = 20000;
    s->alpha = 1e-3;
    int fp;
    int bad = gf_y_probs_or_logits(ctx, m, GF_Y_REQUIRED, &s->logits, &s->V, &fp) < 0;
    bad |= gf_y_sampler(ctx, m, &s->p) < 0;
    uint64_t shift;
    bad |= gf_y_seed_shift(ctx, m, &shift) < 0;
    s->p.seed += shift; /* (keys.h: GENFENCE_SEED_SHIFT) */
    bad |= gf_y_int(ctx, m, "draws", 0, 1, 100000000LL, &s->draws) < 0;
    bad |= gf_y_double(ctx, m, "alpha", 0, &s->alpha) < 0;
    if (!bad && !(s->alpha > 0 && s->alpha < 1)) {
        gf_y_error(ctx, gf_y_get(ctx, m, "alpha", 0), "'alpha' must lie in (0, 1)");
        bad = 1;
    }
    if (gf_y_doubles(ctx, m, "expect_probs", 0, 1, &s->expect_probs, &s->n_expect) < 0) {
        bad = 1;
    } else if (s->expect_probs && (int32_t)s->n_expect != s->V) {
        gf_y_error(ctx, gf_y_get(ctx, m, "expect_probs", 0), "'expect_probs' has %zu entries; the distribution has %d",
                   s->n_expect, s->V);
        bad = 1;
    } else if (s->expect_probs) {
        /* the expectation is normalised before the chi-square: every entry
         * must be a finite weight >= 0 and one > 0 (all zero: 0/0 = NaN) */
        const gf_ynode *ep = gf_y_get(ctx, m, "expect_probs", 0);
        double tot = 0;
        for (size_t i = 0; i < s->n_expect && !bad; i++) {
            const double w = s->expect_probs[i];
            if (!(w >= 0) || isinf(w)) {
                gf_y_error(ctx, ep && i < ep->n ? ep->items[i] : ep,
                           "'expect_probs'[%zu] must be a finite number >= 0, got %g", i, w);
                bad = 1;
            }
            tot += w;
        }
        if (!bad && !(tot > 0)) {
            gf_y_error(ctx, ep, "'expect_probs' sums to 0: at least one entry must be > 0");
            bad = 1;
        }
    }
    return bad ? -1 : 0;
}

static void run_dist(const gf_case *c, gf_krun *k)
{
    const dist_spec *s = c->spec;
    const int32_t V = s->V;
    gf_k_note_sampler(k);
    gf_k_seed(k, "sampler", s->p.seed);
    gf_k_metric_json(k, "sampler_params", gf_sampler_json(&s->p));
    double *want = malloc((size_t)V * sizeof *want);
    long long *count = calloc((size_t)V, sizeof *count);
    if (!want || !count) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    gf_status st = gf_sampler_probs(s->logits, V, &s->p, want);
    if (st != GF_OK) {
        gf_k_error(k, "sampler parameters: %s", gf_error_msg());
        goto done;
    }
    if (s->expect_probs) {
        double tot = 0;
        for (int32_t i = 0; i < V; i++)
            tot += s->expect_probs[i];
        for (int32_t i = 0; i < V; i++)
            want[i] = s->expect_probs[i] / tot;
    }
    for (long long d = 0; d < s->draws; d++) {
        gf_sample_result r;
        st = gf_sample(s->logits, V, &s->p, 0, (uint64_t)d, &r);
        if (st != GF_OK) {
            gf_k_fail(k, "draw %lld: %s", d, gf_error_msg());
            goto done;
        }
        count[r.token]++;
        const uint64_t seq = 0; /* with a backend slot: the same draw through it, draw for draw */
        gf_k_slot_rows(k, "draw", s->logits, 1, V, &s->p, &seq, (uint64_t)d, &r.token);
    }
    /* no draw outside the support */
    long long outside = 0;
    int32_t first_out = -1;
    for (int32_t i = 0; i < V; i++)
        if (want[i] == 0 && count[i]) {
            outside += count[i];
            if (first_out < 0)
                first_out = i;
        }
    gf_k_check(k, outside == 0, "draws stay in the kept set", "%lld draws outside it (first token %d)", outside,
               first_out);
    /* chi-square over the support, small expected counts lumped together */
    double chi2 = 0, lump_e = 0, lump_o = 0;
    int bins = 0;
    for (int32_t i = 0; i < V; i++) {
        if (want[i] == 0)
            continue;
        double e = want[i] * (double)s->draws;
        if (e < 5) {
            lump_e += e;
            lump_o += (double)count[i];
            continue;
        }
        chi2 += (count[i] - e) * (count[i] - e) / e;
        bins++;
    }
    if (lump_e > 0) {
        chi2 += (lump_o - lump_e) * (lump_o - lump_e) / lump_e;
        bins++;
    }
    int df = bins - 1;
    double pval = df > 0 ? gf_chi2_sf(df, chi2) : 1.0;
    gf_k_check(k, pval >= s->alpha, "chi-square goodness of fit", "chi2 %.4g, df %d, p-value %.4g (alpha %g)", chi2, df,
               pval, s->alpha);
    gf_k_metric(k, "chi2", chi2);
    gf_k_metric_int(k, "df", df);
    gf_k_metric(k, "p_value", pval);
    gf_k_metric(k, "alpha", s->alpha);
    gf_k_metric_int(k, "draws", s->draws);
    json_t *cnt = json_array();
    for (int32_t i = 0; i < V && i < 4096; i++)
        json_array_append_new(cnt, json_integer(count[i]));
    gf_k_metric_json(k, "counts", cnt);
done:
    free(want);
    free(count);
}

const gf_kind_def gf_kind_sampling_distribution = {
    .name = "sampling_distribution",
    .summary = "chi-square test that draws follow the filtered, renormalised distribution",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_SAMPLE,
    .parse = parse_dist,
    .free_spec = dist_free,
    .run = run_dist,
};
