#include "hm_stats.h"

#include <math.h>
#include <stdlib.h>

double hm_stats_mean(const double *x, size_t n)
{
    if (n == 0)
        return NAN;
    /* Kahan summation: launch times span orders of magnitude across a sweep
     * and long runs accumulate thousands of values. */
    double sum = 0.0, carry = 0.0;
    for (size_t i = 0; i < n; i++) {
        double y = x[i] - carry;
        double t = sum + y;
        carry = (t - sum) - y;
        sum = t;
    }
    return sum / (double)n;
}

double hm_stats_variance(const double *x, size_t n)
{
    if (n < 2)
        return NAN;
    double mean = hm_stats_mean(x, n);
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    return ss / (double)(n - 1);
}

double hm_stats_se(const double *x, size_t n)
{
    if (n < 2)
        return NAN;
    return sqrt(hm_stats_variance(x, n) / (double)n);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void hm_stats_sort(double *x, size_t n)
{
    qsort(x, n, sizeof *x, compare_double);
}

double hm_stats_quantile_sorted(const double *x, size_t n, double q)
{
    if (n == 0)
        return NAN;
    if (q <= 0.0)
        return x[0];
    if (q >= 1.0)
        return x[n - 1];
    double h = (double)(n - 1) * q;
    size_t lo = (size_t)floor(h);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return x[lo] + (h - (double)lo) * (x[hi] - x[lo]);
}

double hm_stats_median_sorted(const double *x, size_t n)
{
    return hm_stats_quantile_sorted(x, n, 0.5);
}

/* Continued fraction of the incomplete beta function (modified Lentz). */
static double incomplete_beta_cf(double a, double b, double x)
{
    const double tiny = 1e-300, eps = 1e-15;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0;
    double c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny)
        d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= 500; m++) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny)
            d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny)
            d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1.0 / d;
        double delta = d * c;
        h *= delta;
        if (fabs(delta - 1.0) < eps)
            break;
    }
    return h;
}

double hm_stats_incomplete_beta(double a, double b, double x)
{
    if (x <= 0.0)
        return 0.0;
    if (x >= 1.0)
        return 1.0;
    double log_front = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    double front = exp(log_front);
    /* The continued fraction converges fast only below the mean; use the
     * symmetry I_x(a,b) = 1 - I_{1-x}(b,a) above it. */
    if (x < (a + 1.0) / (a + b + 2.0))
        return front * incomplete_beta_cf(a, b, x) / a;
    return 1.0 - front * incomplete_beta_cf(b, a, 1.0 - x) / b;
}

double hm_stats_t_cdf(double t, double df)
{
    double x = df / (df + t * t);
    double tail = 0.5 * hm_stats_incomplete_beta(df / 2.0, 0.5, x);
    return t >= 0 ? 1.0 - tail : tail;
}

double hm_stats_t_quantile(double p, double df)
{
    if (!(p > 0.0 && p < 1.0) || !(df > 0.0))
        return NAN;
    if (p == 0.5)
        return 0.0;
    /* Bracket, then bisect: the CDF is monotone and 200 halvings of a
     * bracket of width <= 2^40 reach full double precision. */
    double lo = -1.0, hi = 1.0;
    while (hm_stats_t_cdf(lo, df) > p)
        lo *= 2.0;
    while (hm_stats_t_cdf(hi, df) < p)
        hi *= 2.0;
    for (int i = 0; i < 200 && hi - lo > 1e-14 * (1.0 + fabs(lo)); i++) {
        double mid = 0.5 * (lo + hi);
        if (hm_stats_t_cdf(mid, df) < p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

size_t hm_stats_trim_sorted(size_t n, double trim_fraction, size_t *first)
{
    size_t cut = (size_t)floor((double)n * trim_fraction);
    if (2 * cut >= n)
        cut = n > 0 ? (n - 1) / 2 : 0;
    *first = cut;
    return n - 2 * cut;
}

void hm_summary_compute(hm_summary *s, double *x, size_t n, double ci_level)
{
    hm_stats_sort(x, n);
    s->n = n;
    s->ci_level = ci_level;
    s->mean = hm_stats_mean(x, n);
    s->median = hm_stats_median_sorted(x, n);
    s->min = n ? x[0] : NAN;
    s->max = n ? x[n - 1] : NAN;
    /* sum / n can round one ulp outside [min, max] (e.g. identical values
     * from a coarse timer); the mean of a sample never lies outside it. */
    if (n > 0)
        s->mean = fmin(fmax(s->mean, s->min), s->max);
    double var = hm_stats_variance(x, n);
    s->stddev = sqrt(var);
    s->se = hm_stats_se(x, n);
    s->rse = s->se / s->mean;
    if (n >= 2) {
        double t = hm_stats_t_quantile(0.5 + ci_level / 2.0, (double)(n - 1));
        s->ci_half = t * s->se;
    } else {
        s->ci_half = NAN;
    }
    s->ci_low = s->mean - s->ci_half;
    s->ci_high = s->mean + s->ci_half;
}
