/* The agent: its sources, batch, sink and control socket, and the loop
 * that samples them on wall-clock-aligned instants. */
#ifndef HM_AGENT_H
#define HM_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "app_channel.h"
#include "config.h"
#include "control.h"
#include "hm_error.h"
#include "jobs.h"
#include "lp.h"
#include "sampler.h"
#include "sinks/sink.h"

#define HM_AGENT_SOURCES_MAX 32

typedef struct hm_agent_source {
    const hm_sampler_ops *ops;
    void *state;
    bool failing;            /* last sample failed; logged once until it recovers */
    double cpu_ns_total;     /* CPU time spent in sample(), when cost is measured */
    int64_t every;           /* sampled every N periods (sources_every; 1 = each) */
} hm_agent_source;

typedef struct hm_agent {
    hm_agent_config cfg;
    const hm_config_override *overrides;
    size_t n_overrides;
    hm_jobs jobs;
    hm_node_shared node;
    hm_self_stats self;
    hm_agent_source source[HM_AGENT_SOURCES_MAX];
    size_t nsources;
    hm_lp lp;
    hm_sink sink;
    hm_control control;
    long admin_gid;          /* control.admin_group, -1 none */
    hm_app app;              /* libhushmon clients (app_channel.h); opened by hm_agent_run */
    int64_t start_ns;
    uint64_t samples;
    uint64_t missed_periods;
    int timer_fd, signal_fd;
    bool stop;
    bool measure_cost;       /* time every source (--measure-cost) */
    bool sink_failing;       /* last write failed; logged once until it recovers */
    bool batch_full_said;
    double sink_cpu_ns_total;
    /* A `set job=ID ...` by the job's owner lasts as long as the job: the
     * settings before it come back when the job ends (agent_control.c). */
    struct {
        char job[HM_JOB_ID_MAX];  /* "" when no job-scoped change is active */
        int64_t period_ms;
        char sources[512];
        hm_app_muted muted;
    } job_scope;
} hm_agent;

/* CPU time of the calling thread (the agent has one), microseconds. */
static inline double hm_thread_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Binds the calling process to the CPU list `cpus` ("0", "0,64-65"):
 * the agent's work stays on a housekeeping core, off the job's CPUs. */
int hm_agent_pin(const char *cpus, hm_error *err);

/* Checks that every name in cfg->sources is a registered source. */
int hm_agent_check_sources(const char *sources, hm_error *err);

/* The explicit list of source names after applying edit to current:
 * "+a,-b" adds and removes, "a,b" replaces; unknown names are errors. */
int hm_agent_edit_sources(const char *current, const char *edit, char *out, size_t size,
                          hm_error *err);
/* Samples these sources from the next cycle: the ones kept stay open,
 * added ones open (one that cannot is logged and left off), removed ones
 * close. Nothing changes on a bad list. */
int hm_agent_set_sources(hm_agent *a, const char *sources, hm_error *err);
/* The sockets' settings from a->cfg: the control socket's mode and group
 * (for when it is made), its deadline and cap, the app channel's limits,
 * the admin group. */
int hm_agent_apply_socket_settings(hm_agent *a, hm_error *err);
int hm_agent_init(hm_agent *a, const hm_agent_config *cfg, const hm_config_override *overrides,
                  size_t n_overrides, hm_error *err);
/* One cycle: reads every source and hands the batch to the sink.
 * ts_ns stamps the lines; mono_ns is when the reads began. */
int hm_agent_cycle(hm_agent *a, int64_t ts_ns, int64_t mono_ns, hm_error *err);
/* Two readings interval_ms apart, the second one written. */
int hm_agent_once(hm_agent *a, int64_t interval_ms, hm_error *err);
/* Runs n cycles (after one priming cycle), gap_ms apart (0 = back to
 * back), timing each source's CPU time, and prints CPU microseconds per
 * sample per source, for docs/agent.md and bench/bench_agent_cost.py. */
int hm_agent_measure_cost(hm_agent *a, int64_t n, int64_t gap_ms, hm_error *err);
/* Samples until SIGTERM/SIGINT; SIGHUP reloads the config. */
int hm_agent_run(hm_agent *a, hm_error *err);
/* Rereads the config file (flags still override) and reopens sources
 * and, if its settings changed, the sink. On error nothing changes. */
int hm_agent_reload(hm_agent *a, hm_error *err);
/* Handles one control request from the control socket (agent_control.c);
 * the client is the socket's peer (SO_PEERCRED, SO_PEERGROUPS). */
void hm_agent_control(void *agent, const char *request, char *response, size_t size);
/* The one rule of who is an admin: root, the agent's own uid, a uid in
 * control.admin_uids, a member of control.admin_group (groups: the
 * peer's, NULL when not known, as over NATS). */
bool hm_agent_is_admin(const hm_agent *a, long uid, const hm_control_peer *groups);
/* For hm_control_serve: hm_agent_is_admin of a socket's peer. */
bool hm_agent_peer_is_admin(void *agent, const hm_control_peer *peer);
/* A request of the agent itself (SIGHUP's reload): as its own uid. */
void hm_agent_control_self(hm_agent *a, const char *request, char *response, size_t size);
/* The same for a request over the sink's connection (NATS): only status
 * and set; the uid is the request's claim (-1 none), which the server's
 * publish permissions vouch for (docs/agent.md, "Control channel"). */
void hm_agent_control_remote(void *agent, long claimed_uid, const char *request, char *response,
                             size_t size);
/* Once per loop turn: ends a job-scoped change whose job has ended. */
void hm_agent_control_tick(hm_agent *a);
void hm_agent_fini(hm_agent *a);

/* The next aligned instant strictly after now_ns: k * period + offset. */
int64_t hm_agent_next_boundary(int64_t now_ns, int64_t period_ns, int64_t offset_ns);

#endif
