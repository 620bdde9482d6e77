/* What hushmon-bench prints: a table row per result as it is measured and,
 * at the end, one JSON document (schema in docs/bench.md). Rank 0 only. */
#ifndef HM_BENCH_REPORT_H
#define HM_BENCH_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "bench_measure.h"
#include "bench_options.h"
#include "bench_summary.h"
#include "op.h"

typedef struct hm_bench_result {
    const hm_op *op;
    int64_t size;
    int nprocs;
    hm_bench_method method;
    int root;
    int pass;                 /* 0-based pass (--passes) */
    hm_buffer_mode buffers;   /* the policy this result used */
    size_t n_total;
    int late, overrun;
    int late_stage_start, late_previous, late_woke; /* late starts by cause (sync) */
    int wide_window;          /* valid launches set aside for a wide window (sync) */
    int iterations, warmup;   /* osu / imb: the tool's counts */
    bool rank_samples;        /* samples are the ranks' means (osu, imb) */
    hm_bench_summary local;   /* max over ranks of each rank's own time */
    hm_bench_summary global;  /* latest end - scheduled start (sync only) */
    bool has_global;
    double delta_final_s;
    /* Judged against the clock error (sync only; loop methods compare no
     * clocks across ranks): clock_valid false means not to be used. */
    bool clock_judged, clock_valid;
    double clock_allowed_s;   /* the clock error this result tolerates */
    double *rank_stats;       /* mean, min, max of rank r at 3r..3r+2 (--per-rank) */
    hm_bench_samples samples; /* every launch (--raw) */
} hm_bench_result;

void hm_bench_result_free(hm_bench_result *r);

typedef struct hm_bench_meta {
    char mpi_library[256];
    int mpi_version, mpi_subversion;
    const char *timer;
    double timer_resolution_ns;
    const char *sync;
    int sync_rounds;
    bool sync_ping_shared;
    int sync_nodes, sync_ranks;
    double sync_elapsed_s;
    double residual_max_s, drift_max_s, residual_end_max_s;
    /* Largest disagreement between two ranks' synchronized clocks, right
     * after the sync and at the end of the run (residual spread). */
    double clock_error_start_s, clock_error_end_s;
    double clock_error_share;     /* --clock-error-share */
    size_t results_clock_invalid; /* synchronized results that failed the check */
    double simulated_skew_s;
    double *offsets_s;        /* offset of each rank's clock to rank 0's */
    char **hosts;
    size_t n_hosts;
    int nprocs;
    double rotate_bytes;
    double spin_us;           /* --spin-us in effect */
    double late_tolerance_us; /* --late-tolerance-us in effect */
    bool oversubscribed;      /* a node had more ranks than CPUs */
    char started_at[32];
} hm_bench_meta;

void hm_bench_table_header(FILE *out);
void hm_bench_table_row(FILE *out, const hm_bench_result *r);
/* With several passes: one line per point over its passes (median, the
 * interval, spread, disagreement, invalid launches). */
void hm_bench_table_points(FILE *out, const hm_bench_opts *o, const hm_bench_meta *m,
                           const hm_bench_result *results, size_t n);

/* Writes the whole JSON document; returns 0 or -1 on a write error. */
int hm_bench_write_json(FILE *out, const hm_bench_opts *o, const hm_bench_meta *m,
                        const hm_bench_result *results, size_t n);

#endif
