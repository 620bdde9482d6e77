/* Summary math of the reducer (c/transport/summary.c): partials merged in
 * any order and grouping give exactly the count, sum, min and max of the raw
 * values, mean and M2 within rounding of a direct computation, and sketch
 * quantiles within alpha of the exact ones. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hm_test.h"
#include "summary.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static double rng_uniform(void) /* (0, 1) */
{
    return ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
}

static double rng_normal(void)
{
    return sqrt(-2.0 * log(rng_uniform())) * cos(2.0 * M_PI * rng_uniform());
}

enum dist { LOGNORMAL, UNIFORM, ZEROS_NEGATIVES, WIDE, NDIST };
static const char *dist_name[NDIST] = {"lognormal", "uniform", "zeros+negatives", "wide"};

static double draw(enum dist d)
{
    switch (d) {
    case LOGNORMAL: return exp(3.0 + 1.5 * rng_normal());
    case UNIFORM: return 100.0 * rng_uniform();
    case ZEROS_NEGATIVES: {
        double u = rng_uniform();
        if (u < 0.2)
            return 0.0;
        return (u < 0.6 ? -1.0 : 1.0) * exp(2.0 * rng_normal());
    }
    default: /* bytes and rates side by side: 1e-3 .. 1e12 */
        return pow(10.0, -3.0 + 15.0 * rng_uniform());
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Merges parts[0..n) into one in a random tree: random pairs are merged
 * until one is left (the order and grouping a network of reducers gives). */
static void merge_random_tree(hm_test_counts *c, hm_summary *parts, int n)
{
    hm_error err;
    while (n > 1) {
        int i = (int)(rng_next() % (uint64_t)n), j = (int)(rng_next() % (uint64_t)(n - 1));
        if (j >= i)
            j++;
        CHECK(c, hm_summary_merge(&parts[i], &parts[j], &err) == 0);
        hm_summary_free(&parts[j]);
        parts[j] = parts[n - 1];
        n--;
    }
}

static void check_distribution(hm_test_counts *c, enum dist d, size_t nvalues, int nparts)
{
    hm_error err;
    double *values = malloc(nvalues * sizeof *values);
    hm_summary *parts = malloc((size_t)nparts * sizeof *parts);
    hm_summary whole;
    hm_summary_init(&whole);
    for (int p = 0; p < nparts; p++)
        hm_summary_init(&parts[p]);
    for (size_t i = 0; i < nvalues; i++) {
        values[i] = draw(d);
        /* Every value to a random partial, some partials maybe empty. */
        CHECK(c, hm_summary_add(&parts[rng_next() % (uint64_t)nparts], values[i], &err) == 0);
        CHECK(c, hm_summary_add(&whole, values[i], &err) == 0);
    }
    merge_random_tree(c, parts, nparts);
    hm_summary *m = &parts[0];

    /* Direct computation: two passes in long double. */
    long double mean = 0.0L, m2 = 0.0L;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < nvalues; i++) {
        mean += values[i];
        lo = fmin(lo, values[i]);
        hi = fmax(hi, values[i]);
    }
    mean /= (long double)nvalues;
    for (size_t i = 0; i < nvalues; i++)
        m2 += (values[i] - mean) * (values[i] - mean);

    CHECK(c, m->count == nvalues);
    CHECK(c, m->min == lo && m->max == hi);
    /* The sum is the same double however the values were grouped. */
    CHECK(c, hm_summary_sum(m) == hm_summary_sum(&whole));
    CHECK_NEAR(c, hm_summary_sum(m), (double)(mean * (long double)nvalues),
               1e-12 * fabs((double)(mean * (long double)nvalues)) + 1e-300);
    CHECK_NEAR(c, m->mean, (double)mean, 1e-12 * fabsl(mean) + 1e-12 * sqrt((double)m2 / nvalues));
    CHECK_NEAR(c, m->m2, (double)m2, 1e-12 * (double)m2);
    CHECK(c, hm_sketch_count(&m->sketch) == nvalues);

    qsort(values, nvalues, sizeof *values, cmp_double);
    static const double qs[] = {0.0, 0.5, 0.9, 0.99, 1.0};
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        double exact = values[(size_t)floor(qs[i] * (double)(nvalues - 1))];
        double got = hm_sketch_quantile(&m->sketch, qs[i]);
        double tol = HM_SKETCH_ALPHA * fabs(exact) * (1.0 + 1e-9);
        if (!(fabs(got - exact) <= tol))
            fprintf(stderr, "%s q=%g: sketch %.17g exact %.17g\n", dist_name[d], qs[i], got, exact);
        CHECK(c, fabs(got - exact) <= tol);
    }
    hm_summary_free(m);
    hm_summary_free(&whole);
    free(parts);
    free(values);
}

/* 0.1 ten times is 1 exactly (a running double sum gives 0.9999999999999999):
 * the sum is the correctly rounded one, split over partials or not. */
static void check_exact_sum(hm_test_counts *c)
{
    hm_error err;
    hm_summary a, b;
    hm_summary_init(&a);
    hm_summary_init(&b);
    for (int i = 0; i < 10; i++)
        CHECK(c, hm_summary_add(i % 3 ? &a : &b, 0.1, &err) == 0);
    CHECK(c, hm_summary_merge(&a, &b, &err) == 0);
    CHECK(c, hm_summary_sum(&a) == 1.0);
    /* Cancellation: 1e100 + 1 - 1e100 is 1. */
    hm_exact_sum e = {0};
    hm_exact_sum_add(&e, 1e100);
    hm_exact_sum_add(&e, 1.0);
    hm_exact_sum_add(&e, -1e100);
    CHECK(c, hm_exact_sum_value(&e) == 1.0);
    hm_summary_free(&a);
    hm_summary_free(&b);
}

/* Merging an empty summary changes nothing; into an empty one copies. */
static void check_empty(hm_test_counts *c)
{
    hm_error err;
    hm_summary a, empty;
    hm_summary_init(&a);
    hm_summary_init(&empty);
    CHECK(c, hm_summary_add(&a, 5.0, &err) == 0);
    CHECK(c, hm_summary_add(&a, 7.0, &err) == 0);
    CHECK(c, hm_summary_merge(&a, &empty, &err) == 0);
    CHECK(c, a.count == 2 && a.mean == 6.0 && a.m2 == 2.0);
    CHECK(c, hm_summary_merge(&empty, &a, &err) == 0);
    CHECK(c, empty.count == 2 && empty.mean == 6.0 && empty.m2 == 2.0 && empty.min == 5.0);
    CHECK(c, isnan(hm_sketch_quantile(&(hm_sketch){0}, 0.5)));
    hm_summary_free(&a);
    hm_summary_free(&empty);
}

/* The key of the contract: ceil(log(x) / log(gamma)), gamma = 1.01 / 0.99. */
static void check_keys(hm_test_counts *c)
{
    CHECK(c, hm_sketch_key(1.0) == 0);
    CHECK(c, hm_sketch_key(12.0) == (int32_t)ceil(log(12.0) / log(1.01 / 0.99)));
    CHECK(c, hm_sketch_key(12.0) == 125);
    double v = hm_sketch_bucket_value(125);
    CHECK(c, fabs(v - 12.0) <= 0.01 * 12.0);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    check_keys(&c);
    check_exact_sum(&c);
    check_empty(&c);
    for (int d = 0; d < NDIST; d++) {
        check_distribution(&c, (enum dist)d, 20000, 37);
        check_distribution(&c, (enum dist)d, 1000, 3);
        check_distribution(&c, (enum dist)d, 7, 5);
    }
    return hm_test_finish("test_summary", &c);
}
