/* A simulated PMU, for machines without one (and for tests with a known
 * truth). It behaves like the kernel's multiplexing: each CPU has
 * `gp_counters` general-purpose counters plus the fixed counters its
 * events name (hm_pmu_event.fixed, from the profile); a group goes on the
 * counters whole or not at all, by the kernel's placement rule
 * (pmu_counters.h); every `slice_ns` (the kernel's
 * perf_event_mux_interval_ms) the list of enabled groups is rotated by one
 * and groups are placed in order while they fit. Each event counts a
 * synthetic rate trace r(t) (a square wave: `base_per_s`, times
 * `high_factor` during the first `duty` of every `period_ns`), so the
 * exact count of every interval is known. */
#ifndef HM_PMU_SIM_H
#define HM_PMU_SIM_H

#include <stdint.h>

#include "pmu_backend.h"

typedef struct hm_pmu_sim_trace {
    double base_per_s;
    double high_factor;
    int64_t period_ns;
    double duty;          /* 0..1 */
} hm_pmu_sim_trace;

typedef struct hm_pmu_sim hm_pmu_sim;

/* now_ns: the simulation's clock (NULL = advance only by
 * hm_pmu_sim_advance_to, as tests do). */
hm_pmu_sim *hm_pmu_sim_create(int gp_counters, int64_t slice_ns, int64_t (*now_ns)(void));
/* Gives the named event this trace on every CPU (before groups open);
 * events without one get a trace derived from their name. */
int hm_pmu_sim_set_trace(hm_pmu_sim *sim, const char *event, const hm_pmu_sim_trace *t,
                         hm_error *err);
/* Sets traces that make the derived metrics of profile p plausible (IPC
 * near 2 in compute phases, 0.5 in memory phases; memory stalls high in
 * the latter; per CPU 30 GFLOP/s on 0.1 GB/s of memory traffic in the
 * compute phase, 0.25 GFLOP/s on 4 GB/s in the memory phase, where the
 * profile has flops and mem_bytes terms), for the agent's demo mode and
 * the test bed's roofline. */
void hm_pmu_sim_model_workload(hm_pmu_sim *sim, const hm_pmu_profile *p);
/* Runs the simulation forward to t_ns. */
void hm_pmu_sim_advance_to(hm_pmu_sim *sim, int64_t t_ns);
/* The exact count of the handle's event k since the group was opened,
 * counting only while the group was enabled: what a dedicated counter
 * would have shown. */
double hm_pmu_sim_truth(const hm_pmu_sim *sim, int handle, size_t k);
/* Integral of trace t over [a_ns, b_ns): events counted. */
double hm_pmu_sim_trace_integral(const hm_pmu_sim_trace *t, int64_t a_ns, int64_t b_ns);

/* The backend over sim (the backend owns sim from then on). */
void hm_pmu_sim_backend(hm_pmu_backend *be, hm_pmu_sim *sim);

#endif
