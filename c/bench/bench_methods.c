/* The table of measuring methods, indexed by hm_bench_method (the names
 * are in bench_options.c, which parses them). A new method: a file
 * measure_<name>.c with its function, a value in hm_bench_method, a name
 * and a line here. */
#include <stddef.h>

#include "bench_measure.h"

static int measure_loop(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx,
                        hm_bench_samples *out, hm_error *err)
{
    return hm_measure_loop(env, op, ctx, false, out, err);
}

static int measure_loop_barrier(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx,
                                hm_bench_samples *out, hm_error *err)
{
    return hm_measure_loop(env, op, ctx, true, out, err);
}

static const hm_bench_method_def methods[HM_BENCH_METHODS] = {
    {HM_METHOD_SYNC, hm_measure_sync, true, false, HM_BUFFERS_ROTATE,
     "MPIPerf: launches at scheduled instants on synchronized clocks"},
    {HM_METHOD_LOOP, measure_loop, false, false, HM_BUFFERS_ROTATE,
     "a barrier, then --loop-iters launches back to back; per rank time / iterations"},
    {HM_METHOD_LOOP_BARRIER, measure_loop_barrier, false, false, HM_BUFFERS_ROTATE,
     "a barrier before each launch, only the launches timed"},
    {HM_METHOD_OSU, hm_measure_osu, false, true, HM_BUFFERS_REUSE,
     "OSU Micro-Benchmarks 7.x: call timed, barrier untimed; avg/min/max of rank means"},
    {HM_METHOD_IMB, hm_measure_imb, false, true, HM_BUFFERS_REUSE,
     "IMB-MPI1: dynamic repetitions, call timed, barrier untimed; t_min/t_max/t_avg"},
};

const hm_bench_method_def *hm_bench_method_get(hm_bench_method m)
{
    if ((int)m < 0 || (int)m >= HM_BENCH_METHODS)
        return NULL;
    return &methods[m];
}
