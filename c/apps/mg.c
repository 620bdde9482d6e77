/* mg: the multigrid kernel of the NAS Parallel Benchmarks, simplified.
 *
 * Solves the 3-D Poisson equation -lap u = f on an n^3 cell-centred grid
 * (zero outside) with V-cycles: weighted Jacobi smoothing (2 sweeps down,
 * 2 up), restriction by averaging 2x2x2 cells, trilinear prolongation,
 * many sweeps on the coarsest grid. f holds +1 and -1 charges at cells drawn
 * from NPB's generator, as in NPB's MG. The grid is cut into slabs of
 * z-planes, one per rank; every sweep and residual exchanges one plane with
 * each neighbour (MPI_Sendrecv) at every level. Streaming through arrays of
 * n^3 doubles: bandwidth-bound. A class solves from zero several times.
 *
 * Verification: each solve must reduce the residual norm |f - A u| by 10x
 * (computed from scratch after the last cycle). The V-cycle converges by
 * about 0.66 per cycle (the zero-outside boundary of a cell-centred grid is
 * not the same surface on every level), so 8 cycles reach about 0.04; a
 * damaged value raises the residual by orders of magnitude. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app_common.h"
#include "npb_common.h"

#define MG_CHARGES 10
#define MG_MAX_LEVELS 16
#define MG_OMEGA (6.0 / 7.0)

static const struct {
    int n_log2, cycles, solves;
    double reduction;   /* |r_end| / |r_0| must be below this */
} mg_classes[NPB_N_CLASSES] = {
    [NPB_CLASS_S] = {6, 8, 3, 0.1},
    [NPB_CLASS_W] = {7, 8, 3, 0.1},
    [NPB_CLASS_A] = {8, 8, 2, 0.1},
};

typedef struct mg_params {
    const char *class_name;
    bool corrupt;
} mg_params;

static int mg_validate(const app_context *ctx, const void *data, hm_error *err)
{
    const mg_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    if (cls < 0)
        return -1;
    const int n = 1 << mg_classes[cls].n_log2;
    if ((ctx->size & (ctx->size - 1)) != 0 || ctx->size > n / 2)
        return hm_error_set(err, "needs a power-of-two number of ranks, at most %d for class %s "
                            "(got %d)", n / 2, p->class_name, ctx->size);
    return 0;
}

/* One level: this rank's planes [1, nz] of an n x n x (nz + 2) array,
 * planes 0 and nz + 1 are the neighbours' (or zero outside the grid). */
typedef struct mg_level {
    int n, nz;
    double h2;   /* h^2 */
    double *u, *f, *r;
} mg_level;

typedef struct mg_ctx {
    const app_context *ctx;
    hm_error *err;
    int64_t exchanges;
    double bytes;
} mg_ctx;

#define IDX(l, i, j, k) ((((size_t)(k)) * (size_t)(l)->n + (size_t)(j)) * (size_t)(l)->n + (size_t)(i))

static void halo(mg_ctx *m, const mg_level *l, double *a)
{
    const app_context *ctx = m->ctx;
    const int down = ctx->rank > 0 ? ctx->rank - 1 : MPI_PROC_NULL;
    const int up = ctx->rank + 1 < ctx->size ? ctx->rank + 1 : MPI_PROC_NULL;
    const int plane = l->n * l->n;
    int rc = MPI_Sendrecv(a + IDX(l, 0, 0, l->nz), plane, MPI_DOUBLE, up, 1, a, plane,
                          MPI_DOUBLE, down, 1, ctx->comm, MPI_STATUS_IGNORE);
    rc |= MPI_Sendrecv(a + IDX(l, 0, 0, 1), plane, MPI_DOUBLE, down, 2,
                       a + IDX(l, 0, 0, l->nz + 1), plane, MPI_DOUBLE, up, 2, ctx->comm,
                       MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        hm_error_set(m->err, "halo exchange failed");
        app_abort(ctx, "mg", m->err);
    }
    m->exchanges++;
    m->bytes += (double)((down != MPI_PROC_NULL) + (up != MPI_PROC_NULL)) * plane * 8.0;
}

/* r = f - A u on this rank's planes (u's halos must be current). */
static void residual(const mg_level *l)
{
    const int n = l->n;
    const double inv_h2 = 1.0 / l->h2;
    for (int k = 1; k <= l->nz; k++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < n; i++) {
                const double *u = l->u;
                double s = u[IDX(l, i, j, k - 1)] + u[IDX(l, i, j, k + 1)];
                s += j > 0 ? u[IDX(l, i, j - 1, k)] : 0.0;
                s += j + 1 < n ? u[IDX(l, i, j + 1, k)] : 0.0;
                s += i > 0 ? u[IDX(l, i - 1, j, k)] : 0.0;
                s += i + 1 < n ? u[IDX(l, i + 1, j, k)] : 0.0;
                l->r[IDX(l, i, j, k)] = l->f[IDX(l, i, j, k)] - (6.0 * u[IDX(l, i, j, k)] - s) * inv_h2;
            }
}

static void smooth(mg_ctx *m, const mg_level *l, int sweeps)
{
    const size_t first = IDX(l, 0, 0, 1), last = IDX(l, 0, 0, l->nz + 1);
    for (int s = 0; s < sweeps; s++) {
        halo(m, l, l->u);
        residual(l);
        for (size_t x = first; x < last; x++)
            l->u[x] += MG_OMEGA * l->h2 / 6.0 * l->r[x];
    }
}

static void vcycle(mg_ctx *m, mg_level *lv, int level, int levels)
{
    mg_level *l = &lv[level];
    if (level + 1 == levels) {
        smooth(m, l, 4 * l->n);
        return;
    }
    smooth(m, l, 2);
    halo(m, l, l->u);
    residual(l);
    mg_level *c = &lv[level + 1];
    memset(c->u, 0, (size_t)c->n * (size_t)c->n * (size_t)(c->nz + 2) * sizeof(double));
    for (int k = 1; k <= c->nz; k++)
        for (int j = 0; j < c->n; j++)
            for (int i = 0; i < c->n; i++) {
                double s = 0.0;
                for (int d = 0; d < 8; d++)
                    s += l->r[IDX(l, 2 * i + (d & 1), 2 * j + ((d >> 1) & 1), 2 * k - 1 + (d >> 2))];
                c->f[IDX(c, i, j, k)] = s / 8.0;
            }
    vcycle(m, lv, level + 1, levels);
    /* Trilinear prolongation: each fine cell from its 8 nearest coarse
     * cells, weights 3/4 and 1/4 per direction (zero outside the grid). */
    halo(m, c, c->u);
    for (int k = 1; k <= l->nz; k++) {
        const int kc = (k + 1) / 2, dk = (k % 2) ? -1 : 1;
        for (int j = 0; j < l->n; j++) {
            const int jc = j / 2, dj = (j % 2) ? 1 : -1;
            for (int i = 0; i < l->n; i++) {
                const int ic = i / 2, di = (i % 2) ? 1 : -1;
                double e = 0.0;
                for (int d = 0; d < 8; d++) {
                    const int ii = ic + ((d & 1) ? di : 0), jj = jc + ((d & 2) ? dj : 0),
                              kk = kc + ((d & 4) ? dk : 0);
                    if (ii < 0 || ii >= c->n || jj < 0 || jj >= c->n)
                        continue;
                    const double w = ((d & 1) ? 0.25 : 0.75) * ((d & 2) ? 0.25 : 0.75) *
                                     ((d & 4) ? 0.25 : 0.75);
                    e += w * c->u[IDX(c, ii, jj, kk)];
                }
                l->u[IDX(l, i, j, k)] += e;
            }
        }
    }
    smooth(m, l, 2);
}

static double norm(mg_ctx *m, const mg_level *l)
{
    double local = 0.0, total = 0.0;
    for (size_t x = IDX(l, 0, 0, 1); x < IDX(l, 0, 0, l->nz + 1); x++)
        local += l->r[x] * l->r[x];
    if (MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, m->ctx->comm) != MPI_SUCCESS) {
        hm_error_set(m->err, "MPI_Allreduce of the residual norm failed");
        app_abort(m->ctx, "mg", m->err);
    }
    return sqrt(total);
}

static int mg_run(const app_context *ctx, const void *data, app_result *result, hm_error *err)
{
    const mg_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    const int n = 1 << mg_classes[cls].n_log2;
    mg_level lv[MG_MAX_LEVELS] = {{0}};
    int levels = 0;
    bool ok = true;
    for (int nl = n, nz = n / ctx->size; nz >= 1 && nl >= 2 && levels < MG_MAX_LEVELS;
         nl /= 2, nz /= 2) {
        mg_level *l = &lv[levels++];
        l->n = nl;
        l->nz = nz;
        const double h = 1.0 / nl;
        l->h2 = h * h;
        size_t cells = (size_t)nl * (size_t)nl * (size_t)(nz + 2);
        l->u = calloc(cells, sizeof(double));
        l->f = calloc(cells, sizeof(double));
        l->r = calloc(cells, sizeof(double));
        ok = ok && l->u && l->f && l->r;
        if (nz % 2)
            break;   /* an odd slab cannot be halved: this is the coarsest level */
    }
    if (!app_all_ok(ctx, ok)) {
        for (int i = 0; i < levels; i++)
            free(lv[i].u), free(lv[i].f), free(lv[i].r);
        return hm_error_set(err, "cannot allocate the grids (%d^3)", n);
    }
    /* NPB-like right-hand side: charges at cells drawn from the generator. */
    mg_level *fine = &lv[0];
    const int z0 = ctx->rank * fine->nz;
    uint64_t seed = NPB_SEED;
    for (int c = 0; c < 2 * MG_CHARGES; c++) {
        int i = (int)(npb_randlc(&seed, NPB_A) * n), j = (int)(npb_randlc(&seed, NPB_A) * n),
            k = (int)(npb_randlc(&seed, NPB_A) * n);
        if (k >= z0 && k < z0 + fine->nz)
            fine->f[IDX(fine, i, j, k - z0 + 1)] = c < MG_CHARGES ? 1.0 : -1.0;
    }

    mg_ctx m = {.ctx = ctx, .err = err};
    int64_t wrong = 0, t0 = app_now_ns();
    double worst = 0.0;
    const size_t fine_cells = (size_t)n * (size_t)n * (size_t)(fine->nz + 2);
    for (int s = 0; s < mg_classes[cls].solves; s++) {
        memset(fine->u, 0, fine_cells * sizeof(double));
        halo(&m, fine, fine->u);
        residual(fine);
        const double r0 = norm(&m, fine);
        for (int c = 0; c < mg_classes[cls].cycles; c++)
            vcycle(&m, lv, 0, levels);
        if (p->corrupt && ctx->rank == 0 && s + 1 == mg_classes[cls].solves)
            fine->u[IDX(fine, n / 2, n / 2, 1)] += 1.0;   /* a wrong value the check must find */
        halo(&m, fine, fine->u);
        residual(fine);
        const double ratio = norm(&m, fine) / r0;
        worst = fmax(worst, ratio);
        if (ctx->rank == 0 && !(ratio < mg_classes[cls].reduction))
            wrong++;
    }
    int64_t solve_ns = app_now_ns() - t0;
    for (int i = 0; i < levels; i++)
        free(lv[i].u), free(lv[i].f), free(lv[i].r);

    result->failures = wrong;
    result->busy_ns = solve_ns;
    result->bytes_moved = m.bytes;
    app_result_extra(result, "grid", (double)n, APP_MAX);
    app_result_extra(result, "levels", (double)levels, APP_MAX);
    app_result_extra(result, "vcycles", (double)mg_classes[cls].cycles * mg_classes[cls].solves,
                     APP_MAX);
    app_result_extra(result, "residual_reduction", ctx->rank == 0 ? worst : 0.0, APP_SUM);
    app_result_extra(result, "halo_exchanges", (double)m.exchanges, APP_MAX);
    return 0;
}

int main(int argc, char **argv)
{
    mg_params params = {.class_name = "S"};
    app_option options[] = {
        APP_STRING("class", &params.class_name, "S|W|A",
                   "size class: 64^3 x 3 solves, 128^3 x 3, 256^3 x 2 (8 V-cycles each)"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 damages the last solution, to show the check catches it"),
    };
    app_program program = {
        .name = "mg",
        .summary = "NPB-like MG: V-cycle multigrid for 3-D Poisson on z-slabs.",
        .details = "Cell-centred grid split into z-slabs; weighted Jacobi smoothing, "
                   "averaging restriction, trilinear prolongation; one plane exchanged with "
                   "each neighbour per sweep at every level. Bandwidth-bound. Each solve "
                   "must reduce the residual by 10x (recomputed after the last cycle; about "
                   "0.66 per V-cycle here, so 8 cycles give 0.04). "
                   "Needs a power-of-two number of ranks.",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = mg_validate,
        .run = mg_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
