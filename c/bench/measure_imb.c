/* IMB-MPI1 collectives (IMB_bcast.c & co., IMB_init_buffers_iter in
 * IMB_mem_manager.c; the rules are in bench_procedures.h): the repetition
 * count from the size, adapted by the default dynamic policy from two
 * pre-runs of the same kernel (1 call, then ~1 s worth at most n_sample);
 * the kernel is N_BARR barriers, then n_sample calls, each timed alone
 * and followed by one barrier (-sync 1), the root fixed (-root_shift 0);
 * per rank time / n_sample; t_min, t_max, t_avg over ranks. With
 * --buffers rotate each call uses the next copy of the buffer spaced as
 * -off_cache spaces them (op_ctx: one cache line between copies through a
 * pool of --rotate-bytes, 2 x last-level cache by default). */
#include <math.h>

#include "bench_measure.h"
#include "bench_procedures.h"

/* The kernel; *mine_s is this rank's time per call. */
static int kernel(const hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, int n_sample,
                  double *mine_s, hm_error *err)
{
    const hm_timer *t = env->clock->timer;
    for (int b = 0; b < HM_IMB_N_BARR; b++)
        if (hm_op_mpi_check(MPI_Barrier(env->comm), "barrier before the imb loop", err) != 0)
            return -1;
    int64_t busy_ns = 0;
    for (int i = 0; i < n_sample; i++) {
        hm_op_ctx_next(ctx);
        int64_t t1 = hm_timer_now_ns(t);
        if (op->run(ctx, err) != 0)
            return hm_error_wrap(err, "%s, imb method", op->name);
        busy_ns += hm_timer_now_ns(t) - t1;
        for (int b = 0; b < HM_IMB_SYNC_BARRIERS; b++)
            if (hm_op_mpi_check(MPI_Barrier(env->comm), "barrier after an imb call", err) != 0)
                return -1;
    }
    *mine_s = (double)busy_ns * 1e-9 / n_sample;
    return 0;
}

static int kernel_max(const hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, int n_sample,
                      double *worst_s, hm_error *err)
{
    double mine = 0;
    if (kernel(env, op, ctx, n_sample, &mine, err) != 0)
        return -1;
    return hm_op_mpi_check(MPI_Allreduce(&mine, worst_s, 1, MPI_DOUBLE, MPI_MAX, env->comm),
                           "imb pre-run reduce", err);
}

int hm_measure_imb(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, hm_bench_samples *out,
                   hm_error *err)
{
    int selected = hm_imb_n_sample((int64_t)ctx->size_bytes);
    int previous = env->imb_n_sample_prev > 0 ? env->imb_n_sample_prev : HM_IMB_MSGS_PER_SAMPLE;
    /* Dynamic policy: one call, then about a second's worth. Every rank
     * computes the same counts from the same reduced times. */
    double one = 0, per_call = 0;
    if (kernel_max(env, op, ctx, 1, &one, err) != 0)
        return -1;
    int rep = hm_imb_rep_test(one);
    int second = selected < rep ? selected : rep;
    per_call = one;
    if (second > 1 && kernel_max(env, op, ctx, second, &per_call, err) != 0)
        return -1;
    int n_sample = hm_imb_dynamic_n_sample(selected, previous, per_call, HM_IMB_SECS_PER_SAMPLE);
    env->imb_n_sample_prev = n_sample;
    double mine = 0;
    if (kernel(env, op, ctx, n_sample, &mine, err) != 0)
        return -1;
    out->iterations = n_sample;
    out->warmup = 1 + (second > 1 ? second : 0);
    out->delta_final_s = NAN;
    out->stages = 1;
    return hm_bench_push_rank_means(env, mine, out, err);
}
