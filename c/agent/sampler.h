/* The contract of a source of measurements ("sampler").
 *
 * Each source is one file in samplers/ that exports one hm_sampler_ops
 * (everything else in it is static) and is listed once in
 * samplers/samplers.def. open() allocates what the source needs for the
 * rest of its life (open descriptors, per-device state); sample() reads,
 * computes rates and appends lines to the batch without allocating.
 * A failing sample() returns -1 with a message: the loop logs it and keeps
 * sampling the other sources. */
#ifndef HM_SAMPLER_H
#define HM_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "control.h"
#include "hm_error.h"
#include "jobs.h"
#include "lp.h"

/* Values one source reads that another publishes, within one period
 * (procs_blocked lives in /proc/stat, next to the CPU times, but belongs
 * to the `load` line). `stamp` says which period they are from. */
#define HM_NODE_CPUS_MAX 1024

typedef struct hm_node_shared {
    int64_t stamp_ns;
    uint64_t procs_running, procs_blocked;
    int online_cpus;
    /* Counters perf_sw takes from files other sources read anyway (no
     * second read): /proc/stat ctxt (cpu) and /proc/vmstat pgfault (vm),
     * each valid for the period its stamp names. */
    int64_t ctxt_stamp_ns, pgfault_stamp_ns;
    uint64_t ctxt, pgfault;
    /* Node scope (scope.cgroup): the `node` source, sampled first, says
     * which CPUs are the node's (its cpuset) and how many CPUs' worth it
     * may use (cpuset, or a smaller CPU quota); valid for the period
     * scope_stamp_ns. `cpu` shows only these CPUs, `cgroup` takes job
     * shares of this capacity. */
    int64_t scope_stamp_ns;
    double scope_cpus;
    uint64_t scope_cpu_mask[HM_NODE_CPUS_MAX / 64];
} hm_node_shared;

/* The agent's own figures, published by the `self` source. */
typedef struct hm_self_stats {
    double cpu_us;            /* CPU time of the previous complete cycle; NaN at start */
    double jitter_us;         /* this wake-up minus its scheduled instant */
    uint64_t rss_bytes;       /* filled in by the self source */
    uint64_t samples_dropped; /* total: missed periods + lines lost to spool bounds */
    uint64_t control_refused[HM_CONTROL_REFUSALS]; /* control socket refusals by reason */
    int64_t period_ms;
} hm_self_stats;

typedef struct hm_sampler_env {
    const hm_agent_config *cfg;
    hm_jobs *jobs;
} hm_sampler_env;

typedef struct hm_sample_ctx {
    int64_t ts_ns;            /* the scheduled instant: every line's timestamp */
    int64_t mono_ns;          /* CLOCK_MONOTONIC when this period's reads began */
    int64_t period_index;     /* ts_ns / period (wall-clock aligned: equal on every node);
                               * the cycle count under --measure-cost */
    hm_jobs *jobs;
    hm_node_shared *node;
    hm_self_stats *self;
} hm_sample_ctx;

/* A source's metrics are written once: one list per measurement in the
 * source's file, each item X(P, name, unit, help[, the source's own
 * columns]), e.g.
 *   #define LOAD_METRICS(X, P) X(P, load1, "", "1-minute load average") ...
 * HM_FIELDS(LOAD_METRICS) is "load1 load5 ..." for .fields (--help prints
 * it; tests/python/test_agent_metrics_doc.py checks docs/formats.md's
 * table against it). HM_METRIC_NAMES(L) is the same with a space before
 * each name, to join several measurements ("cpu:" HM_METRIC_NAMES(..)).
 * HM_METRIC_ENUM(P, L) declares P_load1, ... and P_COUNT; HM_M(P, load1)
 * is the field name "load1" and a compile error when load1 is not in P's
 * list, so a line cannot carry a field its list does not name. */
#define HM_METRIC_NAME_(P, name, ...) " " #name
#define HM_METRIC_NAMES(LIST) LIST(HM_METRIC_NAME_, _)
#define HM_FIELDS(LIST) (HM_METRIC_NAMES(LIST) + 1)
#define HM_METRIC_ENUM_(P, name, ...) P##_##name,
#define HM_METRIC_ENUM(P, LIST) enum { LIST(HM_METRIC_ENUM_, P) P##_COUNT }
#define HM_M(P, name) ((void)P##_##name, #name)

typedef struct hm_sampler_ops {
    const char *name;         /* --sources name */
    const char *reads;        /* what it reads, for --help */
    const char *measurement;  /* line protocol measurement(s) */
    const char *fields;       /* every field it may publish (HM_FIELDS), for --help and docs */
    bool default_on;
    /* What it reads belongs to the agent's node even when the agent runs
     * beside others on one host (its network namespace, its jobs, itself).
     * Every other source reads host-wide figures, and in node scope its
     * lines are tagged scope=host (hm_sampler_scope). */
    bool node_local;
    /* May leave *state NULL and return 0: nothing to sample with this
     * config; the source stays off without a warning. */
    int (*open)(void **state, const hm_sampler_env *env, hm_error *err);
    int (*sample)(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err);
    void (*close)(void *state);
} hm_sampler_ops;

/* The registry: every source, in sampling order (samplers/registry.c). */
extern const hm_sampler_ops *const hm_samplers[];
extern const size_t hm_samplers_count;
const hm_sampler_ops *hm_sampler_find(const char *name);

/* The scope tag of a source's lines: "host" for host-wide sources when
 * the agent runs in node scope, else NULL (no tag: the names of
 * host-wide runs stay as they were). */
static inline const char *hm_sampler_scope(const hm_sampler_ops *ops, const hm_agent_config *cfg)
{
    return cfg->scope_cgroup[0] != '\0' && !ops->node_local ? "host" : NULL;
}

/* Seconds between two monotonic readings; 0 if none before. */
static inline double hm_dt_s(int64_t prev_mono_ns, int64_t now_mono_ns)
{
    return prev_mono_ns > 0 && now_mono_ns > prev_mono_ns ? (now_mono_ns - prev_mono_ns) / 1e9
                                                          : 0.0;
}

#endif
