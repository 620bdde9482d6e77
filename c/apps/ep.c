/* ep: the embarrassingly parallel kernel of the NAS Parallel Benchmarks.
 *
 * 2^M pairs of uniform numbers from NPB's generator become Gaussian pairs by
 * the Marsaglia polar method; the kernel tallies them in square annuli and
 * sums their coordinates. The stream is cut into batches of 2^16 pairs and
 * each rank starts its batches by skipping ahead in the generator, so the
 * numbers (and the sums) do not depend on the number of ranks. Almost no
 * communication: one reduction at the end. What limits it is the CPU, which
 * is what a monitoring agent takes away.
 *
 * Verification: the sums match NPB's published values for the same M
 * (relative error 1e-8) and the annuli counts add up to the accepted pairs. */
#include <math.h>
#include <stdlib.h>

#include "app_common.h"
#include "npb_common.h"

#define EP_BATCH_LOG2 16
#define EP_BATCH_PAIRS (1LL << EP_BATCH_LOG2)
#define EP_ANNULI 10
#define EP_SEED 271828183ULL

/* Per class: log2 of the number of pairs, and NPB's sums for it. */
static const struct {
    int m;
    double sx, sy;
} ep_classes[NPB_N_CLASSES] = {
    [NPB_CLASS_S] = {25, -2.863319731645753e3, -6.320053679109499e3},   /* NPB W */
    [NPB_CLASS_W] = {28, -4.295875165629892e3, -1.580732573678431e4},   /* NPB A */
    [NPB_CLASS_A] = {30, 4.033815542441498e4, -2.660669192809235e4},    /* NPB B */
};

typedef struct ep_params {
    const char *class_name;
    bool corrupt;
} ep_params;

static int ep_validate(const app_context *ctx, const void *data, hm_error *err)
{
    (void)ctx;
    const ep_params *p = data;
    return npb_class_index(p->class_name, err) < 0 ? -1 : 0;
}

typedef struct ep_sums {
    double sx, sy, q[EP_ANNULI];
} ep_sums;

/* One batch: 2^16 pairs from the generator state `seed`. */
static void ep_batch(uint64_t seed, double *x, ep_sums *s)
{
    npb_vranlc(2 * EP_BATCH_PAIRS, &seed, NPB_A, x);
    for (int64_t i = 0; i < EP_BATCH_PAIRS; i++) {
        double x1 = 2.0 * x[2 * i] - 1.0, x2 = 2.0 * x[2 * i + 1] - 1.0;
        double t1 = x1 * x1 + x2 * x2;
        if (t1 <= 1.0) {
            double t2 = sqrt(-2.0 * log(t1) / t1);
            double t3 = x1 * t2, t4 = x2 * t2;
            int l = (int)fmax(fabs(t3), fabs(t4));
            s->q[l < EP_ANNULI ? l : EP_ANNULI - 1] += 1.0;
            s->sx += t3;
            s->sy += t4;
        }
    }
}

static int ep_run(const app_context *ctx, const void *data, app_result *result, hm_error *err)
{
    const ep_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    const int64_t batches = 1LL << (ep_classes[cls].m - EP_BATCH_LOG2);
    const int64_t first = batches * ctx->rank / ctx->size;
    const int64_t last = batches * (ctx->rank + 1) / ctx->size;

    double *x = malloc(2 * EP_BATCH_PAIRS * sizeof(double));
    if (!app_all_ok(ctx, x != NULL)) {
        free(x);
        return hm_error_set(err, "cannot allocate the batch buffer (%lld bytes)",
                            (long long)(2 * EP_BATCH_PAIRS * sizeof(double)));
    }
    ep_sums local = {0}, total = {0};
    int64_t t0 = app_now_ns();
    for (int64_t k = first; k < last; k++)
        ep_batch(npb_skip(EP_SEED, NPB_A, (uint64_t)(2 * EP_BATCH_PAIRS * k)), x, &local);
    int64_t compute_ns = app_now_ns() - t0;
    free(x);
    if (p->corrupt && ctx->rank == 0)
        local.sx += 1e-3;   /* far above the 1e-8 tolerance, far below a visible change */

    if (MPI_Allreduce(&local, &total, 2 + EP_ANNULI, MPI_DOUBLE, MPI_SUM, ctx->comm) !=
        MPI_SUCCESS) {
        hm_error_set(err, "MPI_Allreduce of the sums failed");
        app_abort(ctx, "ep", err);
    }
    double accepted = 0.0;
    for (int i = 0; i < EP_ANNULI; i++)
        accepted += total.q[i];
    bool ok = fabs((total.sx - ep_classes[cls].sx) / ep_classes[cls].sx) <= 1e-8 &&
              fabs((total.sy - ep_classes[cls].sy) / ep_classes[cls].sy) <= 1e-8 &&
              accepted > 0.0;
    result->failures = (ctx->rank == 0 && !ok) ? 1 : 0;
    result->busy_ns = compute_ns;
    result->bytes_moved = (double)sizeof total;
    const double pairs = (double)(last - first) * (double)EP_BATCH_PAIRS;
    app_result_extra(result, "pairs", pairs, APP_SUM);
    app_result_extra(result, "accepted_pairs", ctx->rank == 0 ? accepted : 0.0, APP_SUM);
    app_result_extra(result, "sum_x", ctx->rank == 0 ? total.sx : 0.0, APP_SUM);
    app_result_extra(result, "sum_y", ctx->rank == 0 ? total.sy : 0.0, APP_SUM);
    app_result_extra(result, "compute_s_max", (double)compute_ns * 1e-9, APP_MAX);
    app_result_extra(result, "mpairs_per_s",
                     compute_ns > 0 ? pairs / (double)compute_ns * 1e3 : 0.0, APP_SUM);
    return 0;
}

int main(int argc, char **argv)
{
    ep_params params = {.class_name = "S"};
    app_option options[] = {
        APP_STRING("class", &params.class_name, "S|W|A",
                   "size class: 2^25, 2^28 or 2^30 pairs (NPB classes W, A, B)"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 damages its sum, to show the check catches it"),
    };
    app_program program = {
        .name = "ep",
        .summary = "NPB-like EP: Gaussian pairs by the polar method, tallied in annuli.",
        .details = "2^M pairs from NPB's generator (x <- 5^13 x mod 2^46), split into batches "
                   "of 2^16 pairs that each rank reaches by skipping ahead; one reduction at "
                   "the end. Compute-bound. Verified against NPB's published sums for the "
                   "same M (relative error 1e-8). Class S, W, A = NPB's W, A, B (M = 25, 28, "
                   "30), so S runs a few seconds.",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = ep_validate,
        .run = ep_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
