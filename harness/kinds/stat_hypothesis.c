/* The statistical tier's hypothesis tests: sample sizes, thresholds and
 * power (stat_hypothesis.h). */
#include <math.h>

#include "stat_hypothesis.h"

double gf_stat_phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

double gf_stat_z(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                               1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    if (!(p > 0 && p < 1))
        return p == 0 ? -INFINITY : p == 1 ? INFINITY : NAN;
    const double lo = 0.02425;
    double x;
    if (p < lo || p > 1 - lo) {
        double q = sqrt(-2 * log(p < lo ? p : 1 - p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
        if (p > 1 - lo)
            x = -x;
    } else {
        double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    }
    /* one Halley step on the exact CDF */
    double e = gf_stat_phi(x) - p, u = e * sqrt(2 * M_PI) * exp(x * x / 2);
    return x - u / (1 + x * u / 2);
}

/* log of the Binomial(n, p) probability of j */
static double binom_logpmf(long long j, long long n, double p)
{
    if (p <= 0)
        return j == 0 ? 0 : -INFINITY;
    if (p >= 1)
        return j == n ? 0 : -INFINITY;
    return lgamma((double)n + 1) - lgamma((double)j + 1) - lgamma((double)(n - j) + 1) + (double)j * log(p) +
           (double)(n - j) * log1p(-p);
}

double gf_stat_binom_sf(long long k, long long n, double p)
{
    if (k < 0)
        return 1;
    if (k >= n)
        return 0;
    /* the shorter tail, summed directly */
    double mean = (double)n * p;
    double s = 0;
    if ((double)k < mean) {
        for (long long j = 0; j <= k; j++)
            s += exp(binom_logpmf(j, n, p));
        return s < 1 ? 1 - s : 0;
    }
    for (long long j = k + 1; j <= n; j++) {
        double t = exp(binom_logpmf(j, n, p));
        s += t;
        if (t < s * 1e-17 && (double)j > mean)
            break;
    }
    return s;
}

void gf_stat_mean_plan(gf_stat_mean_test *t)
{
    const double za = gf_stat_z(1 - t->alpha), zb = gf_stat_z(1 - t->beta);
    const double se = t->n > 0 ? t->sigma / sqrt((double)t->n) : INFINITY;
    t->threshold = t->mu0 + za * se;
    if (!(t->theta > 0) || !isfinite(t->sigma) || t->sigma < 0) {
        t->n_needed = -1;
        t->power = NAN;
        return;
    }
    double need = (za + zb) * t->sigma / t->theta;
    need *= need;
    t->n_needed = need < 1 ? 1 : need > 9e15 ? -1 : (long long)ceil(need);
    t->power = t->sigma > 0 ? gf_stat_phi(t->theta / se - za) : (t->n > 0 ? 1.0 : 0.0);
}

/* the disagreements allowed at n: the least k with P(X > k | n, p0) <= alpha */
static long long k_max_at(long long n, double p0, double alpha)
{
    if (p0 <= 0)
        return 0;
    double cdf = 0;
    for (long long k = 0; k < n; k++) {
        cdf += exp(binom_logpmf(k, n, p0));
        if (1 - cdf <= alpha)
            return k;
    }
    return n;
}

static double prop_power(long long n, double p0, double p1, double alpha)
{
    return gf_stat_binom_sf(k_max_at(n, p0, alpha), n, p1);
}

void gf_stat_prop_plan(gf_stat_prop_test *t)
{
    const double p1 = t->p0 + t->theta > 1 ? 1 : t->p0 + t->theta;
    const double phi = t->phi >= 1 ? t->phi : 1;
    const long long n_eff = (long long)floor((double)t->n / phi);
    t->k_max = n_eff > 0 ? k_max_at(n_eff, t->p0, t->alpha) : 0;
    t->threshold = t->n > 0 ? 1 - phi * (double)t->k_max / (double)t->n : NAN;
    t->power = n_eff > 0 ? gf_stat_binom_sf(t->k_max, n_eff, p1) : 0;
    /* the least n with power >= 1 - beta, by bisection over [1, 2^24] */
    const long long cap = 1LL << 24;
    if (!(t->theta > 0) || prop_power(cap, t->p0, p1, t->alpha) < 1 - t->beta) {
        t->n_needed = -1;
        return;
    }
    long long lo = 0, hi = cap; /* power(lo) < 1 - beta <= power(hi) */
    while (hi - lo > 1) {
        long long mid = lo + (hi - lo) / 2;
        if (prop_power(mid, t->p0, p1, t->alpha) >= 1 - t->beta)
            hi = mid;
        else
            lo = mid;
    }
    t->n_needed = (long long)ceil((double)hi * phi);
}

double gf_stat_cantelli_level(double mu0, double sigma, double alpha, long long n)
{
    if (n < 1 || !(alpha > 0 && alpha < 1) || !isfinite(mu0) || !isfinite(sigma) || sigma < 0)
        return NAN;
    return mu0 + sigma * sqrt((double)n / alpha - 1);
}
