/* hushmon-detect's recorder: detours, blocks, histogram quantiles and the
 * binary event file, on synthetic iteration times. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "detect_record.h"
#include "hm_test.h"

static void test_buckets(hm_test_counts *c)
{
    for (int64_t v = 0; v < 8; v++)
        CHECK(c, hm_detect_hist_bucket(v) == (int)v);
    CHECK(c, hm_detect_hist_bucket(-5) == 0);
    /* every value lies in [lower(b), lower(b+1)) of its bucket */
    int64_t samples[] = {8, 9, 15, 16, 17, 100, 1000, 4095, 4096, 123456789, INT64_MAX / 2};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        int b = hm_detect_hist_bucket(samples[i]);
        CHECK(c, b >= 0 && b < HM_DETECT_HIST_BUCKETS);
        CHECK(c, hm_detect_hist_lower_ns(b) <= samples[i]);
        CHECK(c, hm_detect_hist_lower_ns(b + 1) > samples[i]);
    }
    /* monotone */
    int prev = 0;
    for (int64_t v = 0; v < 100000; v += 7) {
        int b = hm_detect_hist_bucket(v);
        CHECK(c, b >= prev);
        prev = b;
    }
}

static void test_quantiles(hm_test_counts *c)
{
    uint64_t hist[HM_DETECT_HIST_BUCKETS] = {0};
    CHECK(c, isnan(hm_detect_hist_quantile(hist, 0.5)));
    /* 990 iterations of 500 ns, 10 of 1 ms: p50 ~ 500, p99 ~ 500, p99.9 ~ 1 ms */
    hist[hm_detect_hist_bucket(500)] = 990;
    hist[hm_detect_hist_bucket(1000000)] = 10;
    double p50 = hm_detect_hist_quantile(hist, 0.5);
    double p999 = hm_detect_hist_quantile(hist, 0.999);
    CHECK(c, p50 > 500 * 0.93 && p50 < 500 * 1.07);
    CHECK(c, hm_detect_hist_quantile(hist, 0.99) < 600);
    CHECK(c, p999 > 1e6 * 0.93 && p999 < 1e6 * 1.07);
    CHECK(c, hm_detect_hist_quantile(hist, 1.0) == p999);
}

static void test_recorder(hm_test_counts *c)
{
    hm_detect_recorder r;
    hm_error err = {{0}};
    CHECK(c, hm_detect_recorder_init(&r, 1, 5000, 0, 100, 10, 0, &err) != 0);
    CHECK(c, hm_detect_recorder_init(&r, 1, 5000, 4, 10, 2, 1000000, &err) == 0);
    /* 10 iterations of 1 us, with detours of 20 us at #3 and 50 us at #7,
     * and 8 us at #8 (a third detour, beyond the cap of 2). */
    int64_t t = 100;
    hm_detect_record_begin(&r, t);
    for (int i = 0; i < 10; i++) {
        int64_t d = i == 3 ? 20000 : i == 7 ? 50000 : i == 8 ? 8000 : 1000;
        hm_detect_record(&r, t, t + d);
        t += d;
    }
    CHECK(c, r.iterations == 10);
    CHECK(c, r.detour_count == 2);
    CHECK(c, r.detours_dropped == 1);
    CHECK(c, r.detour_excess_ns == (20000 - 5000) + (50000 - 5000) + (8000 - 5000));
    CHECK(c, r.detours[0].rank == 1 && r.detours[0].kind == HM_DETECT_DETOUR);
    CHECK(c, r.detours[0].start_ns == 100 + 3 * 1000 + 1000000);
    CHECK(c, r.detours[0].duration_ns == 20000);
    /* blocks of 4: [0..3] and [4..7]; the last 2 iterations are no block */
    CHECK(c, r.block_count == 2);
    CHECK(c, r.blocks[0].start_ns == 100 + 1000000);
    CHECK(c, r.blocks[0].duration_ns == 3 * 1000 + 20000);
    CHECK(c, r.blocks[1].duration_ns == 3 * 1000 + 50000);
    CHECK(c, r.blocks[1].start_ns == r.blocks[0].start_ns + r.blocks[0].duration_ns);

    /* The file: header + records, read back. */
    char path[] = "/tmp/hm_test_detect_XXXXXX";
    int fd = mkstemp(path);
    CHECK(c, fd >= 0);
    if (fd >= 0)
        close(fd);
    hm_detect_file_header h = {.realtime_minus_clock_ns = 42, .threshold_ns = 5000,
                               .block_iters = 4, .nranks = 2};
    CHECK(c, hm_detect_write_file(path, &h, r.detours, r.detour_count, &err) == 0);
    FILE *f = fopen(path, "rb");
    hm_detect_file_header back;
    hm_detect_event ev[2];
    CHECK(c, f != NULL && fread(&back, sizeof back, 1, f) == 1 && fread(ev, sizeof ev[0], 2, f) == 2);
    if (f != NULL)
        fclose(f);
    CHECK(c, memcmp(back.magic, HM_DETECT_MAGIC, 8) == 0);
    CHECK(c, back.record_count == 2 && back.record_bytes == 24 && back.nranks == 2);
    CHECK(c, back.realtime_minus_clock_ns == 42);
    CHECK(c, ev[1].duration_ns == 50000);
    unlink(path);
    CHECK(c, hm_detect_write_file("/nonexistent/dir/x.bin", &h, NULL, 0, &err) != 0);
    CHECK(c, strstr(err.msg, "/nonexistent/dir/x.bin") != NULL);
    hm_detect_recorder_free(&r);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_buckets(&c);
    test_quantiles(&c);
    test_recorder(&c);
    return hm_test_finish("test_noise_detect_record", &c);
}
