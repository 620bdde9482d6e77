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
    int64_t launch_spin_ns;    /* the same for waits between the launches of a stage:
                                * INT64_MAX (spin the whole window) unless the node is
                                * oversubscribed, where a spinning rank keeps another
                                * off its CPU */
} hm_bench_env;

typedef struct hm_bench_samples {
    /* Every measured launch (warm-up excluded), identical on all ranks. For
     * the loop methods a "launch" is one loop sample (mean per launch). */
    double *local_s;   /* max over ranks of the rank's own end - start */
    double *global_s;  /* max over ranks of end - scheduled start (sync only) */
    bool *valid;
    size_t n, cap;
    int late, overrun; /* invalid launches by reason */
    /* This rank's own times of the valid launches, for --per-rank. */
    double *own_s;
    size_t n_own, cap_own;
    double delta_final_s; /* window of the last stage (sync only, else NaN) */
    int stages;
} hm_bench_samples;

void hm_bench_samples_free(hm_bench_samples *s);

/* For the methods: append one launch / one own valid time. 0 or -1. */
int hm_bench_samples_push(hm_bench_samples *s, double local_s, double global_s, bool valid,
                          hm_error *err);
int hm_bench_samples_push_own(hm_bench_samples *s, double own_s, hm_error *err);
/* The stop rule on the valid local times (trimmed as reported). */
int hm_bench_should_stop(const hm_bench_opts *o, const hm_bench_samples *s, bool *stop,
                         hm_error *err);

/* The valid values of an array, copied into a new malloc'ed array. */
double *hm_bench_valid_values(const double *v, const bool *valid, size_t n, size_t *count);

/* MPIPerf's synchronized method; may raise env->t_bcast_ns. */
int hm_measure_sync(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx,
                    hm_bench_samples *out, hm_error *err);

/* The IMB/OSU loop: `loop` (back to back) or `loop_barrier` (a barrier
 * before each launch, only the launch timed). */
int hm_measure_loop(const hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, bool barrier,
                    hm_bench_samples *out, hm_error *err);

#endif
