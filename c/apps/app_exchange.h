/* The driver shared by the message-passing tests (master, snake,
 * butterfly). A test is only its communication pattern: who sends to whom
 * in each phase of a round. The driver does the rest, the same way for all:
 *
 *   for each cycle:   --rounds rounds of messages, then --compute-ms of
 *                     floating-point work (so the CPU and the network
 *                     sensors both see a phase of their own)
 *   each round:       for each phase: post every receive and send of this
 *                     rank (nonblocking), wait for all; check what arrived
 *
 * Every message carries its sender and sequence number in its first and
 * last 8 bytes (checked on every message) and a sender-specific byte
 * pattern in between (checked in full on the first and the last round), so
 * a lost, stale or misrouted message is counted as a failure. */
#ifndef APP_EXCHANGE_H
#define APP_EXCHANGE_H

#include "app_common.h"

typedef struct exch_pattern {
    const char *name;
    const char *summary;
    const char *details;
    int min_ranks;
    int n_phases;
    /* Fills the ranks this rank sends to (to, *n_to) and receives from
     * (from, *n_from) in `phase`; each array has room for `size` entries.
     * The pattern must be consistent: r lists s in `to` exactly when s
     * lists r in `from`. */
    void (*peers)(int phase, int rank, int size, int *to, int *n_to, int *from, int *n_from);
} exch_pattern;

/* main() of a message-passing test. */
int exch_main(const exch_pattern *pattern, int argc, char **argv);

#endif
