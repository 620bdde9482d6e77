/* STREAM's triad, one slice of each array per thread. The bytes counted
 * are STREAM's (read b and c, write a: 24 per element); a CPU that reads a
 * line before writing it (write-allocate) moves 32, so the figure is what
 * the application sees, as STREAM's is. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "probe_kernels.h"

typedef struct triad_arg {
    size_t elements;         /* per thread */
    int64_t passes;
    double scalar;
    double **a, **b, **c;    /* [thread] */
} triad_arg;

static int triad_setup(void *p, size_t thread)
{
    triad_arg *t = p;
    if (t->a[thread] != NULL)
        return 0; /* the calibration's arrays: thread i is on the same CPU again */
    size_t bytes = (t->elements * sizeof(double) + 63) / 64 * 64;
    double *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes),
           *c = aligned_alloc(64, bytes);
    t->a[thread] = a;
    t->b[thread] = b;
    t->c[thread] = c;
    if (a == NULL || b == NULL || c == NULL)
        return -1;
    for (size_t i = 0; i < t->elements; i++) {
        a[i] = 0.0;
        b[i] = 1.0;
        c[i] = 2.0;
    }
    return 0;
}

static int triad_work(void *p, size_t thread)
{
    triad_arg *t = p;
    double *restrict a = t->a[thread];
    const double *restrict b = t->b[thread];
    const double *restrict c = t->c[thread];
    const double s = t->scalar;
    for (int64_t k = 0; k < t->passes; k++)
        for (size_t i = 0; i < t->elements; i++)
            a[i] = b[i] + s * c[i];
    return 0;
}

static void triad_free(triad_arg *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (t->a != NULL)
            free(t->a[i]);
        if (t->b != NULL)
            free(t->b[i]);
        if (t->c != NULL)
            free(t->c[i]);
    }
    free(t->a);
    free(t->b);
    free(t->c);
}

/* Every thread's a[] must hold b + s * c = 1 + 3 * 2: a kernel the compiler
 * had dropped, or a thread that skipped its slice, shows here. */
static bool triad_correct(const triad_arg *t, size_t n)
{
    double want = 1.0 + t->scalar * 2.0;
    for (size_t th = 0; th < n; th++) {
        const double *a = t->a[th];
        if (a[0] != want || a[t->elements / 2] != want || a[t->elements - 1] != want)
            return false;
    }
    return true;
}

int hm_probe_triad_run(const int *cpus, size_t n, int64_t array_bytes, double budget_s,
                       hm_probe_triad *out, hm_error *err)
{
    size_t elements = (size_t)array_bytes / sizeof(double) / n;
    if (elements < 1024)
        return hm_error_set(err, "arrays of %lld bytes give each of %zu threads under 1024 "
                            "elements", (long long)array_bytes, n);
    triad_arg t = {.elements = elements, .passes = 1, .scalar = 3.0};
    t.a = calloc(n, sizeof *t.a);
    t.b = calloc(n, sizeof *t.b);
    t.c = calloc(n, sizeof *t.c);
    if (t.a == NULL || t.b == NULL || t.c == NULL) {
        triad_free(&t, n);
        return hm_error_set(err, "out of memory");
    }
    /* Two passes size the repetitions: arrays that fit a
     * cache take microseconds per pass, below the clock's resolution, so
     * a repetition makes as many passes as fill a tenth of the budget. */
    hm_probe_timing once;
    if (hm_probe_team_run(cpus, n, triad_setup, triad_work, &t, 0.0, 2, 2, &once, err) < 0) {
        triad_free(&t, n);
        return hm_error_wrap(err, "triad (arrays of %lld bytes)", (long long)array_bytes);
    }
    double target_s = budget_s / 10.0;
    if (once.best_s < target_s)
        t.passes = (int64_t)ceil(target_s / once.best_s);
    int rc = hm_probe_team_run(cpus, n, triad_setup, triad_work, &t, budget_s, 3, 100000,
                               &out->timing, err);
    if (rc == 0 && !triad_correct(&t, n))
        rc = hm_error_set(err, "triad: the arrays do not hold b + s * c after the run");
    triad_free(&t, n);
    if (rc < 0)
        return rc;
    out->array_bytes = (int64_t)(elements * n * sizeof(double));
    out->passes_per_rep = t.passes;
    out->bytes_per_rep = 3.0 * sizeof(double) * (double)elements * (double)n * (double)t.passes;
    out->gb_per_s = out->bytes_per_rep / out->timing.best_s / 1e9;
    out->median_gb_per_s = out->bytes_per_rep / out->timing.median_s / 1e9;
    return 0;
}
