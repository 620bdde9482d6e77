/* node: the node's own CPU and memory, from its cgroup (node scope).
 *
 * With scope.cgroup set, the agent describes one node that shares a host
 * with others (a test-bed node, a container, a partition of a large
 * machine). This source then publishes the node's `cpu,cpu=total` and
 * `mem` lines from the cgroup, under the names the host-wide sources use
 * when the agent is not scoped, so whatever reads those (the digest's
 * sensors) reads the node; the agent tags the host-wide sources' lines
 * scope=host. Its own `node_cgroup` line carries what only the cgroup
 * knows: capacity, throttling, OOM kills, I/O.
 *
 * The cgroup is looked up under jobs.cgroup_root: cgroup v2 when
 * <path>/cgroup.controllers exists there, else v1, one hierarchy per
 * controller (<cgroup_root>/cpuacct/<path>, cpu/, cpuset/, memory/).
 * "self" is the agent's own cgroup from /proc/self/cgroup (per controller
 * in v1), resolved when the source opens, and again on reload.
 *
 * CPU shares are of the node's capacity: the CPUs of its cpuset, or its
 * CPU quota when that is smaller, so a node limited to 1 of 2 CPUs reads
 * 100 % busy when it keeps that CPU busy. A cgroup counts only time spent
 * running, so idle_pct is 100 - busy and iowait, irq and steal are
 * absent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "counter.h"
#include "procfile.h"
#include "sampler.h"

/* The node's own cpu,cpu=total line: shares of its CPU capacity. */
#define NODE_CPU_METRICS(X, P)                                                                \
    X(P, user_pct, "%", "user, of the node's CPU capacity")                                   \
    X(P, system_pct, "%", "system")                                                           \
    X(P, idle_pct, "%", "100 - busy")
HM_METRIC_ENUM(NCPU, NODE_CPU_METRICS);
/* The node's own mem line. */
#define NODE_MEM_METRICS(X, P)                                                                \
    X(P, total_bytes, "B", "memory limit, or the host's MemTotal if none or larger")          \
    X(P, free_bytes, "B", "total - usage")                                                    \
    X(P, available_bytes, "B", "total - used")                                                \
    X(P, used_bytes, "B", "usage - inactive page cache")                                      \
    X(P, used_pct, "%", "100 x used / total")                                                 \
    X(P, anon_bytes, "B", "anonymous memory")                                                 \
    X(P, cached_bytes, "B", "page cache")                                                     \
    X(P, swap_used_bytes, "B", "swap in use")
HM_METRIC_ENUM(NMEM, NODE_MEM_METRICS);
#define NODE_CGROUP_METRICS(X, P)                                                             \
    X(P, cpus, "CPUs", "CPU capacity: the cpuset's CPUs, or the quota when smaller")          \
    X(P, cpuset_cpus, "CPUs", "CPUs in the cpuset")                                           \
    X(P, quota_cpus, "CPUs", "the CPU quota (absent without one)")                            \
    X(P, throttled_pct, "%", "quota periods in which it was throttled")                       \
    X(P, oom_kill_per_s, "1/s", "OOM kills in the cgroup")                                    \
    X(P, io_read_bytes_per_s, "B/s", "io.stat rbytes (v2)")                                   \
    X(P, io_write_bytes_per_s, "B/s", "io.stat wbytes (v2)")
HM_METRIC_ENUM(NCG, NODE_CGROUP_METRICS);

/* v1 hierarchies, one directory each; v2 uses the first slot only. */
enum { C_CPUACCT, C_CPU, C_CPUSET, C_MEMORY, NCTRL };
static const char *const ctrl_names[NCTRL] = {"cpuacct", "cpu", "cpuset", "memory"};

enum {
    F_CPU,          /* v2 cpu.stat (usage, user, system, throttling); v1 cpuacct.usage */
    F_CPU_USER,     /* v1 cpuacct.usage_user (ns) */
    F_CPU_SYS,      /* v1 cpuacct.usage_sys (ns) */
    F_CPU_TICKS,    /* v1 cpuacct.stat (USER_HZ): kernels before 4.7 lack the two above */
    F_THROTTLE,     /* v1 cpu.stat */
    F_QUOTA,        /* v2 cpu.max; v1 cpu.cfs_quota_us */
    F_QUOTA_PERIOD, /* v1 cpu.cfs_period_us */
    F_CPUSET,       /* v2 cpuset.cpus.effective; v1 cpuset.effective_cpus */
    F_CPUSET_OLD,   /* v1 cpuset.cpus: kernels without effective_cpus */
    F_MEM,          /* v2 memory.current; v1 memory.usage_in_bytes */
    F_MEM_MAX,      /* v2 memory.max; v1 memory.limit_in_bytes */
    F_MEM_STAT,     /* memory.stat */
    F_SWAP,         /* v2 memory.swap.current; v1 memory.memsw.usage_in_bytes */
    F_EVENTS,       /* v2 memory.events; v1 memory.oom_control (oom_kill) */
    F_IO,           /* v2 io.stat (v1 blkio is not read) */
    NFILES
};

typedef struct file_def {
    int ctrl;
    const char *name;   /* NULL: not in this version */
} file_def;

static const file_def files_v2[NFILES] = {
    [F_CPU] = {0, "cpu.stat"},
    [F_QUOTA] = {0, "cpu.max"},
    [F_CPUSET] = {0, "cpuset.cpus.effective"},
    [F_MEM] = {0, "memory.current"},
    [F_MEM_MAX] = {0, "memory.max"},
    [F_MEM_STAT] = {0, "memory.stat"},
    [F_SWAP] = {0, "memory.swap.current"},
    [F_EVENTS] = {0, "memory.events"},
    [F_IO] = {0, "io.stat"},
};

static const file_def files_v1[NFILES] = {
    [F_CPU] = {C_CPUACCT, "cpuacct.usage"},
    [F_CPU_USER] = {C_CPUACCT, "cpuacct.usage_user"},
    [F_CPU_SYS] = {C_CPUACCT, "cpuacct.usage_sys"},
    [F_CPU_TICKS] = {C_CPUACCT, "cpuacct.stat"},
    [F_THROTTLE] = {C_CPU, "cpu.stat"},
    [F_QUOTA] = {C_CPU, "cpu.cfs_quota_us"},
    [F_QUOTA_PERIOD] = {C_CPU, "cpu.cfs_period_us"},
    [F_CPUSET] = {C_CPUSET, "cpuset.effective_cpus"},
    [F_CPUSET_OLD] = {C_CPUSET, "cpuset.cpus"},
    [F_MEM] = {C_MEMORY, "memory.usage_in_bytes"},
    [F_MEM_MAX] = {C_MEMORY, "memory.limit_in_bytes"},
    [F_MEM_STAT] = {C_MEMORY, "memory.stat"},
    [F_SWAP] = {C_MEMORY, "memory.memsw.usage_in_bytes"},
    [F_EVENTS] = {C_MEMORY, "memory.oom_control"},
};

/* "key value" lines, and the file they are in. */
enum { K_USAGE, K_USER, K_SYSTEM, K_PERIODS, K_THROTTLED, K_ANON, K_FILE, K_INACTIVE, K_SWAP,
       K_OOM, NKEYS };
static const char *const keys_v2[NKEYS] = {
    "usage_usec", "user_usec", "system_usec", "nr_periods", "nr_throttled",
    "anon", "file", "inactive_file", NULL, "oom_kill",
};
static const char *const keys_v1[NKEYS] = {
    NULL, "user", "system", "nr_periods", "nr_throttled",
    "total_rss", "total_cache", "total_inactive_file", "total_swap", "oom_kill",
};

/* Counters whose rates are published. CPU times in ns. */
enum { P_USAGE, P_USER, P_SYSTEM, P_PERIODS, P_THROTTLED, P_OOM, P_RBYTES, P_WBYTES, NPREV };

typedef struct node_state {
    int version;                 /* 1 or 2 */
    char path[PATH_MAX];         /* the cgroup, for messages */
    hm_procfile file[NFILES];
    hm_procfile online;          /* sys/devices/system/cpu/online, when no cpuset */
    hm_key_hint hint[NKEYS];
    double host_mem_bytes;       /* MemTotal: the node's memory when unlimited; NaN if unknown */
    double ns_per_tick;
    bool prev_ok[NPREV];
    uint64_t prev[NPREV];
    int64_t prev_mono_ns;
} node_state;

static void node_close(void *state)
{
    node_state *s = state;
    if (s == NULL)
        return;
    for (int k = 0; k < NFILES; k++)
        hm_procfile_close(&s->file[k]);
    hm_procfile_close(&s->online);
    free(s);
}

static bool exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    return n > 0 && (size_t)n < sizeof path && stat(path, &st) == 0;
}

/* /proc/self/cgroup: "0::/path" (v2) and "N:ctrl,ctrl:/path" (v1). Fills
 * v2 with the v2 path and v1[c] with each controller's path ("" when not
 * listed). */
static int read_self(const char *root, char *v2, size_t size, char v1[NCTRL][PATH_MAX],
                     hm_error *err)
{
    hm_procfile f;
    if (hm_procfile_open(&f, root, "proc/self/cgroup", err) < 0)
        return hm_error_wrap(err, "scope.cgroup = \"self\"");
    v2[0] = '\0';
    for (int c = 0; c < NCTRL; c++)
        v1[c][0] = '\0';
    hm_scan line = hm_scan_of(f.buf, f.len);
    do {
        const char *p = line.p;
        const char *nl = memchr(p, '\n', (size_t)(line.end - p));
        const char *eol = nl ? nl : line.end;
        const char *c1 = memchr(p, ':', (size_t)(eol - p));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
        if (c2 == NULL)
            continue;
        size_t plen = (size_t)(eol - c2 - 1);
        if (plen >= PATH_MAX || plen >= size) {
            hm_procfile_close(&f);
            return hm_error_set(err, "%s: cgroup path too long", f.path ? f.path : "proc/self/cgroup");
        }
        if (c2 == c1 + 1) { /* no controllers: the v2 hierarchy */
            memcpy(v2, c2 + 1, plen);
            v2[plen] = '\0';
            continue;
        }
        for (const char *ctl = c1 + 1; ctl < c2;) {
            const char *comma = memchr(ctl, ',', (size_t)(c2 - ctl));
            const char *end = comma ? comma : c2;
            for (int c = 0; c < NCTRL; c++)
                if (hm_word_eq(ctl, (size_t)(end - ctl), ctrl_names[c])) {
                    memcpy(v1[c], c2 + 1, plen);
                    v1[c][plen] = '\0';
                }
            ctl = end + 1;
        }
    } while (hm_scan_next_line(&line));
    hm_procfile_close(&f);
    return 0;
}

/* Finds the cgroup's directories: dir[0] for v2, dir[C_*] for v1. */
static int locate(node_state *s, const hm_agent_config *cfg, char dir[NCTRL][PATH_MAX],
                  hm_error *err)
{
    char base[PATH_MAX], v2[PATH_MAX], v1[NCTRL][PATH_MAX];
    if (hm_path_join(base, sizeof base, cfg->root, cfg->cgroup_root, err) < 0)
        return -1;
    bool self = strcmp(cfg->scope_cgroup, "self") == 0;
    if (self) {
        if (read_self(cfg->root, v2, sizeof v2, v1, err) < 0)
            return -1;
    } else {
        snprintf(v2, sizeof v2, "%s", cfg->scope_cgroup);
        for (int c = 0; c < NCTRL; c++)
            snprintf(v1[c], sizeof v1[c], "%s", cfg->scope_cgroup);
    }
    if (v2[0] != '\0') {
        if (hm_path_join(dir[0], PATH_MAX, base, v2, err) < 0)
            return -1;
        if (exists(dir[0], "cgroup.controllers")) {
            s->version = 2;
            snprintf(s->path, sizeof s->path, "%s", v2);
            return 0;
        }
    }
    /* v1: cpuacct is what the CPU figures need; the others may be absent. */
    for (int c = 0; c < NCTRL; c++) {
        char ctrl_root[PATH_MAX];
        dir[c][0] = '\0';
        if (v1[c][0] == '\0')
            continue;
        if (hm_path_join(ctrl_root, sizeof ctrl_root, base, ctrl_names[c], err) < 0 ||
            hm_path_join(dir[c], PATH_MAX, ctrl_root, v1[c], err) < 0)
            return -1;
    }
    if (dir[C_CPUACCT][0] != '\0' && exists(dir[C_CPUACCT], "cpuacct.usage")) {
        s->version = 1;
        snprintf(s->path, sizeof s->path, "%s", v1[C_CPUACCT]);
        return 0;
    }
    if (self)
        return hm_error_set(err, "scope.cgroup = \"self\": the agent's cgroup (%s) has neither "
                                 "cgroup.controllers (v2) nor cpuacct.usage (v1) under %s",
                            v2[0] ? v2 : v1[C_CPUACCT], base);
    return hm_error_set(err, "scope.cgroup '%s': neither %s/%s/cgroup.controllers (cgroup v2) "
                             "nor %s/cpuacct/%s/cpuacct.usage (v1) exists",
                        cfg->scope_cgroup, base, cfg->scope_cgroup, base, cfg->scope_cgroup);
}

/* MemTotal from meminfo, read once: a node without a memory limit may
 * use the whole host. */
static double host_memory(const char *root)
{
    hm_procfile f;
    hm_error ignored;
    if (hm_procfile_open(&f, root, "proc/meminfo", &ignored) < 0)
        return NAN;
    hm_key_hint hint = {.key = "MemTotal", .offset = 0};
    hm_scan line = hm_find_key(f.buf, f.len, &hint);
    uint64_t kib;
    double v = hm_scan_char(&line, ':') && hm_scan_u64(&line, &kib) ? (double)kib * 1024.0 : NAN;
    hm_procfile_close(&f);
    return v;
}

static int node_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    const hm_agent_config *cfg = env->cfg;
    *state = NULL;
    if (cfg->scope_cgroup[0] == '\0')
        return 0; /* host-wide: the cpu and mem sources say it all */
    node_state *s = calloc(1, sizeof *s);
    char(*dir)[PATH_MAX] = calloc(NCTRL, PATH_MAX);
    if (s == NULL || dir == NULL) {
        free(s);
        free(dir);
        return hm_error_set(err, "out of memory");
    }
    for (int k = 0; k < NFILES; k++)
        s->file[k].fd = -1;
    s->online.fd = -1;
    if (locate(s, cfg, dir, err) < 0) {
        free(dir);
        node_close(s);
        return -1;
    }
    const file_def *defs = s->version == 2 ? files_v2 : files_v1;
    const char *const *keys = s->version == 2 ? keys_v2 : keys_v1;
    for (int k = 0; k < NKEYS; k++)
        s->hint[k].key = keys[k];
    for (int k = 0; k < NFILES; k++) {
        if (defs[k].name == NULL || dir[defs[k].ctrl][0] == '\0')
            continue;
        if (k == F_CPU_TICKS && s->file[F_CPU_USER].fd >= 0 && s->file[F_CPU_SYS].fd >= 0)
            continue;
        if (k == F_CPUSET_OLD && s->file[F_CPUSET].fd >= 0)
            continue;
        char path[PATH_MAX];
        hm_error e;
        if (hm_path_join(path, sizeof path, dir[defs[k].ctrl], defs[k].name, err) < 0) {
            free(dir);
            node_close(s);
            return -1;
        }
        /* Only the CPU time is required; a controller that is not enabled
         * (no memory, no cpuset, no swap accounting) leaves its fields out. */
        if (hm_procfile_open_path(&s->file[k], path, &e) < 0 && k == F_CPU) {
            free(dir);
            node_close(s);
            return hm_error_set(err, "node cgroup: %s", e.msg);
        }
    }
    free(dir);
    if (s->file[F_CPUSET].fd < 0 && s->file[F_CPUSET_OLD].fd < 0 &&
        hm_procfile_open(&s->online, cfg->root, "sys/devices/system/cpu/online", err) < 0) {
        hm_error_wrap(err, "node cgroup %s has no cpuset and the host's CPUs are unknown",
                      s->path);
        node_close(s);
        return -1;
    }
    s->host_mem_bytes = host_memory(cfg->root);
    long tck = sysconf(_SC_CLK_TCK);
    s->ns_per_tick = 1e9 / (double)(tck > 0 ? tck : 100);
    *state = s;
    return 0;
}

static bool key_u64(node_state *s, int file, int key, uint64_t *out)
{
    const hm_procfile *f = &s->file[file];
    if (f->fd < 0 || s->hint[key].key == NULL)
        return false;
    hm_scan line = hm_find_key(f->buf, f->len, &s->hint[key]);
    return line.p != line.end && hm_scan_u64(&line, out);
}

/* A file that holds one number; false for "max", "-1" or no file. */
static bool value_u64(const hm_procfile *f, hm_scan *rest, uint64_t *out)
{
    if (f->fd < 0)
        return false;
    hm_scan c = hm_scan_of(f->buf, f->len);
    bool ok = hm_scan_u64(&c, out);
    if (rest != NULL)
        *rest = c;
    return ok;
}

/* A kernel CPU list ("0-3,8,10-11"): how many CPUs, and which in mask
 * (CPUs past HM_NODE_CPUS_MAX are counted, not marked). */
static bool parse_cpu_list(const hm_procfile *f, int *count, uint64_t *mask)
{
    memset(mask, 0, HM_NODE_CPUS_MAX / 8);
    *count = 0;
    hm_scan c = hm_scan_of(f->buf, f->len);
    uint64_t lo, hi;
    while (hm_scan_u64(&c, &lo)) {
        hi = lo;
        if (c.p < c.end && *c.p == '-') {
            c.p++;
            if (!hm_scan_u64(&c, &hi) || hi < lo)
                return false;
        }
        if (hi - lo >= 1u << 20)
            return false;
        for (uint64_t cpu = lo; cpu <= hi; cpu++)
            if (cpu < HM_NODE_CPUS_MAX)
                mask[cpu / 64] |= UINT64_C(1) << (cpu % 64);
        *count += (int)(hi - lo + 1);
        if (c.p >= c.end || *c.p != ',')
            break;
        c.p++;
    }
    hm_scan_skip_blanks(&c);
    return hm_scan_at_eol(&c);
}

/* CPU quota in CPUs: v2 "QUOTA PERIOD" or "max PERIOD"; v1 two files,
 * quota -1 for none. NaN when there is none. */
static double quota_cpus(node_state *s)
{
    uint64_t quota, period;
    hm_scan rest;
    if (!value_u64(&s->file[F_QUOTA], &rest, &quota))
        return NAN;
    bool ok = s->version == 2 ? hm_scan_u64(&rest, &period)
                              : value_u64(&s->file[F_QUOTA_PERIOD], NULL, &period);
    return ok && period > 0 ? (double)quota / (double)period : NAN;
}

static int node_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    node_state *s = state;
    for (int k = 0; k < NFILES; k++)
        if (s->file[k].fd >= 0 && hm_procfile_read(&s->file[k], err) < 0)
            return hm_error_wrap(err, "node cgroup %s (removed? reload to find it again)", s->path);
    if (s->online.fd >= 0 && hm_procfile_read(&s->online, err) < 0)
        return -1;

    uint64_t now[NPREV] = {0};
    bool got[NPREV] = {false};
    if (s->version == 2) {
        got[P_USAGE] = key_u64(s, F_CPU, K_USAGE, &now[P_USAGE]);
        got[P_USER] = key_u64(s, F_CPU, K_USER, &now[P_USER]);
        got[P_SYSTEM] = key_u64(s, F_CPU, K_SYSTEM, &now[P_SYSTEM]);
        for (int k = P_USAGE; k <= P_SYSTEM; k++)
            now[k] *= 1000; /* usec -> ns */
    } else {
        got[P_USAGE] = value_u64(&s->file[F_CPU], NULL, &now[P_USAGE]);
        got[P_USER] = value_u64(&s->file[F_CPU_USER], NULL, &now[P_USER]);
        got[P_SYSTEM] = value_u64(&s->file[F_CPU_SYS], NULL, &now[P_SYSTEM]);
        if (s->file[F_CPU_TICKS].fd >= 0) {
            got[P_USER] = key_u64(s, F_CPU_TICKS, K_USER, &now[P_USER]);
            got[P_SYSTEM] = key_u64(s, F_CPU_TICKS, K_SYSTEM, &now[P_SYSTEM]);
            now[P_USER] = (uint64_t)((double)now[P_USER] * s->ns_per_tick);
            now[P_SYSTEM] = (uint64_t)((double)now[P_SYSTEM] * s->ns_per_tick);
        }
    }
    if (!got[P_USAGE])
        return hm_error_set(err, "%s: no CPU usage in it", s->file[F_CPU].path);
    int throttle_file = s->version == 2 ? F_CPU : F_THROTTLE;
    got[P_PERIODS] = key_u64(s, throttle_file, K_PERIODS, &now[P_PERIODS]);
    got[P_THROTTLED] = key_u64(s, throttle_file, K_THROTTLED, &now[P_THROTTLED]);
    got[P_OOM] = key_u64(s, F_EVENTS, K_OOM, &now[P_OOM]);
    if (s->file[F_IO].fd >= 0) {
        hm_io_stat_totals(s->file[F_IO].buf, s->file[F_IO].len, &now[P_RBYTES], &now[P_WBYTES]);
        got[P_RBYTES] = got[P_WBYTES] = true;
    }
    double dt = hm_dt_s(s->prev_mono_ns, ctx->mono_ns);
    uint64_t delta[NPREV] = {0};
    double rate[NPREV];
    for (int k = 0; k < NPREV; k++) {
        /* No rate on the first reading, nor across a reset (the cgroup
         * was made anew under the same name). */
        bool ok = got[k] && s->prev_ok[k] && dt > 0 &&
                  hm_counter_delta(s->prev[k], now[k], 64, &delta[k]);
        rate[k] = ok ? (double)delta[k] / dt : NAN;
        s->prev[k] = now[k];
        s->prev_ok[k] = got[k];
    }
    s->prev_mono_ns = ctx->mono_ns;

    /* Capacity: the cpuset's CPUs, or the quota when it is smaller. */
    const hm_procfile *list = s->file[F_CPUSET].fd >= 0       ? &s->file[F_CPUSET]
                              : s->file[F_CPUSET_OLD].fd >= 0 ? &s->file[F_CPUSET_OLD]
                                                              : &s->online;
    int ncpus = 0;
    if (!parse_cpu_list(list, &ncpus, ctx->node->scope_cpu_mask))
        return hm_error_set(err, "%s: not a CPU list: '%.40s'", list->path, list->buf);
    double quota = quota_cpus(s);
    double capacity = ncpus > 0 && !(quota < ncpus) ? (double)ncpus : quota;
    if (ncpus > 0 || quota > 0) {
        ctx->node->scope_stamp_ns = ctx->ts_ns;
        ctx->node->scope_cpus = capacity;
    }

    if (capacity > 0 && !isnan(rate[P_USAGE])) {
        /* Busy time is the scheduler's exact run time (usage); the user and
         * system times are sampled at scheduler ticks and can be off by
         * 20 % for a task that a quota throttles at every tick, so they
         * only split the busy time. Usage passes a quota by up to a tick
         * per quota period (throttling waits for the tick), some 10 % for
         * a 0.2-CPU quota: the node was then fully busy, 100 %. */
        double busy = 100.0 * rate[P_USAGE] / (1e9 * capacity);
        if (busy > 100.0)
            busy = 100.0;
        double split = rate[P_USER] + rate[P_SYSTEM];
        double user = split > 0 ? busy * rate[P_USER] / split : NAN;
        double system = split > 0 ? busy * rate[P_SYSTEM] / split : NAN;
        hm_lp_begin(out, "cpu");
        hm_lp_tag(out, "cpu", "total");
        hm_lp_field_f64(out, HM_M(NCPU, user_pct), user);
        hm_lp_field_f64(out, HM_M(NCPU, system_pct), system);
        hm_lp_field_f64(out, HM_M(NCPU, idle_pct), 100.0 - busy);
        hm_lp_end(out);
    }

    uint64_t current, limit, v;
    if (value_u64(&s->file[F_MEM], NULL, &current)) {
        double total = s->host_mem_bytes;
        if (value_u64(&s->file[F_MEM_MAX], NULL, &limit) && !((double)limit >= total))
            total = (double)limit;
        /* In use = not reclaimable without writing anything back: the
         * page cache not recently used (inactive_file) is left out, as
         * `free`'s "available" and container runtimes' working set do. */
        double used = (double)current;
        if (key_u64(s, F_MEM_STAT, K_INACTIVE, &v))
            used = v < current ? (double)(current - v) : 0.0;
        hm_lp_begin(out, "mem");
        hm_lp_field_f64(out, HM_M(NMEM, total_bytes), total);
        if (total > 0) { /* NaN when neither a limit nor MemTotal is known */
            hm_lp_field_f64(out, HM_M(NMEM, free_bytes),
                            total > (double)current ? total - (double)current : 0.0);
            hm_lp_field_f64(out, HM_M(NMEM, available_bytes), total > used ? total - used : 0.0);
            hm_lp_field_f64(out, HM_M(NMEM, used_pct), 100.0 * used / total);
        }
        hm_lp_field_f64(out, HM_M(NMEM, used_bytes), used);
        hm_lp_field_f64(out, HM_M(NMEM, anon_bytes),
                        key_u64(s, F_MEM_STAT, K_ANON, &v) ? (double)v : NAN);
        hm_lp_field_f64(out, HM_M(NMEM, cached_bytes),
                        key_u64(s, F_MEM_STAT, K_FILE, &v) ? (double)v : NAN);
        /* v1: total_swap when swap is accounted, else memsw - usage. */
        double swap = NAN;
        if (key_u64(s, F_MEM_STAT, K_SWAP, &v))
            swap = (double)v;
        else if (value_u64(&s->file[F_SWAP], NULL, &v))
            swap = s->version == 2 ? (double)v : v > current ? (double)(v - current) : 0.0;
        hm_lp_field_f64(out, HM_M(NMEM, swap_used_bytes), swap);
        hm_lp_end(out);
    }

    hm_lp_begin(out, "node_cgroup");
    hm_lp_field_f64(out, HM_M(NCG, cpus), capacity > 0 ? capacity : NAN);
    if (ncpus > 0)
        hm_lp_field_i64(out, HM_M(NCG, cpuset_cpus), ncpus);
    hm_lp_field_f64(out, HM_M(NCG, quota_cpus), quota);
    /* Share of the quota's enforcement periods in which the node ran out
     * of quota; absent without a quota (no periods counted). */
    hm_lp_field_f64(out, HM_M(NCG, throttled_pct),
                    !isnan(rate[P_THROTTLED]) && delta[P_PERIODS] > 0
                        ? 100.0 * (double)delta[P_THROTTLED] / (double)delta[P_PERIODS]
                        : NAN);
    hm_lp_field_f64(out, HM_M(NCG, oom_kill_per_s), rate[P_OOM]);
    hm_lp_field_f64(out, HM_M(NCG, io_read_bytes_per_s), rate[P_RBYTES]);
    hm_lp_field_f64(out, HM_M(NCG, io_write_bytes_per_s), rate[P_WBYTES]);
    hm_lp_end(out);
    return 0;
}

const hm_sampler_ops hm_sampler_node_cgroup = {
    .name = "node",
    .reads = "the node's cgroup (scope.cgroup; v2 cpu.stat cpu.max cpuset.cpus.effective "
             "memory.* io.stat, or v1 cpuacct cpu cpuset memory)",
    .measurement = "cpu (cpu=total), mem, node_cgroup",
    .fields = "cpu:" HM_METRIC_NAMES(NODE_CPU_METRICS) "; mem:" HM_METRIC_NAMES(
        NODE_MEM_METRICS) "; node_cgroup:" HM_METRIC_NAMES(NODE_CGROUP_METRICS),
    .default_on = true,
    .node_local = true,
    .open = node_open,
    .sample = node_sample,
    .close = node_close,
};
