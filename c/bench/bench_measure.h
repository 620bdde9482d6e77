/* Measuring one case (operation, size, communicator) by one method.
 * Collective over env->comm; every rank ends with the same launch arrays
 * (combined with MPI_Allreduce), so every rank takes the same decisions. */
#ifndef HM_BENCH_MEASURE_H
#define HM_BENCH_MEASURE_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "bench_options.h"
#include "hm_clock_sync.h"
#include "hm_error.h"
#include "op.h"

typedef struct hm_bench_env {
    const hm_bench_opts *opts;
    const hm_clock *clock;
    MPI_Comm comm;
    int rank, nprocs;
    int64_t t_bcast_ns;   /* t_bcast bound on this communicator (raised when
                           * a stage start arrives late) */
    int64_t t_bcast_probed_ns; /* the bound as probed; t_bcast_ns decays back to it */
    int64_t late_tolerance_ns; /* leaving the wait later than this after the start is late */
    int64_t spin_ns;           /* spin this long at the end of a wait, sleep before */
    bool oversubscribed;       /* more ranks than CPUs on a node (schedule: lateness
                                * grows the window) */
    int imb_n_sample_prev;     /* IMB's n_sample of the previous size of this operation
                                * (0 before the first); measure_imb keeps it */
} hm_bench_env;

typedef struct hm_bench_samples {
    /* Every measured launch (warm-up excluded), identical on all ranks. For
     * the loop methods a "launch" is one loop sample (mean per launch). */
    double *local_s;   /* max over ranks of the rank's own end - start */
    double *global_s;  /* max over ranks of end - scheduled start (sync only) */
    bool *valid;
    size_t n, cap;
    int late, overrun; /* invalid launches by reason */
    /* Late starts by cause (sync): the stage start reached a rank after
     * launch 0 was due; a rank was still busy with the previous launch
     * (it ran past its window or was disturbed); a rank was ready but
     * left its wait late (descheduled while spinning). */
    int late_stage_start, late_previous, late_woke;
    /* Valid launches set aside afterwards for the window they were timed
     * under (hm_schedule_set_aside_wide; sync only). */
    int wide_window;
    /* osu / imb: the tool's counts; samples are the ranks' own means. */
    int iterations, warmup;
    /* This rank's own times of the valid launches, for --per-rank; with
     * own_per_launch, of every launch (n_own == n; valid[] picks them,
     * since launches can be set aside after they were recorded). */
    double *own_s;
    size_t n_own, cap_own;
    bool own_per_launch;
    double delta_final_s; /* window of the last stage (sync only, else NaN) */
    /* Window of each launch (sync only, n_window == n; --raw's window_s):
     * how the schedule adapted over a point. */
    double *window_s;
    size_t n_window, cap_window;
    int stages;
} hm_bench_samples;

void hm_bench_samples_free(hm_bench_samples *s);

/* For the methods: append one launch / one own valid time. 0 or -1. */
int hm_bench_samples_push(hm_bench_samples *s, double local_s, double global_s, bool valid,
                          hm_error *err);
int hm_bench_samples_push_own(hm_bench_samples *s, double own_s, hm_error *err);
int hm_bench_samples_push_window(hm_bench_samples *s, double window_s, hm_error *err);
/* The stop rule on the valid local times (trimmed as reported); with
 * elapsed_ns >= 0 (the same on every rank) and --budget-ms, the budget
 * rule (bench_passes.h). */
int hm_bench_should_stop(const hm_bench_opts *o, const hm_bench_samples *s, double elapsed_ns,
                         bool *stop, hm_error *err);

/* The valid values of an array, copied into a new malloc'ed array. */
double *hm_bench_valid_values(const double *v, const bool *valid, size_t n, size_t *count);

/* MPIPerf's synchronized method; may raise env->t_bcast_ns. */
int hm_measure_sync(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx,
                    hm_bench_samples *out, hm_error *err);

/* The loop: `loop` (back to back) or `loop_barrier` (a barrier before
 * each launch, only the launch timed). */
int hm_measure_loop(const hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, bool barrier,
                    hm_bench_samples *out, hm_error *err);

/* The procedures of OSU 7.x and IMB-MPI1 (bench_procedures.h). Each
 * sample is one rank's own mean (every rank's, in rank order). */
int hm_measure_osu(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, hm_bench_samples *out,
                   hm_error *err);
int hm_measure_imb(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, hm_bench_samples *out,
                   hm_error *err);

/* Gathers each rank's own mean into the samples, in rank order. */
int hm_bench_push_rank_means(const hm_bench_env *env, double mine_s, hm_bench_samples *out,
                             hm_error *err);

/* The method table (bench_methods.c), indexed by hm_bench_method. */
typedef int (*hm_bench_measure_fn)(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx,
                                   hm_bench_samples *out, hm_error *err);
typedef struct hm_bench_method_def {
    hm_bench_method id;
    hm_bench_measure_fn measure;
    bool synchronized;      /* global times, judged by the clock check */
    bool rank_samples;      /* samples are the ranks' means: summarized untrimmed */
    hm_buffer_mode buffers; /* buffer policy unless --buffers is given */
    const char *what;       /* one line for docs and --help */
} hm_bench_method_def;
const hm_bench_method_def *hm_bench_method_get(hm_bench_method m);

#endif
