/* Where hardware counts come from: the kernel (perf_event_open) or the
 * simulated PMU. Both give the same thing the kernel gives: per group of
 * events, the raw counts plus the time the group was enabled and the time
 * it was actually on the counters. The multiplexing logic above this
 * interface (pmu_mux.c) is the same for both, so the simulation tests
 * the code that runs on real machines. */
#ifndef HM_PMU_BACKEND_H
#define HM_PMU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"
#include "pmu_profile.h"

typedef struct hm_pmu_reading {
    uint64_t value[HM_PMU_GROUP_EVENTS_MAX];
    uint64_t enabled_ns;   /* time the group was enabled */
    uint64_t running_ns;   /* time it was on the counters */
} hm_pmu_reading;

typedef struct hm_pmu_backend_ops {
    const char *name;
    /* Opens events[0..n) on cpu as one group (all on the counters at once,
     * or none), enabled or not. Sets *handle. */
    int (*open_group)(void *state, int cpu, const hm_pmu_event *const *events, size_t n,
                      bool enabled, int *handle, hm_error *err);
    int (*set_enabled)(void *state, int handle, bool enabled, hm_error *err);
    int (*read_group)(void *state, int handle, hm_pmu_reading *r, hm_error *err);
    void (*destroy)(void *state);
} hm_pmu_backend_ops;

typedef struct hm_pmu_backend {
    const hm_pmu_backend_ops *ops;
    void *state;
} hm_pmu_backend;

/* The kernel. hm_pmu_perf_probe says whether this machine has a hardware
 * PMU at all (fills err with the reason when it has not). */
int hm_pmu_perf_probe(hm_error *err);
int hm_pmu_perf_backend(hm_pmu_backend *be, size_t max_groups, hm_error *err);

#endif
