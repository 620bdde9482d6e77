/* OSU Micro-Benchmarks 7.x, blocking collectives (osu_bcast.c & co.; the
 * counts are in bench_procedures.h): `skip` untimed then `iterations`
 * timed calls, each call timed alone on this rank's clock and followed by
 * an untimed MPI_Barrier; one buffer unless --buffers says otherwise;
 * each rank's mean over the timed calls. OSU then reduces the ranks'
 * means to their average (Avg Latency), min and max; here the ranks'
 * means are the samples, summarized untrimmed, so `mean` is OSU's
 * average and `min` / `max` its -f columns. */
#include <math.h>

#include "bench_measure.h"
#include "bench_procedures.h"

int hm_measure_osu(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, hm_bench_samples *out,
                   hm_error *err)
{
    const hm_timer *t = env->clock->timer;
    int iterations = 0, skip = 0;
    hm_osu_iterations((int64_t)ctx->size_bytes, &iterations, &skip);
    /* OSU's barrier at the end of the previous size (the sizes run back to
     * back there); here other points may have run in between. */
    if (hm_op_mpi_check(MPI_Barrier(env->comm), "barrier before the osu loop", err) != 0)
        return -1;
    int64_t busy_ns = 0;
    for (int i = 0; i < iterations + skip; i++) {
        hm_op_ctx_next(ctx);
        int64_t t0 = hm_timer_now_ns(t);
        if (op->run(ctx, err) != 0)
            return hm_error_wrap(err, "%s, osu method", op->name);
        int64_t t1 = hm_timer_now_ns(t);
        if (hm_op_mpi_check(MPI_Barrier(env->comm), "barrier after an osu call", err) != 0)
            return -1;
        if (i >= skip)
            busy_ns += t1 - t0;
    }
    out->iterations = iterations;
    out->warmup = skip;
    out->delta_final_s = NAN;
    out->stages = 1;
    return hm_bench_push_rank_means(env, (double)busy_ns * 1e-9 / iterations, out, err);
}
