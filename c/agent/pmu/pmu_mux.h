/* Counting more events than the PMU has counters (seed 003: 8 events,
 * 4 counters), and the metrics derived from them.
 *
 * kernel: every group is enabled and the kernel time-slices them; a count
 *   is scaled by time_enabled / time_running, and running / enabled is
 *   published as the multiplexing ratio.
 * rotate: the agent keeps one group on the counters per period and moves
 *   to the next group at each sample (LIKWID's approach); an event's rate
 *   is the one measured the last time its group was on, so it can be up to
 *   (groups - 1) periods old, and costs no kernel reprogramming in
 *   between.
 * A rate that was never measured is NaN, and so is everything derived
 * from it. */
#ifndef HM_PMU_MUX_H
#define HM_PMU_MUX_H

#include <stdbool.h>
#include <stddef.h>

#include "hm_error.h"
#include "pmu_backend.h"
#include "pmu_profile.h"

typedef enum hm_pmu_mode {
    HM_PMU_MODE_NONE,
    HM_PMU_MODE_KERNEL,
    HM_PMU_MODE_ROTATE,
} hm_pmu_mode;

int hm_pmu_mode_parse(const char *s, hm_pmu_mode *mode, hm_error *err);

typedef struct hm_pmu_mux {
    hm_pmu_profile profile;
    hm_pmu_backend backend;
    hm_pmu_mode mode;
    size_t ncpu;
    int *cpu;                  /* [i]: the CPU number of the i-th counted CPU */
    int *handle;               /* [cpu * ngroups + g] */
    hm_pmu_reading *prev;      /* last reading per handle */
    double *rate;              /* [cpu * nevents + e] events per second, NaN unknown */
    double *mux_ratio;         /* [cpu]: share of time an event is counted */
    size_t active_group;       /* rotate mode */
    size_t samples;
} hm_pmu_mux;

/* Opens every group of profile on the ncpu CPUs listed in cpus (NULL:
 * CPUs 0..ncpu-1) through backend (which the mux owns from then on, also
 * on failure). */
int hm_pmu_mux_open(hm_pmu_mux *m, const hm_pmu_profile *profile, hm_pmu_backend backend,
                    hm_pmu_mode mode, const int *cpus, size_t ncpu, hm_error *err);
/* Reads the counters, updates rates, and in rotate mode moves on to the
 * next group. */
int hm_pmu_mux_sample(hm_pmu_mux *m, hm_error *err);
void hm_pmu_mux_close(hm_pmu_mux *m);

/* Rate of event e summed over CPUs; NaN if any CPU's is unknown. */
double hm_pmu_mux_total_rate(const hm_pmu_mux *m, size_t e);

typedef struct hm_pmu_derived {
    double ipc;              /* instructions per cycle */
    double score_cpu;        /* 100 - Retiring %, seed 003 */
    double mem_stall_pct;    /* seed 003's memory-bound score */
    double flops_per_s;
    double mem_bytes_per_s;  /* the profile's memory-traffic events x bytes each */
} hm_pmu_derived;

/* From per-event rates (indexed like profile->event). */
void hm_pmu_derive(const hm_pmu_profile *p, const double *rate, hm_pmu_derived *out);

#endif
