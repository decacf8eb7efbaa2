/* The chi-square distribution for the statistical kinds (chi2.c): the
 * p-value of a statistic, the critical value of a level, and the power of a
 * goodness-of-fit test against a stated alternative. */
#ifndef GENFENCE_HARNESS_KIT_CHI2_H
#define GENFENCE_HARNESS_KIT_CHI2_H

/* P(X >= x) for X ~ chi-square(df), df >= 1 (1.0 for x <= 0). */
double gf_chi2_sf(int df, double x);
/* The x with gf_chi2_sf(df, x) = alpha, alpha in (0, 1). */
double gf_chi2_crit(int df, double alpha);
/* The power of the level-alpha test with df degrees of freedom when the
 * statistic is noncentral with noncentrality lambda = N sum (a - p)^2 / p
 * (N observations, alternative a, null p): P(X' >= crit), by Patnaik's
 * two-moment approximation. lambda infinite (the alternative has mass where
 * the null has none): 1. */
double gf_chi2_power(int df, double lambda, double alpha);

#endif
