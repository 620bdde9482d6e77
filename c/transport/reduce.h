/* hushmon-reduce: the rack and top reducers of docs/transport.md. */
#ifndef HM_REDUCE_H
#define HM_REDUCE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "groups.h"
#include "hm_error.h"

/* How long one pull waits for messages: until the first open group is
 * due, at least HM_REDUCE_PULL_MIN_MS, at most HM_REDUCE_PULL_MAX_MS. It
 * is also the open pull request's expiry (jspull.c): a quiet stream costs
 * one request (and one 408 status) per wait, and a period's burst is taken
 * by the request already waiting. With a fixed 100 ms pull the rack
 * reducer spent 4x the CPU per batch (and libnats 3.4.1's own pull, used
 * then, corrupted its heap: docs/transport.md, "The pull"). */
#define HM_REDUCE_PULL_MIN_MS 50
#define HM_REDUCE_PULL_MAX_MS 1000

typedef struct hm_reduce_opts {
    bool top;
    const char *rack;          /* rack level: the rack served */
    const char *url;
    int64_t grace_ms;          /* -1: 2 periods (rack), 2000 ms (top) */
    int64_t stats_every_s;     /* 0: only the final line */
    int64_t max_batch_bytes;
    int64_t fetch_batch;
    int64_t keep_s;            /* how long a published (job, period) is remembered */
} hm_reduce_opts;

/* Run until *stop is set (SIGTERM), then publish what is open, ack and
 * return 0; -1 with err set when it cannot start. */
int hm_reduce_rack(const hm_reduce_opts *o, volatile sig_atomic_t *stop, hm_error *err);
int hm_reduce_top(const hm_reduce_opts *o, volatile sig_atomic_t *stop, hm_error *err);

/* Shared by both levels. */
int64_t hm_reduce_now_ns(void);       /* CLOCK_MONOTONIC */
double hm_reduce_cpu_s(void);         /* this process's CPU time */
/* The longest a group stays open (then a later batch makes a late
 * partial): 5 graces and 10 s, bounding memory, and never past half the
 * consumer's AckWait (set by the admin step), so the server does not
 * redeliver what a reducer holds. */
int64_t hm_reduce_max_hold_ns(int64_t grace_ns, int64_t ack_wait_ns);
/* The upkeep both levels do between pulls: every second, the groups
 * published more than keep_s ago are forgotten; every minute, when 1 MiB
 * or more of the heap lies free, it is given back (hm_heap.h: without it
 * each backlog left its pages resident). */
#define HM_REDUCE_TRIM_EVERY_S 60
#define HM_REDUCE_TRIM_MIN_FREE_BYTES ((size_t)1 << 20)
typedef struct hm_reduce_upkeep {
    int64_t last_prune_ns, last_trim_ns;
    uint64_t heap_trims; /* times free pages were given back */
} hm_reduce_upkeep;
void hm_reduce_upkeep_run(hm_reduce_upkeep *u, hm_groups *g, int64_t now_ns, int64_t keep_s);
/* A subject token from a name: '.', '*', '>' and white space become '_'. */
void hm_reduce_subject_token(char *out, size_t cap, const char *name);

#endif
