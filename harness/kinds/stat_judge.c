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
                 "no alpha, beta, theta_kld and theta_top1 for %s (the table's policy or the case's 'hypothesis')",
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

static json_t *prop_json(const gf_stat_prop_test *t)
{
    json_t *o = json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:I, s:f}", "test",
                          "one-tailed exact (quasi-)binomial test of the top-1 disagreement rate", "alpha", t->alpha,
                          "beta", t->beta, "theta", t->theta, "null_disagree", t->p0, "dispersion",
                          t->phi >= 1 ? t->phi : 1.0, "positions", (json_int_t)t->n, "disagreements_allowed",
                          (t->phi >= 1 ? t->phi : 1.0) * (double)t->k_max);
    json_object_set_new(o, "positions_needed", t->n_needed >= 0 ? json_integer(t->n_needed) : json_null());
    gf_json_set_number(o, "threshold", t->threshold, "no positions");
    gf_json_set_number(o, "power", t->power, "no positions");
    return o;
}

static void needed_str(char *buf, size_t cap, long long n)
{
    snprintf(buf, cap, n >= 0 ? "%lld" : "more than 2^24", n);
}

int gf_stat_hyp_plan(gf_krun *k, const gf_case *c, gf_stat_hyp *h, const char *key, size_t n)
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
    json_t *o = json_object();
    json_object_set_new(o, "kld_mean", mean_json(&h->kl));
    json_object_set_new(o, "top1", prop_json(&h->top1));
    json_t *cal = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "table", h->table->path, "line", z->line,
                            "case", z->case_id, "model", z->model, "weights", z->weights, "kv", z->kv, "backends",
                            z->backends, "windows", (json_int_t)z->windows, "positions", (json_int_t)z->positions);
    json_object_set(cal, "provenance", h->table->provenance);
    json_object_set_new(o, "calibration", cal);
    json_object_set_new(o, "policy_from",
                        h->pol_from_case ? json_pack("{s:s, s:i}", "case", c->file, "line", h->pol_from_case)
                                         : json_string("table"));
    gf_k_metric_json(k, "hypothesis", o);
    const int kl_short = h->kl.n_needed < 0 || (long long)n < h->kl.n_needed;
    const int t1_short = !(h->top1.power >= 1 - h->top1.beta);
    if (!kl_short && !t1_short)
        return 0;
    char need[32];
    needed_str(need, sizeof need, kl_short ? h->kl.n_needed : h->top1.n_needed);
    gf_k_error(k,
               "%s:%d: case %s: its %zu positions cannot reach the declared power for %s: the %s test (alpha %.3g, "
               "beta %.3g, theta %.3g) needs %s positions (power %.3g at %zu); give it more positions (goldens, "
               "prompts, steps) or declare a larger theta ('hypothesis: {%s: {%s: ...}}')",
               c->file, h->pol_from_case ? h->pol_from_case : c->line, c->id, n, key, kl_short ? "KL mean" : "top-1",
               h->pol.alpha, h->pol.beta, kl_short ? h->kl.theta : h->top1.theta, need,
               kl_short ? h->kl.power : h->top1.power, n, key, kl_short ? "theta_kld" : "theta_top1");
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
