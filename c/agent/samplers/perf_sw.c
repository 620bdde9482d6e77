/* perf_sw: kernel software events, counted system-wide per CPU through
 * perf_event_open (they work on machines without a hardware PMU, and in
 * VMs): context switches, CPU migrations, page faults.
 *
 * One event group per CPU, read with a single read() returning all three.
 * The kernel's task clock is not published at node level: counted per CPU
 * it includes the idle task and so always reads 100 %. CPUs that are
 * offline when the source opens are not counted until `reload`. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "counter.h"
#include "hm_log.h"
#include "perf_event.h"
#include "sampler.h"

typedef struct sw_event {
    uint64_t config;
    const char *field;
} sw_event;

static const sw_event events[] = {
    {PERF_COUNT_SW_CONTEXT_SWITCHES, "context_switches_per_s"},
    {PERF_COUNT_SW_CPU_MIGRATIONS, "cpu_migrations_per_s"},
    {PERF_COUNT_SW_PAGE_FAULTS, "page_faults_per_s"},
};

#define NEVENTS (sizeof events / sizeof events[0])

typedef struct cpu_group {
    int fd[NEVENTS];
} cpu_group;

typedef struct perf_sw_state {
    cpu_group *cpu;
    size_t ncpu;
    bool have_prev;
    uint64_t prev[NEVENTS];
    int64_t prev_mono_ns;
} perf_sw_state;

static void perf_sw_close(void *state)
{
    perf_sw_state *s = state;
    if (s == NULL)
        return;
    for (size_t c = 0; c < s->ncpu; c++)
        for (size_t e = 0; e < NEVENTS; e++)
            if (s->cpu[c].fd[e] >= 0)
                close(s->cpu[c].fd[e]);
    free(s->cpu);
    free(s);
}

static int perf_sw_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    (void)env;
    perf_sw_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    s->ncpu = conf > 0 ? (size_t)conf : 1;
    s->cpu = calloc(s->ncpu, sizeof *s->cpu);
    if (s->cpu == NULL) {
        free(s);
        return hm_error_set(err, "out of memory");
    }
    for (size_t c = 0; c < s->ncpu; c++)
        for (size_t e = 0; e < NEVENTS; e++)
            s->cpu[c].fd[e] = -1;
    size_t opened = 0;
    for (size_t c = 0; c < s->ncpu; c++) {
        for (size_t e = 0; e < NEVENTS; e++) {
            struct perf_event_attr a;
            memset(&a, 0, sizeof a);
            a.size = sizeof a;
            a.type = PERF_TYPE_SOFTWARE;
            a.config = events[e].config;
            a.read_format = PERF_FORMAT_GROUP;
            int leader = e == 0 ? -1 : s->cpu[c].fd[0];
            int fd = hm_perf_event_open(&a, -1, (int)c, leader, PERF_FLAG_FD_CLOEXEC);
            if (fd < 0) {
                if (errno == ENODEV || errno == ENXIO) /* CPU offline */
                    break;
                hm_error_errno(err, "perf_event_open(software event %d, cpu %zu)", (int)e, c);
                perf_sw_close(s);
                return hm_error_wrap(err, "perf_sw (needs root or kernel.perf_event_paranoid <= 0)");
            }
            s->cpu[c].fd[e] = fd;
        }
        if (s->cpu[c].fd[NEVENTS - 1] >= 0)
            opened++;
    }
    if (opened == 0) {
        perf_sw_close(s);
        return hm_error_set(err, "perf_sw: no CPU accepted software events");
    }
    *state = s;
    return 0;
}

static int perf_sw_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    perf_sw_state *s = state;
    uint64_t total[NEVENTS] = {0};
    for (size_t c = 0; c < s->ncpu; c++) {
        if (s->cpu[c].fd[NEVENTS - 1] < 0)
            continue;
        uint64_t buf[1 + NEVENTS];
        ssize_t n = read(s->cpu[c].fd[0], buf, sizeof buf);
        if (n != (ssize_t)sizeof buf || buf[0] != NEVENTS)
            return hm_error_errno(err, "reading software events of cpu %zu", c);
        for (size_t e = 0; e < NEVENTS; e++)
            total[e] += buf[1 + e];
    }
    double dt = hm_dt_s(s->prev_mono_ns, ctx->mono_ns);
    bool first = !s->have_prev;
    double rate[NEVENTS];
    for (size_t e = 0; e < NEVENTS; e++) {
        rate[e] = first ? NAN : hm_counter_rate(s->prev[e], total[e], 64, dt);
        s->prev[e] = total[e];
    }
    s->have_prev = true;
    s->prev_mono_ns = ctx->mono_ns;
    if (first)
        return 0;
    hm_lp_begin(out, "perf_sw");
    for (size_t e = 0; e < NEVENTS; e++)
        hm_lp_field_f64(out, events[e].field, rate[e]);
    hm_lp_end(out);
    return 0;
}

const hm_sampler_ops hm_sampler_perf_sw = {
    .name = "perf_sw",
    .reads = "perf_event_open software events, every CPU",
    .measurement = "perf_sw",
    .fields = "context_switches_per_s cpu_migrations_per_s page_faults_per_s",
    .default_on = true,
    .open = perf_sw_open,
    .sample = perf_sw_sample,
    .close = perf_sw_close,
};
