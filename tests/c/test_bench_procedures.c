/* The OSU 7.x and IMB-MPI1 procedures hushmon-bench reproduces
 * (--method osu, --method imb): iteration and warm-up counts by size, the
 * IMB dynamic iteration policy and -off_cache spacing, and the reductions
 * over ranks both tools report. */
#include <math.h>

#include "bench_procedures.h"
#include "hm_test.h"

static void test_osu_iterations(hm_test_counts *c)
{
    int it = 0, skip = 0;
    hm_osu_iterations(1, &it, &skip);
    CHECK(c, it == 1000 && skip == 100);
    /* The switch is `size > 8192`: 8 KiB itself is still a small message. */
    hm_osu_iterations(8192, &it, &skip);
    CHECK(c, it == 1000 && skip == 100);
    hm_osu_iterations(8193, &it, &skip);
    CHECK(c, it == 100 && skip == 10);
    hm_osu_iterations(1 << 20, &it, &skip);
    CHECK(c, it == 100 && skip == 10);
    hm_osu_iterations(0, &it, &skip);
    CHECK(c, it == 1000 && skip == 100);
}

static void test_imb_n_sample(hm_test_counts *c)
{
    CHECK(c, hm_imb_n_sample(0) == 1000);
    CHECK(c, hm_imb_n_sample(8) == 1000);
    /* 40 MiB / size binds from 41944 B on. */
    CHECK(c, hm_imb_n_sample(41943) == 1000);
    CHECK(c, hm_imb_n_sample(41944) == 999);
    CHECK(c, hm_imb_n_sample(65536) == 640);
    CHECK(c, hm_imb_n_sample(4 << 20) == 10);
    CHECK(c, hm_imb_n_sample((int64_t)1 << 30) == 1);
}

static void test_imb_dynamic(hm_test_counts *c)
{
    /* Step 1: about one second's worth, at most 1000. */
    CHECK(c, hm_imb_rep_test(1e-6) == 1000);
    CHECK(c, hm_imb_rep_test(NAN) == 1000);
    CHECK(c, hm_imb_rep_test(0.01) == 100);
    CHECK(c, hm_imb_rep_test(0.3) == 3);
    CHECK(c, hm_imb_rep_test(2.0) == 1);
    /* Step 2: 1 + 10 s / time per call, the selected and previous counts. */
    CHECK(c, hm_imb_dynamic_n_sample(1000, 1000, 1e-6, 10) == 1000);
    CHECK(c, hm_imb_dynamic_n_sample(1000, 1000, 0.05, 10) == 201);
    CHECK(c, hm_imb_dynamic_n_sample(1000, 640, 1e-6, 10) == 640);
    CHECK(c, hm_imb_dynamic_n_sample(640, 1000, 1e-6, 10) == 640);
    /* A time too small to trust keeps the selected count. */
    CHECK(c, hm_imb_dynamic_n_sample(1000, 1000, 1e-9, 10) == 1000);
}

static void test_imb_off_cache(hm_test_counts *c)
{
    /* Copies start on a fresh cache line with one line between them. */
    CHECK(c, hm_imb_cache_spacing(1, 64) == 128);
    CHECK(c, hm_imb_cache_spacing(64, 64) == 128);
    CHECK(c, hm_imb_cache_spacing(65, 64) == 192);
    /* ceil(2 * cache / spacing), at most n_sample. */
    CHECK(c, hm_imb_cache_iters(4096, 64, 1 << 20, 1000) == 2 * (1 << 20) / 4160 + 1);
    CHECK(c, hm_imb_cache_iters(8, 64, 1 << 20, 1000) == 1000);
    CHECK(c, hm_imb_cache_iters(1 << 22, 64, 1 << 20, 10) == 1);
}

static void test_reduce_over_ranks(hm_test_counts *c)
{
    /* OSU's Avg Latency is the mean of the ranks' means, not the slowest. */
    double per_rank[4] = {2e-6, 1e-6, 4e-6, 1e-6};
    hm_rank_reduction r = hm_reduce_over_ranks(per_rank, 4);
    CHECK_NEAR(c, r.avg, 2e-6, 1e-18);
    CHECK_NEAR(c, r.min, 1e-6, 0);
    CHECK_NEAR(c, r.max, 4e-6, 0);
    r = hm_reduce_over_ranks(per_rank, 0);
    CHECK(c, isnan(r.avg) && isnan(r.min) && isnan(r.max));
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_osu_iterations(&c);
    test_imb_n_sample(&c);
    test_imb_dynamic(&c);
    test_imb_off_cache(&c);
    test_reduce_over_ranks(&c);
    return hm_test_finish("test_bench_procedures", &c);
}
