/* distribution_match's hypothesis tests on a run (stat_judge.c): the
 * calibrated null of the case's model and the backend's types, the policy
 * the case declares or inherits, the positions it needs, the checks. */
#ifndef GENFENCE_HARNESS_STAT_JUDGE_H
#define GENFENCE_HARNESS_STAT_JUDGE_H

#include <stddef.h>

#include "kinds.h"
#include "stat_calibration.h"
#include "stat_hypothesis.h"

typedef struct gf_stat_hyp {
    const gf_stat_table *table;
    const gf_stat_null *null; /* NULL: not calibrated (the fixed bounds judge, if any) */
    gf_stat_policy pol;
    int pol_from_case; /* the case's line for the type's policy, 0: the table's */
    gf_stat_mean_test kl;
    gf_stat_prop_test top1;
    /* the tails: exceedance tests of the share of positions past a level of
     * the null (the KL's p99 level, its maximum, |delta p|'s maximum) */
    gf_stat_prop_test p99, kmax, dpmax;
    double lvl_p99, lvl_max, lvl_dp;
    int dp_pinsker;  /* the table has no dp_max: lvl_dp = sqrt(kld_max / 2) */
    double distinct; /* the null's distinct positions (the max tests' p0 = 1 / (distinct + 1)) */
    char why[512];   /* not calibrated: why */
} gf_stat_hyp;

/* The null and policy for the backend's types (key: the thresholds' key;
 * case_id: the case calibrated; w, kv: its weights and KV cache;
 * model_hex: the case model's hash).
 * 1: calibrated (h->null set), 0: not (h->why says why). */
int gf_stat_hyp_find(gf_stat_hyp *h, const gf_stat_table *t, const gf_stat_policy_entry *hyp, size_t n_hyp,
                     const char *key, const char *case_id, const char *w, const char *kv, const char *model_hex);
/* The tests at n positions, n_fixed of them the goldens' (the same in every
 * reseed); the record's metrics.hypothesis. 0, or -1 when
 * a test cannot reach the declared power at n: the case is refused (an
 * error verdict, exit 2) naming its FILE:LINE. */
int gf_stat_hyp_plan(gf_krun *k, const gf_case *c, gf_stat_hyp *h, const char *key, size_t n, size_t n_fixed);
/* The checks kld_mean and top1_min against the tests' thresholds. */
void gf_stat_hyp_judge(gf_krun *k, const gf_stat_hyp *h, double kl_mean, size_t disagreements, const char *extra);
/* The checks kld_p99, kld_max and dp_max: the exceedance tests, from the
 * per-position KL and |delta p| (n each, h's positions) and the measured
 * figures printed beside. */
void gf_stat_hyp_judge_tails(gf_krun *k, const gf_stat_hyp *h, const double *kl, const double *dp, double kl_p99,
                             double kl_max, double dp_max, const char *extra);

#endif
