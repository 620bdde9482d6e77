/* hushmon's loop methods, kept so a user can see the systematic
 * error the synchronized method removes (seed section 3.6: r_i(n, k)).
 * Not OSU's or IMB's procedure (those are measure_osu.c and
 * measure_imb.c): the same warm-up as sync, rotated buffers by default.
 * A sample is the mean time per launch of `loop_iters` launches, taken
 * as the maximum over ranks; samples repeat under the same stop rule. */
#include <math.h>

#include "bench_measure.h"

int hm_measure_loop(const hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, bool barrier,
                    hm_bench_samples *out, hm_error *err)
{
    const hm_bench_opts *o = env->opts;
    const hm_timer *t = env->clock->timer;
    /* The same warm-up as the synchronized method, so the comparison is
     * about the launch pattern, not about late initialization. */
    for (int l = 0; l < o->schedule.warmup_launches; l++) {
        hm_op_ctx_next(ctx);
        if (op->run(ctx, err) != 0)
            return hm_error_wrap(err, "%s, loop warm-up", op->name);
    }
    out->delta_final_s = NAN;
    for (;;) {
        int64_t busy_ns = 0;
        if (!barrier &&
            hm_op_mpi_check(MPI_Barrier(env->comm), "barrier before the loop", err) != 0)
            return -1;
        int64_t t0 = hm_timer_now_ns(t);
        for (int i = 0; i < o->loop_iters; i++) {
            hm_op_ctx_next(ctx);
            if (barrier) {
                if (hm_op_mpi_check(MPI_Barrier(env->comm), "barrier in the loop", err) != 0)
                    return -1;
                t0 = hm_timer_now_ns(t);
            }
            if (op->run(ctx, err) != 0)
                return hm_error_wrap(err, "%s, loop method", op->name);
            if (barrier)
                busy_ns += hm_timer_now_ns(t) - t0;
        }
        if (!barrier)
            busy_ns = hm_timer_now_ns(t) - t0;
        double mine = (double)busy_ns * 1e-9 / o->loop_iters, worst = 0;
        if (hm_op_mpi_check(MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, env->comm),
                            "loop sample reduce", err) != 0)
            return -1;
        if (hm_bench_samples_push(out, worst, NAN, true, err) != 0 ||
            hm_bench_samples_push_own(out, mine, err) != 0)
            return -1;
        out->stages++;
        bool stop = false;
        if (hm_bench_should_stop(o, out, -1, &stop, err) != 0)
            return -1;
        if (stop)
            return 0;
    }
}
