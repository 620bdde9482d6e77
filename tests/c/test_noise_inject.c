/* hushmon-inject's schedule, work allocation and duty-cycle check. The short
 * real runs below check counts and CPU-time floors only (work is measured on
 * the thread's CPU clock, so a busy machine makes it slower, never shorter). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>

#include "hm_test.h"
#include "inject_run.h"
#include "inject_shape.h"

#define MS 1000000LL
#define S 1000000000LL

static hm_inject_config base_config(void)
{
    return (hm_inject_config){.level_pct = 1.0, .period_ns = S, .duration_ns = 10 * S,
                              .shape = hm_inject_shape_find("sum"), .burst_every = 10,
                              .start = HM_INJECT_START_NOW, .work_clock = HM_INJECT_WORK_CPU};
}

static void test_first_start(hm_test_counts *c)
{
    int64_t now = 1000 * S + 250 * MS;
    CHECK(c, hm_inject_first_start_ns(now, S, HM_INJECT_START_BOUNDARY, 0, 0) == 1001 * S);
    CHECK(c, hm_inject_first_start_ns(now, S, HM_INJECT_START_BOUNDARY, 300 * MS, 0) ==
                 1000 * S + 300 * MS);
    CHECK(c, hm_inject_first_start_ns(now, S, HM_INJECT_START_BOUNDARY, 100 * MS, 0) ==
                 1001 * S + 100 * MS);
    /* Exactly on a boundary: the next one, never "now" (strictly after). */
    CHECK(c, hm_inject_first_start_ns(1000 * S, S, HM_INJECT_START_BOUNDARY, 0, 0) == 1001 * S);
    CHECK(c, hm_inject_first_start_ns(now, S, HM_INJECT_START_RANDOM, 0, 0.5) ==
                 1000 * S + 500 * MS);
    CHECK(c, hm_inject_first_start_ns(now, S, HM_INJECT_START_RANDOM, 0, 0.1) ==
                 1001 * S + 100 * MS);
    CHECK(c, hm_inject_first_start_ns(now, S, HM_INJECT_START_NOW, 0, 0) == now);
    /* A 0.2 s period lines up on multiples of 0.2 s. */
    CHECK(c, hm_inject_first_start_ns(now, 200 * MS, HM_INJECT_START_BOUNDARY, 0, 0) ==
                 1000 * S + 400 * MS);
}

static void test_work(hm_test_counts *c)
{
    hm_inject_config cfg = base_config();
    CHECK(c, hm_inject_work_ns(&cfg, 0) == 10 * MS);
    cfg.level_pct = 0.001;
    CHECK(c, hm_inject_work_ns(&cfg, 5) == 10000);
    cfg.level_pct = 0;
    CHECK(c, hm_inject_work_ns(&cfg, 5) == 0);
    cfg.level_pct = 100;
    CHECK(c, hm_inject_work_ns(&cfg, 3) == S);

    /* Burst: the work of 4 periods in every 4th period, the same average. */
    cfg = base_config();
    cfg.shape = hm_inject_shape_find("burst");
    cfg.burst_every = 4;
    int64_t total = 0;
    for (int64_t k = 0; k < 8; k++)
        total += hm_inject_work_ns(&cfg, k);
    CHECK(c, hm_inject_work_ns(&cfg, 0) == 0);
    CHECK(c, hm_inject_work_ns(&cfg, 3) == 40 * MS);
    CHECK(c, hm_inject_work_ns(&cfg, 7) == 40 * MS);
    CHECK(c, total == 8 * 10 * MS);
    /* Never more than the N periods it has. */
    cfg.level_pct = 100;
    CHECK(c, hm_inject_work_ns(&cfg, 3) == 4 * S);

    cfg = base_config();
    cfg.duration_ns = 2500 * MS;
    CHECK(c, hm_inject_activation_count(&cfg) == 3);
    cfg.duration_ns = 3 * S;
    CHECK(c, hm_inject_activation_count(&cfg) == 3);
}

static void test_duty_check(hm_test_counts *c)
{
    hm_inject_result r = {.planned_work_ns = 100 * MS, .wall_ns = 10 * S, .cpu_ns = 105 * MS};
    hm_inject_duty d;
    hm_inject_duty_check(&r, &d);
    CHECK_NEAR(c, d.intended_pct, 1.0, 1e-12);
    CHECK_NEAR(c, d.measured_pct, 1.05, 1e-12);
    CHECK_NEAR(c, d.tolerance_pct, 0.1, 1e-12);
    CHECK(c, d.ok);
    r.cpu_ns = 111 * MS;
    hm_inject_duty_check(&r, &d);
    CHECK(c, !d.ok);
    r.cpu_ns = 89 * MS;
    hm_inject_duty_check(&r, &d);
    CHECK(c, !d.ok);
    r.wall_ns = 0;
    hm_inject_duty_check(&r, &d);
    CHECK(c, !d.ok);
}

/* A real run of every shape: 5 activations of 4 ms CPU each in 0.25 s. */
static void test_short_runs(hm_test_counts *c)
{
    static const volatile sig_atomic_t never = 0;
    for (size_t i = 0; hm_inject_shapes[i] != NULL; i++) {
        hm_inject_config cfg = base_config();
        cfg.shape = hm_inject_shapes[i];
        cfg.burst_every = 5;
        cfg.level_pct = 8;
        cfg.period_ns = 50 * MS;
        cfg.duration_ns = 250 * MS;
        hm_inject_result r;
        hm_error err = {{0}};
        int rc = hm_inject_run(&cfg, &never, &r, &err);
        CHECK(c, rc == 0);
        if (rc != 0) {
            fprintf(stderr, "%s: %s\n", cfg.shape->name, err.msg);
            continue;
        }
        size_t expected = cfg.shape->burst ? 1 : 5;
        CHECK(c, r.activation_count == expected);
        CHECK(c, r.planned_work_ns == 20 * MS);
        int64_t cpu = 0;
        for (size_t k = 0; k < r.activation_count; k++) {
            CHECK(c, r.activations[k].cpu_ns >= hm_inject_work_ns(&cfg, (int64_t)k) ||
                         cfg.shape->burst);
            cpu += r.activations[k].cpu_ns;
        }
        CHECK(c, cpu >= 20 * MS);
        CHECK(c, r.cpu_ns >= cpu);
        CHECK(c, r.wall_ns == 250 * MS);
        /* Absolute sleeps: an activation may start late on a loaded machine,
         * never before its period boundary. */
        for (size_t k = 0; k < r.activation_count && !cfg.shape->burst; k++)
            CHECK(c, r.activations[k].start_realtime_ns >=
                         r.t0_realtime_ns + (int64_t)k * cfg.period_ns);
        hm_inject_result_free(&r);
    }
    /* Level 0 is idle: no activations, no work. */
    hm_inject_config cfg = base_config();
    cfg.level_pct = 0;
    cfg.period_ns = 10 * MS;
    cfg.duration_ns = 30 * MS;
    hm_inject_result r;
    hm_error err = {{0}};
    CHECK(c, hm_inject_run(&cfg, &never, &r, &err) == 0);
    CHECK(c, r.activation_count == 0 && r.planned_work_ns == 0);
    hm_inject_result_free(&r);
}

static void test_stop_flag(hm_test_counts *c)
{
    static const volatile sig_atomic_t stopped = 1;
    hm_inject_config cfg = base_config();
    hm_inject_result r;
    hm_error err = {{0}};
    CHECK(c, hm_inject_run(&cfg, &stopped, &r, &err) == 0);
    CHECK(c, r.stopped_by_signal && r.activation_count == 0);
    hm_inject_result_free(&r);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_first_start(&c);
    test_work(&c);
    test_duty_check(&c);
    test_short_runs(&c);
    test_stop_flag(&c);
    return hm_test_finish("test_noise_inject", &c);
}
