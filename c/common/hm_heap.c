#include "hm_heap.h"

#include <malloc.h>

double hm_heap_in_use_mib(void)
{
    /* What the daemon holds, apart from the resident size, which also has
     * the allocator's free lists and fragmentation in it. */
    struct mallinfo2 mi = mallinfo2();
    return (double)(mi.uordblks + mi.hblkhd) / (1024.0 * 1024.0);
}

size_t hm_heap_free_bytes(void)
{
    return mallinfo2().fordblks;
}

int hm_heap_trim_every(int64_t now_ns, int64_t every_ns, size_t min_free_bytes,
                       int64_t *last_ns)
{
    /* mallinfo2 and malloc_trim walk every free chunk: once a minute is
     * nothing, once per pull would show in the reducer's CPU. Pages given
     * back stay counted as free, so a fragmented heap trims every interval
     * (a walk, no new madvise work for pages already returned). */
    if (*last_ns != 0 && now_ns - *last_ns < every_ns)
        return 0;
    *last_ns = now_ns;
    if (hm_heap_free_bytes() < min_free_bytes)
        return 0;
    malloc_trim(0);
    return 1;
}
