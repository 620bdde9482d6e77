/* Memory-streaming load: copy 64 MiB (bigger than any last-level cache
 * here) 32 KiB at a time, so an activation also evicts the job's data, the
 * way an agent that walks large tables does. */
#include <stdlib.h>
#include <string.h>

#include "inject_shape.h"

enum { MEMORY_BYTES = 64 << 20, MEMORY_CHUNK_BYTES = 32 << 10 };

typedef struct memory_state {
    unsigned char *src, *dst;
    size_t pos;
} memory_state;

static void memory_fini(void *state)
{
    memory_state *s = state;
    if (s != NULL) {
        free(s->src);
        free(s->dst);
    }
    free(s);
}

static int memory_init(void **state, hm_error *err)
{
    memory_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_errno(err, "allocating the memory kernel");
    s->src = malloc(MEMORY_BYTES);
    s->dst = malloc(MEMORY_BYTES);
    if (s->src == NULL || s->dst == NULL) {
        memory_fini(s);
        return hm_error_errno(err, "allocating 2 x %d MiB for the memory kernel",
                              MEMORY_BYTES >> 20);
    }
    /* Touch every page now: page faults belong to start-up, not to the load. */
    memset(s->src, 0x5a, MEMORY_BYTES);
    memset(s->dst, 0, MEMORY_BYTES);
    *state = s;
    return 0;
}

static uint64_t memory_chunk(void *state)
{
    memory_state *s = state;
    memcpy(s->dst + s->pos, s->src + s->pos, MEMORY_CHUNK_BYTES);
    uint64_t seen = s->dst[s->pos];
    s->pos += MEMORY_CHUNK_BYTES;
    if (s->pos >= MEMORY_BYTES)
        s->pos = 0;
    return seen;
}

const hm_inject_kernel hm_inject_kernel_memory = {
    .name = "memory",
    .init = memory_init,
    .chunk = memory_chunk,
    .fini = memory_fini,
};
