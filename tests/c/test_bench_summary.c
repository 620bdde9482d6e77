/* Statistics of a measured case: trimming 25 % at each end, mean, median,
 * SE and Student-t intervals at 0.90 / 0.95 / 0.99. Reference values
 * computed with NumPy/SciPy (scipy.stats.t.ppf). */
#include <math.h>

#include "bench_summary.h"
#include "hm_test.h"

static void test_trim_and_moments(hm_test_counts *c)
{
    /* 12 values, unsorted, with outliers at both ends: 3 dropped per side. */
    double v[] = {9.0, 1.0, 5.0, 100.0, 4.0, 6.0, 7.0, 3.0, 8.0, 0.001, 2.0, 50.0};
    hm_bench_summary s;
    hm_error err;
    CHECK(c, hm_bench_summarize(v, 12, 0.25, 0.95, &s, &err) == 0);
    CHECK(c, s.n_valid == 12 && s.n_used == 6);
    /* kept: 3 4 5 6 7 8 */
    CHECK_NEAR(c, s.mean, 5.5, 1e-12);
    CHECK_NEAR(c, s.median, 5.5, 1e-12);
    CHECK_NEAR(c, s.min, 3.0, 0);
    CHECK_NEAR(c, s.max, 8.0, 0);
    /* sd of 3..8 = sqrt(3.5); se = sqrt(3.5/6) */
    CHECK_NEAR(c, s.se, sqrt(3.5 / 6.0), 1e-12);
    CHECK_NEAR(c, s.rse, sqrt(3.5 / 6.0) / 5.5, 1e-12);
    /* t quantiles for df = 5: 0.95 -> 2.015048, 0.975 -> 2.570582, 0.995 -> 4.032143 */
    double se = sqrt(3.5 / 6.0);
    CHECK_NEAR(c, s.ci_high_at[0] - 5.5, 2.0150483733330233 * se, 1e-9);
    CHECK_NEAR(c, s.ci_high_at[1] - 5.5, 2.570581835636314 * se, 1e-9);
    CHECK_NEAR(c, 5.5 - s.ci_low_at[2], 4.032142983555228 * se, 1e-9);
    /* The chosen level's interval is the 0.95 one here. */
    CHECK_NEAR(c, s.ci_low, s.ci_low_at[1], 1e-15);
    CHECK_NEAR(c, s.ci_high, s.ci_high_at[1], 1e-15);
    CHECK_NEAR(c, s.ci_level, 0.95, 0);
    /* The input is left as it was. */
    CHECK_NEAR(c, v[0], 9.0, 0);
    CHECK_NEAR(c, v[3], 100.0, 0);
}

static void test_other_level_and_no_trim(hm_test_counts *c)
{
    double v[] = {1.0, 2.0, 3.0, 4.0};
    hm_bench_summary s;
    hm_error err;
    CHECK(c, hm_bench_summarize(v, 4, 0.0, 0.99, &s, &err) == 0);
    CHECK(c, s.n_used == 4);
    CHECK_NEAR(c, s.mean, 2.5, 1e-15);
    /* df = 3, t_0.995 = 5.840909309733349; se = sqrt(1.6667/4) */
    double se = sqrt((5.0 / 3.0) / 4.0);
    CHECK_NEAR(c, s.ci_high - s.mean, 5.840909309733349 * se, 1e-9);
}

static void test_degenerate(hm_test_counts *c)
{
    hm_bench_summary s;
    hm_error err;
    CHECK(c, hm_bench_summarize(NULL, 0, 0.25, 0.95, &s, &err) == 0);
    CHECK(c, s.n_used == 0 && isnan(s.mean) && isnan(s.ci_low));
    double one[] = {7.0};
    CHECK(c, hm_bench_summarize(one, 1, 0.25, 0.95, &s, &err) == 0);
    CHECK(c, s.n_used == 1);
    CHECK_NEAR(c, s.mean, 7.0, 0);
    CHECK(c, isnan(s.se) && isnan(s.ci_high_at[0]));
    /* All equal (coarse timer): RSE 0, not NaN, so the stop rule can fire. */
    double same[] = {0.0, 0.0, 0.0, 0.0, 0.0};
    CHECK(c, hm_bench_summarize(same, 5, 0.25, 0.95, &s, &err) == 0);
    CHECK_NEAR(c, s.rse, 0.0, 0);
    /* Trimming never removes everything: 3 values at 49 % keep the middle one. */
    double three[] = {3.0, 1.0, 2.0};
    CHECK(c, hm_bench_summarize(three, 3, 0.49, 0.95, &s, &err) == 0);
    CHECK(c, s.n_used == 1);
    CHECK_NEAR(c, s.median, 2.0, 0);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_trim_and_moments(&c);
    test_other_level_and_no_trim(&c);
    test_degenerate(&c);
    return hm_test_finish("test_bench_summary", &c);
}
