#include "reduce.h"

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

int64_t hm_reduce_ack_wait_ns(const hm_reduce_opts *o, int64_t max_hold_ns)
{
    if (o->ack_wait_ms > 0)
        return o->ack_wait_ms * 1000000;
    int64_t floor_ns = 30 * (int64_t)1000000000;
    return 2 * max_hold_ns > floor_ns ? 2 * max_hold_ns : floor_ns;
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
