/* MPIPerf's synchronized method (seed section 4, step 3): stages of k
 * launches at tau_j + l*delta_j on the global clock, launches checked for
 * late starts and overruns, the window adapted, stage 0 as warm-up. */
#include <math.h>
#include <stdlib.h>

#include "bench_measure.h"
#include "bench_schedule.h"

/* Causes of a late start, as stored per launch (0: not late). MAX over
 * ranks keeps the highest: a rank still busy with the previous launch
 * (which a wider window prevents) outranks one that merely woke late. */
#define LATE_WOKE 1
#define LATE_STAGE_START 2
#define LATE_PREVIOUS 3

/* Rank 0 reads the global clock and announces tau_j = T0 + t_bcast. */
static int stage_start(const hm_bench_env *env, int64_t *tau_ns, hm_error *err)
{
    int64_t tau = 0;
    if (env->rank == 0)
        tau = hm_clock_now_ns(env->clock) + env->t_bcast_ns;
    if (hm_op_mpi_check(MPI_Bcast(&tau, 1, MPI_INT64_T, 0, env->comm), "stage start broadcast",
                        err) != 0)
        return -1;
    *tau_ns = tau;
    return 0;
}

/* Stage 0: k' launches back to back (delta_0 = 0) from tau_0; they absorb
 * late initialization and set delta_1 from the stage's span. Each rank
 * also times the bookkeeping a measured stage does between the end of one
 * launch and being ready for the next (the turnaround), the same steps as
 * run_stage, so delta_1 leaves room for it. */
static int warm_up(const hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, hm_delta_state *st,
                   hm_error *err)
{
    const hm_schedule_params *p = &env->opts->schedule;
    int64_t tau;
    if (stage_start(env, &tau, err) != 0)
        return -1;
    /* A rank that got the stage start late begins late; its lateness is
     * not the operation's duration and must not widen the window. */
    int64_t begin = hm_clock_wait_until_ns(env->clock, tau, env->spin_ns);
    int kw = p->warmup_launches;
    /* Per rank: each launch's time, the span, the largest turnaround. */
    double *mine = calloc((size_t)kw + 2, sizeof *mine);
    double *worst = calloc((size_t)kw + 2, sizeof *worst);
    int rc = -1;
    if (mine == NULL || worst == NULL) {
        hm_error_set(err, "out of memory for %d warm-up launches", kw);
        goto done;
    }
    int64_t ready = begin;
    for (int l = 0; l < kw; l++) {
        hm_op_ctx_next(ctx);
        if (op->run(ctx, err) != 0)
            goto done;
        int64_t end = hm_clock_now_ns(env->clock);
        mine[l] = (double)(end - ready);
        hm_launch_times times = {end, end, end, end, end};
        volatile hm_launch_status status = hm_launch_classify(&times, env->late_tolerance_ns);
        (void)status;
        ready = hm_clock_now_ns(env->clock);
        if ((double)(ready - end) > mine[kw + 1])
            mine[kw + 1] = (double)(ready - end);
    }
    mine[kw] = (double)(hm_clock_now_ns(env->clock) - begin);
    if (hm_op_mpi_check(MPI_Allreduce(mine, worst, kw + 2, MPI_DOUBLE, MPI_MAX, env->comm),
                        "warm-up span reduce", err) != 0)
        goto done;
    /* Twice the bare bookkeeping: a measured stage also stores the launch
     * and computes the next start; the stages measure the real gap. */
    hm_schedule_after_warmup(p, worst[kw], hm_stage_typical(worst, kw, p->invalid_fraction),
                             2 * worst[kw + 1], st);
    rc = 0;
done:
    free(mine);
    free(worst);
    return rc;
}

/* One measured stage. mine/all hold 4k+4 doubles: per launch the local
 * time, the global time, the late flag, the overrun flag, then the stage
 * span, how late the stage start reached this rank, the largest
 * turnaround (end of a launch to ready for the next) and how late this
 * rank started launch 0; MAX over ranks turns them into the launch's
 * (and the stage's) values. */
static int run_stage(const hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx, int64_t delta_ns,
                     double *mine, double *all, int64_t *tau_out, hm_error *err)
{
    int k = env->opts->schedule.launches_per_stage;
    int64_t tau;
    if (stage_start(env, &tau, err) != 0)
        return -1;
    *tau_out = tau;
    int64_t end = tau;
    mine[4 * k + 1] = (double)(hm_clock_now_ns(env->clock) - tau) * 1e-9;
    mine[4 * k + 2] = 0;
    mine[4 * k + 3] = 0;
    for (int l = 0; l < k; l++) {
        int64_t sched = tau + (int64_t)l * delta_ns;
        hm_op_ctx_next(ctx);
        int64_t arrive = hm_clock_now_ns(env->clock);
        if (l > 0 && (double)(arrive - end) * 1e-9 > mine[4 * k + 2])
            mine[4 * k + 2] = (double)(arrive - end) * 1e-9;
        /* Sleep-then-spin here too: spinning whole windows was tried and
         * made things worse on a busy machine (a spinner uses up its CPU
         * share, then is off the CPU for tens of ms at the instant it is
         * due; 470 s runs at load 12), while a sleeper is woken promptly. */
        int64_t start =
            arrive < sched ? hm_clock_wait_until_ns(env->clock, sched, env->spin_ns) : arrive;
        if (l == 0)
            mine[4 * k + 3] = (double)(start - sched) * 1e-9;
        if (op->run(ctx, err) != 0)
            return -1;
        end = hm_clock_now_ns(env->clock);
        hm_launch_times times = {arrive, sched, start, end, sched + delta_ns};
        hm_launch_status status = hm_launch_classify(&times, env->late_tolerance_ns);
        mine[l] = (double)(end - start) * 1e-9;
        mine[k + l] = (double)(end - sched) * 1e-9;
        /* Why late, for the report (MAX over ranks keeps the highest code). */
        mine[2 * k + l] = status != HM_LAUNCH_LATE ? 0
                          : arrive <= sched        ? LATE_WOKE
                          : l == 0                 ? LATE_STAGE_START
                                                   : LATE_PREVIOUS;
        mine[3 * k + l] = status == HM_LAUNCH_OVERRUN;
    }
    /* The seed's tau'_j - tau_j, lateness included: when a stage fails
     * because ranks cannot start on time (a busy or oversubscribed node),
     * wider windows are what lets them. */
    mine[4 * k] = (double)(end - tau) * 1e-9;
    return hm_op_mpi_check(MPI_Allreduce(mine, all, 4 * k + 4, MPI_DOUBLE, MPI_MAX, env->comm),
                           "stage results reduce", err);
}

/* Adds a reduced stage to the samples; fills the outcome for the window. */
static int record_stage(int k, double invalid_fraction, int64_t delta_ns, const double *mine,
                        const double *all, hm_bench_samples *out, hm_stage_outcome *o,
                        hm_error *err)
{
    o->launches = k;
    o->invalid = 0;
    o->not_window = 0;
    /* The span from the latest start of launch 0, not from tau_j: a stage
     * start that reached a rank late is t_bcast's to absorb (raised below);
     * counted in the span it spread over k windows and blew a 0.6 us
     * window up to ~100 us (a rank 816 us late), past --spin-us, where
     * every wait slept, woke late and widened the window again (Bcast 8 B:
     * windows of 3.5 ms, 31 of 40 launches late). */
    double first_late_ns = all[4 * k + 3] > 0 ? all[4 * k + 3] * 1e9 : 0;
    o->span_ns = all[4 * k] * 1e9 - first_late_ns;
    if (o->span_ns < 0)
        o->span_ns = 0;
    o->longest_ns = 0;
    o->turnaround_ns = all[4 * k + 2] * 1e9;
    o->typical_ns = hm_stage_typical(all, k, invalid_fraction) * 1e9;
    for (int l = 0; l < k; l++) {
        hm_launch_status st = hm_launch_combine(all[2 * k + l] > 0, all[3 * k + l] > 0);
        bool valid = st == HM_LAUNCH_VALID;
        if (st == HM_LAUNCH_LATE) {
            out->late++;
            int cause = (int)all[2 * k + l];
            out->late_stage_start += cause == LATE_STAGE_START;
            out->late_previous += cause == LATE_PREVIOUS;
            out->late_woke += cause == LATE_WOKE;
            o->not_window += cause == LATE_WOKE || cause == LATE_STAGE_START;
        }
        else if (st == HM_LAUNCH_OVERRUN)
            out->overrun++;
        if (!valid)
            o->invalid++;
        if (valid && all[k + l] * 1e9 > o->longest_ns)
            o->longest_ns = all[k + l] * 1e9;
        if (hm_bench_samples_push(out, all[l], all[k + l], valid, err) != 0 ||
            hm_bench_samples_push_window(out, (double)delta_ns * 1e-9, err) != 0)
            return -1;
        if (hm_bench_samples_push_own(out, mine[l], err) != 0)
            return -1;
    }
    return 0;
}

int hm_measure_sync(hm_bench_env *env, const hm_op *op, hm_op_ctx *ctx,
                    hm_bench_samples *out, hm_error *err)
{
    int k = env->opts->schedule.launches_per_stage;
    double *mine = malloc((size_t)(4 * k + 4) * sizeof *mine);
    double *all = malloc((size_t)(4 * k + 4) * sizeof *all);
    int rc = -1;
    if (mine == NULL || all == NULL) {
        hm_error_set(err, "out of memory for a stage of %d launches", k);
        goto done;
    }
    hm_delta_state st;
    int64_t first_tau = 0;
    out->own_per_launch = true;
    if (warm_up(env, op, ctx, &st, err) != 0)
        goto done;
    for (int stage = 0;; stage++) {
        /* Whole nanoseconds; at least 1 so launches keep their order. */
        int64_t delta_ns = (int64_t)ceil(st.delta_ns);
        if (delta_ns < 1)
            delta_ns = 1;
        int64_t tau = 0;
        if (run_stage(env, op, ctx, delta_ns, mine, all, &tau, err) != 0)
            goto done;
        if (stage == 0)
            first_tau = tau;
        hm_stage_outcome o;
        if (record_stage(k, env->opts->schedule.invalid_fraction, delta_ns, mine, all, out, &o,
                         err) != 0)
            goto done;
        out->stages++;
        out->delta_final_s = (double)delta_ns * 1e-9;
        /* Before the stop rule, so a point whose valid launches were timed
         * under a window it has since shrunk from goes on launching. */
        out->wide_window += (int)hm_schedule_set_aside_wide(
            out->window_s, out->valid, out->n,
            env->oversubscribed ? 0 : env->opts->schedule.wide_factor);
        /* hushmon addition: t_bcast is meant as an upper bound; when the
         * start of a stage reached some rank after tau_j, the bound was
         * wrong (a busy or oversubscribed node), so raise it the way delta
         * is raised, or every later stage would start late as well. */
        double start_late_ns = all[4 * k + 1] * 1e9;
        double gamma = env->opts->schedule.gamma;
        if (start_late_ns > 0) {
            env->t_bcast_ns = (int64_t)(gamma * ((double)env->t_bcast_ns + start_late_ns));
        } else {
            /* Straight back to the probed bound once a start is on time.
             * Decaying by gamma per stage left a bound raised to ms for
             * dozens of stages: every launch 0 then followed a wait of ms,
             * ran ~20 us instead of 0.2 (a launch after a long wait runs
             * cold here) and made the rest of its stage late (Bcast 64 B:
             * 13 stages, no valid launch). */
            env->t_bcast_ns = env->t_bcast_probed_ns;
        }
        hm_schedule_params sp = env->opts->schedule;
        sp.lateness_grows = env->oversubscribed;
        hm_schedule_next_delta(&sp, &o, &st);
        bool stop = false;
        /* From broadcast instants and reduced spans: the same on every rank. */
        double elapsed_ns = (double)(tau - first_tau) + o.span_ns;
        if (hm_bench_should_stop(env->opts, out, elapsed_ns, &stop, err) != 0)
            goto done;
        if (stop)
            break;
    }
    rc = 0;
done:
    free(mine);
    free(all);
    return rc == 0 ? 0 : hm_error_wrap(err, "%s, synchronized method", op->name);
}
