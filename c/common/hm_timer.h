/* Timers for measurement. A timer reads a clock in integer nanoseconds;
 * the clock is named so reports can say which one was used.
 *
 * Clocks that are system-wide on a node (CLOCK_MONOTONIC, _RAW, gettimeofday,
 * an invariant TSC) give the same reading in every process of the node, so
 * clock synchronization can skip ping-pongs between ranks that share one.
 * For the TSC that holds only when the processes convert ticks with the same
 * calibration (hm_timer_init_tsc_shared): the counter is one per node, but a
 * frequency calibrated by each process on its own differs in the sixth digit,
 * which over the ~10^13 ticks since boot is milliseconds. */
#ifndef HM_TIMER_H
#define HM_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "hm_error.h"

typedef enum hm_timer_kind {
    HM_TIMER_MONOTONIC,
    HM_TIMER_MONOTONIC_RAW,
    HM_TIMER_GETTIMEOFDAY,
    HM_TIMER_TSC,
    HM_TIMER_EXTERNAL,   /* a function supplied by the caller, e.g. MPI_Wtime */
} hm_timer_kind;

typedef struct hm_timer {
    hm_timer_kind kind;
    const char *name;
    bool system_wide;          /* same reading in every process on the node */
    double resolution_ns;      /* smallest step observed or reported */
    double tsc_ticks_per_ns;   /* TSC only: calibrated frequency */
    uint64_t tsc_origin;       /* TSC only: the tick read as 0 ns */
    double (*external_now_s)(void);  /* EXTERNAL only */
} hm_timer;

/* Names accepted by hm_timer_init, for --help and error messages. */
extern const char *const hm_timer_names[];

/* Sets up the timer called `name` ("monotonic", "monotonic_raw",
 * "gettimeofday", "tsc"). For "tsc" checks for an invariant TSC and
 * calibrates its frequency against CLOCK_MONOTONIC_RAW (about 50 ms).
 * Returns 0, or -1 with err set (unknown name, no invariant TSC). */
int hm_timer_init(hm_timer *t, const char *name, hm_error *err);

/* A TSC timer that converts ticks with a calibration made elsewhere (the
 * node leader's, shared by hm_mpi_timer_init), so every process using the
 * same ticks_per_ns and origin reads the same nanoseconds from the node's one
 * counter. Checks for an invariant TSC; returns 0, or -1 with err set. */
int hm_timer_init_tsc_shared(hm_timer *t, double ticks_per_ns, uint64_t origin, hm_error *err);

/* An EXTERNAL timer around a function returning seconds (MPI_Wtime). */
void hm_timer_init_external(hm_timer *t, const char *name, double (*now_s)(void),
                            bool system_wide, double resolution_ns);

/* Current reading in nanoseconds. */
int64_t hm_timer_now_ns(const hm_timer *t);

/* Raw TSC read, serialized with rdtscp. Returns 0 on non-x86 builds. */
uint64_t hm_tsc_read(void);

/* True if the CPU reports an invariant (constant-rate, non-stop) TSC. */
bool hm_tsc_is_invariant(void);

/* CLOCK_MONOTONIC in nanoseconds; the clock for schedules and periods. */
int64_t hm_monotonic_ns(void);
/* CLOCK_REALTIME in nanoseconds; the clock for timestamps in data. */
int64_t hm_realtime_ns(void);

/* Sleeps until the CLOCK_REALTIME / CLOCK_MONOTONIC deadline in ns
 * (absolute, so periodic loops do not accumulate drift). Returns 0 or -1
 * if interrupted by a signal. */
int hm_sleep_until_realtime_ns(int64_t deadline_ns);
int hm_sleep_until_monotonic_ns(int64_t deadline_ns);

#endif
