/* Reference values from SciPy 1.16 (scipy.stats.t.ppf / t.cdf,
 * scipy.special.betainc) and from published t tables. */
#include <stdlib.h>

#include "hm_stats.h"
#include "hm_test.h"

static void test_t_quantile(hm_test_counts *c)
{
    CHECK_NEAR(c, hm_stats_t_quantile(0.975, 1), 12.706204736174694, 1e-9);
    CHECK_NEAR(c, hm_stats_t_quantile(0.975, 9), 2.262157162798205, 1e-10);
    CHECK_NEAR(c, hm_stats_t_quantile(0.95, 29), 1.6991270265334972, 1e-10);
    CHECK_NEAR(c, hm_stats_t_quantile(0.995, 4), 4.604094871349992, 1e-9);
    CHECK_NEAR(c, hm_stats_t_quantile(0.995, 100), 2.6258905214380173, 1e-9);
    CHECK_NEAR(c, hm_stats_t_quantile(0.025, 9), -2.262157162798205, 1e-10);
    CHECK_NEAR(c, hm_stats_t_quantile(0.5, 7), 0.0, 1e-15);
    /* Large df approaches the normal quantile 2.5758293035489. */
    CHECK_NEAR(c, hm_stats_t_quantile(0.995, 1e6), 2.5758342201053344, 1e-7);
    CHECK(c, isnan(hm_stats_t_quantile(1.0, 5)));
    CHECK(c, isnan(hm_stats_t_quantile(0.9, 0)));
}

static void test_t_cdf_and_beta(hm_test_counts *c)
{
    CHECK_NEAR(c, hm_stats_t_cdf(2.0, 5), 0.9490302605850709, 1e-12);
    CHECK_NEAR(c, hm_stats_t_cdf(-1.0, 3), 0.19550110947788524, 1e-12);
    CHECK_NEAR(c, hm_stats_incomplete_beta(2.0, 3.0, 0.4), 0.5248, 1e-12);
    CHECK_NEAR(c, hm_stats_incomplete_beta(0.5, 0.5, 0.5), 0.5, 1e-12);
    CHECK_NEAR(c, hm_stats_incomplete_beta(5.0, 0.5, 0.99), 0.7571581091015623, 1e-10);
}

static void test_descriptive(hm_test_counts *c)
{
    double x[] = {5, 1, 4, 2, 3};
    hm_summary s;
    hm_summary_compute(&s, x, 5, 0.95);
    CHECK_NEAR(c, s.mean, 3.0, 1e-15);
    CHECK_NEAR(c, s.median, 3.0, 1e-15);
    CHECK_NEAR(c, s.min, 1.0, 0);
    CHECK_NEAR(c, s.max, 5.0, 0);
    CHECK_NEAR(c, s.stddev, 1.5811388300841898, 1e-14);
    CHECK_NEAR(c, s.se, 0.7071067811865476, 1e-14);
    /* t_{0.975,4} = 2.7764451051977934 */
    CHECK_NEAR(c, s.ci_half, 2.7764451051977934 * 0.7071067811865476, 1e-9);
    CHECK_NEAR(c, s.ci_low, 3.0 - s.ci_half, 1e-15);

    double q[] = {1, 2, 3, 4};
    CHECK_NEAR(c, hm_stats_quantile_sorted(q, 4, 0.25), 1.75, 1e-15);
    CHECK_NEAR(c, hm_stats_median_sorted(q, 4), 2.5, 1e-15);
    CHECK(c, isnan(hm_stats_median_sorted(q, 0)));
    CHECK(c, isnan(hm_stats_variance(q, 1)));

    /* Identical values whose sum / 3 rounds up by one ulp (seen with the
     * TSC timer, whose readings are quantized to ticks). */
    double same[3] = {4.703703703704e-08, 4.703703703704e-08, 4.703703703704e-08};
    hm_summary flat;
    hm_summary_compute(&flat, same, 3, 0.95);
    CHECK(c, flat.min <= flat.mean && flat.mean <= flat.max);

    hm_summary one;
    double single[] = {7};
    hm_summary_compute(&one, single, 1, 0.99);
    CHECK(c, one.n == 1 && one.mean == 7 && isnan(one.se) && isnan(one.ci_low));
}

static void test_trim(hm_test_counts *c)
{
    size_t first;
    CHECK(c, hm_stats_trim_sorted(100, 0.25, &first) == 50 && first == 25);
    CHECK(c, hm_stats_trim_sorted(10, 0.25, &first) == 6 && first == 2);
    CHECK(c, hm_stats_trim_sorted(3, 0.25, &first) == 3 && first == 0);
    CHECK(c, hm_stats_trim_sorted(1, 0.5, &first) == 1 && first == 0);
    CHECK(c, hm_stats_trim_sorted(4, 0.5, &first) == 2 && first == 1);
    CHECK(c, hm_stats_trim_sorted(0, 0.25, &first) == 0);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_t_quantile(&c);
    test_t_cdf_and_beta(&c);
    test_descriptive(&c);
    test_trim(&c);
    return hm_test_finish("test_stats", &c);
}
