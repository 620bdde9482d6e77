/* snake: neighbour exchange in two phases around a ring of ranks.
 *
 * Phase 1: even ranks send to rank+1; phase 2: odd ranks send to rank+1;
 * the last rank sends to rank 0. Neighbours by number usually share a node,
 * so most of the traffic stays inside nodes (compare butterfly). */
#include "app_exchange.h"

static void snake_peers(int phase, int rank, int size, int *to, int *n_to, int *from,
                        int *n_from)
{
    /* Phase 0 moves the messages of even senders, phase 1 of odd ones. */
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    *n_to = *n_from = 0;
    if (rank % 2 == phase)
        to[(*n_to)++] = next;
    if (prev % 2 == phase)
        from[(*n_from)++] = prev;
}

int main(int argc, char **argv)
{
    static const exch_pattern pattern = {
        .name = "snake",
        .summary = "Each rank sends to rank+1 (last to first): even senders first, then odd.",
        .details = "Each round has two phases: even ranks send --length bytes to rank+1, then "
                   "odd ranks do; the last rank sends to rank 0. Every rank sends one message "
                   "per round, as in butterfly, but to a neighbour by number, which packed "
                   "placement puts on the same node. Every message is checked (sender, "
                   "sequence; full contents on the first and last round).",
        .min_ranks = 2,
        .n_phases = 2,
        .peers = snake_peers,
    };
    return exch_main(&pattern, argc, argv);
}
