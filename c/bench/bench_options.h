/* Command line of hushmon-bench. Parsing is MPI-free and deterministic:
 * every rank parses the same argv and reaches the same verdict, so bad
 * input makes every rank exit non-zero without any communication. */
#ifndef HM_BENCH_OPTIONS_H
#define HM_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_schedule.h"
#include "hm_clock_estimate.h"
#include "hm_error.h"
#include "op.h"

/* The methods; their measuring functions are the table in bench_methods.c
 * (same order). */
typedef enum hm_bench_method {
    HM_METHOD_SYNC,         /* MPIPerf: synchronized launches */
    HM_METHOD_LOOP,         /* barrier, then launches back to back, mean per launch */
    HM_METHOD_LOOP_BARRIER, /* a barrier before each launch, only the launches timed */
    HM_METHOD_OSU,          /* OSU Micro-Benchmarks 7.x collective procedure */
    HM_METHOD_IMB,          /* IMB-MPI1 collective procedure */
} hm_bench_method;

#define HM_BENCH_METHODS 5
/* "sync", "loop", "loop_barrier", "osu", "imb" */
extern const char *const hm_bench_method_names[HM_BENCH_METHODS];

typedef struct hm_bench_opts {
    const hm_op **ops;            /* --op, in the order given */
    size_t n_ops;
    int64_t *sizes;               /* --sizes (bytes) */
    size_t n_sizes;
    int64_t *nprocs;              /* --nprocs; NULL = all ranks */
    size_t n_nprocs;
    hm_bench_method methods[HM_BENCH_METHODS];
    size_t n_methods;
    int root;
    const char *timer;            /* --timer */
    hm_sync_algo sync;            /* --sync */
    int sync_rounds;              /* --sync-rounds: d */
    bool sync_ping_shared;        /* --sync-ping-shared */
    int64_t simulated_skew_ns;    /* --simulate-skew-us: rank r's clock r times this ahead */
    double simulated_drift_ppm;   /* --simulate-drift-ppm: rank r's clock r times this fast */
    double clock_error_share;     /* --clock-error-share: allowed clock error / mean time */
    int bcast_probes;             /* --bcast-probes: broadcasts behind t_bcast */
    int64_t spin_ns;              /* --spin-us: spin this long before a launch, sleep before */
    int64_t late_tolerance_ns;    /* --late-tolerance-us; -1 = 10 timer steps, >= 100 ns */
    hm_schedule_params schedule;
    hm_stop_rule stop;
    double trim;                  /* --trim: fraction dropped at each end */
    double ci_level;              /* --ci-level */
    int loop_iters;               /* --loop-iters: launches per loop sample */
    hm_buffer_mode buffers;       /* --buffers */
    bool buffers_given;           /* --buffers was given: it applies to every method; else
                                   * osu and imb reuse one buffer as those tools do */
    int passes;                   /* --passes: independent passes over all points */
    uint64_t seed;                /* --seed: order of the points in each pass */
    bool shuffle;                 /* false with --in-order */
    double budget_ns;             /* --budget-ms: time per point per pass (sync), 0 = none */
    int max_launches;             /* --max-launches: cap with a budget */
    double disagree_share;        /* --disagree-share: gap between groups of passes */
    int64_t rotate_bytes;         /* --rotate-bytes; 0 = 2 x last-level cache */
    const char *json_path;        /* --json FILE|-; NULL = none */
    bool per_rank, raw, quiet;
    bool help, list;              /* print and exit 0 */
    const char *sizes_text, *nprocs_text, *ops_text, *methods_text; /* as given, for meta */
} hm_bench_opts;

/* Fills opts from argv. Returns 0, or -1 with err set (one line). */
int hm_bench_parse(int argc, char **argv, hm_bench_opts *opts, hm_error *err);

/* Checks the options against the number of ranks: process counts within
 * 1..world_size, each op's minimum, root below the smallest count. */
int hm_bench_check_ranks(const hm_bench_opts *opts, int world_size, hm_error *err);

void hm_bench_opts_free(hm_bench_opts *opts);

void hm_bench_print_help(FILE *out);
void hm_bench_print_list(FILE *out);

#endif
