/* ft: the 3-D FFT kernel of the NAS Parallel Benchmarks.
 *
 * A complex field on an nx x ny x nz grid (NPB's generator) is transformed
 * to Fourier space once, then for t = 1 .. iterations its spectrum is damped
 * by exp(-4 alpha pi^2 |k|^2 t) and transformed back (NPB's "evolve"), with
 * a checksum per iteration. The grid is cut into z-slabs: x and y transforms
 * are local, the z transform needs a global transpose (MPI_Alltoall of the
 * whole field) each way. All-to-all traffic of the whole data set.
 *
 * Verification: (1) before the run, a plane wave of known wave numbers is
 * transformed and must become a single spike of height N at those numbers
 * and zero elsewhere (catches wrong indexing and transposes); (2) after the
 * last iteration, the inverse result transformed forward again must equal
 * the damped spectrum it came from (relative error 1e-10); (3) the checksums
 * must be finite. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app_common.h"
#include "npb_common.h"

static const struct {
    int nx, ny, nz, iterations;
} ft_classes[NPB_N_CLASSES] = {
    [NPB_CLASS_S] = {128, 128, 64, 10},
    [NPB_CLASS_W] = {256, 256, 128, 10},
    [NPB_CLASS_A] = {256, 256, 256, 25},
};

#define FT_ALPHA 1e-6

typedef struct ft_params {
    const char *class_name;
    bool corrupt;
} ft_params;

static int ft_validate(const app_context *ctx, const void *data, hm_error *err)
{
    const ft_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    if (cls < 0)
        return -1;
    if (ft_classes[cls].nz % ctx->size || ft_classes[cls].ny % ctx->size)
        return hm_error_set(err, "class %s needs a number of ranks dividing %d (got %d)",
                            p->class_name, ft_classes[cls].nz, ctx->size);
    return 0;
}

/* In-place radix-2 FFT of n points (n a power of two); sign -1 forward. */
static void fft1(double complex *a, int n, int sign)
{
    for (int i = 1, j = 0; i < n; i++) {
        int bit = n >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j ^= bit;
        if (i < j) {
            double complex t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
    }
    for (int len = 2; len <= n; len <<= 1) {
        const double ang = sign * 2.0 * M_PI / len;
        const double complex wl = cos(ang) + I * sin(ang);
        for (int i = 0; i < n; i += len) {
            double complex w = 1.0;
            for (int k = 0; k < len / 2; k++) {
                double complex u = a[i + k], v = a[i + k + len / 2] * w;
                a[i + k] = u + v;
                a[i + k + len / 2] = u - v;
                w *= wl;
            }
        }
    }
}

/* FFT of `count` lines of n points, `stride` apart within a line, lines
 * starting at base + l * line_step; through a contiguous scratch line. */
static void fft_lines(double complex *base, int count, size_t line_step, int n, size_t stride,
                      int sign, double complex *line)
{
    for (int l = 0; l < count; l++) {
        double complex *p = base + (size_t)l * line_step;
        for (int i = 0; i < n; i++)
            line[i] = p[(size_t)i * stride];
        fft1(line, n, sign);
        for (int i = 0; i < n; i++)
            p[(size_t)i * stride] = line[i];
    }
}

typedef struct ft_ctx {
    const app_context *ctx;
    hm_error *err;
    int nx, ny, nz, zl, yl;   /* zl: planes per rank (slabs), yl: rows per rank (pencils) */
    double complex *pack, *unpack, *line;
    double bytes;
} ft_ctx;

static void alltoall(ft_ctx *f)
{
    const int block = f->zl * f->yl * f->nx * 2;
    if (MPI_Alltoall(f->pack, block, MPI_DOUBLE, f->unpack, block, MPI_DOUBLE, f->ctx->comm) !=
        MPI_SUCCESS) {
        hm_error_set(f->err, "MPI_Alltoall of the transpose failed");
        app_abort(f->ctx, "ft", f->err);
    }
    f->bytes += (double)block * 8.0 * (f->ctx->size - 1);
}

/* slab[z_local][y][x] -> pencil[y_local][z][x], transforming as it goes. */
static void forward(ft_ctx *f, double complex *slab, double complex *pencil)
{
    const size_t nx = (size_t)f->nx, ny = (size_t)f->ny;
    for (int z = 0; z < f->zl; z++) {
        fft_lines(slab + z * ny * nx, f->ny, nx, f->nx, 1, -1, f->line);   /* along x */
        fft_lines(slab + z * ny * nx, f->nx, 1, f->ny, nx, -1, f->line);   /* along y */
    }
    for (int d = 0; d < f->ctx->size; d++)
        for (int z = 0; z < f->zl; z++)
            memcpy(f->pack + (((size_t)d * f->zl + z) * f->yl) * nx,
                   slab + ((size_t)z * ny + (size_t)d * f->yl) * nx,
                   (size_t)f->yl * nx * sizeof(double complex));
    alltoall(f);
    for (int s = 0; s < f->ctx->size; s++)
        for (int z = 0; z < f->zl; z++)
            for (int y = 0; y < f->yl; y++)
                memcpy(pencil + ((size_t)y * f->nz + (size_t)s * f->zl + z) * nx,
                       f->unpack + (((size_t)s * f->zl + z) * f->yl + y) * nx,
                       nx * sizeof(double complex));
    for (int y = 0; y < f->yl; y++)
        fft_lines(pencil + (size_t)y * f->nz * nx, f->nx, 1, f->nz, nx, -1, f->line);
}

/* The inverse of forward (scaled by 1/N); overwrites pencil. */
static void inverse(ft_ctx *f, double complex *pencil, double complex *slab)
{
    const size_t nx = (size_t)f->nx, ny = (size_t)f->ny;
    for (int y = 0; y < f->yl; y++)
        fft_lines(pencil + (size_t)y * f->nz * nx, f->nx, 1, f->nz, nx, 1, f->line);
    for (int d = 0; d < f->ctx->size; d++)
        for (int z = 0; z < f->zl; z++)
            for (int y = 0; y < f->yl; y++)
                memcpy(f->pack + (((size_t)d * f->zl + z) * f->yl + y) * nx,
                       pencil + ((size_t)y * f->nz + (size_t)d * f->zl + z) * nx,
                       nx * sizeof(double complex));
    alltoall(f);
    for (int s = 0; s < f->ctx->size; s++)
        for (int z = 0; z < f->zl; z++)
            memcpy(slab + ((size_t)z * ny + (size_t)s * f->yl) * nx,
                   f->unpack + (((size_t)s * f->zl + z) * f->yl) * nx,
                   (size_t)f->yl * nx * sizeof(double complex));
    const double scale = 1.0 / ((double)f->nx * f->ny * f->nz);
    for (int z = 0; z < f->zl; z++) {
        fft_lines(slab + z * ny * nx, f->nx, 1, f->ny, nx, 1, f->line);
        fft_lines(slab + z * ny * nx, f->ny, nx, f->nx, 1, 1, f->line);
    }
    for (size_t i = 0; i < (size_t)f->zl * ny * nx; i++)
        slab[i] *= scale;
}

static double allreduce_max(ft_ctx *f, double v)
{
    double out = 0.0;
    if (MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, f->ctx->comm) != MPI_SUCCESS) {
        hm_error_set(f->err, "MPI_Allreduce failed");
        app_abort(f->ctx, "ft", f->err);
    }
    return out;
}

/* Signed wave number of index i on n points. */
static int wave(int i, int n)
{
    return i < n / 2 ? i : i - n;
}

static int ft_run(const app_context *ctx, const void *data, app_result *result, hm_error *err)
{
    const ft_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    ft_ctx f = {.ctx = ctx, .err = err, .nx = ft_classes[cls].nx, .ny = ft_classes[cls].ny,
                .nz = ft_classes[cls].nz};
    f.zl = f.nz / ctx->size;
    f.yl = f.ny / ctx->size;
    const size_t local = (size_t)f.zl * f.ny * f.nx;   /* = yl * nz * nx */
    double complex *slab = malloc(local * sizeof *slab), *pencil = malloc(local * sizeof *pencil),
                   *spectrum = malloc(local * sizeof *spectrum);
    f.pack = malloc(local * sizeof *f.pack);
    f.unpack = malloc(local * sizeof *f.unpack);
    f.line = malloc((size_t)(f.nx > f.nz ? (f.nx > f.ny ? f.nx : f.ny) : (f.nz > f.ny ? f.nz : f.ny)) *
                    sizeof *f.line);
    bool ok = slab && pencil && spectrum && f.pack && f.unpack && f.line;
    if (!app_all_ok(ctx, ok)) {
        free(slab), free(pencil), free(spectrum), free(f.pack), free(f.unpack), free(f.line);
        return hm_error_set(err, "cannot allocate the field (%d x %d x %d)", f.nx, f.ny, f.nz);
    }
    const double n_total = (double)f.nx * f.ny * f.nz;
    const int z0 = ctx->rank * f.zl, y0 = ctx->rank * f.yl;
    int64_t wrong = 0;

    /* (1) A plane wave exp(2 pi i (3x/nx + 5y/ny + 7z/nz)) becomes a spike. */
    const int kx = 3, ky = 5, kz = 7;
    for (int z = 0; z < f.zl; z++)
        for (int y = 0; y < f.ny; y++)
            for (int x = 0; x < f.nx; x++) {
                double ph = 2.0 * M_PI * ((double)kx * x / f.nx + (double)ky * y / f.ny +
                                          (double)kz * (z0 + z) / f.nz);
                slab[((size_t)z * f.ny + y) * f.nx + x] = cos(ph) + I * sin(ph);
            }
    forward(&f, slab, pencil);
    double off = 0.0;
    for (int y = 0; y < f.yl; y++)
        for (int z = 0; z < f.nz; z++)
            for (int x = 0; x < f.nx; x++) {
                double complex expect = (x == kx && y0 + y == ky && z == kz) ? n_total : 0.0;
                off = fmax(off, cabs(pencil[((size_t)y * f.nz + z) * f.nx + x] - expect));
            }
    const double spike_error = allreduce_max(&f, off) / n_total;
    if (!(spike_error <= 1e-8) && ctx->rank == 0)
        wrong++;

    /* NPB-like field: uniform random real and imaginary parts, each rank's
     * share of the stream reached by skipping ahead. */
    uint64_t seed = npb_skip(NPB_SEED, NPB_A, 2 * (uint64_t)z0 * f.ny * f.nx);
    for (size_t i = 0; i < local; i++) {
        double re = npb_randlc(&seed, NPB_A);
        slab[i] = re + I * npb_randlc(&seed, NPB_A);
    }
    int64_t t0 = app_now_ns();
    forward(&f, slab, spectrum);
    double checksum = 0.0;
    for (int t = 1; t <= ft_classes[cls].iterations; t++) {
        for (int y = 0; y < f.yl; y++)
            for (int z = 0; z < f.nz; z++)
                for (int x = 0; x < f.nx; x++) {
                    const int a = wave(x, f.nx), b = wave(y0 + y, f.ny), c = wave(z, f.nz);
                    const size_t i = ((size_t)y * f.nz + z) * f.nx + x;
                    pencil[i] = spectrum[i] *
                                exp(-4.0 * FT_ALPHA * M_PI * M_PI * (a * a + b * b + c * c) * t);
                }
        /* The last step: keep its damped spectrum for the round trip (the
         * undamped one is not needed any more). */
        if (t == ft_classes[cls].iterations)
            memcpy(spectrum, pencil, local * sizeof *pencil);
        inverse(&f, pencil, slab);
        double complex sum = 0.0;
        for (int k = 0; k < 1024; k++) {   /* NPB's checksum: 1024 scattered points */
            const int x = k % f.nx, y = (3 * k) % f.ny, z = (5 * k) % f.nz;
            if (z >= z0 && z < z0 + f.zl)
                sum += slab[((size_t)(z - z0) * f.ny + y) * f.nx + x];
        }
        checksum += creal(sum) + cimag(sum);
    }
    int64_t run_ns = app_now_ns() - t0;

    /* (2) forward(inverse(V)) == V for the last damped spectrum V. */
    if (p->corrupt && ctx->rank == 0)
        slab[local / 2] += 1.0;   /* a damaged value the round trip must find */
    forward(&f, slab, pencil);
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < local; i++) {
        diff = fmax(diff, cabs(pencil[i] - spectrum[i]));
        scale = fmax(scale, cabs(spectrum[i]));
    }
    diff = allreduce_max(&f, diff);
    scale = allreduce_max(&f, scale);
    double total_checksum = 0.0;
    if (MPI_Allreduce(&checksum, &total_checksum, 1, MPI_DOUBLE, MPI_SUM, ctx->comm) !=
        MPI_SUCCESS) {
        hm_error_set(err, "MPI_Allreduce of the checksums failed");
        app_abort(ctx, "ft", err);
    }
    if (ctx->rank == 0 && (!(diff <= 1e-10 * scale) || !isfinite(total_checksum)))
        wrong++;
    free(slab), free(pencil), free(spectrum), free(f.pack), free(f.unpack), free(f.line);

    result->failures = wrong;
    result->busy_ns = run_ns;
    result->bytes_moved = f.bytes;
    app_result_extra(result, "points", n_total, APP_MAX);
    app_result_extra(result, "iterations", ft_classes[cls].iterations, APP_MAX);
    app_result_extra(result, "checksum", ctx->rank == 0 ? total_checksum : 0.0, APP_SUM);
    app_result_extra(result, "plane_wave_error", ctx->rank == 0 ? spike_error : 0.0, APP_SUM);
    app_result_extra(result, "round_trip_error", ctx->rank == 0 ? diff / scale : 0.0, APP_SUM);
    return 0;
}

int main(int argc, char **argv)
{
    ft_params params = {.class_name = "S"};
    app_option options[] = {
        APP_STRING("class", &params.class_name, "S|W|A",
                   "size class: 128x128x64 x 10 steps, 256x256x128 x 10, 256^3 x 25"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 damages the last result, to show the check catches it"),
    };
    app_program program = {
        .name = "ft",
        .summary = "NPB-like FT: 3-D FFT evolution with global transposes (alltoall).",
        .details = "A random complex field is transformed once, then per step its spectrum is "
                   "damped and transformed back. z-slabs: x and y transforms local, the z "
                   "transform after an MPI_Alltoall transpose. Verified by a plane wave that "
                   "must become one spike, and by a forward transform of the last result "
                   "that must give back its spectrum (1e-10). The number of ranks must "
                   "divide nz and ny.",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = ft_validate,
        .run = ft_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
