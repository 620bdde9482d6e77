/* A bump allocator whose pieces are freed together: what one summary
 * keeps per source (its key text and host) lives as long as the summary,
 * so one free per 64 KiB chunk replaces two malloc/free pairs per batch. */
#ifndef HM_ARENA_H
#define HM_ARENA_H

#include <stddef.h>

typedef struct hm_arena_chunk hm_arena_chunk;

typedef struct hm_arena {
    hm_arena_chunk *head; /* the chunk being filled, then the older ones */
    size_t used, cap;     /* of head */
} hm_arena;

/* n bytes aligned for any type, or NULL when memory runs out. */
void *hm_arena_alloc(hm_arena *a, size_t n);
/* Frees every piece; the arena is empty and usable again. */
void hm_arena_free(hm_arena *a);

#endif
