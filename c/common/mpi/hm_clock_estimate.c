#include "hm_clock_estimate.h"

#include <string.h>

const char *const hm_sync_algo_names[] = {"linear", "ring", "tree", NULL};

int hm_sync_algo_parse(const char *name, hm_sync_algo *out, hm_error *err)
{
    for (int i = 0; hm_sync_algo_names[i] != NULL; i++) {
        if (strcmp(name, hm_sync_algo_names[i]) == 0) {
            *out = (hm_sync_algo)i;
            return 0;
        }
    }
    return hm_error_set(err, "unknown clock sync algorithm '%s' (expected linear, ring, tree)",
                        name);
}

int64_t hm_clock_offset_from_exchange(int64_t local_send_ns, int64_t remote_ns,
                                      int64_t local_recv_ns)
{
    int64_t rtt = local_recv_ns - local_send_ns;
    return remote_ns - (local_send_ns + rtt / 2);
}

void hm_rtt_tracker_init(hm_rtt_tracker *t, int stop_after, int max_rounds)
{
    t->best_rtt_ns = INT64_MAX;
    t->best_offset_ns = 0;
    t->rounds = 0;
    t->rounds_since_best = 0;
    t->stop_after = stop_after < 1 ? 1 : stop_after;
    t->max_rounds = max_rounds < 1 ? 1 : max_rounds;
}

bool hm_rtt_tracker_add(hm_rtt_tracker *t, int64_t local_send_ns, int64_t remote_ns,
                        int64_t local_recv_ns)
{
    int64_t rtt = local_recv_ns - local_send_ns;
    t->rounds++;
    /* A negative RTT means the local clock stepped; such an exchange says
     * nothing about the offset, so it only counts towards the caps. */
    if (rtt >= 0 && rtt < t->best_rtt_ns) {
        t->best_rtt_ns = rtt;
        t->best_offset_ns = hm_clock_offset_from_exchange(local_send_ns, remote_ns, local_recv_ns);
        t->rounds_since_best = 0;
    } else {
        t->rounds_since_best++;
    }
    return t->rounds_since_best >= t->stop_after || t->rounds >= t->max_rounds;
}

int hm_clock_tree_lowbit(int r) { return r & -r; }

int hm_clock_tree_top(int n)
{
    int top = 1;
    while (top * 2 < n)
        top *= 2;
    return top;
}
