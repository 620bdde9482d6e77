/* The malloc heap of a long-running C daemon (the reducers): what it holds,
 * and its free pages given back after a burst.
 *
 * glibc returns the top of its heap by itself (past M_TRIM_THRESHOLD, which
 * the reducers raise to 64 MiB), but a free run below a live chunk stays
 * resident: after each backlog (more messages held while the collector
 * compacts) a rack reducer's resident size stepped up by ~1.5 MiB with the
 * bytes in use unchanged, 6 -> 10 MiB over an hour (docs/transport.md,
 * "The rack reducers' steps"). */
#ifndef HM_HEAP_H
#define HM_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* Bytes malloc'ed and not freed (every arena, mmapped chunks too), MiB. */
double hm_heap_in_use_mib(void);

/* Bytes malloc holds free in its arenas, resident or given back. */
size_t hm_heap_free_bytes(void);

/* At most once per every_ns (last_ns is the caller's, 0 at first): when at
 * least min_free_bytes lie free, malloc_trim(0), which returns the main
 * heap's top and whole free pages inside every arena; a thread arena's own
 * top it leaves (its high-water mark stays). 1 when it trimmed, else 0. */
int hm_heap_trim_every(int64_t now_ns, int64_t every_ns, size_t min_free_bytes,
                       int64_t *last_ns);

#endif
