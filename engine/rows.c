/* The argmax with its margin and max |delta| of logit rows: the one
 * definition of each (genfence/rows.h). */
#include "genfence/rows.h"

#include <math.h>

void gf_top2_init(gf_top2 *t)
{
    t->token = t->runner_up = -1;
    t->top1 = t->top2 = -INFINITY;
}

void gf_top2_push(gf_top2 *t, int32_t i, double score)
{
    if (t->token < 0 || score > t->top1) {
        t->runner_up = t->token;
        t->top2 = t->top1;
        t->token = i;
        t->top1 = score;
    } else if (t->runner_up < 0 || score > t->top2) {
        t->runner_up = i;
        t->top2 = score;
    }
}

double gf_top2_margin(const gf_top2 *t) { return t->runner_up >= 0 ? t->top1 - t->top2 : INFINITY; }

/* an entry counts when it is a number above -inf */
#define COUNTS(s) (!isnan(s) && (s) != -INFINITY)

void gf_row_top2(const float *x, int32_t V, gf_top2 *out)
{
    gf_top2_init(out);
    for (int32_t i = 0; i < V; i++)
        if (COUNTS(x[i]))
            gf_top2_push(out, i, (double)x[i]);
}

void gf_row_top2_d(const double *x, int32_t V, gf_top2 *out)
{
    gf_top2_init(out);
    for (int32_t i = 0; i < V; i++)
        if (COUNTS(x[i]))
            gf_top2_push(out, i, x[i]);
}

int32_t gf_row_top(const float *x, int32_t V, double *top1, double *margin)
{
    gf_top2 t;
    gf_row_top2(x, V, &t);
    if (top1)
        *top1 = t.token >= 0 ? t.top1 : NAN;
    if (margin)
        *margin = gf_top2_margin(&t);
    return t.token;
}

double gf_max_abs_delta(const float *a, const float *b, size_t n, size_t *where)
{
    double m = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double x = a[i], y = b[i], d;
        if (isnan(x) || isnan(y))
            d = isnan(x) && isnan(y) ? 0.0 : INFINITY;
        else if (isinf(x) || isinf(y))
            d = x == y ? 0.0 : INFINITY;
        else
            d = fabs(x - y);
        if (d > m) {
            m = d;
            at = i;
        }
    }
    if (where)
        *where = at;
    return m;
}

void gf_row_log_softmax(const float *x, int32_t V, double *out)
{
    double m = -INFINITY, sum = 0;
    for (int32_t i = 0; i < V; i++)
        m = x[i] > m ? x[i] : m;
    for (int32_t i = 0; i < V; i++)
        sum += exp((double)x[i] - m);
    const double lse = m + log(sum);
    for (int32_t i = 0; i < V; i++)
        out[i] = (double)x[i] - lse;
}
