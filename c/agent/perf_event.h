/* perf_event_open(2), which glibc does not wrap. */
#ifndef HM_PERF_EVENT_H
#define HM_PERF_EVENT_H

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline int hm_perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu,
                                     int group_fd, unsigned long flags)
{
    return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

#endif
