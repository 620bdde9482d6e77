#include "probe_team.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double hm_probe_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t hm_probe_allowed_cpus(int *cpus, size_t max)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    size_t n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    return n;
}

typedef struct team {
    const int *cpus;
    size_t n;
    hm_probe_fn setup, work;
    void *arg;
    double budget_s;
    size_t min_reps, max_reps;
    pthread_barrier_t barrier;
    bool failed;      /* any thread's setup or pinning failed */
    bool stop;        /* set by thread 0 between repetitions */
    double *rep_s;    /* [max_reps] */
    size_t reps;
} team;

typedef struct member {
    team *t;
    size_t index;
} member;

static void *member_main(void *p)
{
    member *m = p;
    team *t = m->t;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(t->cpus[m->index], &one);
    bool ok = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    ok = ok && t->setup(t->arg, m->index) == 0;
    if (!ok)
        __atomic_store_n(&t->failed, true, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&t->barrier);
    if (__atomic_load_n(&t->failed, __ATOMIC_SEQ_CST))
        return NULL;
    double start_s = hm_probe_now_s();
    for (;;) {
        double t0 = 0;
        pthread_barrier_wait(&t->barrier);
        if (m->index == 0)
            t0 = hm_probe_now_s();
        t->work(t->arg, m->index);
        pthread_barrier_wait(&t->barrier);
        if (m->index == 0) {
            double now = hm_probe_now_s();
            t->rep_s[t->reps++] = now - t0;
            t->stop = t->reps >= t->max_reps ||
                      (t->reps >= t->min_reps && now - start_s >= t->budget_s);
        }
        pthread_barrier_wait(&t->barrier);
        if (t->stop)
            break;
    }
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int hm_probe_team_run(const int *cpus, size_t n, hm_probe_fn setup, hm_probe_fn work, void *arg,
                      double budget_s, size_t min_reps, size_t max_reps, hm_probe_timing *out,
                      hm_error *err)
{
    team t = {.cpus = cpus, .n = n, .setup = setup, .work = work, .arg = arg,
              .budget_s = budget_s, .min_reps = min_reps, .max_reps = max_reps};
    t.rep_s = calloc(max_reps, sizeof *t.rep_s);
    pthread_t *tid = calloc(n, sizeof *tid);
    member *mem = calloc(n, sizeof *mem);
    if (t.rep_s == NULL || tid == NULL || mem == NULL) {
        free(t.rep_s);
        free(tid);
        free(mem);
        return hm_error_set(err, "out of memory");
    }
    pthread_barrier_init(&t.barrier, NULL, (unsigned)n);
    size_t started = 0;
    int rc = 0;
    for (; started < n; started++) {
        mem[started] = (member){&t, started};
        if (pthread_create(&tid[started], NULL, member_main, &mem[started]) != 0)
            break;
    }
    if (started < n) {
        /* The barrier counts n threads: without all of them the team
         * cannot run, and the ones started wait forever. */
        rc = hm_error_set(err, "could not start thread %zu of %zu", started + 1, n);
        for (size_t i = 0; i < started; i++)
            pthread_cancel(tid[i]);
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&t.barrier);
    if (rc == 0 && t.failed)
        rc = hm_error_set(err, "a thread could not be pinned to its CPU or set up its arrays");
    if (rc == 0) {
        out->reps = t.reps;
        qsort(t.rep_s, t.reps, sizeof *t.rep_s, by_value);
        out->best_s = t.rep_s[0];
        out->median_s = t.reps % 2 ? t.rep_s[t.reps / 2]
                                   : (t.rep_s[t.reps / 2 - 1] + t.rep_s[t.reps / 2]) / 2;
    }
    free(t.rep_s);
    free(tid);
    free(mem);
    return rc;
}
