/* master: rank 0 sends every message; the others only receive.
 *
 * The load falls on one process and its link, so with short messages the
 * sender's latency limits the job, with long ones its bandwidth. */
#include "app_exchange.h"

static void master_peers(int phase, int rank, int size, int *to, int *n_to, int *from,
                         int *n_from)
{
    (void)phase;
    *n_to = *n_from = 0;
    if (rank == 0) {
        for (int r = 1; r < size; r++)
            to[(*n_to)++] = r;
    } else {
        from[(*n_from)++] = 0;
    }
}

int main(int argc, char **argv)
{
    static const exch_pattern pattern = {
        .name = "master",
        .summary = "Rank 0 sends each message to every other rank (one sender, n-1 receivers).",
        .details = "Each round rank 0 posts one message of --length bytes to every other rank; "
                   "the others receive. Traffic: (n-1) x length per round, all through rank 0's "
                   "link. Every message is checked (sender, sequence; full contents on the "
                   "first and last round).",
        .min_ranks = 2,
        .n_phases = 1,
        .peers = master_peers,
    };
    return exch_main(&pattern, argc, argv);
}
