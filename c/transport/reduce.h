/* hushmon-reduce: the rack and top reducers of docs/transport.md. */
#ifndef HM_REDUCE_H
#define HM_REDUCE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "hm_error.h"

typedef struct hm_reduce_opts {
    bool top;
    const char *rack;          /* rack level: the rack served */
    const char *url;
    int64_t grace_ms;          /* -1: 2 periods (rack), 2000 ms (top) */
    int64_t stats_every_s;     /* 0: only the final line */
    int64_t max_batch_bytes;
    int64_t max_ack_pending;
    int64_t fetch_batch;
    int64_t keep_s;            /* how long a published (job, period) is remembered */
    int64_t ack_wait_ms;       /* AckWait of a consumer this creates; -1: derived from the grace */
} hm_reduce_opts;

/* Run until *stop is set (SIGTERM), then publish what is open, ack and
 * return 0; -1 with err set when it cannot start. */
int hm_reduce_rack(const hm_reduce_opts *o, volatile sig_atomic_t *stop, hm_error *err);
int hm_reduce_top(const hm_reduce_opts *o, volatile sig_atomic_t *stop, hm_error *err);

/* Shared by both levels. */
int64_t hm_reduce_now_ns(void);       /* CLOCK_MONOTONIC */
double hm_reduce_cpu_s(void);         /* this process's CPU time */
/* How long a message may stay unacked (the server redelivers after it):
 * --ack-wait-ms, else twice the longest hold and at least 30 s. */
int64_t hm_reduce_ack_wait_ns(const hm_reduce_opts *o, int64_t max_hold_ns);
/* A subject token from a name: '.', '*', '>' and white space become '_'. */
void hm_reduce_subject_token(char *out, size_t cap, const char *name);

#endif
