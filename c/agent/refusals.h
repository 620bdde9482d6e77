/* Refusals on the agent's sockets (control and app): each one is counted
 * by its reason, for the batch's counters, and logged with the uid. A
 * user who floods a socket must not flood the log as well: at most
 * HM_REFUSAL_LOG_BURST lines per window of HM_REFUSAL_LOG_WINDOW_NS are
 * written, and the first refusal after a window with more says how many
 * went unlogged (they are all in the counters). */
#ifndef HM_REFUSALS_H
#define HM_REFUSALS_H

#include <stdint.h>

#define HM_REFUSAL_LOG_BURST 20
#define HM_REFUSAL_LOG_WINDOW_NS INT64_C(10000000000)

typedef struct hm_refusal_log {
    int64_t window_start_ns;
    unsigned logged;          /* lines written in this window */
    uint64_t unlogged;        /* refusals past the burst, not yet summed up */
} hm_refusal_log;

/* Adds n to *counter (1 a client or request; the values of records
 * dropped) and logs "<prefix>: <text>" as a warning (text: printf-style;
 * it names the uid). */
void hm_refuse(hm_refusal_log *log, uint64_t *counter, uint64_t n, const char *prefix,
               const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
