#include "reduce.h"

#include "hm_heap.h"

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

void hm_reduce_upkeep_run(hm_reduce_upkeep *u, hm_groups *g, int64_t now_ns, int64_t keep_s)
{
    const int64_t ns_per_s = 1000000000;
    if (now_ns - u->last_prune_ns > ns_per_s) {
        hm_groups_prune(g, now_ns, keep_s * ns_per_s);
        u->last_prune_ns = now_ns;
    }
    u->heap_trims += (uint64_t)hm_heap_trim_every(now_ns, HM_REDUCE_TRIM_EVERY_S * ns_per_s,
                                                   HM_REDUCE_TRIM_MIN_FREE_BYTES,
                                                   &u->last_trim_ns);
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
