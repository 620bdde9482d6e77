/* The probe's two kernels: memory bandwidth (a STREAM-like triad over
 * arrays far beyond the last-level cache) and peak double-precision FLOP
 * rate (independent FMA chains, no memory traffic). Each runs on a team
 * (probe_team.h) over the CPUs given and reports the best repetition. */
#ifndef HM_PROBE_KERNELS_H
#define HM_PROBE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"
#include "probe_team.h"

typedef struct hm_probe_triad {
    int64_t array_bytes;     /* one array, all threads' slices together */
    int64_t passes_per_rep;  /* passes over the arrays in one timed repetition */
    double bytes_per_rep;    /* 3 arrays x 8 bytes x elements x passes (STREAM's count) */
    double gb_per_s;         /* bytes_per_rep / best repetition / 1e9 */
    double median_gb_per_s;
    hm_probe_timing timing;
} hm_probe_triad;

typedef struct hm_probe_fma {
    const char *isa;         /* the kernel's instruction set: avx512f, avx2+fma, sse2 */
    int lanes;               /* doubles per vector */
    int chains;              /* independent accumulators per thread */
    int64_t iterations;      /* per thread and repetition */
    double flop_per_rep;     /* threads x iterations x chains x lanes x 2 */
    double gflop_per_s;
    double median_gflop_per_s;
    hm_probe_timing timing;
} hm_probe_fma;

/* a[i] = b[i] + s * c[i]; the result is checked after the last pass. */
int hm_probe_triad_run(const int *cpus, size_t n, int64_t array_bytes, double budget_s,
                       hm_probe_triad *out, hm_error *err);
int hm_probe_fma_run(const int *cpus, size_t n, double budget_s, hm_probe_fma *out,
                     hm_error *err);

#endif
