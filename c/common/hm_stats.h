/* Descriptive statistics and Student-t intervals.
 *
 * Quantiles of the t distribution are computed (regularized incomplete beta
 * function inverted numerically), not looked up in a short table, so any
 * confidence level and any sample size work. */
#ifndef HM_STATS_H
#define HM_STATS_H

#include <stddef.h>

double hm_stats_mean(const double *x, size_t n);
/* Sample variance with n-1 in the denominator; NaN when n < 2. */
double hm_stats_variance(const double *x, size_t n);
/* Standard error of the mean, sqrt(var/n); NaN when n < 2. */
double hm_stats_se(const double *x, size_t n);
/* Sorts x in place, ascending. */
void hm_stats_sort(double *x, size_t n);
/* Median of a sorted array; NaN when n == 0. */
double hm_stats_median_sorted(const double *x, size_t n);
/* Quantile q in [0,1] of a sorted array, linear interpolation between order
 * statistics (type 7, the R and NumPy default); NaN when n == 0. */
double hm_stats_quantile_sorted(const double *x, size_t n, double q);

/* Regularized incomplete beta function I_x(a, b), 0 <= x <= 1. */
double hm_stats_incomplete_beta(double a, double b, double x);
/* CDF of Student's t distribution with df degrees of freedom. */
double hm_stats_t_cdf(double t, double df);
/* Quantile of Student's t: the t with P(T <= t) = p; 0 < p < 1, df > 0. */
double hm_stats_t_quantile(double p, double df);

/* Summary of a sample, as the MPIPerf report prints it. */
typedef struct hm_summary {
    size_t n;          /* values the summary was computed from */
    double mean, median, stddev, se, min, max;
    double rse;        /* relative standard error, se / mean */
    double ci_level;   /* e.g. 0.95 */
    double ci_half;    /* Student-t half-width: t_{(1+level)/2, n-1} * se */
    double ci_low, ci_high;
} hm_summary;

/* Summarizes x (which it sorts in place). Fields are NaN where undefined
 * (e.g. se for n < 2). */
void hm_summary_compute(hm_summary *s, double *x, size_t n, double ci_level);

/* Drops trim_fraction of the values from each end of sorted x, the way
 * MPIPerf discards the 25 % fastest and slowest launches. Returns the
 * number kept and sets *first to the index of the first kept value. */
size_t hm_stats_trim_sorted(size_t n, double trim_fraction, size_t *first);

#endif
