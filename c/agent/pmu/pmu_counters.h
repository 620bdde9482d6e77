/* Which counters a set of event groups takes on one CPU, by the rule the
 * kernel's x86 scheduler applies (arch/x86/events/core.c,
 * perf_assign_events): an event a fixed counter can count goes there while
 * it is free and takes a general-purpose counter when another event holds
 * it; an event that only a fixed counter can count (a pseudo-encoding such
 * as ref-cycles or slots, a PERF_METRICS field) has no such fallback.
 * The profile check and the simulated PMU both use it, so a group the
 * simulation places is one the kernel would place on the same PMU. */
#ifndef HM_PMU_COUNTERS_H
#define HM_PMU_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

#include "pmu_profile.h"

typedef struct hm_pmu_counter_use {
    int gp_only;                        /* events only a general-purpose counter counts */
    uint32_t fixed_only;                /* fixed counters held by fixed-only events */
    int fixed_or_gp[HM_PMU_FIXED_MAX];  /* events that prefer fixed counter k */
} hm_pmu_counter_use;

/* Adds one event. -1 when it is fixed-only and another fixed-only event
 * already holds its counter: the two can never be counted together. */
int hm_pmu_counter_use_add(hm_pmu_counter_use *u, const hm_pmu_event *e);
/* General-purpose counters the events added so far need. */
int hm_pmu_counter_use_gp(const hm_pmu_counter_use *u);

/* Whether <root>/sys/devices/system/cpu/smt/active says SMT is on. A
 * kernel without SMT control (or a fixture tree) has no such file: then
 * true, the smaller general-purpose count, which every group fits. */
bool hm_cpu_smt_active(const char *root);
/* The general-purpose counters per CPU of p's PMU in that SMT state. */
int hm_pmu_profile_gp_counters(const hm_pmu_profile *p, bool smt_active);

#endif
