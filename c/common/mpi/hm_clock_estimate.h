/* The arithmetic of clock synchronization, free of MPI so it is unit-tested
 * without mpirun: offset from one ping-pong, the minimum-RTT tracker with
 * its "d rounds without improvement" stop rule, and algorithm names.
 *
 * Convention everywhere: global = local + offset, where global is the clock
 * of rank 0 (MPIPerf: T_0 = T_i + o_i). */
#ifndef HM_CLOCK_ESTIMATE_H
#define HM_CLOCK_ESTIMATE_H

#include <stdbool.h>
#include <stdint.h>

#include "hm_error.h"

typedef enum hm_sync_algo {
    HM_SYNC_LINEAR, /* rank 0 pings every rank in turn: O(n) rounds */
    HM_SYNC_RING,   /* each rank pings its left neighbour, offsets summed by rank 0 */
    HM_SYNC_TREE,   /* binomial tree: ceil(log2 n) rounds of parallel pairs */
} hm_sync_algo;

/* "linear", "ring", "tree", NULL-terminated, in enum order. */
extern const char *const hm_sync_algo_names[];

int hm_sync_algo_parse(const char *name, hm_sync_algo *out, hm_error *err);

/* Offset of the local clock to a remote one from a single exchange: the
 * local clock read local_send_ns, the remote clock then read remote_ns, the
 * reply arrived at local_recv_ns. Assumes the remote reading happened in
 * the middle of the round trip: offset = remote - (send + rtt / 2). */
int64_t hm_clock_offset_from_exchange(int64_t local_send_ns, int64_t remote_ns,
                                      int64_t local_recv_ns);

/* Keeps the exchange with the smallest round-trip time, whose midpoint
 * assumption is the least wrong, and decides when to stop. */
typedef struct hm_rtt_tracker {
    int64_t best_rtt_ns;     /* INT64_MAX until the first sample */
    int64_t best_offset_ns;  /* offset measured by the best exchange */
    int rounds;              /* exchanges seen */
    int rounds_since_best;   /* exchanges since best_rtt_ns last improved */
    int stop_after;          /* d: stop after this many non-improving rounds */
    int max_rounds;          /* hard cap, so a noisy link cannot run forever */
} hm_rtt_tracker;

void hm_rtt_tracker_init(hm_rtt_tracker *t, int stop_after, int max_rounds);

/* Adds one exchange; returns true when the tracker has seen enough. */
bool hm_rtt_tracker_add(hm_rtt_tracker *t, int64_t local_send_ns, int64_t remote_ns,
                        int64_t local_recv_ns);

/* Lowest set bit of r > 0 (its parent in the binomial tree is r - lowbit). */
int hm_clock_tree_lowbit(int r);
/* Largest power of two strictly below n (n >= 2); the first tree round. */
int hm_clock_tree_top(int n);

#endif
