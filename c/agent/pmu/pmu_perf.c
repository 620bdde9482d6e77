/* The perf_event_open backend: one kernel event group per (CPU, group),
 * counting system-wide on that CPU. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "perf_event.h"
#include "pmu_backend.h"

typedef struct perf_group {
    int fd[HM_PMU_GROUP_EVENTS_MAX];
    size_t n;
} perf_group;

typedef struct perf_state {
    perf_group *group;
    size_t n, cap;
} perf_state;

int hm_pmu_perf_probe(hm_error *err)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.disabled = 1;
    int fd = hm_perf_event_open(&a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return hm_error_errno(err, "perf_event_open(PERF_COUNT_HW_INSTRUCTIONS)");
    close(fd);
    return 0;
}

static int perf_open_group(void *state, int cpu, const hm_pmu_event *const *events, size_t n,
                           bool enabled, int *handle, hm_error *err)
{
    perf_state *s = state;
    if (s->n == s->cap)
        return hm_error_set(err, "more event groups than planned (%zu)", s->cap);
    perf_group *g = &s->group[s->n];
    g->n = 0;
    for (size_t i = 0; i < n; i++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = events[i]->type;
        a.config = events[i]->config;
        a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
                        PERF_FORMAT_TOTAL_TIME_RUNNING;
        a.disabled = (i == 0 && !enabled) ? 1 : 0;
        int leader = i == 0 ? -1 : g->fd[0];
        int fd = hm_perf_event_open(&a, -1, cpu, leader, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            hm_error_errno(err, "perf_event_open(%s on cpu %d)", events[i]->name, cpu);
            for (size_t k = 0; k < g->n; k++)
                close(g->fd[k]);
            return -1;
        }
        g->fd[g->n++] = fd;
    }
    *handle = (int)s->n++;
    return 0;
}

static int perf_set_enabled(void *state, int handle, bool enabled, hm_error *err)
{
    perf_state *s = state;
    int fd = s->group[handle].fd[0];
    if (ioctl(fd, enabled ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE,
              PERF_IOC_FLAG_GROUP) < 0)
        return hm_error_errno(err, "%s event group", enabled ? "enabling" : "disabling");
    return 0;
}

static int perf_read_group(void *state, int handle, hm_pmu_reading *r, hm_error *err)
{
    perf_state *s = state;
    perf_group *g = &s->group[handle];
    uint64_t buf[3 + HM_PMU_GROUP_EVENTS_MAX];
    ssize_t want = (ssize_t)((3 + g->n) * sizeof(uint64_t));
    ssize_t got = read(g->fd[0], buf, (size_t)want);
    if (got != want || buf[0] != g->n)
        return hm_error_errno(err, "reading event group");
    r->enabled_ns = buf[1];
    r->running_ns = buf[2];
    for (size_t i = 0; i < g->n; i++)
        r->value[i] = buf[3 + i];
    return 0;
}

static void perf_destroy(void *state)
{
    perf_state *s = state;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->group[i].n; k++)
            close(s->group[i].fd[k]);
    free(s->group);
    free(s);
}

static const hm_pmu_backend_ops perf_ops = {
    .name = "perf",
    .open_group = perf_open_group,
    .set_enabled = perf_set_enabled,
    .read_group = perf_read_group,
    .destroy = perf_destroy,
};

int hm_pmu_perf_backend(hm_pmu_backend *be, size_t max_groups, hm_error *err)
{
    perf_state *s = calloc(1, sizeof *s);
    if (s == NULL || (s->group = calloc(max_groups, sizeof *s->group)) == NULL) {
        free(s);
        return hm_error_set(err, "out of memory");
    }
    s->cap = max_groups;
    be->ops = &perf_ops;
    be->state = s;
    return 0;
}
