/* The injector's schedule and run loop, separate from option parsing so the
 * unit tests drive it directly.
 *
 * Activation k starts at t0 + k * period on CLOCK_REALTIME (absolute
 * sleeps: no drift, and injectors on different nodes started with
 * --start boundary activate at the same instants). */
#ifndef HM_INJECT_RUN_H
#define HM_INJECT_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "hm_error.h"
#include "inject_shape.h"

typedef enum hm_inject_start {
    HM_INJECT_START_BOUNDARY, /* next multiple of the period (+ phase) on CLOCK_REALTIME */
    HM_INJECT_START_RANDOM,   /* a random phase within the period */
    HM_INJECT_START_NOW,
} hm_inject_start;

typedef enum hm_inject_work_clock {
    HM_INJECT_WORK_CPU,  /* work until the thread used level x period of CPU time */
    HM_INJECT_WORK_WALL, /* the seed: work until level x period of wall time passed */
} hm_inject_work_clock;

typedef struct hm_inject_config {
    double level_pct;      /* 0 (idle) .. 100 */
    int64_t period_ns;
    int64_t duration_ns;   /* from the first activation to the end */
    const hm_inject_shape *shape;
    int burst_every;       /* burst shape: one detour every N periods */
    hm_inject_start start;
    int64_t phase_ns;      /* added to the boundary (boundary start only) */
    uint64_t seed;         /* random phase */
    hm_inject_work_clock work_clock;
} hm_inject_config;

typedef struct hm_inject_activation {
    int64_t start_realtime_ns; /* when the work began */
    int64_t wall_ns;           /* how long it took on the wall clock */
    int64_t cpu_ns;            /* thread CPU time it used */
} hm_inject_activation;

typedef struct hm_inject_result {
    int64_t t0_realtime_ns;     /* scheduled start of activation 0 */
    int64_t end_realtime_ns;
    hm_inject_activation *activations;
    size_t activation_count;
    int64_t planned_work_ns;    /* sum of the work asked for */
    int64_t wall_ns;            /* t0 .. end */
    int64_t cpu_ns;             /* process CPU time over t0 .. end */
    bool stopped_by_signal;
} hm_inject_result;

/* Start of activation 0: the first instant strictly after now_ns that is
 * (boundary) a multiple of period_ns plus phase_ns, (random) a multiple
 * plus random_fraction * period_ns, or (now) now_ns itself. Pure. */
int64_t hm_inject_first_start_ns(int64_t now_ns, int64_t period_ns, hm_inject_start start,
                                 int64_t phase_ns, double random_fraction);

/* Work asked of activation k: level x period, or for the burst shape
 * burst_every x level x period in every burst_every-th period (k = N-1,
 * 2N-1, ...) and nothing in the others, capped at the time available. */
int64_t hm_inject_work_ns(const hm_inject_config *cfg, int64_t k);

/* Number of activations that start within the duration. */
int64_t hm_inject_activation_count(const hm_inject_config *cfg);

/* Runs the schedule. `stop` (set by a signal handler) ends it early; the
 * result then covers what ran. Returns 0, or -1 with err set. The caller
 * frees the result with hm_inject_result_free. */
int hm_inject_run(const hm_inject_config *cfg, const volatile sig_atomic_t *stop,
                  hm_inject_result *result, hm_error *err);
void hm_inject_result_free(hm_inject_result *result);

/* The duty-cycle self-check: intended and measured load in percent of the
 * wall time, and whether they agree within max(10 % of the intended load,
 * 0.001 percentage points) (the seed's 1 % +- 0.1 %). */
typedef struct hm_inject_duty {
    double intended_pct, measured_pct, error_pct, tolerance_pct;
    bool ok;
} hm_inject_duty;
void hm_inject_duty_check(const hm_inject_result *result, hm_inject_duty *duty);

#endif
