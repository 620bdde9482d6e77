/* matmul: blocked matrix multiplication C = A x B distributed over ranks.
 *
 * Rows of A, B and C are split into one contiguous band per rank. The bands
 * of B travel around a ring (each rank passes its current band to rank-1
 * while it multiplies with it), so after n steps every rank has seen all of
 * B. The multiply itself is blocked (--block) so a block of A, B and C fits
 * in cache: a smaller matrix gives each rank less work per message, which is
 * what the seed's decomposition-limit example (1024 vs 512) shows.
 *
 * Verification (Freivalds): for a fixed vector x, C x must equal A (B x);
 * computing both sides costs O(N^2), and any wrong element of C shows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app_common.h"

typedef struct matmul_params {
    int64_t size;
    int64_t block;
    int64_t repeat;
    bool corrupt;
} matmul_params;

/* The band of rows [first, first + count) that rank r owns. */
static void band(int64_t n, int ranks, int r, int64_t *first, int64_t *count)
{
    int64_t base = n / ranks, extra = n % ranks;
    *count = base + (r < extra ? 1 : 0);
    *first = r * base + (r < extra ? r : extra);
}

/* Entries in [-1, 1), a fixed function of the position so every rank can
 * build its band without communication. */
static double entry_a(int64_t i, int64_t j)
{
    return (double)((i * 7 + j * 13) % 31) / 15.5 - 1.0;
}

static double entry_b(int64_t i, int64_t j)
{
    return (double)((i * 11 + j * 5 + 3) % 29) / 14.5 - 1.0;
}

static double entry_x(int64_t j)
{
    return 0.5 + (double)((j * 37) % 101) / 101.0;
}

/* C[rows x n] += A[rows x n](columns a_col0 .. a_col0 + kcount) x B_band[kcount x n],
 * in blocks of `bs` so the working set stays in cache. */
static void multiply_band(const double *a, const double *b_band, double *c, int64_t rows,
                          int64_t n, int64_t a_col0, int64_t kcount, int64_t bs)
{
    for (int64_t ii = 0; ii < rows; ii += bs) {
        int64_t ie = ii + bs < rows ? ii + bs : rows;
        for (int64_t kk = 0; kk < kcount; kk += bs) {
            int64_t ke = kk + bs < kcount ? kk + bs : kcount;
            for (int64_t jj = 0; jj < n; jj += bs) {
                int64_t je = jj + bs < n ? jj + bs : n;
                for (int64_t i = ii; i < ie; i++) {
                    double *crow = c + i * n;
                    for (int64_t k = kk; k < ke; k++) {
                        const double aik = a[i * n + a_col0 + k];
                        const double *brow = b_band + k * n;
                        for (int64_t j = jj; j < je; j++)
                            crow[j] += aik * brow[j];
                    }
                }
            }
        }
    }
}

static int matmul_validate(const app_context *ctx, const void *data, hm_error *err)
{
    const matmul_params *p = data;
    if (p->size < ctx->size)
        return hm_error_set(err, "--size %lld is smaller than the number of ranks (%d)",
                            (long long)p->size, ctx->size);
    if (p->block > p->size)
        return hm_error_set(err, "--block %lld is larger than --size %lld",
                            (long long)p->block, (long long)p->size);
    return 0;
}

typedef struct matmul_buffers {
    double *a, *c, *band_now, *band_next, *x, *y;
    int *counts, *displs;
} matmul_buffers;

static void buffers_free(matmul_buffers *m)
{
    free(m->a);
    free(m->c);
    free(m->band_now);
    free(m->band_next);
    free(m->x);
    free(m->y);
    free(m->counts);
    free(m->displs);
}

/* Freivalds' check of this rank's band of C. Returns the number of rows of
 * the band where C x and A (B x) differ beyond rounding. y = B x must hold
 * the full product (every rank's share gathered). */
static int64_t check_band(const matmul_buffers *m, int64_t rows, int64_t n)
{
    int64_t wrong = 0;
    for (int64_t i = 0; i < rows; i++) {
        double cx = 0.0, aby = 0.0, scale = 0.0;
        for (int64_t j = 0; j < n; j++) {
            cx += m->c[i * n + j] * m->x[j];
            aby += m->a[i * n + j] * m->y[j];
            scale += fabs(m->a[i * n + j] * m->y[j]);
        }
        /* Rounding grows with n; a wrong element of C changes cx by at
         * least 0.5 x its error (x >= 0.5), far above this bound. */
        if (!(fabs(cx - aby) <= 1e-12 * (double)n * (scale + 1.0)))
            wrong++;
    }
    return wrong;
}

static int matmul_run(const app_context *ctx, const void *data, app_result *result,
                      hm_error *err)
{
    const matmul_params *p = data;
    const int64_t n = p->size;
    int64_t first, rows, max_rows, unused;
    band(n, ctx->size, ctx->rank, &first, &rows);
    band(n, ctx->size, 0, &unused, &max_rows);   /* rank 0's band is the largest */

    matmul_buffers m = {0};
    size_t band_bytes = (size_t)max_rows * (size_t)n * sizeof(double);
    m.a = malloc(band_bytes);
    m.c = malloc(band_bytes);
    m.band_now = malloc(band_bytes);
    m.band_next = malloc(band_bytes);
    m.x = malloc((size_t)n * sizeof(double));
    m.y = malloc((size_t)n * sizeof(double));
    m.counts = malloc((size_t)ctx->size * sizeof(int));
    m.displs = malloc((size_t)ctx->size * sizeof(int));
    int rc = 0;
    if (!m.a || !m.c || !m.band_now || !m.band_next || !m.x || !m.y || !m.counts || !m.displs)
        rc = hm_error_set(err, "cannot allocate 4 bands of %zu bytes (--size %lld)", band_bytes,
                          (long long)n);
    if (!app_all_ok(ctx, rc == 0)) {
        if (rc == 0)
            rc = hm_error_set(err, "another rank could not allocate its matrices");
        buffers_free(&m);
        return rc;
    }

    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++)
            m.a[i * n + j] = entry_a(first + i, j);
    for (int64_t j = 0; j < n; j++)
        m.x[j] = entry_x(j);
    for (int r = 0; r < ctx->size; r++) {
        int64_t f, cnt;
        band(n, ctx->size, r, &f, &cnt);
        m.counts[r] = (int)cnt;
        m.displs[r] = (int)f;
    }

    const int left = (ctx->rank + ctx->size - 1) % ctx->size;
    const int right = (ctx->rank + 1) % ctx->size;
    int64_t compute_ns = 0, wait_ns = 0, wrong = 0;
    double bytes_sent = 0.0;
    for (int64_t rep = 0; rep < p->repeat; rep++) {
        memset(m.c, 0, (size_t)rows * (size_t)n * sizeof(double));
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++)
                m.band_now[i * n + j] = entry_b(first + i, j);
        /* y = B x: each rank's rows of B x, gathered everywhere. */
        for (int64_t i = 0; i < rows; i++) {
            double s = 0.0;
            for (int64_t j = 0; j < n; j++)
                s += m.band_now[i * n + j] * m.x[j];
            m.y[first + i] = s;
        }
        if (MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, m.y, m.counts, m.displs,
                           MPI_DOUBLE, ctx->comm) != MPI_SUCCESS) {
            hm_error_set(err, "MPI_Allgatherv of B x failed");
            app_abort(ctx, "matmul", err);
        }

        for (int step = 0; step < ctx->size; step++) {
            /* At step s this rank holds the band of rank (rank + s) mod n. */
            const int owner = (ctx->rank + step) % ctx->size;
            const int next_owner = (owner + 1) % ctx->size;
            const bool pass_on = step + 1 < ctx->size;
            MPI_Request reqs[2];
            MPI_Status statuses[2]; /* not MPI_STATUSES_IGNORE: see app_exchange.c */
            int mpi_rc = MPI_SUCCESS;
            if (pass_on) {
                mpi_rc |= MPI_Irecv(m.band_next, m.counts[next_owner] * (int)n, MPI_DOUBLE,
                                    right, 0, ctx->comm, &reqs[0]);
                mpi_rc |= MPI_Isend(m.band_now, m.counts[owner] * (int)n, MPI_DOUBLE, left, 0,
                                    ctx->comm, &reqs[1]);
                bytes_sent += (double)m.counts[owner] * (double)n * sizeof(double);
            }
            int64_t t0 = app_now_ns();
            multiply_band(m.a, m.band_now, m.c, rows, n, m.displs[owner], m.counts[owner],
                          p->block);
            int64_t t1 = app_now_ns();
            if (pass_on)
                mpi_rc |= MPI_Waitall(2, reqs, statuses);
            wait_ns += app_now_ns() - t1;
            compute_ns += t1 - t0;
            if (mpi_rc != MPI_SUCCESS) {
                hm_error_set(err, "passing bands of B around the ring failed");
                app_abort(ctx, "matmul", err);
            }
            double *swap = m.band_now;
            m.band_now = m.band_next;
            m.band_next = swap;
        }
        if (p->corrupt && ctx->rank == 0 && rep + 1 == p->repeat)
            m.c[rows * n / 2] += 1.0;   /* one wrong element the check must find */
        wrong += check_band(&m, rows, n);
    }
    buffers_free(&m);

    const double flops = 2.0 * (double)rows * (double)n * (double)n * (double)p->repeat;
    result->bytes_moved = bytes_sent;
    result->busy_ns = compute_ns + wait_ns;
    result->failures = wrong;
    app_result_extra(result, "flops", flops, APP_SUM);
    app_result_extra(result, "compute_s_max", (double)compute_ns * 1e-9, APP_MAX);
    app_result_extra(result, "wait_s_max", (double)wait_ns * 1e-9, APP_MAX);
    /* Per rank, then summed: the job's rate while multiplying. */
    app_result_extra(result, "gflops_per_s",
                     compute_ns > 0 ? flops / (double)(compute_ns + wait_ns) : 0.0, APP_SUM);
    return 0;
}

int main(int argc, char **argv)
{
    /* Defaults: about 15-20 s with 2 ranks on a small machine. */
    matmul_params params = {.size = 1536, .block = 64, .repeat = 3};
    app_option options[] = {
        APP_SIZE("size", &params.size, 1, 32768, "N", "matrix order (N x N doubles)"),
        APP_SIZE("block", &params.block, 1, 32768, "B", "block size of the cache blocking"),
        APP_INT("repeat", &params.repeat, 1, 1000000, "R", "multiplications (each verified)"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 damages one element of C, to show the check catches it"),
    };
    app_program program = {
        .name = "matmul",
        .summary = "Blocked matrix multiplication C = A x B, rows distributed over the ranks.",
        .details = "Each rank owns a band of rows of A, B and C. Bands of B travel around a "
                   "ring of ranks while each rank multiplies with the band it holds, in "
                   "--block x --block tiles. Each product is verified with Freivalds' check "
                   "(C x = A (B x) for a fixed x). Reports GFLOP/s: compare sizes to see the "
                   "decomposition limit (less work per rank, same overheads).",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = matmul_validate,
        .run = matmul_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
