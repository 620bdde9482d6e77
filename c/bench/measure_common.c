/* Sample storage shared by both methods. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench_measure.h"
#include "bench_passes.h"
#include "bench_summary.h"
#include "hm_array.h"

void hm_bench_samples_free(hm_bench_samples *s)
{
    free(s->local_s);
    free(s->global_s);
    free(s->valid);
    free(s->own_s);
    free(s->window_s);
    s->local_s = s->global_s = s->own_s = s->window_s = NULL;
    s->valid = NULL;
    s->n = s->cap = s->n_own = s->cap_own = s->n_window = s->cap_window = 0;
}

double *hm_bench_valid_values(const double *v, const bool *valid, size_t n, size_t *count)
{
    double *out = malloc((n > 0 ? n : 1) * sizeof *out);
    if (out == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (valid[i])
            out[k++] = v[i];
    *count = k;
    return out;
}

int hm_bench_samples_push(hm_bench_samples *s, double local_s, double global_s, bool valid,
                          hm_error *err)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *l = realloc(s->local_s, cap * sizeof *l);
        if (l != NULL)
            s->local_s = l;
        double *g = realloc(s->global_s, cap * sizeof *g);
        if (g != NULL)
            s->global_s = g;
        bool *v = realloc(s->valid, cap * sizeof *v);
        if (v != NULL)
            s->valid = v;
        if (l == NULL || g == NULL || v == NULL)
            return hm_error_set(err, "out of memory for %zu samples", cap);
        s->cap = cap;
    }
    s->local_s[s->n] = local_s;
    s->global_s[s->n] = global_s;
    s->valid[s->n] = valid;
    s->n++;
    return 0;
}

int hm_bench_samples_push_own(hm_bench_samples *s, double own_s, hm_error *err)
{
    if (s->n_own == s->cap_own) {
        double *o = hm_array_grow(s->own_s, &s->cap_own, sizeof *o, 64, SIZE_MAX, "samples", err);
        if (o == NULL)
            return -1;
        s->own_s = o;
    }
    s->own_s[s->n_own++] = own_s;
    return 0;
}

int hm_bench_samples_push_window(hm_bench_samples *s, double window_s, hm_error *err)
{
    if (s->n_window == s->cap_window) {
        double *w =
            hm_array_grow(s->window_s, &s->cap_window, sizeof *w, 64, SIZE_MAX, "windows", err);
        if (w == NULL)
            return -1;
        s->window_s = w;
    }
    s->window_s[s->n_window++] = window_s;
    return 0;
}

int hm_bench_should_stop(const hm_bench_opts *o, const hm_bench_samples *s, double elapsed_ns,
                         bool *stop, hm_error *err)
{
    size_t n_valid = 0;
    double *valid = hm_bench_valid_values(s->local_s, s->valid, s->n, &n_valid);
    if (valid == NULL)
        return hm_error_set(err, "out of memory for %zu samples", s->n);
    hm_bench_summary sum;
    int rc = hm_bench_summarize(valid, n_valid, o->trim, o->ci_level, &sum, err);
    free(valid);
    if (rc != 0)
        return -1;
    if (elapsed_ns >= 0)
        *stop = hm_stop_with_budget(&o->stop, (int)s->n, (int)n_valid, sum.rse, elapsed_ns,
                                    o->budget_ns, o->max_launches);
    else
        *stop = hm_stop_reached(&o->stop, (int)s->n, (int)n_valid, sum.rse);
    return 0;
}

int hm_bench_push_rank_means(const hm_bench_env *env, double mine_s, hm_bench_samples *out,
                             hm_error *err)
{
    double *all = malloc((size_t)env->nprocs * sizeof *all);
    if (all == NULL)
        return hm_error_set(err, "out of memory for %d rank means", env->nprocs);
    int rc = hm_op_mpi_check(MPI_Allgather(&mine_s, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, env->comm),
                             "gathering rank means", err);
    for (int r = 0; r < env->nprocs && rc == 0; r++)
        rc = hm_bench_samples_push(out, all[r], NAN, true, err);
    if (rc == 0)
        rc = hm_bench_samples_push_own(out, mine_s, err);
    free(all);
    return rc;
}
