/* The chi-square distribution (chi2.h). */
#include "chi2.h"

#include <math.h>

/* Q(a, x): the regularised upper incomplete gamma. Series for x < a + 1,
 * continued fraction otherwise. */
static double gamma_q(double a, double x)
{
    if (x <= 0)
        return 1.0;
    double gln = lgamma(a);
    if (x < a + 1) {
        double ap = a, sum = 1.0 / a, del = sum;
        for (int n = 0; n < 10000; n++) {
            ap += 1;
            del *= x / ap;
            sum += del;
            if (fabs(del) < fabs(sum) * 1e-15)
                break;
        }
        return 1.0 - sum * exp(-x + a * log(x) - gln);
    }
    double b = x + 1 - a, cc = 1.0 / 1e-300, d = 1.0 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < 1e-300)
            d = 1e-300;
        cc = b + an / cc;
        if (fabs(cc) < 1e-300)
            cc = 1e-300;
        d = 1.0 / d;
        double del = d * cc;
        h *= del;
        if (fabs(del - 1.0) < 1e-15)
            break;
    }
    return exp(-x + a * log(x) - gln) * h;
}

double gf_chi2_sf(int df, double x) { return df < 1 ? 1.0 : gamma_q(df / 2.0, x / 2.0); }

/* the scaled chi-square c * chi2(h) of real h: P(X >= x) */
static double scaled_sf(double h, double c, double x) { return x <= 0 ? 1.0 : gamma_q(h / 2.0, x / (2.0 * c)); }

double gf_chi2_crit(int df, double alpha)
{
    double lo = 0, hi = df + 10.0;
    while (gf_chi2_sf(df, hi) > alpha)
        hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (gf_chi2_sf(df, mid) > alpha)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

double gf_chi2_power(int df, double lambda, double alpha)
{
    if (df < 1)
        return 0.0;
    if (isinf(lambda))
        return 1.0;
    if (!(lambda > 0))
        return alpha;
    const double crit = gf_chi2_crit(df, alpha);
    const double h = (df + lambda) * (df + lambda) / (df + 2 * lambda), c = (df + 2 * lambda) / (df + lambda);
    return scaled_sf(h, c, crit);
}
