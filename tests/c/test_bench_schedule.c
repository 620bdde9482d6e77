/* The launch schedule of hushmon-bench: launch validity, the adaptive
 * window and the stop rules (MPIPerf defaults). */
#include <math.h>

#include "bench_schedule.h"
#include "hm_test.h"

static void test_defaults(hm_test_counts *c)
{
    hm_schedule_params p;
    hm_stop_rule r;
    hm_schedule_params_default(&p);
    hm_stop_rule_default(&r);
    CHECK(c, p.launches_per_stage == 8 && p.warmup_launches == 4);
    CHECK_NEAR(c, p.invalid_fraction, 0.25, 0);
    CHECK_NEAR(c, p.gamma, 1.1, 0);
    CHECK(c, p.shrink_after_calm == 1);
    CHECK_NEAR(c, p.wide_factor, 4, 0);
    CHECK_NEAR(c, r.rse_max, 0.05, 0);
    CHECK(c, r.min_valid == 10 && r.max_total == 100 && r.max_valid == 30);
}

static hm_launch_status classify(int64_t arrive, int64_t start, int64_t end, int64_t tol)
{
    /* scheduled at 100, window until 200 */
    hm_launch_times t = {arrive, 100, start, end, 200};
    return hm_launch_classify(&t, tol);
}

static void test_classify(hm_test_counts *c)
{
    /* Ready before the start, left the spin just after it, done in time. */
    CHECK(c, classify(90, 101, 150, 10) == HM_LAUNCH_VALID);
    /* Ready exactly at the start still counts as on time. */
    CHECK(c, classify(100, 100, 150, 10) == HM_LAUNCH_VALID);
    /* Ending exactly at the window end is inside it. */
    CHECK(c, classify(90, 100, 200, 10) == HM_LAUNCH_VALID);
    CHECK(c, classify(101, 101, 150, 10) == HM_LAUNCH_LATE);
    CHECK(c, classify(90, 100, 201, 10) == HM_LAUNCH_OVERRUN);
    /* Ready in time but descheduled while spinning: left the wait 30 ns
     * after the start with a 10 ns tolerance: late, though it ended in time. */
    CHECK(c, classify(90, 130, 190, 10) == HM_LAUNCH_LATE);
    CHECK(c, classify(90, 110, 190, 10) == HM_LAUNCH_VALID);
    /* Late and overrun: counted once, as late. */
    CHECK(c, classify(150, 150, 300, 10) == HM_LAUNCH_LATE);
    CHECK(c, hm_launch_combine(false, false) == HM_LAUNCH_VALID);
    CHECK(c, hm_launch_combine(true, true) == HM_LAUNCH_LATE);
    CHECK(c, hm_launch_combine(false, true) == HM_LAUNCH_OVERRUN);
}

static void test_warmup_sets_delta(hm_test_counts *c)
{
    hm_schedule_params p;
    hm_schedule_params_default(&p);
    hm_delta_state st = {123, 5, 0, 0};
    /* delta_1 = gamma * (tau'_0 - tau_0) / k' = 1.1 * 4000 / 4 */
    hm_schedule_after_warmup(&p, 4000, 0, 0, &st);
    CHECK_NEAR(c, st.delta_ns, 1100, 1e-9);
    CHECK(c, st.calm_stages == 0);
    hm_schedule_after_warmup(&p, -5, 0, 0, &st); /* clock oddity: no negative window */
    CHECK_NEAR(c, st.delta_ns, 0, 0);
    /* The turnaround is added to the window, not scaled by gamma. */
    hm_schedule_after_warmup(&p, 4000, 0, 150, &st);
    CHECK_NEAR(c, st.delta_ns, 1250, 1e-9);
    CHECK_NEAR(c, st.turnaround_ns, 150, 0);
    /* A typical warm-up launch replaces the mean span: one rank
     * descheduled for 17 ms among 4 launches of 0.7 us does not set a
     * window of milliseconds. */
    hm_schedule_after_warmup(&p, 17e6, 700, 150, &st);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 700 + 150, 1e-9);
}

/* The (1 - g) quantile of a stage's launch times: with g = 0.25 and k = 8
 * the 6th smallest, whatever the order and the two largest. */
static void test_stage_typical(hm_test_counts *c)
{
    double launches[8] = {21884e3, 7.3e3, 0.26e3, 0.18e3, 0.15e3, 0.16e3, 0.15e3, 0.17e3};
    CHECK_NEAR(c, hm_stage_typical(launches, 8, 0.25), 0.26e3, 1e-9);
    double even[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    CHECK_NEAR(c, hm_stage_typical(even, 8, 0.25), 6, 0);
    CHECK_NEAR(c, hm_stage_typical(even, 8, 0), 8, 0);
    CHECK_NEAR(c, hm_stage_typical(even, 8, 0.5), 4, 0);
    /* 4 warm-up launches: the 3rd smallest. */
    double warm[4] = {17e6, 700, 650, 720};
    CHECK_NEAR(c, hm_stage_typical(warm, 4, 0.25), 720, 0);
    CHECK_NEAR(c, hm_stage_typical(warm, 0, 0.25), 0, 0);
}

/* A failed stage grows the window by the seed's span rule, at least by
 * gamma, and at least to gamma times its typical launch; the span of a
 * stage with one launch descheduled for 21 ms is capped at wide_factor
 * times the narrowest window used. */
static void test_growth_by_span_typical_and_cap(hm_test_counts *c)
{
    hm_schedule_params p;
    hm_schedule_params_default(&p);
    hm_delta_state st = {1000, 0, 100, 0};
    hm_stage_outcome cascade = {.launches = 8, .invalid = 7, .span_ns = 21.9e6,
                                .longest_ns = 0, .typical_ns = 260};
    CHECK(c, hm_schedule_next_delta(&p, &cascade, &st) == 1);
    CHECK_NEAR(c, st.delta_ns, 4000, 1e-9); /* not 1.1 * 21.9 ms / 8 */
    CHECK(c, st.calm_stages == 0);
    /* Too small a window: 6 of 8 launches took 1500 ns; the typical launch
     * asks more than the span (1.1 * 12000 / 8 = 1650). */
    st = (hm_delta_state){1000, 0, 100, 0};
    hm_stage_outcome tight = {.launches = 8, .invalid = 7, .span_ns = 12000, .typical_ns = 1500};
    CHECK(c, hm_schedule_next_delta(&p, &tight, &st) == 1);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 1500 + 100, 1e-9);
    /* At least gamma * delta, as with the seed's rule. */
    st.delta_ns = 1700;
    tight.typical_ns = 1550;
    CHECK(c, hm_schedule_next_delta(&p, &tight, &st) == 1);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 1700, 1e-9);
    /* The shrink floor takes the typical launch when it is longer than
     * the longest valid one (launches that overran were not valid). */
    hm_stage_outcome some = {.launches = 8, .invalid = 2, .longest_ns = 900, .typical_ns = 1200};
    st.delta_ns = 9000;
    CHECK(c, hm_schedule_next_delta(&p, &some, &st) == -1);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 1200 + 100, 1e-9);
    /* ... or when no launch was valid. */
    hm_stage_outcome none_valid = {.launches = 8, .invalid = 1, .typical_ns = 300};
    st.delta_ns = 9000;
    CHECK(c, hm_schedule_next_delta(&p, &none_valid, &st) == -1);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 300 + 100, 1e-9);
    /* Oversubscribed nodes (lateness_grows): the seed's span rule, no cap. */
    p.lateness_grows = true;
    st = (hm_delta_state){1000, 0, 100, 0};
    CHECK(c, hm_schedule_next_delta(&p, &cascade, &st) == 1);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 21.9e6 / 8, 1e-3);
}

static void test_delta_grows(hm_test_counts *c)
{
    hm_schedule_params p;
    hm_schedule_params_default(&p);
    p.shrink_after_calm = 2; /* the calm count is what is tested */
    hm_delta_state st = {1000, 1, 0, 0};
    /* 3 of 8 invalid (> 25 %): delta = gamma * span / k = 1.1 * 16000 / 8. */
    hm_stage_outcome o = {.launches = 8, .invalid = 3, .span_ns = 16000, .longest_ns = 900};
    CHECK(c, hm_schedule_next_delta(&p, &o, &st) == 1);
    CHECK_NEAR(c, st.delta_ns, 2200, 1e-9);
    CHECK(c, st.calm_stages == 0);
    /* Late starts with an on-time span: the gamma * delta floor applies. */
    st.delta_ns = 1000;
    o.span_ns = 8000;
    hm_schedule_next_delta(&p, &o, &st);
    CHECK_NEAR(c, st.delta_ns, 1100, 1e-9);
    /* Exactly 25 % invalid (2 of 8) is not "more than g": unchanged. */
    st.delta_ns = 1000;
    o.invalid = 2;
    CHECK(c, hm_schedule_next_delta(&p, &o, &st) == 0);
    CHECK_NEAR(c, st.delta_ns, 1000, 0);
}

static void test_delta_shrinks_after_calm_stages(hm_test_counts *c)
{
    hm_schedule_params p;
    hm_schedule_params_default(&p);
    p.shrink_after_calm = 2; /* the calm count is what is tested */
    hm_delta_state st = {11000, 0, 0, 0};
    hm_stage_outcome clean = {.launches = 8, .invalid = 0, .span_ns = 88000, .longest_ns = 2000};
    /* First clean stage: wait for a second one. */
    CHECK(c, hm_schedule_next_delta(&p, &clean, &st) == 0);
    CHECK(c, st.calm_stages == 1);
    /* Second: down to gamma * the longest launch (1.1 * 2000). */
    CHECK(c, hm_schedule_next_delta(&p, &clean, &st) == -1);
    CHECK_NEAR(c, st.delta_ns, 2200, 1e-9);
    CHECK(c, st.calm_stages == 0);
    /* A window blown up by one disturbed stage comes back in one step. */
    st.delta_ns = 5e6;
    st.calm_stages = 1;
    hm_schedule_next_delta(&p, &clean, &st);
    CHECK_NEAR(c, st.delta_ns, 2200, 1e-9);
    /* ... and never grows by "shrinking" when the floor is above delta. */
    st.delta_ns = 2000;
    st.calm_stages = 1;
    CHECK(c, hm_schedule_next_delta(&p, &clean, &st) == 0);
    CHECK_NEAR(c, st.delta_ns, 2000, 0);
    /* A stage with a few (<= g) invalid launches is calm too: 2 of 8. */
    hm_stage_outcome some = {.launches = 8, .invalid = 2, .span_ns = 1, .longest_ns = 3000};
    st.delta_ns = 90000;
    st.calm_stages = 1;
    CHECK(c, hm_schedule_next_delta(&p, &some, &st) == -1);
    CHECK_NEAR(c, st.delta_ns, 3300, 1e-9);
    /* A stage that needed a larger window resets the count. */
    hm_stage_outcome bad = {.launches = 8, .invalid = 3, .span_ns = 8000, .longest_ns = 900};
    st.calm_stages = 1;
    hm_schedule_next_delta(&p, &bad, &st);
    CHECK(c, st.calm_stages == 0);
    /* No valid launch: nothing to shrink towards. */
    hm_stage_outcome none = {.launches = 8, .invalid = 0, .span_ns = 8000, .longest_ns = 0};
    st.delta_ns = 7000;
    st.calm_stages = 1;
    CHECK(c, hm_schedule_next_delta(&p, &none, &st) == 0);
    /* shrink_after_calm = 0 turns shrinking off. */
    p.shrink_after_calm = 0;
    st.delta_ns = 5000;
    for (int i = 0; i < 5; i++)
        hm_schedule_next_delta(&p, &clean, &st);
    CHECK_NEAR(c, st.delta_ns, 5000, 0);
}

/* A launch that used its whole window still needs the turnaround before
 * the next one can start on time: the shrink floor keeps that gap. Without
 * it, a small Bcast (0.4 us, ~0.15 us of bookkeeping) lost most launches
 * to late starts. */
static void test_shrink_keeps_turnaround(hm_test_counts *c)
{
    hm_schedule_params p;
    hm_schedule_params_default(&p);
    hm_delta_state st = {90000, 1, 0, 0};
    hm_stage_outcome o = {
        .launches = 8, .invalid = 0, .span_ns = 1, .longest_ns = 400, .turnaround_ns = 150};
    CHECK(c, hm_schedule_next_delta(&p, &o, &st) == -1);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 400 + 150, 1e-9);
    CHECK_NEAR(c, st.turnaround_ns, 150, 0);
    /* A stage that measured no turnaround keeps the last one measured. */
    o.turnaround_ns = 0;
    st.delta_ns = 90000;
    st.calm_stages = 1;
    hm_schedule_next_delta(&p, &o, &st);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 400 + 150, 1e-9);
}

/* Late starts a wider window does not prevent (woke late, stage start
 * late) do not grow it, except where lateness_grows says so. */
static void test_only_window_causes_grow(hm_test_counts *c)
{
    hm_schedule_params p;
    hm_schedule_params_default(&p);
    p.shrink_after_calm = 2; /* the calm count is what is tested */
    p.wide_factor = 0;       /* no cap on growth here */
    CHECK(c, !p.lateness_grows);
    hm_delta_state st = {1000, 0, 0, 0};
    hm_stage_outcome woke = {
        .launches = 8, .invalid = 4, .not_window = 4, .span_ns = 80000, .longest_ns = 900};
    CHECK(c, hm_schedule_next_delta(&p, &woke, &st) == 0);
    CHECK_NEAR(c, st.delta_ns, 1000, 0);
    CHECK(c, st.calm_stages == 1);
    /* 3 of 4 invalid were busy with the previous launch: more than g. */
    woke.not_window = 1;
    st.calm_stages = 0;
    CHECK(c, hm_schedule_next_delta(&p, &woke, &st) == 1);
    CHECK_NEAR(c, st.delta_ns, 11000, 1e-9);
    /* The seed's count (oversubscribed nodes): every invalid launch. */
    p.lateness_grows = true;
    woke.not_window = 4;
    st.delta_ns = 1000;
    CHECK(c, hm_schedule_next_delta(&p, &woke, &st) == 1);
}

/* Valid launches timed under a window more than F times the point's
 * narrowest are set aside; invalid ones and narrow ones stay as they are. */
static void test_set_aside_wide(hm_test_counts *c)
{
    double windows[6] = {13e6, 13e6, 40e3, 1500, 1400, 5600};
    bool valid[6] = {true, false, true, true, true, true};
    CHECK(c, hm_schedule_set_aside_wide(windows, valid, 6, 4) == 2);
    CHECK(c, !valid[0] && !valid[1] && !valid[2] && valid[3] && valid[4] && valid[5]);
    /* Nothing new the second time; 5600 = 4 x 1400 is not "more than". */
    CHECK(c, hm_schedule_set_aside_wide(windows, valid, 6, 4) == 0);
    /* A narrower window later sets aside more. */
    windows[5] = 1000;
    CHECK(c, hm_schedule_set_aside_wide(windows, valid, 6, 1.45) == 1);
    CHECK(c, !valid[3] && valid[4]);
    /* 0 turns it off; empty input is fine. */
    bool all[2] = {true, true};
    double wide[2] = {1, 1e9};
    CHECK(c, hm_schedule_set_aside_wide(wide, all, 2, 0) == 0 && all[1]);
    CHECK(c, hm_schedule_set_aside_wide(wide, all, 0, 4) == 0);
}

/* Growth stops at wide_factor times the narrowest window a stage used:
 * wider windows would only time launches that are set aside. */
static void test_growth_capped_by_narrowest(hm_test_counts *c)
{
    hm_schedule_params p;
    hm_schedule_params_default(&p);
    hm_delta_state st = {1000, 0, 0, 0};
    /* A burst: 6 of 8 launches took 5 ms. */
    hm_stage_outcome burst = {.launches = 8, .invalid = 8, .span_ns = 40e6, .typical_ns = 5e6};
    CHECK(c, hm_schedule_next_delta(&p, &burst, &st) == 1);
    CHECK_NEAR(c, st.delta_ns, 4000, 1e-9);
    CHECK_NEAR(c, st.narrowest_ns, 1000, 0);
    /* At the cap: stays there. */
    CHECK(c, hm_schedule_next_delta(&p, &burst, &st) == 0);
    CHECK_NEAR(c, st.delta_ns, 4000, 1e-9);
    /* A window above the cap (set by the warm-up) is not cut by it. */
    st.delta_ns = 9000;
    CHECK(c, hm_schedule_next_delta(&p, &burst, &st) == 0);
    CHECK_NEAR(c, st.delta_ns, 9000, 0);
    /* Off with wide_factor 0, and on oversubscribed nodes. */
    st = (hm_delta_state){1000, 0, 0, 0};
    p.wide_factor = 0;
    hm_schedule_next_delta(&p, &burst, &st);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 5e6, 1e-3);
    st = (hm_delta_state){1000, 0, 0, 0};
    p.wide_factor = 4;
    p.lateness_grows = true;
    hm_schedule_next_delta(&p, &burst, &st);
    CHECK_NEAR(c, st.delta_ns, 1.1 * 40e6 / 8, 1e-3);
}

static void test_stop_rules(hm_test_counts *c)
{
    hm_stop_rule r;
    hm_stop_rule_default(&r);
    /* RSE branch: needs both the error bound and 10 valid launches. */
    CHECK(c, !hm_stop_reached(&r, 16, 9, 0.01));
    CHECK(c, hm_stop_reached(&r, 16, 10, 0.05));
    CHECK(c, !hm_stop_reached(&r, 16, 10, 0.0501));
    CHECK(c, !hm_stop_reached(&r, 16, 12, NAN));
    /* Count caps: more than 100 total, or more than 30 valid. */
    CHECK(c, !hm_stop_reached(&r, 100, 5, 0.9));
    CHECK(c, hm_stop_reached(&r, 101, 5, 0.9));
    CHECK(c, !hm_stop_reached(&r, 40, 30, 0.9));
    CHECK(c, hm_stop_reached(&r, 40, 31, 0.9));
    /* All settable. */
    r.rse_max = 0.01;
    r.min_valid = 3;
    CHECK(c, hm_stop_reached(&r, 8, 3, 0.01));
    CHECK(c, !hm_stop_reached(&r, 8, 3, 0.02));
}

static void test_clock_error(hm_test_counts *c)
{
    double allowed = 0;
    /* The reported bug: clocks 1818 us apart, Bcast "measured" at 1839 us
     * and WaitPatternUp at 2.15 us: neither survives. */
    CHECK(c, !hm_clock_error_acceptable(1818143, 1838937, 0.1, 100, &allowed));
    CHECK_NEAR(c, allowed, 183893.7, 1e-6);
    CHECK(c, !hm_clock_error_acceptable(1818143, 2147, 0.1, 100, NULL));
    /* Working clocks (34 ns apart) and a 0.45 us Bcast: 10 % of it is 45 ns. */
    CHECK(c, hm_clock_error_acceptable(34, 450, 0.1, 100, &allowed));
    CHECK_NEAR(c, allowed, 100, 0);
    CHECK(c, hm_clock_error_acceptable(200, 2147, 0.1, 100, NULL));
    CHECK(c, !hm_clock_error_acceptable(250, 2147, 0.1, 100, NULL));
    /* Near-zero times (WaitPatternNull) are judged by the late tolerance. */
    CHECK(c, hm_clock_error_acceptable(60, 47, 0.1, 100, NULL));
    CHECK(c, !hm_clock_error_acceptable(101, 47, 0.1, 100, NULL));
    /* No valid launch: the tolerance alone; an unmeasured error never passes. */
    CHECK(c, hm_clock_error_acceptable(100, NAN, 0.1, 100, &allowed));
    CHECK_NEAR(c, allowed, 100, 0);
    CHECK(c, !hm_clock_error_acceptable(NAN, 2000, 0.1, 100, NULL));
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_defaults(&c);
    test_classify(&c);
    test_warmup_sets_delta(&c);
    test_stage_typical(&c);
    test_growth_by_span_typical_and_cap(&c);
    test_delta_grows(&c);
    test_delta_shrinks_after_calm_stages(&c);
    test_shrink_keeps_turnaround(&c);
    test_only_window_causes_grow(&c);
    test_set_aside_wide(&c);
    test_growth_capped_by_narrowest(&c);
    test_stop_rules(&c);
    test_clock_error(&c);
    return hm_test_finish("test_bench_schedule", &c);
}
