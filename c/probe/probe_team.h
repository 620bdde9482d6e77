/* A team of threads, one pinned to each CPU the process may use, that runs
 * a kernel in timed repetitions: every repetition starts on a barrier and
 * ends when the slowest thread is done (STREAM times the whole team, so a
 * slow CPU lowers the figure instead of hiding in an average). */
#ifndef HM_PROBE_TEAM_H
#define HM_PROBE_TEAM_H

#include <stddef.h>

#include "hm_error.h"

#define HM_PROBE_CPUS_MAX 1024

/* setup runs once per thread on its own CPU (first touch places memory on
 * the thread's NUMA node); work is one repetition; both get the thread's
 * index 0..n-1. */
typedef int (*hm_probe_fn)(void *arg, size_t thread);

typedef struct hm_probe_timing {
    size_t reps;
    double best_s;   /* fastest repetition */
    double median_s;
} hm_probe_timing;

/* The CPUs of this process's affinity mask, at most max, in order. */
size_t hm_probe_allowed_cpus(int *cpus, size_t max);

/* Runs setup once, then repetitions of work until budget_s has passed and
 * at least min_reps were run (at most max_reps). Returns 0, or -1 with err
 * set when a thread could not start, be pinned, or set up. */
int hm_probe_team_run(const int *cpus, size_t n, hm_probe_fn setup, hm_probe_fn work, void *arg,
                      double budget_s, size_t min_reps, size_t max_reps, hm_probe_timing *out,
                      hm_error *err);

double hm_probe_now_s(void);

#endif
