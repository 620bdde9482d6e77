/* cpu: CPU time shares per CPU and in total, from /proc/stat.
 *
 * The kernel counts time in USER_HZ ticks per state; a share is the
 * state's increase over the sum of all states' increases, so it needs no
 * tick rate and stays right when a CPU was offline for part of the
 * interval. Also picks up procs_running / procs_blocked for `load`. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "counter.h"
#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

/* In the column order of /proc/stat; guest time is already inside
 * user/nice. */
#define CPU_METRICS(X, P)                                                                     \
    X(P, user_pct, "%", "user")                                                               \
    X(P, nice_pct, "%", "user at a lower priority")                                           \
    X(P, system_pct, "%", "kernel")                                                           \
    X(P, idle_pct, "%", "idle")                                                               \
    X(P, iowait_pct, "%", "idle with I/O outstanding")                                        \
    X(P, irq_pct, "%", "hardware interrupts")                                                 \
    X(P, softirq_pct, "%", "software interrupts")                                             \
    X(P, steal_pct, "%", "taken by the hypervisor")
HM_METRIC_ENUM(CPU, CPU_METRICS);
#define NSTATES CPU_COUNT

#define CPU_NAME_(P, name, ...) #name,
static const char *const state_fields[NSTATES] = {CPU_METRICS(CPU_NAME_, _)};
#undef CPU_NAME_

typedef struct cpu_entry {
    bool seen;          /* prev holds a reading */
    char tag[16];       /* "total" or "cpuN" */
    uint64_t prev[NSTATES];
} cpu_entry;

typedef struct proc_stat_state {
    hm_procfile file;
    size_t ncpu_slots;  /* entries after the total */
    cpu_entry *cpu;     /* [0] = total, [1 + N] = cpuN */
    bool warned_range;
    bool scoped;        /* node scope: per-CPU lines only for the node's CPUs */
    hm_key_hint running_hint, blocked_hint, ctxt_hint;
} proc_stat_state;

static void proc_stat_close(void *state)
{
    proc_stat_state *s = state;
    if (s == NULL)
        return;
    hm_procfile_close(&s->file);
    free(s->cpu);
    free(s);
}

static int proc_stat_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    proc_stat_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    if (hm_procfile_open(&s->file, env->cfg->root, "proc/stat", err) < 0) {
        free(s);
        return -1;
    }
    /* Room for every CPU the file shows now and the kernel could bring
     * online later, so hot-plug needs no allocation. */
    size_t lines = 0;
    hm_scan c = hm_scan_of(s->file.buf, s->file.len);
    do {
        if (c.end - c.p > 3 && memcmp(c.p, "cpu", 3) == 0)
            lines++;
    } while (hm_scan_next_line(&c));
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    s->ncpu_slots = lines + (conf > 0 ? (size_t)conf : 0) + 1;
    s->cpu = calloc(s->ncpu_slots + 1, sizeof *s->cpu);
    if (s->cpu == NULL) {
        proc_stat_close(s);
        return hm_error_set(err, "out of memory");
    }
    strcpy(s->cpu[0].tag, "total");
    s->scoped = env->cfg->scope_cgroup[0] != '\0';
    s->running_hint.key = "procs_running";
    s->blocked_hint.key = "procs_blocked";
    s->ctxt_hint.key = "ctxt";
    *state = s;
    return 0;
}

/* publish false still takes the reading, so a CPU that joins the node
 * has its shares from the next period on. */
static void emit_cpu(cpu_entry *e, const uint64_t *now, bool publish, hm_lp *out)
{
    uint64_t d[NSTATES], total = 0;
    bool ok = e->seen;
    for (int i = 0; i < NSTATES && ok; i++) {
        ok = hm_counter_delta(e->prev[i], now[i], 64, &d[i]);
        total += ok ? d[i] : 0;
    }
    memcpy(e->prev, now, sizeof e->prev);
    e->seen = true;
    if (!ok || total == 0 || !publish)
        return; /* first reading or a reset: no shares this time */
    hm_lp_begin(out, "cpu");
    hm_lp_tag(out, "cpu", e->tag);
    for (int i = 0; i < NSTATES; i++)
        hm_lp_field_f64(out, state_fields[i], 100.0 * (double)d[i] / (double)total);
    hm_lp_end(out);
}

/* In node scope a CPU is shown only when the node source said this period
 * that it is in the node's cpuset: the lines still count every task on
 * the CPU (they are tagged scope=host), but other nodes' CPUs are left
 * out. */
static bool node_cpu(const proc_stat_state *s, const hm_sample_ctx *ctx, size_t cpu)
{
    if (!s->scoped)
        return true;
    return ctx->node->scope_stamp_ns == ctx->ts_ns && cpu < HM_NODE_CPUS_MAX &&
           (ctx->node->scope_cpu_mask[cpu / 64] >> (cpu % 64) & 1u) != 0;
}

static int proc_stat_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    proc_stat_state *s = state;
    if (hm_procfile_read(&s->file, err) < 0)
        return -1;
    hm_scan c = hm_scan_of(s->file.buf, s->file.len);
    int online = 0;
    /* The cpu lines come first; stop at the first other line. */
    while (c.end - c.p > 3 && memcmp(c.p, "cpu", 3) == 0) {
        hm_scan line = c;
        const char *w;
        size_t wl;
        hm_scan_word(&line, &w, &wl, false);
        uint64_t now[NSTATES] = {0};
        int got = 0;
        while (got < NSTATES && hm_scan_u64(&line, &now[got]))
            got++;
        if (got < 4) /* user nice system idle are always there */
            return hm_error_set(err, "%s: malformed line '%.*s'", s->file.path, (int)wl, w);
        size_t slot = 0;
        if (wl > 3) {
            hm_scan num = hm_scan_of(w + 3, wl - 3);
            uint64_t idx;
            if (!hm_scan_u64(&num, &idx) || num.p != num.end)
                return hm_error_set(err, "%s: malformed name '%.*s'", s->file.path, (int)wl, w);
            online++;
            if (idx + 1 > s->ncpu_slots) {
                hm_log_warn_once(&s->warned_range, "%s: cpu%llu beyond the %zu CPUs sized at start; not sampled",
                                 s->file.path, (unsigned long long)idx, s->ncpu_slots);
                if (!hm_scan_next_line(&c))
                    break;
                continue;
            }
            slot = (size_t)idx + 1;
            if (s->cpu[slot].tag[0] == '\0')
                memcpy(s->cpu[slot].tag, w, wl < 15 ? wl : 15);
        }
        emit_cpu(&s->cpu[slot], now, slot == 0 || node_cpu(s, ctx, slot - 1), out);
        if (!hm_scan_next_line(&c))
            break;
    }
    hm_scan r = hm_find_key(s->file.buf, s->file.len, &s->running_hint);
    hm_scan b = hm_find_key(s->file.buf, s->file.len, &s->blocked_hint);
    if (hm_scan_u64(&r, &ctx->node->procs_running) && hm_scan_u64(&b, &ctx->node->procs_blocked)) {
        ctx->node->stamp_ns = ctx->ts_ns;
        ctx->node->online_cpus = online;
    }
    hm_scan x = hm_find_key(s->file.buf, s->file.len, &s->ctxt_hint);
    if (hm_scan_u64(&x, &ctx->node->ctxt))
        ctx->node->ctxt_stamp_ns = ctx->ts_ns;
    return 0;
}

const hm_sampler_ops hm_sampler_proc_stat = {
    .name = "cpu",
    .reads = "/proc/stat",
    .measurement = "cpu (tag cpu=total|cpuN)",
    .fields = HM_FIELDS(CPU_METRICS),
    .default_on = true,
    .open = proc_stat_open,
    .sample = proc_stat_sample,
    .close = proc_stat_close,
};
