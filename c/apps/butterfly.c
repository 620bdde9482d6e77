/* butterfly: rank i exchanges messages with rank n-1-i.
 *
 * Partners sit at opposite ends of the rank order, so with packed placement
 * nearly every message crosses the network between nodes (compare snake). */
#include "app_exchange.h"

static void butterfly_peers(int phase, int rank, int size, int *to, int *n_to, int *from,
                            int *n_from)
{
    (void)phase;
    const int partner = size - 1 - rank;
    *n_to = *n_from = 0;
    if (partner != rank) {   /* the middle rank of an odd count sits out */
        to[(*n_to)++] = partner;
        from[(*n_from)++] = partner;
    }
}

int main(int argc, char **argv)
{
    static const exch_pattern pattern = {
        .name = "butterfly",
        .summary = "Rank i exchanges messages with rank n-1-i (first with last, ...).",
        .details = "Each round every rank sends --length bytes to its mirror rank n-1-i and "
                   "receives as much from it (the middle rank of an odd count sits out). "
                   "Every rank sends one message per round, as in snake, but to a far rank, "
                   "which packed placement puts on another node. Every message is checked "
                   "(sender, sequence; full contents on the first and last round).",
        .min_ranks = 2,
        .n_phases = 1,
        .peers = butterfly_peers,
    };
    return exch_main(&pattern, argc, argv);
}
