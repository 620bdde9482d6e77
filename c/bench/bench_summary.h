/* Statistics of one measured case (MPIPerf section 4, step 4): the valid
 * launch times are sorted, the lowest and highest `trim` fraction dropped,
 * and mean, median, SE, min, max and Student-t intervals computed from the
 * n_used values that remain. MPI-free. */
#ifndef HM_BENCH_SUMMARY_H
#define HM_BENCH_SUMMARY_H

#include <stddef.h>

#include "hm_error.h"

#define HM_BENCH_CI_LEVELS 3
/* The levels every result reports, besides the chosen ci_level. */
extern const double hm_bench_ci_levels[HM_BENCH_CI_LEVELS]; /* 0.90, 0.95, 0.99 */

typedef struct hm_bench_summary {
    size_t n_valid;   /* values given */
    size_t n_used;    /* values left after trimming */
    double mean, median, se, rse, min, max;
    double ci_level, ci_low, ci_high;
    double ci_low_at[HM_BENCH_CI_LEVELS], ci_high_at[HM_BENCH_CI_LEVELS];
} hm_bench_summary;

/* Summarizes values[0..n) (not modified). Undefined fields are NaN (e.g.
 * everything for n == 0, se and intervals for n_used < 2). Returns 0, or
 * -1 with err set when out of memory. */
int hm_bench_summarize(const double *values, size_t n, double trim, double ci_level,
                       hm_bench_summary *out, hm_error *err);

#endif
