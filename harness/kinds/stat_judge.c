/* distribution_match's hypothesis tests on a run (stat_judge.h): KL mean
 * by a one-tailed z-test, top-1 agreement by a one-tailed exact binomial
 * test (stat_hypothesis.h), from the calibration table's null for the
 * case's model and the backend's weights and KV cache, with the alpha, beta
 * and theta the case declares or inherits from the table's policy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "stat_judge.h"

int gf_stat_hyp_find(gf_stat_hyp *h, const gf_stat_table *t, const gf_stat_policy_entry *hyp, size_t n_hyp,
                     const char *key, const char *case_id, const char *w, const char *kv, const char *model_hex)
{
    memset(h, 0, sizeof *h);
    h->table = t;
    if (!t) {
        snprintf(h->why, sizeof h->why, "no calibration table");
        return 0;
    }
    h->null = gf_stat_null_for(t, case_id, model_hex, w, kv);
    if (!h->null) {
        snprintf(h->why, sizeof h->why, "%s has no null for case %s on this model (hash %.12s) with weights %s, kv %s",
                 t->path, case_id, model_hex, w, kv);
        return 0;
    }
    if (!gf_stat_policy_for(t, hyp, n_hyp, key, &h->pol, &h->pol_from_case)) {
        snprintf(h->why, sizeof h->why,
                 "no alpha, beta, theta_kld, theta_top1, theta_p99 and theta_max for %s (the table's policy or the "
                 "case's 'hypothesis')",
                 key);
        h->null = NULL;
        return 0;
    }
    return 1;
}

static json_t *mean_json(const gf_stat_mean_test *t)
{
    json_t *o = json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:I}", "test", "one-tailed z-test of the KL mean", "alpha",
                          t->alpha, "beta", t->beta, "theta", t->theta, "null_mean", t->mu0, "sigma", t->sigma,
                          "positions", (json_int_t)t->n);
    json_object_set_new(o, "positions_needed", t->n_needed >= 0 ? json_integer(t->n_needed) : json_null());
    gf_json_set_number(o, "threshold", t->threshold, "no positions");
    gf_json_set_number(o, "power", t->power, "theta 0");
    return o;
}

static json_t *prop_json(const gf_stat_prop_test *t, const char *test)
{
    json_t *o =
        json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:I, s:f}", "test", test, "alpha", t->alpha, "beta", t->beta, "theta",
                  t->theta, "null_disagree", t->p0, "dispersion", t->phi >= 1 ? t->phi : 1.0, "positions",
                  (json_int_t)t->n, "disagreements_allowed", (t->phi >= 1 ? t->phi : 1.0) * (double)t->k_max);
    json_object_set_new(o, "positions_needed", t->n_needed >= 0 ? json_integer(t->n_needed) : json_null());
    gf_json_set_number(o, "threshold", t->threshold, "no positions");
    gf_json_set_number(o, "power", t->power, "no positions");
    return o;
}

static void needed_str(char *buf, size_t cap, long long n)
{
    snprintf(buf, cap, n >= 0 ? "%lld" : "more than 2^24", n);
}

int gf_stat_hyp_plan(gf_krun *k, const gf_case *c, gf_stat_hyp *h, const char *key, size_t n, size_t n_fixed)
{
    const gf_stat_null *z = h->null;
    h->kl = (gf_stat_mean_test){.alpha = h->pol.alpha,
                                .beta = h->pol.beta,
                                .theta = h->pol.theta_kld,
                                .mu0 = z->kld_mean,
                                .sigma = z->kld_sigma,
                                .n = (long long)n};
    gf_stat_mean_plan(&h->kl);
    h->top1 = (gf_stat_prop_test){.alpha = h->pol.alpha,
                                  .beta = h->pol.beta,
                                  .theta = h->pol.theta_top1,
                                  .p0 = z->top1_disagree,
                                  .phi = z->top1_dispersion,
                                  .n = (long long)n};
    gf_stat_prop_plan(&h->top1);
    /* the tails: the share of positions past a level of the null. Past the
     * largest per-reseed p99, at most 1% under H0 (the level is at least the
     * pooled p99); past the largest of the null's N positions, 1 / (N + 1)
     * (a new exchangeable position is the largest of N + 1 with that
     * probability); |delta p| past the null's largest, or past
     * sqrt(kld_max / 2) where the table has no dp_max (Pinsker: |delta p| <=
     * TV <= sqrt(KL / 2), so its share is at most the KL's). */
    /* The null's N pooled positions are not N independent ones: a golden's
     * positions are the same in every reseed (the n_fixed of the case's n),
     * and the B honest backends give correlated copies of each. Counted once:
     * N_distinct = n_fixed + R (n - n_fixed), R = windows / B the reseeds
     * (error_rates.py measured 3 false fails in 200 with N itself on kv q8_0). */
    long long nb = 1;
    for (const char *q = z->backends; *q; q++)
        nb += *q == ' ' && q[1] && q[1] != ' ';
    const long long reseeds = z->windows / nb > 0 ? z->windows / nb : 1;
    const double per_backend = (double)z->positions / (double)nb;
    double distinct = (double)n_fixed + (double)reseeds * (double)(n > n_fixed ? n - n_fixed : 0);
    if (!(distinct > 0) || distinct > per_backend)
        distinct = per_backend;
    h->distinct = distinct;
    const double p_max = 1.0 / (distinct + 1);
    h->lvl_p99 = z->kld_p99;
    h->lvl_max = z->kld_max;
    h->dp_pinsker = !isfinite(z->dp_max);
    h->lvl_dp = h->dp_pinsker ? sqrt(z->kld_max / 2) : z->dp_max;
    gf_stat_prop_test *tails[] = {&h->p99, &h->kmax, &h->dpmax};
    const double p0s[] = {0.01, p_max, p_max}, thetas[] = {h->pol.theta_p99, h->pol.theta_max, h->pol.theta_max};
    for (int i = 0; i < 3; i++) {
        *tails[i] = (gf_stat_prop_test){
            .alpha = h->pol.alpha, .beta = h->pol.beta, .theta = thetas[i], .p0 = p0s[i], .phi = 1, .n = (long long)n};
        gf_stat_prop_plan(tails[i]);
    }
    json_t *o = json_object();
    json_object_set_new(o, "kld_mean", mean_json(&h->kl));
    json_object_set_new(o, "top1",
                        prop_json(&h->top1, "one-tailed exact (quasi-)binomial test of the top-1 disagreement rate"));
    const char *const tname[] = {"kld_p99", "kld_max", "dp_max"};
    const double lvls[] = {h->lvl_p99, h->lvl_max, h->lvl_dp};
    const char *const lwhat[] = {"the null's largest per-reseed KL p99", "the null's largest KL",
                                 h->dp_pinsker ? "sqrt(the null's largest KL / 2) (Pinsker; the table has no dp_max)"
                                               : "the null's largest |delta p|"};
    for (int i = 0; i < 3; i++) {
        json_t *j = prop_json(tails[i], "one-tailed exact binomial test of the share of positions past the level");
        /* the share's names: a position past the level, not a disagreement */
        json_object_set(j, "null_share", json_object_get(j, "null_disagree"));
        json_object_set(j, "past_allowed", json_object_get(j, "disagreements_allowed"));
        json_object_del(j, "null_disagree");
        json_object_del(j, "disagreements_allowed");
        json_object_del(j, "dispersion");
        json_object_set_new(j, "level", json_real(lvls[i]));
        json_object_set_new(j, "level_is", json_string(lwhat[i]));
        if (i > 0)
            json_object_set_new(j, "null_positions_distinct", json_real(h->distinct));
        json_object_set_new(o, tname[i], j);
    }
    json_t *cal = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "table", h->table->path, "line", z->line,
                            "case", z->case_id, "model", z->model, "weights", z->weights, "kv", z->kv, "backends",
                            z->backends, "windows", (json_int_t)z->windows, "positions", (json_int_t)z->positions);
    json_object_set(cal, "provenance", h->table->provenance);
    json_object_set_new(o, "calibration", cal);
    json_object_set_new(o, "policy_from",
                        h->pol_from_case ? json_pack("{s:s, s:i}", "case", c->file, "line", h->pol_from_case)
                                         : json_string("table"));
    gf_k_metric_json(k, "hypothesis", o);
    /* the first test that cannot reach the declared power at n */
    const char *what = NULL, *field = NULL;
    double theta = NAN, power = NAN;
    long long needed = 0;
    if (h->kl.n_needed < 0 || (long long)n < h->kl.n_needed)
        what = "KL mean", field = "theta_kld", theta = h->kl.theta, power = h->kl.power, needed = h->kl.n_needed;
    const gf_stat_prop_test *pt[] = {&h->top1, &h->p99, &h->kmax, &h->dpmax};
    const char *const pwhat[] = {"top-1", "KL p99 exceedance", "KL max exceedance", "|delta p| max exceedance"};
    const char *const pfield[] = {"theta_top1", "theta_p99", "theta_max", "theta_max"};
    for (int i = 0; i < 4 && !what; i++)
        if (!(pt[i]->power >= 1 - pt[i]->beta))
            what = pwhat[i], field = pfield[i], theta = pt[i]->theta, power = pt[i]->power, needed = pt[i]->n_needed;
    if (!what)
        return 0;
    char need[32];
    needed_str(need, sizeof need, needed);
    gf_k_error(k,
               "%s:%d: case %s: its %zu positions cannot reach the declared power for %s: the %s test (alpha %.3g, "
               "beta %.3g, theta %.3g) needs %s positions (power %.3g at %zu); give it more positions (goldens, "
               "prompts, steps) or declare a larger theta ('hypothesis: {%s: {%s: ...}}')",
               c->file, h->pol_from_case ? h->pol_from_case : c->line, c->id, n, key, what, h->pol.alpha, h->pol.beta,
               theta, need, power, n, key, field);
    return -1;
}

void gf_stat_hyp_judge(gf_krun *k, const gf_stat_hyp *h, double kl_mean, size_t disagreements, const char *extra)
{
    const gf_stat_mean_test *m = &h->kl;
    int ok = kl_mean <= m->threshold;
    char need[32];
    needed_str(need, sizeof need, m->n_needed);
    gf_k_check(k, ok, "kld_mean",
               "measured %.3g %s threshold %.3g (one-tailed z-test: alpha %.3g, beta %.3g, theta %.3g; null mean %.3g, "
               "sigma %.3g; %lld positions used, %s needed, power %.3g; null %s:%d)%s",
               kl_mean, ok ? "<=" : ">", m->threshold, m->alpha, m->beta, m->theta, m->mu0, m->sigma, m->n, need,
               m->power, h->table->path, h->null->line, extra);
    const gf_stat_prop_test *t = &h->top1;
    needed_str(need, sizeof need, t->n_needed);
    double agree = t->n > 0 ? 1 - (double)disagreements / (double)t->n : NAN;
    const double phi = t->phi >= 1 ? t->phi : 1;
    ok = (double)disagreements / phi <= (double)t->k_max;
    gf_k_check(k, ok, "top1_min",
               "measured %.4g %s threshold %.4g: %zu of %lld positions differ, at most %.4g allowed (one-tailed exact "
               "binomial test: alpha %.3g, beta %.3g, theta %.3g; null disagreement rate %.3g, dispersion %.3g; %lld "
               "positions used, %s needed, power %.3g)%s",
               agree, ok ? ">=" : "<", t->threshold, disagreements, t->n, phi * (double)t->k_max, t->alpha, t->beta,
               t->theta, t->p0, phi, t->n, need, t->power, extra);
}

void gf_stat_hyp_judge_tails(gf_krun *k, const gf_stat_hyp *h, const double *kl, const double *dp, double kl_p99,
                             double kl_max, double dp_max, const char *extra)
{
    const gf_stat_prop_test *t[] = {&h->p99, &h->kmax, &h->dpmax};
    const double lvl[] = {h->lvl_p99, h->lvl_max, h->lvl_dp}, measured[] = {kl_p99, kl_max, dp_max};
    const double *v[] = {kl, kl, dp};
    const char *const name[] = {"kld_p99", "kld_max", "dp_max"};
    const char *const what[] = {"the null's largest per-reseed KL p99", "the null's largest KL",
                                h->dp_pinsker ? "sqrt(the null's largest KL / 2), Pinsker"
                                              : "the null's largest |delta p|"};
    for (int i = 0; i < 3; i++) {
        size_t past = 0;
        for (long long j = 0; j < t[i]->n; j++)
            past += !(v[i][j] <= lvl[i]); /* NaN counts as past */
        const int ok = (long long)past <= t[i]->k_max;
        char need[32];
        needed_str(need, sizeof need, t[i]->n_needed);
        gf_k_check(k, ok, name[i],
                   "measured %.3g; %zu of %lld positions past the level %.3g (%s), at most %lld allowed (one-tailed "
                   "exact binomial test of that share: alpha %.3g, beta %.3g, theta %.3g; null share %.3g; %lld "
                   "positions used, %s needed, power %.3g)%s",
                   measured[i], past, t[i]->n, lvl[i], what[i], t[i]->k_max, t[i]->alpha, t[i]->beta, t[i]->theta,
                   t[i]->p0, t[i]->n, need, t[i]->power, extra);
    }
}
