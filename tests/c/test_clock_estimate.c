/* Clock-sync arithmetic: offsets from exchanges, the min-RTT tracker and
 * its stop rule, tree shape. */
#include <stdint.h>

#include "hm_clock_estimate.h"
#include "hm_test.h"

static void test_offset(hm_test_counts *c)
{
    /* Remote clock 1000 ns ahead, 200 ns each way: send at 0 (remote 1000),
     * remote reads 1200 on arrival, reply lands at local 400. */
    CHECK(c, hm_clock_offset_from_exchange(0, 1200, 400) == 1000);
    /* Remote clock behind. */
    CHECK(c, hm_clock_offset_from_exchange(5000, 2100, 5200) == -3000);
    /* Asymmetric paths bias the estimate by half the asymmetry: 100 ns
     * there, 300 ns back, true offset 0. */
    CHECK(c, hm_clock_offset_from_exchange(0, 100, 400) == -100);
}

static void test_tracker_keeps_min_rtt(hm_test_counts *c)
{
    hm_rtt_tracker t;
    hm_rtt_tracker_init(&t, 3, 1000);
    CHECK(c, !hm_rtt_tracker_add(&t, 0, 1500, 1000));  /* rtt 1000, offset 1000 */
    CHECK(c, t.best_rtt_ns == 1000 && t.best_offset_ns == 1000);
    CHECK(c, !hm_rtt_tracker_add(&t, 2000, 3100, 2200)); /* rtt 200, offset 1000 */
    CHECK(c, t.best_rtt_ns == 200);
    /* A slower exchange with a different offset must not replace it. */
    CHECK(c, !hm_rtt_tracker_add(&t, 3000, 9000, 3900));
    CHECK(c, t.best_offset_ns == 1000);
    CHECK(c, !hm_rtt_tracker_add(&t, 4000, 5100, 4300));
    /* Third round without improvement: stop (d = 3). */
    CHECK(c, hm_rtt_tracker_add(&t, 5000, 6100, 5300));
    CHECK(c, t.rounds == 5 && t.rounds_since_best == 3);
}

static void test_tracker_improvement_resets(hm_test_counts *c)
{
    hm_rtt_tracker t;
    hm_rtt_tracker_init(&t, 2, 1000);
    CHECK(c, !hm_rtt_tracker_add(&t, 0, 0, 500));
    CHECK(c, !hm_rtt_tracker_add(&t, 0, 0, 600));
    CHECK(c, !hm_rtt_tracker_add(&t, 0, 0, 400)); /* better: counter restarts */
    CHECK(c, !hm_rtt_tracker_add(&t, 0, 0, 450));
    CHECK(c, hm_rtt_tracker_add(&t, 0, 0, 450));
}

static void test_tracker_caps(hm_test_counts *c)
{
    hm_rtt_tracker t;
    /* Ever-improving link: only the hard cap stops it. */
    hm_rtt_tracker_init(&t, 100, 5);
    bool stop = false;
    int rounds = 0;
    for (int64_t rtt = 1000; !stop; rtt -= 10, rounds++)
        stop = hm_rtt_tracker_add(&t, 0, 0, rtt);
    CHECK(c, rounds == 5);
    /* A clock that steps backwards gives a negative RTT: ignored. */
    hm_rtt_tracker_init(&t, 100, 50);
    hm_rtt_tracker_add(&t, 1000, 0, 500);
    CHECK(c, t.best_rtt_ns == INT64_MAX);
}

static void test_names_and_tree(hm_test_counts *c)
{
    hm_sync_algo a;
    hm_error err;
    CHECK(c, hm_sync_algo_parse("ring", &a, &err) == 0 && a == HM_SYNC_RING);
    CHECK(c, hm_sync_algo_parse("tree", &a, &err) == 0 && a == HM_SYNC_TREE);
    CHECK(c, hm_sync_algo_parse("linear", &a, &err) == 0 && a == HM_SYNC_LINEAR);
    CHECK(c, hm_sync_algo_parse("star", &a, &err) == -1);
    CHECK(c, hm_clock_tree_top(2) == 1);
    CHECK(c, hm_clock_tree_top(5) == 4);
    CHECK(c, hm_clock_tree_top(8) == 4);
    CHECK(c, hm_clock_tree_lowbit(6) == 2);
    CHECK(c, hm_clock_tree_lowbit(5) == 1);
    /* Every rank 1..n-1 has a parent that is synced in an earlier round. */
    for (int n = 2; n <= 33; n++) {
        for (int r = 1; r < n; r++) {
            int step = hm_clock_tree_lowbit(r);
            int parent = r - step;
            CHECK(c, step <= hm_clock_tree_top(n));
            CHECK(c, parent == 0 || hm_clock_tree_lowbit(parent) > step);
        }
    }
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_offset(&c);
    test_tracker_keeps_min_rtt(&c);
    test_tracker_improvement_resets(&c);
    test_tracker_caps(&c);
    test_names_and_tree(&c);
    return hm_test_finish("test_clock_estimate", &c);
}
