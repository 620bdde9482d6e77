/* lu: the pipelined SSOR kernel of the NAS Parallel Benchmarks' LU, on a
 * scalar 2-D problem.
 *
 * Solves (4 + sigma) u_ij - (u_i-1,j + u_i+1,j + u_i,j-1 + u_i,j+1) = f_ij on
 * an n x n grid (zero outside) by symmetric successive over-relaxation: a
 * forward Gauss-Seidel sweep in lexicographic order, then a backward one.
 * Rows are split among ranks, and a sweep is a wavefront: a rank can update
 * a block of columns only after the rank above has updated the same block of
 * its last row, so each block's boundary row travels down the ranks (and up,
 * in the backward sweep) in small messages — NPB LU's pipeline. The order of
 * the updates is the same on any number of ranks, so is the result.
 *
 * Verification: after the iterations the residual |f - A u| / |f|,
 * recomputed from scratch, must be below 1e-8. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app_common.h"
#include "npb_common.h"

#define LU_SIGMA 0.5
#define LU_OMEGA 1.2
#define LU_BLOCK 128

static const struct {
    int n, iterations;
} lu_classes[NPB_N_CLASSES] = {
    [NPB_CLASS_S] = {1024, 30},
    [NPB_CLASS_W] = {2048, 60},
    [NPB_CLASS_A] = {4096, 80},
};

typedef struct lu_params {
    const char *class_name;
    bool corrupt;
} lu_params;

static int lu_validate(const app_context *ctx, const void *data, hm_error *err)
{
    const lu_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    if (cls < 0)
        return -1;
    if (ctx->size > lu_classes[cls].n)
        return hm_error_set(err, "class %s has %d rows, fewer than %d ranks", p->class_name,
                            lu_classes[cls].n, ctx->size);
    return 0;
}

typedef struct lu_ctx {
    const app_context *ctx;
    hm_error *err;
    int n, rows;
    double *u, *f;   /* u: rows + 2 (ghost rows 0 and rows + 1), f: rows */
    int64_t messages;
} lu_ctx;

#define U(l, i, j) ((l)->u[(size_t)(i) * (size_t)(l)->n + (size_t)(j)])
#define F(l, i, j) ((l)->f[(size_t)((i) - 1) * (size_t)(l)->n + (size_t)(j)])

static void mpi_check(lu_ctx *l, int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        hm_error_set(l->err, "%s failed", what);
        app_abort(l->ctx, "lu", l->err);
    }
}

static double relax(const lu_ctx *l, int i, int j)
{
    const double west = j > 0 ? U(l, i, j - 1) : 0.0, east = j + 1 < l->n ? U(l, i, j + 1) : 0.0;
    const double gs = (F(l, i, j) + U(l, i - 1, j) + U(l, i + 1, j) + west + east) /
                      (4.0 + LU_SIGMA);
    return (1.0 - LU_OMEGA) * U(l, i, j) + LU_OMEGA * gs;
}

static void ssor(lu_ctx *l)
{
    const app_context *ctx = l->ctx;
    const int up = ctx->rank > 0 ? ctx->rank - 1 : MPI_PROC_NULL;
    const int down = ctx->rank + 1 < ctx->size ? ctx->rank + 1 : MPI_PROC_NULL;
    const int n = l->n, rows = l->rows;
    /* The next rank's first row as it is before this sweep. */
    mpi_check(l, MPI_Sendrecv(&U(l, 1, 0), n, MPI_DOUBLE, up, 3, &U(l, rows + 1, 0), n,
                              MPI_DOUBLE, down, 3, ctx->comm, MPI_STATUS_IGNORE),
              "exchange of the first rows");
    /* Forward: blocks left to right, rows top to bottom. */
    for (int j0 = 0; j0 < n; j0 += LU_BLOCK) {
        const int w = j0 + LU_BLOCK < n ? LU_BLOCK : n - j0;
        mpi_check(l, MPI_Recv(&U(l, 0, j0), w, MPI_DOUBLE, up, 4, ctx->comm, MPI_STATUS_IGNORE),
                  "receive of a block from above");
        for (int i = 1; i <= rows; i++)
            for (int j = j0; j < j0 + w; j++)
                U(l, i, j) = relax(l, i, j);
        mpi_check(l, MPI_Send(&U(l, rows, j0), w, MPI_DOUBLE, down, 4, ctx->comm),
                  "send of a block down");
        l->messages += (up != MPI_PROC_NULL) + (down != MPI_PROC_NULL);
    }
    /* Backward: blocks right to left, rows bottom to top; ghost row 0
     * already holds the rank above's last row after its forward sweep. */
    for (int j0 = ((n - 1) / LU_BLOCK) * LU_BLOCK; j0 >= 0; j0 -= LU_BLOCK) {
        const int w = j0 + LU_BLOCK < n ? LU_BLOCK : n - j0;
        mpi_check(l, MPI_Recv(&U(l, rows + 1, j0), w, MPI_DOUBLE, down, 5, ctx->comm,
                              MPI_STATUS_IGNORE), "receive of a block from below");
        for (int i = rows; i >= 1; i--)
            for (int j = j0 + w - 1; j >= j0; j--)
                U(l, i, j) = relax(l, i, j);
        mpi_check(l, MPI_Send(&U(l, 1, j0), w, MPI_DOUBLE, up, 5, ctx->comm),
                  "send of a block up");
        l->messages += (up != MPI_PROC_NULL) + (down != MPI_PROC_NULL);
    }
}

/* |f - A u| and |f| over all ranks. */
static void residual(lu_ctx *l, double *r_norm, double *f_norm)
{
    const app_context *ctx = l->ctx;
    const int up = ctx->rank > 0 ? ctx->rank - 1 : MPI_PROC_NULL;
    const int down = ctx->rank + 1 < ctx->size ? ctx->rank + 1 : MPI_PROC_NULL;
    const int n = l->n, rows = l->rows;
    mpi_check(l, MPI_Sendrecv(&U(l, 1, 0), n, MPI_DOUBLE, up, 6, &U(l, rows + 1, 0), n,
                              MPI_DOUBLE, down, 6, ctx->comm, MPI_STATUS_IGNORE), "halo");
    mpi_check(l, MPI_Sendrecv(&U(l, rows, 0), n, MPI_DOUBLE, down, 7, &U(l, 0, 0), n,
                              MPI_DOUBLE, up, 7, ctx->comm, MPI_STATUS_IGNORE), "halo");
    double local[2] = {0.0, 0.0}, total[2];
    for (int i = 1; i <= rows; i++)
        for (int j = 0; j < n; j++) {
            const double west = j > 0 ? U(l, i, j - 1) : 0.0;
            const double east = j + 1 < n ? U(l, i, j + 1) : 0.0;
            const double au = (4.0 + LU_SIGMA) * U(l, i, j) - U(l, i - 1, j) - U(l, i + 1, j) -
                              west - east;
            local[0] += (F(l, i, j) - au) * (F(l, i, j) - au);
            local[1] += F(l, i, j) * F(l, i, j);
        }
    mpi_check(l, MPI_Allreduce(local, total, 2, MPI_DOUBLE, MPI_SUM, ctx->comm), "reduction");
    *r_norm = sqrt(total[0]);
    *f_norm = sqrt(total[1]);
}

static int lu_run(const app_context *ctx, const void *data, app_result *result, hm_error *err)
{
    const lu_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    lu_ctx l = {.ctx = ctx, .err = err, .n = lu_classes[cls].n};
    const int first = (int)((int64_t)l.n * ctx->rank / ctx->size);
    l.rows = (int)((int64_t)l.n * (ctx->rank + 1) / ctx->size) - first;
    l.u = calloc((size_t)(l.rows + 2) * (size_t)l.n, sizeof(double));
    l.f = malloc((size_t)l.rows * (size_t)l.n * sizeof(double));
    if (!app_all_ok(ctx, l.u && l.f)) {
        free(l.u), free(l.f);
        return hm_error_set(err, "cannot allocate the grid (%d x %d)", l.n, l.n);
    }
    uint64_t seed = npb_skip(NPB_SEED, NPB_A, (uint64_t)first * (uint64_t)l.n);
    for (int i = 1; i <= l.rows; i++)
        for (int j = 0; j < l.n; j++)
            F(&l, i, j) = 2.0 * npb_randlc(&seed, NPB_A) - 1.0;

    int64_t t0 = app_now_ns();
    for (int it = 0; it < lu_classes[cls].iterations; it++)
        ssor(&l);
    int64_t run_ns = app_now_ns() - t0;
    if (p->corrupt && ctx->rank == 0)
        U(&l, 1, l.n / 2) += 1.0;   /* a wrong value the residual must show */
    double r_norm, f_norm;
    residual(&l, &r_norm, &f_norm);
    /* A checksum of u, the same on any number of ranks (same update order). */
    double sum = 0.0, total_sum = 0.0;
    for (int i = 1; i <= l.rows; i++)
        for (int j = 0; j < l.n; j++)
            sum += U(&l, i, j);
    mpi_check(&l, MPI_Allreduce(&sum, &total_sum, 1, MPI_DOUBLE, MPI_SUM, ctx->comm), "sum");
    free(l.u), free(l.f);

    const double rel = r_norm / f_norm;
    result->failures = (ctx->rank == 0 && !(rel < 1e-8)) ? 1 : 0;
    result->busy_ns = run_ns;
    result->bytes_moved = (double)l.messages * LU_BLOCK * sizeof(double) / 2.0;
    app_result_extra(result, "grid", l.n, APP_MAX);
    app_result_extra(result, "iterations", lu_classes[cls].iterations, APP_MAX);
    app_result_extra(result, "residual", ctx->rank == 0 ? rel : 0.0, APP_SUM);
    app_result_extra(result, "checksum", ctx->rank == 0 ? total_sum : 0.0, APP_SUM);
    app_result_extra(result, "messages", (double)l.messages, APP_SUM);
    return 0;
}

int main(int argc, char **argv)
{
    lu_params params = {.class_name = "S"};
    app_option options[] = {
        APP_STRING("class", &params.class_name, "S|W|A",
                   "size class: 1024^2 x 30 iterations, 2048^2 x 60, 4096^2 x 80"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 damages the solution, to show the check catches it"),
    };
    app_program program = {
        .name = "lu",
        .summary = "NPB-like LU: pipelined SSOR sweeps (wavefronts) over row blocks.",
        .details = "Symmetric successive over-relaxation of a 2-D diagonally dominant "
                   "5-point system; rows split among ranks, each sweep a wavefront of "
                   "128-column blocks passed rank to rank in small messages. Verified by the "
                   "residual |f - A u| / |f| < 1e-8, recomputed from scratch.",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = lu_validate,
        .run = lu_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
