/* perf_sw: the kernel's software-event counts for the node: context
 * switches, CPU migrations, page faults (per second).
 *
 * Context switches and page faults come from counters the kernel keeps
 * anyway and other sources read already: /proc/stat `ctxt` (the sum of the
 * run queues' switch counts, the same switches perf's context-switches
 * event counts) and /proc/vmstat `pgfault` (counted in handle_mm_fault;
 * perf's page-faults event counts one step earlier, in the arch fault
 * handler, so a fault retried after dropping mmap_lock counts twice in
 * pgfault and once in perf, and a bad access ending in SIGSEGV only in
 * perf). When `cpu` and `vm` ran this period their readings are used (no
 * extra read); otherwise this source reads the files itself.
 *
 * CPU migrations have no such counter. Where BPF is allowed (root), a
 * per-CPU perf_event of PERF_COUNT_SW_CPU_MIGRATIONS counts into a per-CPU
 * BPF map (../bpf_count.c) that one bpf() call reads every period without
 * interrupting anyone. Otherwise the perf_events are read, and reading a
 * CPU-bound event from another CPU is an IPI to that CPU (perf_event_read
 * -> smp_call_function_single): every CPU of the node, i.e. every rank of
 * a full-node job, is interrupted once per read. So those reads happen
 * every `perf_sw.migrations_every` periods (default 10; 1 = every period),
 * on wall-clock-aligned periods so that all nodes interrupt their ranks at
 * the same instant; the rate is over the time since the previous read.
 * migrations_every = 0: no migrations, no perf_event, no BPF. CPUs offline
 * when the source opens are not counted until `reload`. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf_count.h"
#include "counter.h"
#include "hm_log.h"
#include "perf_event.h"
#include "procfile.h"
#include "sampler.h"

#define PERF_SW_METRICS(X, P)                                                                 \
    X(P, context_switches_per_s, "1/s", "all CPUs (/proc/stat ctxt)")                         \
    X(P, cpu_migrations_per_s, "1/s", "all CPUs (BPF, or perf_event reads)")                  \
    X(P, page_faults_per_s, "1/s", "all CPUs (/proc/vmstat pgfault)")
HM_METRIC_ENUM(PERF_SW, PERF_SW_METRICS);

typedef struct rate_counter {
    bool have_prev;
    uint64_t prev;
    int64_t prev_mono_ns;
} rate_counter;

typedef struct perf_sw_state {
    const hm_agent_config *cfg; /* live: a reload or `period` request changes it */
    int *fd;                    /* migrations, one per CPU; -1 offline */
    size_t ncpu, opened;
    hm_procfile stat, vmstat;   /* read only when cpu / vm did not this period */
    hm_key_hint ctxt_hint, pgfault_hint;
    rate_counter ctxt, pgfault, migrations;
    hm_bpf_count bpf;           /* migrations counted in the kernel, when allowed */
    bool use_bpf;
} perf_sw_state;

static void perf_sw_close(void *state)
{
    perf_sw_state *s = state;
    if (s == NULL)
        return;
    for (size_t c = 0; c < s->ncpu; c++)
        if (s->fd[c] >= 0)
            close(s->fd[c]);
    free(s->fd);
    if (s->use_bpf)
        hm_bpf_count_close(&s->bpf);
    hm_procfile_close(&s->stat);
    hm_procfile_close(&s->vmstat);
    free(s);
}

/* One migrations event per CPU. Failing is not fatal: the source still
 * gives context switches and page faults. */
static void open_migrations(perf_sw_state *s)
{
    for (size_t c = 0; c < s->ncpu; c++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_MIGRATIONS;
        int fd = hm_perf_event_open(&a, -1, (int)c, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (errno == ENODEV || errno == ENXIO) /* CPU offline */
                continue;
            hm_log_warn("perf_sw: perf_event_open(cpu-migrations, cpu %zu): %s; "
                        "cpu_migrations_per_s left out (needs root or kernel.perf_event_paranoid <= 0)",
                        c, strerror(errno));
            for (size_t k = 0; k < c; k++)
                if (s->fd[k] >= 0) {
                    close(s->fd[k]);
                    s->fd[k] = -1;
                }
            s->opened = 0;
            return;
        }
        s->fd[c] = fd;
        s->opened++;
    }
}

static int perf_sw_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    perf_sw_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    s->cfg = env->cfg;
    s->stat.fd = s->vmstat.fd = -1;
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    s->ncpu = conf > 0 ? (size_t)conf : 1;
    s->fd = malloc(s->ncpu * sizeof *s->fd);
    if (s->fd == NULL) {
        free(s);
        return hm_error_set(err, "out of memory");
    }
    for (size_t c = 0; c < s->ncpu; c++)
        s->fd[c] = -1;
    if (hm_procfile_open(&s->stat, env->cfg->root, "proc/stat", err) < 0 ||
        hm_procfile_open(&s->vmstat, env->cfg->root, "proc/vmstat", err) < 0) {
        perf_sw_close(s);
        return hm_error_wrap(err, "perf_sw");
    }
    s->ctxt_hint.key = "ctxt";
    s->pgfault_hint.key = "pgfault";
    if (env->cfg->perf_sw_migrations_every > 0) {
        hm_error e;
        bool bpf = strcmp(env->cfg->perf_sw_migrations, "auto") == 0;
        if (bpf && hm_bpf_count_open(&s->bpf, PERF_COUNT_SW_CPU_MIGRATIONS, s->ncpu, &e) == 0) {
            s->use_bpf = true;
        } else if (!bpf) {
            open_migrations(s);
        } else {
            hm_log_notice("perf_sw: no BPF counting of migrations (%s): perf_event reads, "
                          "an IPI to every CPU every %lld periods",
                          e.msg, (long long)env->cfg->perf_sw_migrations_every);
            open_migrations(s);
        }
    }
    *state = s;
    return 0;
}

static double rate_of(rate_counter *r, uint64_t now, int64_t mono_ns)
{
    double rate = r->have_prev ? hm_counter_rate(r->prev, now, 64, hm_dt_s(r->prev_mono_ns, mono_ns))
                               : NAN;
    r->prev = now;
    r->prev_mono_ns = mono_ns;
    r->have_prev = true;
    return rate;
}

/* The counter `key` of a file some other source may have read this period. */
static int shared_counter(hm_procfile *f, hm_key_hint *hint, int64_t stamp_ns, uint64_t shared,
                          const hm_sample_ctx *ctx, uint64_t *out, bool *found, hm_error *err)
{
    *found = true;
    if (stamp_ns == ctx->ts_ns) {
        *out = shared;
        return 0;
    }
    if (hm_procfile_read(f, err) < 0)
        return -1;
    hm_scan line = hm_find_key(f->buf, f->len, hint);
    *found = hm_scan_u64(&line, out);
    return 0;
}

static bool migrations_due(const perf_sw_state *s, int64_t period_index)
{
    int64_t every = s->cfg->perf_sw_migrations_every;
    return s->opened > 0 && every > 0 && period_index % every == 0;
}

static int perf_sw_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    perf_sw_state *s = state;
    double ctxt = NAN, pgfault = NAN, migrations = NAN;
    uint64_t v;
    bool found;
    if (shared_counter(&s->stat, &s->ctxt_hint, ctx->node->ctxt_stamp_ns, ctx->node->ctxt, ctx, &v,
                       &found, err) < 0)
        return -1;
    if (found)
        ctxt = rate_of(&s->ctxt, v, ctx->mono_ns);
    if (shared_counter(&s->vmstat, &s->pgfault_hint, ctx->node->pgfault_stamp_ns, ctx->node->pgfault,
                       ctx, &v, &found, err) < 0)
        return -1;
    if (found)
        pgfault = rate_of(&s->pgfault, v, ctx->mono_ns);
    if (s->use_bpf && s->cfg->perf_sw_migrations_every > 0) {
        uint64_t total;
        if (hm_bpf_count_read(&s->bpf, &total, err) < 0)
            return -1;
        migrations = rate_of(&s->migrations, total, ctx->mono_ns);
    } else if (migrations_due(s, ctx->period_index)) {
        uint64_t total = 0;
        for (size_t c = 0; c < s->ncpu; c++) {
            if (s->fd[c] < 0)
                continue;
            uint64_t count;
            if (read(s->fd[c], &count, sizeof count) != (ssize_t)sizeof count)
                return hm_error_errno(err, "reading cpu-migrations of cpu %zu", c);
            total += count;
        }
        migrations = rate_of(&s->migrations, total, ctx->mono_ns);
    }
    hm_lp_begin(out, "perf_sw");
    hm_lp_field_f64(out, HM_M(PERF_SW, context_switches_per_s), ctxt);
    hm_lp_field_f64(out, HM_M(PERF_SW, cpu_migrations_per_s), migrations);
    hm_lp_field_f64(out, HM_M(PERF_SW, page_faults_per_s), pgfault);
    hm_lp_end(out); /* no line while every value is still priming */
    return 0;
}

const hm_sampler_ops hm_sampler_perf_sw = {
    .name = "perf_sw",
    .reads = "/proc/stat ctxt, /proc/vmstat pgfault, cpu-migrations counted by BPF on every "
             "CPU (or perf_event reads every perf_sw.migrations_every periods)",
    .measurement = "perf_sw",
    .fields = HM_FIELDS(PERF_SW_METRICS),
    .default_on = true,
    .open = perf_sw_open,
    .sample = perf_sw_sample,
    .close = perf_sw_close,
};
