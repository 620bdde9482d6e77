/* Peak double-precision FLOP rate: CHAINS independent accumulators per
 * thread, each acc = acc * x + y, so every FMA unit has work every cycle
 * (an FMA's latency is 4-5 cycles and a core issues 2 a cycle: 8-10 chains
 * of the widest vector keep both busy). The kernel is built three times
 * with GCC's target attribute (AVX-512F, AVX2 + FMA, SSE2) and the widest
 * the CPU supports runs, so one binary measures any x86-64 node; elsewhere
 * the portable C version runs, which the compiler vectorises for the
 * build's ISA. Intrinsics, not plain C: in ISO C mode GCC does not contract
 * a * b + c into an FMA (-ffp-contract=off), which would halve the peak. */
#include <stdlib.h>

#include "probe_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CHAINS 12

typedef struct fma_arg {
    int64_t iterations;
    double (*kernel)(int64_t iterations);
    volatile double *sink;  /* [thread]: keeps the chains' results alive */
} fma_arg;

#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static double fma_avx512(int64_t iterations)
{
    const __m512d x = _mm512_set1_pd(0.9999999), y = _mm512_set1_pd(1e-7);
#define DECL(k) __m512d a##k = _mm512_set1_pd(1.0 + (k) * 1e-3);
    REP12(DECL)
#undef DECL
    for (int64_t i = 0; i < iterations; i++) {
#define STEP(k) a##k = _mm512_fmadd_pd(a##k, x, y);
        REP12(STEP)
#undef STEP
    }
    __m512d s = _mm512_setzero_pd();
#define SUM(k) s = _mm512_add_pd(s, a##k);
    REP12(SUM)
#undef SUM
    return _mm512_reduce_add_pd(s);
}

__attribute__((target("avx2,fma"))) static double fma_avx2(int64_t iterations)
{
    const __m256d x = _mm256_set1_pd(0.9999999), y = _mm256_set1_pd(1e-7);
#define DECL(k) __m256d a##k = _mm256_set1_pd(1.0 + (k) * 1e-3);
    REP12(DECL)
#undef DECL
    for (int64_t i = 0; i < iterations; i++) {
#define STEP(k) a##k = _mm256_fmadd_pd(a##k, x, y);
        REP12(STEP)
#undef STEP
    }
    __m256d s = _mm256_setzero_pd();
#define SUM(k) s = _mm256_add_pd(s, a##k);
    REP12(SUM)
#undef SUM
    double out[4];
    _mm256_storeu_pd(out, s);
    return out[0] + out[1] + out[2] + out[3];
}

/* No FMA: a multiply and an add, the same 2 FLOPs per lane. */
static double fma_sse2(int64_t iterations)
{
    const __m128d x = _mm_set1_pd(0.9999999), y = _mm_set1_pd(1e-7);
#define DECL(k) __m128d a##k = _mm_set1_pd(1.0 + (k) * 1e-3);
    REP12(DECL)
#undef DECL
    for (int64_t i = 0; i < iterations; i++) {
#define STEP(k) a##k = _mm_add_pd(_mm_mul_pd(a##k, x), y);
        REP12(STEP)
#undef STEP
    }
    __m128d s = _mm_setzero_pd();
#define SUM(k) s = _mm_add_pd(s, a##k);
    REP12(SUM)
#undef SUM
    double out[2];
    _mm_storeu_pd(out, s);
    return out[0] + out[1];
}
#else
static double fma_portable(int64_t iterations)
{
    double a[CHAINS][4];
    for (int k = 0; k < CHAINS; k++)
        for (int l = 0; l < 4; l++)
            a[k][l] = 1.0 + k * 1e-3;
    for (int64_t i = 0; i < iterations; i++)
        for (int k = 0; k < CHAINS; k++)
            for (int l = 0; l < 4; l++)
                a[k][l] = a[k][l] * 0.9999999 + 1e-7;
    double s = 0;
    for (int k = 0; k < CHAINS; k++)
        for (int l = 0; l < 4; l++)
            s += a[k][l];
    return s;
}
#endif

static int fma_setup(void *p, size_t thread)
{
    (void)p;
    (void)thread;
    return 0;
}

static int fma_work(void *p, size_t thread)
{
    fma_arg *f = p;
    f->sink[thread] = f->kernel(f->iterations);
    return 0;
}

static void pick_kernel(hm_probe_fma *out, fma_arg *f)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        *out = (hm_probe_fma){.isa = "avx512f", .lanes = 8};
        f->kernel = fma_avx512;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *out = (hm_probe_fma){.isa = "avx2+fma", .lanes = 4};
        f->kernel = fma_avx2;
    } else {
        *out = (hm_probe_fma){.isa = "sse2", .lanes = 2};
        f->kernel = fma_sse2;
    }
#else
    *out = (hm_probe_fma){.isa = "portable C (the build's ISA)", .lanes = 4};
    f->kernel = fma_portable;
#endif
    out->chains = CHAINS;
}

int hm_probe_fma_run(const int *cpus, size_t n, double budget_s, hm_probe_fma *out,
                     hm_error *err)
{
    fma_arg f = {.iterations = 100000};
    pick_kernel(out, &f);
    f.sink = calloc(n, sizeof *f.sink);
    if (f.sink == NULL)
        return hm_error_set(err, "out of memory");
    /* A short run sizes the repetitions to a tenth of the budget each. */
    hm_probe_timing once;
    int rc = hm_probe_team_run(cpus, n, fma_setup, fma_work, &f, 0.0, 2, 2, &once, err);
    if (rc == 0) {
        double per_iter_s = once.best_s / (double)f.iterations;
        double want = budget_s / 10.0 / per_iter_s;
        f.iterations = want > 1000 ? (int64_t)want : 1000;
        rc = hm_probe_team_run(cpus, n, fma_setup, fma_work, &f, budget_s, 3, 100000,
                               &out->timing, err);
    }
    /* the chains converge to y / (1 - x) = 1: anything else means a
     * kernel that did not run as written */
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!(f.sink[i] > 0.5 * CHAINS * out->lanes && f.sink[i] < 2.0 * CHAINS * out->lanes))
            rc = hm_error_set(err, "fma: thread %zu's chains sum to %g", i, f.sink[i]);
    free((void *)f.sink);
    if (rc < 0)
        return rc;
    out->iterations = f.iterations;
    out->flop_per_rep = 2.0 * (double)n * (double)f.iterations * CHAINS * out->lanes;
    out->gflop_per_s = out->flop_per_rep / out->timing.best_s / 1e9;
    out->median_gflop_per_s = out->flop_per_rep / out->timing.median_s / 1e9;
    return 0;
}
