/* Repeatability rules: shuffled point order, the time budget per point,
 * and the summary of a point over its passes (median, distribution-free
 * interval, disagreement flag). */
#include <math.h>

#include "bench_passes.h"
#include "hm_test.h"

static void test_shuffle(hm_test_counts *c)
{
    size_t a[10], b[10];
    for (size_t i = 0; i < 10; i++)
        a[i] = b[i] = i;
    hm_shuffle(a, 10, 42);
    hm_shuffle(b, 10, 42);
    int same = 1, moved = 0, sum = 0;
    for (size_t i = 0; i < 10; i++) {
        same &= a[i] == b[i];
        moved += a[i] != i;
        sum += (int)a[i];
    }
    /* Same seed, same order on every rank; a permutation; not the identity. */
    CHECK(c, same);
    CHECK(c, sum == 45);
    CHECK(c, moved > 0);
    for (size_t i = 0; i < 10; i++)
        b[i] = i;
    hm_shuffle(b, 10, 43);
    int differs = 0;
    for (size_t i = 0; i < 10; i++)
        differs |= a[i] != b[i];
    CHECK(c, differs);
}

static void test_budget(hm_test_counts *c)
{
    hm_stop_rule r;
    hm_stop_rule_default(&r);
    /* No budget: the ordinary rule. */
    CHECK(c, hm_stop_with_budget(&r, 16, 12, 0.01, 0, 0, 100000));
    /* With a budget the rule waits for it, even past the count caps... */
    CHECK(c, !hm_stop_with_budget(&r, 500, 400, 0.01, 5e6, 20e6, 100000));
    /* ... and stops once it is spent. */
    CHECK(c, hm_stop_with_budget(&r, 500, 400, 0.01, 20e6, 20e6, 100000));
    /* A large size: budget spent after a few launches, rule not yet met. */
    CHECK(c, !hm_stop_with_budget(&r, 8, 8, 0.2, 30e6, 20e6, 100000));
    CHECK(c, hm_stop_with_budget(&r, 16, 12, 0.01, 30e6, 20e6, 100000));
    /* The cap ends a point whatever the budget. */
    CHECK(c, hm_stop_with_budget(&r, 100000, 1, NAN, 1, 20e6, 100000));
}

static void test_coverage(hm_test_counts *c)
{
    CHECK_NEAR(c, hm_median_interval_coverage(3, 1), 0.75, 1e-12);
    CHECK_NEAR(c, hm_median_interval_coverage(5, 1), 1 - 2.0 / 32, 1e-12);
    CHECK_NEAR(c, hm_median_interval_coverage(6, 1), 1 - 2.0 / 64, 1e-12);
    /* n = 10, k = 2: 1 - 2 * (1 + 10) / 1024 */
    CHECK_NEAR(c, hm_median_interval_coverage(10, 2), 1 - 22.0 / 1024, 1e-12);
    CHECK_NEAR(c, hm_median_interval_coverage(1, 1), 0, 0);
}

static void test_summary(hm_test_counts *c)
{
    hm_pass_summary s;
    double three[3] = {1.2e-6, NAN, 1.0e-6};
    CHECK(c, hm_passes_summarize(three, 3, 0.25, &s) == 0);
    CHECK(c, s.n == 2);
    CHECK_NEAR(c, s.median, 1.1e-6, 1e-18);
    double five[5] = {1.00, 1.02, 0.98, 1.01, 0.99};
    hm_passes_summarize(five, 5, 0.25, &s);
    CHECK_NEAR(c, s.median, 1.00, 1e-12);
    /* 5 passes: [min, max], coverage 1 - 2^-4. */
    CHECK_NEAR(c, s.ci_low, 0.98, 0);
    CHECK_NEAR(c, s.ci_high, 1.02, 0);
    CHECK_NEAR(c, s.ci_level, 0.9375, 1e-12);
    CHECK_NEAR(c, s.spread, 0.04, 1e-12);
    CHECK(c, !s.disagree);
    /* 10 passes: k = 2 is the largest with coverage >= 0.95. */
    double ten[10] = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
    hm_passes_summarize(ten, 10, 0.25, &s);
    CHECK_NEAR(c, s.ci_low, 2, 0);
    CHECK_NEAR(c, s.ci_high, 9, 0);
    CHECK(c, s.ci_level >= 0.95);
    /* Two groups of passes (a whole run 2x slower): flagged. */
    double bimodal[4] = {1.0, 1.05, 2.0, 2.1};
    hm_passes_summarize(bimodal, 4, 0.25, &s);
    CHECK(c, s.disagree);
    CHECK_NEAR(c, s.largest_gap, 0.95 / 1.525, 1e-12);
    /* Nothing measured. */
    double none[2] = {NAN, NAN};
    hm_passes_summarize(none, 2, 0.25, &s);
    CHECK(c, s.n == 0 && isnan(s.median) && !s.disagree);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_shuffle(&c);
    test_budget(&c);
    test_coverage(&c);
    test_summary(&c);
    return hm_test_finish("test_bench_passes", &c);
}
