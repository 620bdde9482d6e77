/* Repeatability (MPI-free, unit-tested in tests/c/test_bench_passes.c):
 * independent passes over the points in a shuffled order, a time budget
 * per point, and the summary of one point over its passes.
 *
 * A point's figure is the median of its pass values; its interval is the
 * distribution-free one for a median, [x_(k), x_(n-k+1)] of the sorted
 * values, with the largest k whose coverage 1 - 2 P(Bin(n, 1/2) <= k-1)
 * is at least 0.95; with 5 passes or fewer no k reaches it and the
 * interval is [min, max] with its true coverage 1 - 2^(1-n) (3 passes:
 * 0.75), reported as ci_level. The interval covers the variation between
 * passes (a fresh clock sync, another place in the run), which the CI of
 * one pass, built from launches seconds apart, does not. */
#ifndef HM_BENCH_PASSES_H
#define HM_BENCH_PASSES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_schedule.h"

/* Fisher-Yates over idx[0..n) with a splitmix64 stream from seed: every
 * rank given the same seed gets the same order. */
void hm_shuffle(size_t *idx, size_t n, uint64_t seed);

/* The stop rule with a time budget (hushmon addition): with budget_ns > 0
 * a point keeps launching until budget_ns has passed and then stops when
 * hm_stop_reached says so (its count caps are long exceeded at small
 * sizes, so it stops at once); large sizes, whose launches spend the
 * budget in a few stages, end by the ordinary rule. cap bounds the
 * launches either way. */
bool hm_stop_with_budget(const hm_stop_rule *r, int n_total, int n_valid, double rse,
                         double elapsed_ns, double budget_ns, int cap);

typedef struct hm_pass_summary {
    size_t n;              /* passes with a value (NaN values are left out) */
    double median, ci_low, ci_high, ci_level;
    double min, max;
    double spread;         /* (max - min) / median */
    double largest_gap;    /* largest step between consecutive sorted values / median */
    bool disagree;         /* largest_gap > share: the passes fall into groups */
} hm_pass_summary;

/* Coverage of [x_(k), x_(n-k+1)] for the median of n values. */
double hm_median_interval_coverage(size_t n, size_t k);

/* Summarizes the pass values of one point; disagree_share is the gap (as a
 * share of the median) between two groups of passes that flags a point.
 * Returns 0, or -1 when out of memory. */
int hm_passes_summarize(const double *values, size_t n, double disagree_share,
                        hm_pass_summary *out);

#endif
