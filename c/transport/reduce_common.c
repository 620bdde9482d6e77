#include "reduce.h"

#include <malloc.h>
#include <stdio.h>
#include <time.h>

int64_t hm_reduce_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double hm_reduce_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double hm_reduce_heap_mib(void)
{
    /* glibc's count of bytes handed out and not freed (heap and mmap'ed):
     * what the reducer holds, apart from the resident size, which also
     * has the allocator's free lists and fragmentation in it. */
    struct mallinfo2 mi = mallinfo2();
    return (double)(mi.uordblks + mi.hblkhd) / (1024.0 * 1024.0);
}

int64_t hm_reduce_max_hold_ns(int64_t grace_ns, int64_t ack_wait_ns)
{
    int64_t hold_ns = 5 * grace_ns + 10 * (int64_t)1000000000;
    return hold_ns < ack_wait_ns / 2 ? hold_ns : ack_wait_ns / 2;
}

void hm_reduce_subject_token(char *out, size_t cap, const char *name)
{
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++) {
        char c = name[i];
        out[i] = (c == '.' || c == '*' || c == '>' || c == ' ' || c == '\t' || c == '\r' || c == '\n') ? '_' : c;
    }
    out[i] = '\0';
    if (i == 0 && cap > 1)
        snprintf(out, cap, "_");
}
