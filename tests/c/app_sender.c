/* A small program that reports through libhushmon, for the tests of the
 * application channel (tests/python/test_libhushmon.py) and
 * bench/bench_libhushmon.py:
 *   app_sender [--count N] [--threads T] [--names K] [--fork] [--phases] [--events]
 *              [--bench] [--sleep-ms MS] [--poll unused|registered] [--no-metric]
 * sends N metrics "iter_time_s" (value = index) per thread (--names K:
 * cycling over K names "iter_time_s.<k>", so batches fill), and prints
 * one JSON line: the library's counters and, with --bench, the mean cost
 * per hm_metric call in ns of the calling thread's CPU time. --fork: a child process sends as well (its
 * own connection); --sleep-ms: pause before closing so the agent reads.
 * --poll: hm_poll() every iteration too, without a control callback
 * (unused) or with one (registered); --no-metric: hm_poll alone. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hushmon.h"

static long count = 1000;
static int nnames = 1;
static char names[256][24];
static int phases = 0, events = 0;
static int poll_mode = 0; /* 0 none, 1 unused, 2 registered */
static int no_metric = 0;

static int on_control(const char *command, const char *args, void *user)
{
    (void)command;
    (void)args;
    (void)user;
    return 0;
}

/* The thread's CPU time (user + kernel, sends included): on a shared,
 * loaded machine wall-clock time would count other processes' slices. */
static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *work(void *arg)
{
    double *cost = arg;
    double t0 = now_ns();
    for (long i = 0; i < count; i++) {
        if (!no_metric)
            hm_metric(nnames == 1 ? "iter_time_s" : names[i % nnames], (double)i);
        if (poll_mode)
            hm_poll();
    }
    *cost = (now_ns() - t0) / (double)count;
    if (phases) {
        hm_phase_begin("solve");
        hm_phase_begin("halo");
        hm_phase_end("halo");
        hm_phase_end("solve");
    }
    if (events)
        hm_event("checkpoint", "wrote \"step\" 10");
    hm_flush();
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 1, do_fork = 0, bench = 0;
    long sleep_ms = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
            count = atol(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--sleep-ms") == 0 && i + 1 < argc)
            sleep_ms = atol(argv[++i]);
        else if (strcmp(argv[i], "--names") == 0 && i + 1 < argc)
            nnames = atoi(argv[++i]);
        else if (strcmp(argv[i], "--fork") == 0)
            do_fork = 1;
        else if (strcmp(argv[i], "--phases") == 0)
            phases = 1;
        else if (strcmp(argv[i], "--events") == 0)
            events = 1;
        else if (strcmp(argv[i], "--poll") == 0 && i + 1 < argc) {
            i++;
            poll_mode = strcmp(argv[i], "unused") == 0 ? 1 : strcmp(argv[i], "registered") == 0 ? 2 : -1;
            if (poll_mode < 0) {
                fprintf(stderr, "app_sender: --poll unused|registered, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--no-metric") == 0)
            no_metric = 1;
        else if (strcmp(argv[i], "--bench") == 0)
            bench = 1;
        else {
            fprintf(stderr, "app_sender: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (count < 1 || threads < 1 || threads > 64 || nnames < 1 || nnames > 256) {
        fprintf(stderr, "app_sender: --count >= 1, --threads 1..64, --names 1..256\n");
        return 2;
    }
    for (int k = 0; k < nnames; k++)
        snprintf(names[k], sizeof names[k], "iter_time_s.%d", k);
    int opened = hm_open();
    if (poll_mode == 2)
        hm_on_control(on_control, NULL);
    hm_metric("warmup", 1.0); /* first call allocates the thread's buffer */
    pid_t child = -1;
    if (do_fork) {
        child = fork();
        if (child == 0) {
            double c;
            work(&c);
            hm_close();
            _exit(0);
        }
    }
    pthread_t tid[64];
    double cost[64];
    for (int t = 0; t < threads; t++)
        if (pthread_create(&tid[t], NULL, work, &cost[t]) != 0) {
            fprintf(stderr, "app_sender: pthread_create failed\n");
            return 1;
        }
    double mean = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        mean += cost[t] / threads;
    }
    if (child > 0)
        waitpid(child, NULL, 0);
    hm_flush();
    if (sleep_ms > 0) {
        /* One more message after the pause: it carries the drop count to
         * an agent that was stopped meanwhile. */
        usleep((useconds_t)sleep_ms * 1000);
        hm_metric("final", 1.0);
        hm_flush();
    }
    hm_stats st;
    hm_stats_get(&st);
    printf("{\"opened\": %d, \"records\": %llu, \"sent_records\": %llu, \"dropped_records\": %llu, "
           "\"messages\": %llu, \"connected\": %d, \"rank\": %d, \"size\": %d",
           opened, (unsigned long long)st.records, (unsigned long long)st.sent_records,
           (unsigned long long)st.dropped_records, (unsigned long long)st.messages, st.connected,
           hm_rank(), hm_size());
    if (bench)
        printf(", \"ns_per_call\": %.2f", mean);
    printf("}\n");
    hm_close();
    return 0;
}
