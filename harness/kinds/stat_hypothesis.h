/* The statistical tier's hypothesis tests (stat_hypothesis.c): from a
 * declared false-alarm rate alpha, miss rate beta and minimum detectable
 * effect theta, and the calibrated null of the per-position statistic
 * (stat_calibration.h), the positions a case needs and the threshold its
 * measured figure is judged by. Both tests are one-tailed, as in NVIDIA
 * TensorRT-LLM's accuracy suite (tests/integration/defs/accuracy/README.md):
 *
 *   KL mean, a z-test of H0: mean = mu0 against H1: mean = mu0 + theta:
 *     n_needed  = ceil(((z_{1-alpha} + z_{1-beta}) sigma / theta)^2)
 *     threshold = mu0 + z_{1-alpha} sigma / sqrt(n)
 *     power(n)  = Phi(theta sqrt(n) / sigma - z_{1-alpha})
 *   (one-sample: mu0 and sigma come from the calibration's many windows,
 *   not from a second sample of the case's size, so no sqrt(2));
 *
 *   top-1 agreement, an exact binomial test of the disagreement rate,
 *   H0: p = p0 against H1: p = p0 + theta, quasi-binomial: disagreements
 *   cluster along a sequence, so with the calibrated dispersion phi >= 1
 *   (Pearson's, over the calibration's reseeds) n positions count as
 *   n_eff = floor(n / phi) and d disagreements as d / phi:
 *     k_max(m)  = the least k with P(X > k | m, p0) <= alpha
 *     pass      iff d / phi <= k_max(n_eff) (threshold: 1 - phi k_max / n)
 *     power     = P(X > k_max(n_eff) | n_eff, p0 + theta)
 *     n_needed  = phi x the least m with power(m) >= 1 - beta (bisection;
 *                 the exact power saw-tooths, so the power at n is printed).
 */
#ifndef GENFENCE_HARNESS_STAT_HYPOTHESIS_H
#define GENFENCE_HARNESS_STAT_HYPOTHESIS_H

#include <stddef.h>

/* The standard normal quantile z_p, p in (0, 1) (Acklam's approximation
 * refined by one Halley step on erfc: ~1e-15 relative). */
double gf_stat_z(double p);
/* The standard normal CDF. */
double gf_stat_phi(double x);
/* P(X > k) for X ~ Binomial(n, p) (1 for k < 0, 0 for k >= n). */
double gf_stat_binom_sf(long long k, long long n, double p);

typedef struct gf_stat_mean_test {
    double alpha, beta, theta; /* declared */
    double mu0, sigma;         /* the calibrated null */
    long long n;               /* positions used */
    long long n_needed;        /* for power 1 - beta at theta (-1: theta 0 or sigma not finite) */
    double threshold;          /* mu0 + z_{1-alpha} sigma / sqrt(n) */
    double power;              /* at theta, n positions */
} gf_stat_mean_test;

typedef struct gf_stat_prop_test {
    double alpha, beta, theta; /* declared (theta: a rise of the disagreement rate) */
    double p0;                 /* the calibrated null disagreement rate */
    double phi;                /* its calibrated dispersion (>= 1; 1: binomial) */
    long long n;               /* positions used */
    long long n_needed;        /* -1: not reachable within 2^24 positions */
    long long k_max;           /* effective disagreements allowed at n_eff (phi k_max real ones) */
    double threshold;          /* the least top-1 agreement that passes: 1 - phi k_max / n */
    double power;              /* at p0 + theta, n positions */
} gf_stat_prop_test;

void gf_stat_mean_plan(gf_stat_mean_test *t);
void gf_stat_prop_plan(gf_stat_prop_test *t);

/* A level that none of n positions of the null passes but with probability
 * at most alpha, from the null's mean mu0 and sd sigma alone (no shape, no
 * independence): Cantelli's P(X - mu0 >= t) <= sigma^2 / (sigma^2 + t^2) for
 * each, the union over the n, so t = sigma sqrt(n / alpha - 1):
 *   level = mu0 + sigma sqrt(n / alpha - 1).
 * NaN for n < 1, alpha outside (0, 1) or a non-finite mu0 or sigma. */
double gf_stat_cantelli_level(double mu0, double sigma, double alpha, long long n);

#endif
