#include "bench_summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hm_stats.h"

const double hm_bench_ci_levels[HM_BENCH_CI_LEVELS] = {0.90, 0.95, 0.99};

int hm_bench_summarize(const double *values, size_t n, double trim, double ci_level,
                       hm_bench_summary *out, hm_error *err)
{
    out->n_valid = n;
    out->n_used = 0;
    out->mean = out->median = out->se = out->rse = out->min = out->max = NAN;
    out->ci_level = ci_level;
    out->ci_low = out->ci_high = NAN;
    for (int i = 0; i < HM_BENCH_CI_LEVELS; i++)
        out->ci_low_at[i] = out->ci_high_at[i] = NAN;
    if (n == 0)
        return 0;
    double *sorted = malloc(n * sizeof *sorted);
    if (sorted == NULL)
        return hm_error_set(err, "out of memory for %zu samples", n);
    memcpy(sorted, values, n * sizeof *sorted);
    hm_stats_sort(sorted, n);
    size_t first = 0;
    size_t used = hm_stats_trim_sorted(n, trim, &first);
    hm_summary s;
    hm_summary_compute(&s, sorted + first, used, ci_level);
    out->n_used = used;
    out->mean = s.mean;
    out->median = s.median;
    out->se = s.se;
    /* All values equal (a coarse timer can read 0 every time): no error. */
    out->rse = s.se == 0.0 ? 0.0 : s.rse;
    out->min = s.min;
    out->max = s.max;
    out->ci_low = s.ci_low;
    out->ci_high = s.ci_high;
    for (int i = 0; i < HM_BENCH_CI_LEVELS; i++) {
        double half = NAN;
        if (used >= 2)
            half = hm_stats_t_quantile(0.5 + hm_bench_ci_levels[i] / 2.0, (double)(used - 1)) * s.se;
        out->ci_low_at[i] = s.mean - half;
        out->ci_high_at[i] = s.mean + half;
    }
    free(sorted);
    return 0;
}
