#include "bench_procedures.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>

void hm_osu_iterations(int64_t size_bytes, int *iterations, int *skip)
{
    /* osu_bcast & co: `if (size > LARGE_MESSAGE_SIZE)` switches to the
     * large counts, so 8192 B itself is still small. */
    bool large = size_bytes > HM_OSU_LARGE_MESSAGE_BYTES;
    *iterations = large ? HM_OSU_ITERATIONS_LARGE : HM_OSU_ITERATIONS_SMALL;
    *skip = large ? HM_OSU_SKIP_LARGE : HM_OSU_SKIP_SMALL;
}

int hm_imb_n_sample(int64_t size_bytes)
{
    if (size_bytes <= 0)
        return HM_IMB_MSGS_PER_SAMPLE;
    int64_t by_volume = HM_IMB_OVERALL_VOL_BYTES / size_bytes;
    int64_t n = by_volume < HM_IMB_MSGS_PER_SAMPLE ? by_volume : HM_IMB_MSGS_PER_SAMPLE;
    return n < 1 ? 1 : (int)n;
}

int hm_imb_rep_test(double one_call_s)
{
    if (!(one_call_s >= 1.0 / HM_IMB_MSGS_PER_SAMPLE))
        return HM_IMB_MSGS_PER_SAMPLE; /* also NaN and negative */
    if (one_call_s < 1.0)
        return (int)(1.0 / one_call_s + 0.5);
    return 1;
}

int hm_imb_dynamic_n_sample(int selected, int previous, double per_call_s, double secs)
{
    int t_sample = selected;
    if (per_call_s > 1e-8) {
        double val = 1.0 + secs / per_call_s;
        if (val <= (double)INT_MAX)
            t_sample = (int)val;
    }
    int n = selected < previous ? selected : previous;
    n = n < t_sample ? n : t_sample;
    return n < 1 ? 1 : n;
}

size_t hm_imb_cache_spacing(size_t len_bytes, size_t line_bytes)
{
    if (line_bytes == 0)
        line_bytes = HM_IMB_CACHE_LINE_BYTES;
    return ((len_bytes + line_bytes - 1) / line_bytes + 1) * line_bytes;
}

int hm_imb_cache_iters(size_t len_bytes, size_t line_bytes, size_t cache_bytes, int n_sample)
{
    size_t ofs = hm_imb_cache_spacing(len_bytes, line_bytes);
    size_t iters = (2 * cache_bytes + ofs - 1) / ofs;
    if (n_sample > 0 && iters > (size_t)n_sample)
        iters = (size_t)n_sample;
    return iters < 1 ? 1 : (int)iters;
}

hm_rank_reduction hm_reduce_over_ranks(const double *per_rank, size_t n)
{
    hm_rank_reduction r = {NAN, NAN, NAN};
    if (n == 0)
        return r;
    double sum = 0;
    r.min = INFINITY;
    r.max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        sum += per_rank[i];
        r.min = per_rank[i] < r.min ? per_rank[i] : r.min;
        r.max = per_rank[i] > r.max ? per_rank[i] : r.max;
    }
    r.avg = sum / (double)n;
    return r;
}
