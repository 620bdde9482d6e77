/* cg: the conjugate gradient kernel of the NAS Parallel Benchmarks, on a
 * matrix of our own.
 *
 * NPB's CG estimates the smallest eigenvalue of a sparse symmetric matrix by
 * inverse power iteration, each step a fixed number of CG iterations. Here
 * the matrix has rows of 2 x --offsets scattered entries: row i is coupled
 * to i +- o_t (mod n) for pseudo-random offsets o_t, with weights that make
 * it symmetric and strongly diagonally dominant (so positive definite and
 * well conditioned). Rows are split among ranks; every matrix-vector product
 * gathers the whole vector (MPI_Allgatherv) because the columns are spread
 * over all of it, and every CG iteration needs two dot products
 * (MPI_Allreduce of one number): small messages, latency-bound.
 *
 * Verification: after the last solve, the true residual |x - A z| / |x| is
 * recomputed from scratch (not the recurrence CG carries) and must be below
 * 1e-8; the estimate zeta must be finite and positive. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app_common.h"
#include "npb_common.h"

#define CG_INNER 25

static const struct {
    int64_t n;
    int offsets;
    int outer;
} cg_classes[NPB_N_CLASSES] = {
    [NPB_CLASS_S] = {1 << 17, 7, 15},
    [NPB_CLASS_W] = {1 << 19, 7, 30},
    [NPB_CLASS_A] = {1 << 20, 9, 35},
};

typedef struct cg_params {
    const char *class_name;
    bool corrupt;
} cg_params;

static int cg_validate(const app_context *ctx, const void *data, hm_error *err)
{
    (void)ctx;
    const cg_params *p = data;
    return npb_class_index(p->class_name, err) < 0 ? -1 : 0;
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The weight of the pair (i, i + o_t): in -(0.1 .. 1.0). */
static double weight(int64_t i, int t)
{
    return -(0.1 + 0.9 * (double)(mix((uint64_t)i * 64 + (uint64_t)t + 1) >> 11) * 0x1p-53);
}

typedef struct cg_matrix {
    int64_t rows, first, n, width;   /* width: entries per row, diagonal first */
    int64_t *col;
    double *val;
} cg_matrix;

static void cg_build(cg_matrix *a, const int64_t *offsets, int n_offsets)
{
    for (int64_t r = 0; r < a->rows; r++) {
        const int64_t i = a->first + r;
        int64_t *c = a->col + r * a->width;
        double *v = a->val + r * a->width, off_sum = 0.0;
        for (int t = 0; t < n_offsets; t++) {
            const int64_t up = (i + offsets[t]) % a->n, down = (i - offsets[t] + a->n) % a->n;
            c[1 + 2 * t] = up;
            v[1 + 2 * t] = weight(i, t);
            c[2 + 2 * t] = down;
            v[2 + 2 * t] = weight(down, t);   /* the pair (down, down + o_t): symmetric */
            off_sum += fabs(v[1 + 2 * t]) + fabs(v[2 + 2 * t]);
        }
        c[0] = i;
        v[0] = 1.5 * off_sum;   /* Gershgorin: eigenvalues in [0.5, 2.5] x off_sum */
    }
}

static void cg_matvec(const cg_matrix *a, const double *x_full, double *y)
{
    for (int64_t r = 0; r < a->rows; r++) {
        const int64_t *c = a->col + r * a->width;
        const double *v = a->val + r * a->width;
        double s = 0.0;
        for (int64_t k = 0; k < a->width; k++)
            s += v[k] * x_full[c[k]];
        y[r] = s;
    }
}

typedef struct cg_state {
    const app_context *ctx;
    int *counts, *displs;
    double *full;   /* the gathered vector */
    int64_t allreduces, gathers;
    hm_error *err;
} cg_state;

static double dot(cg_state *s, const double *x, const double *y, int64_t n)
{
    double local = 0.0, total = 0.0;
    for (int64_t i = 0; i < n; i++)
        local += x[i] * y[i];
    if (MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, s->ctx->comm) != MPI_SUCCESS) {
        hm_error_set(s->err, "MPI_Allreduce of a dot product failed");
        app_abort(s->ctx, "cg", s->err);
    }
    s->allreduces++;
    return total;
}

/* y = A x for this rank's rows; x is this rank's part of the vector. */
static void product(cg_state *s, const cg_matrix *a, const double *x, double *y)
{
    memcpy(s->full + a->first, x, (size_t)a->rows * sizeof(double));
    if (MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, s->full, s->counts, s->displs,
                       MPI_DOUBLE, s->ctx->comm) != MPI_SUCCESS) {
        hm_error_set(s->err, "MPI_Allgatherv of the vector failed");
        app_abort(s->ctx, "cg", s->err);
    }
    s->gathers++;
    cg_matvec(a, s->full, y);
}

static int cg_run(const app_context *ctx, const void *data, app_result *result, hm_error *err)
{
    const cg_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    const int64_t n = cg_classes[cls].n;
    const int n_off = cg_classes[cls].offsets;
    cg_matrix a = {.n = n, .width = 1 + 2 * n_off};
    a.first = n * ctx->rank / ctx->size;
    a.rows = n * (ctx->rank + 1) / ctx->size - a.first;
    const int64_t rows = a.rows;

    cg_state s = {.ctx = ctx, .err = err};
    a.col = malloc((size_t)(rows * a.width) * sizeof(int64_t));
    a.val = malloc((size_t)(rows * a.width) * sizeof(double));
    s.full = malloc((size_t)n * sizeof(double));
    s.counts = malloc((size_t)ctx->size * sizeof(int));
    s.displs = malloc((size_t)ctx->size * sizeof(int));
    double *vec = malloc((size_t)(5 * rows) * sizeof(double));
    bool ok = a.col && a.val && s.full && s.counts && s.displs && vec;
    if (!app_all_ok(ctx, ok)) {
        free(a.col), free(a.val), free(s.full), free(s.counts), free(s.displs), free(vec);
        return hm_error_set(err, "cannot allocate the matrix (%lld rows)", (long long)n);
    }
    double *x = vec, *z = vec + rows, *r = vec + 2 * rows, *pv = vec + 3 * rows,
           *q = vec + 4 * rows;
    for (int k = 0; k < ctx->size; k++) {
        s.displs[k] = (int)(n * k / ctx->size);
        s.counts[k] = (int)(n * (k + 1) / ctx->size) - s.displs[k];
    }
    /* Offsets spread over the whole range: the columns of a row are far
     * apart, as in NPB's random matrix. */
    int64_t offsets[16];
    uint64_t seed = NPB_SEED;
    for (int t = 0; t < n_off; t++)
        offsets[t] = 1 + (int64_t)(npb_randlc(&seed, NPB_A) * (double)(n / 2 - 2));
    cg_build(&a, offsets, n_off);

    for (int64_t i = 0; i < rows; i++)
        x[i] = 1.0;
    double zeta = 0.0, residual = 0.0;
    int64_t t0 = app_now_ns();
    for (int it = 0; it < cg_classes[cls].outer; it++) {
        /* Solve A z = x by CG from z = 0. */
        memset(z, 0, (size_t)rows * sizeof(double));
        memcpy(r, x, (size_t)rows * sizeof(double));
        memcpy(pv, x, (size_t)rows * sizeof(double));
        double rho = dot(&s, r, r, rows);
        for (int k = 0; k < CG_INNER; k++) {
            product(&s, &a, pv, q);
            const double alpha = rho / dot(&s, pv, q, rows);
            for (int64_t i = 0; i < rows; i++) {
                z[i] += alpha * pv[i];
                r[i] -= alpha * q[i];
            }
            const double rho_next = dot(&s, r, r, rows);
            const double beta = rho_next / rho;
            rho = rho_next;
            for (int64_t i = 0; i < rows; i++)
                pv[i] = r[i] + beta * pv[i];
        }
        if (p->corrupt && ctx->rank == 0 && it + 1 == cg_classes[cls].outer)
            z[0] += 1.0;   /* a wrong solution the residual check must find */
        /* The true residual of this solve, from scratch. */
        product(&s, &a, z, q);
        for (int64_t i = 0; i < rows; i++)
            r[i] = x[i] - q[i];
        residual = sqrt(dot(&s, r, r, rows) / dot(&s, x, x, rows));
        zeta = 1.0 / dot(&s, x, z, rows);
        const double norm = 1.0 / sqrt(dot(&s, z, z, rows));
        for (int64_t i = 0; i < rows; i++)
            x[i] = z[i] * norm;
    }
    int64_t solve_ns = app_now_ns() - t0;
    free(a.col), free(a.val), free(s.full), free(s.counts), free(s.displs), free(vec);

    const bool good = residual < 1e-8 && isfinite(zeta) && zeta > 0.0;
    result->failures = (ctx->rank == 0 && !good) ? 1 : 0;
    result->busy_ns = solve_ns;
    result->bytes_moved = (double)s.gathers * (double)(n - rows) * sizeof(double) +
                          (double)s.allreduces * sizeof(double);
    app_result_extra(result, "rows", (double)rows, APP_SUM);
    app_result_extra(result, "nonzeros", (double)(rows * a.width), APP_SUM);
    app_result_extra(result, "zeta", ctx->rank == 0 ? zeta : 0.0, APP_SUM);
    app_result_extra(result, "residual", ctx->rank == 0 ? residual : 0.0, APP_SUM);
    app_result_extra(result, "allreduces", (double)s.allreduces, APP_MAX);
    return 0;
}

int main(int argc, char **argv)
{
    cg_params params = {.class_name = "S"};
    app_option options[] = {
        APP_STRING("class", &params.class_name, "S|W|A",
                   "size class: 2^17, 2^19, 2^20 rows; 15, 30, 35 outer iterations"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 damages the last solution, to show the check catches it"),
    };
    app_program program = {
        .name = "cg",
        .summary = "NPB-like CG: inverse power iteration, 25 CG iterations per step.",
        .details = "A sparse symmetric positive definite matrix (row i coupled to i +- o_t "
                   "for scattered offsets o_t) split by rows; each product gathers the vector "
                   "(MPI_Allgatherv), each CG iteration reduces two dot products "
                   "(MPI_Allreduce): latency-bound. Verified by the true residual of the "
                   "last solve, recomputed from scratch (< 1e-8).",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = cg_validate,
        .run = cg_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
