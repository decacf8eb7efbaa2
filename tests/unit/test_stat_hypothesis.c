/* The statistical tier's test arithmetic (harness/kinds/stat_hypothesis.c):
 * known answers for the normal quantile, the binomial tail and the early
 * guard's Cantelli level. */
#include <criterion/criterion.h>

#include <math.h>

#include "stat_hypothesis.h"

static void near(double got, double want, double rel, const char *what)
{
    cr_assert(fabs(got - want) <= rel * fabs(want), "%s: got %.17g, want %.17g", what, got, want);
}

Test(stat_hypothesis, normal_quantile_and_cdf)
{
    near(gf_stat_z(0.995), 2.5758293035489004, 1e-12, "z(0.995)");
    near(gf_stat_z(0.8), 0.8416212335729143, 1e-12, "z(0.8)");
    near(gf_stat_phi(1.959963984540054), 0.975, 1e-12, "Phi(1.96)");
}

Test(stat_hypothesis, binomial_tail)
{
    /* P(X > 1 | n 10, p 0.1) = 1 - 0.9^10 - 10 x 0.1 x 0.9^9 */
    near(gf_stat_binom_sf(1, 10, 0.1), 1 - pow(0.9, 10) - pow(0.9, 9), 1e-12, "sf(1; 10, 0.1)");
    cr_assert(gf_stat_binom_sf(-1, 10, 0.1) == 1 && gf_stat_binom_sf(10, 10, 0.1) == 0);
}

Test(stat_hypothesis, cantelli_level)
{
    /* one position, alpha 0.05: mean + sd sqrt(19) */
    near(gf_stat_cantelli_level(0, 1, 0.05, 1), sqrt(19.0), 1e-15, "n 1");
    /* the union over 16 positions at alpha 0.005: sqrt(3199) sds */
    near(gf_stat_cantelli_level(1, 2, 0.005, 16), 1 + 2 * sqrt(3199.0), 1e-15, "n 16");
    /* an exponential law (mean 1, sd 1) at one position: its tail past the level is within alpha */
    cr_assert(exp(-gf_stat_cantelli_level(1, 1, 0.05, 1)) <= 0.05);
    /* more positions, a smaller alpha: a higher level */
    cr_assert(gf_stat_cantelli_level(0, 1, 0.005, 64) > gf_stat_cantelli_level(0, 1, 0.005, 16));
    cr_assert(gf_stat_cantelli_level(0, 1, 0.001, 16) > gf_stat_cantelli_level(0, 1, 0.005, 16));
    /* no level without positions, a valid alpha, a finite null */
    cr_assert(isnan(gf_stat_cantelli_level(0, 1, 0.005, 0)));
    cr_assert(isnan(gf_stat_cantelli_level(0, 1, 0, 16)));
    cr_assert(isnan(gf_stat_cantelli_level(0, 1, 1, 16)));
    cr_assert(isnan(gf_stat_cantelli_level(0, NAN, 0.005, 16)));
    cr_assert(isnan(gf_stat_cantelli_level(INFINITY, 1, 0.005, 16)));
}
