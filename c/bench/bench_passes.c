#include "bench_passes.h"

#include <math.h>
#include <stdlib.h>

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void hm_shuffle(size_t *idx, size_t n, uint64_t seed)
{
    uint64_t state = seed;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix64(&state) % i);
        size_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

bool hm_stop_with_budget(const hm_stop_rule *r, int n_total, int n_valid, double rse,
                         double elapsed_ns, double budget_ns, int cap)
{
    if (cap > 0 && n_total >= cap)
        return true;
    if (budget_ns <= 0)
        return hm_stop_reached(r, n_total, n_valid, rse);
    if (elapsed_ns < budget_ns)
        return false;
    return hm_stop_reached(r, n_total, n_valid, rse);
}

double hm_median_interval_coverage(size_t n, size_t k)
{
    if (n == 0 || k == 0 || 2 * k > n + 1)
        return 0;
    /* P(Bin(n, 1/2) <= k-1), summed in logs to stay finite for large n. */
    double tail = 0;
    for (size_t i = 0; i < k; i++)
        tail += exp(lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) -
                    (double)n * log(2.0));
    double c = 1 - 2 * tail;
    return c < 0 ? 0 : c;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int hm_passes_summarize(const double *values, size_t n, double disagree_share,
                        hm_pass_summary *out)
{
    hm_pass_summary s = {0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, false};
    double *v = malloc((n > 0 ? n : 1) * sizeof *v);
    if (v == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!isnan(values[i]))
            v[s.n++] = values[i];
    if (s.n > 0) {
        qsort(v, s.n, sizeof *v, cmp_double);
        size_t m = s.n;
        s.median = m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
        s.min = v[0];
        s.max = v[m - 1];
        size_t k = 1;
        while (2 * (k + 1) <= m + 1 && hm_median_interval_coverage(m, k + 1) >= 0.95)
            k++;
        s.ci_low = v[k - 1];
        s.ci_high = v[m - k];
        s.ci_level = hm_median_interval_coverage(m, k);
        if (s.median > 0) {
            s.spread = (s.max - s.min) / s.median;
            double gap = 0;
            for (size_t i = 1; i < m; i++)
                gap = v[i] - v[i - 1] > gap ? v[i] - v[i - 1] : gap;
            s.largest_gap = gap / s.median;
            s.disagree = m >= 2 && s.largest_gap > disagree_share;
        }
    }
    free(v);
    *out = s;
    return 0;
}
