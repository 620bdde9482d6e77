#include "arena.h"

#include <stdalign.h>
#include <stdlib.h>

#define CHUNK_BYTES ((size_t)64 * 1024)

struct hm_arena_chunk {
    hm_arena_chunk *next;
    alignas(max_align_t) unsigned char data[];
};

void *hm_arena_alloc(hm_arena *a, size_t n)
{
    size_t align = alignof(max_align_t);
    size_t at = (a->used + align - 1) & ~(align - 1);
    if (a->head == NULL || at + n > a->cap) {
        size_t cap = n > CHUNK_BYTES ? n : CHUNK_BYTES;
        hm_arena_chunk *c = malloc(sizeof *c + cap);
        if (c == NULL)
            return NULL;
        c->next = a->head;
        a->head = c;
        a->cap = cap;
        at = 0;
    }
    a->used = at + n;
    return a->head->data + at;
}

void hm_arena_free(hm_arena *a)
{
    while (a->head) {
        hm_arena_chunk *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->used = a->cap = 0;
}
