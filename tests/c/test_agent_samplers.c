/* Sources on the fixture trees tests/fixtures/agent/t0 -> t1 (two seconds
 * apart): rates, wraps, resets, missing fields, jobs from Slurm's cgroup
 * tree and what happens when a job's cgroup is missing or vanishes; node
 * scope on the cgroup v2 and v1 trees node-v2/ and node-v1/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "hm_test.h"
#include "jobs.h"
#include "lp.h"
#include "sampler.h"

typedef struct rig {
    char root[256];
    const char *tree;   /* holds t0/ and t1/ */
    hm_agent_config cfg;
    hm_jobs jobs;
    hm_node_shared node;
    hm_self_stats self;
    const hm_sampler_ops *ops[16];
    void *state[16];
    size_t n;
    hm_lp lp;
} rig;

static int run(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
    return rc;
}

/* Copies tree/t0 to a temporary root; scope = scope.cgroup ("" = host-wide).
 * `prepare` runs in the root before the sources open (NULL for none). */
static void rig_open_tree(rig *r, hm_test_counts *c, const char *tree, const char *scope,
                          const char *prepare, const char *const *sources, size_t n,
                          int64_t slurm_scan_ms)
{
    memset(r, 0, sizeof *r);
    r->tree = tree;
    strcpy(r->root, "/tmp/hm_agent_fixture_XXXXXX");
    CHECK(c, mkdtemp(r->root) != NULL);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp -r %s/t0/. %s/", tree, r->root);
    CHECK(c, run(cmd) == 0);
    if (prepare != NULL) {
        snprintf(cmd, sizeof cmd, "cd %s && %s", r->root, prepare);
        CHECK(c, run(cmd) == 0);
    }
    hm_config_defaults(&r->cfg);
    strcpy(r->cfg.root, r->root);
    strcpy(r->cfg.scope_cgroup, scope);
    r->cfg.slurm_scan_ms = slurm_scan_ms;
    hm_error err;
    CHECK(c, hm_lp_init(&r->lp, 1 << 16, "n1", &err) == 0);
    hm_sampler_env env = {.cfg = &r->cfg, .jobs = &r->jobs};
    for (size_t i = 0; i < n; i++) {
        r->ops[r->n] = hm_sampler_find(sources[i]);
        CHECK(c, r->ops[r->n] != NULL);
        if (r->ops[r->n] == NULL)
            continue;
        int rc = r->ops[r->n]->open(&r->state[r->n], &env, &err);
        if (rc != 0)
            fprintf(stderr, "open %s: %s\n", sources[i], err.msg);
        CHECK(c, rc == 0);
        if (rc == 0 && r->state[r->n] != NULL)
            r->n++;
    }
}

static void rig_open(rig *r, hm_test_counts *c, const char *const *sources, size_t n,
                     int64_t slurm_scan_ms)
{
    rig_open_tree(r, c, "tests/fixtures/agent", "", NULL, sources, n, slurm_scan_ms);
}

/* One period: returns the batch text (valid until the next call). */
static const char *rig_sample(rig *r, hm_test_counts *c, int64_t mono_ns)
{
    int64_t ts = 1732270000000000000 + mono_ns;
    hm_lp_reset(&r->lp, ts);
    hm_sample_ctx ctx = {.ts_ns = ts, .mono_ns = mono_ns, .jobs = &r->jobs, .node = &r->node,
                         .self = &r->self};
    for (size_t i = 0; i < r->n; i++) {
        hm_error err;
        hm_lp_set_scope(&r->lp, hm_sampler_scope(r->ops[i], &r->cfg)); /* as the agent does */
        int rc = r->ops[i]->sample(r->state[i], &ctx, &r->lp, &err);
        if (rc != 0)
            fprintf(stderr, "sample %s: %s\n", r->ops[i]->name, err.msg);
        CHECK(c, rc == 0);
    }
    r->lp.buf[r->lp.len < r->lp.cap ? r->lp.len : r->lp.cap - 1] = '\0';
    return r->lp.buf;
}

static void rig_step_to_t1(rig *r, hm_test_counts *c)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp -r %s/t1/. %s/", r->tree, r->root);
    CHECK(c, run(cmd) == 0);
}

static void rig_close(rig *r)
{
    for (size_t i = 0; i < r->n; i++)
        r->ops[i]->close(r->state[i]);
    hm_lp_free(&r->lp);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", r->root);
    run(cmd);
}

/* The line that starts with prefix, copied into line; false if none. */
static bool find_line(const char *batch, const char *prefix, char *line, size_t size)
{
    for (const char *p = batch; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0 && p[strlen(prefix)] == ' ') {
            snprintf(line, size, "%.*s", (int)len, p);
            return true;
        }
        p = nl ? nl + 1 : NULL;
    }
    return false;
}

/* Value of field in a line ("key=value"); NaN if absent. */
static double field(const char *line, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof pat, "%s=", key);
    const char *fields = strchr(line, ' ');
    for (const char *p = fields; p; p = strstr(p + 1, pat)) {
        if ((p[-1] == ' ' || p[-1] == ',') && strncmp(p, pat, strlen(pat)) == 0)
            return strtod(p + strlen(pat), NULL);
        if (p == fields && strncmp(p + 1, pat, strlen(pat)) == 0)
            return strtod(p + 1 + strlen(pat), NULL);
    }
    return NAN;
}

static void test_node_sources(hm_test_counts *c)
{
    const char *const sources[] = {"cpu", "load", "mem", "vm", "disk", "net", "ib"};
    rig r;
    rig_open(&r, c, sources, 7, 5000);
    const char *b0 = rig_sample(&r, c, 1000000000);
    char line[2048];
    /* First reading: levels yes, rates no. */
    CHECK(c, find_line(b0, "mem,host=n1", line, sizeof line));
    CHECK(c, !find_line(b0, "cpu,host=n1,cpu=total", line, sizeof line));
    CHECK(c, !find_line(b0, "vm,host=n1", line, sizeof line));
    CHECK(c, !find_line(b0, "net,host=n1,iface=eth0", line, sizeof line));
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);

    CHECK(c, find_line(b, "cpu,host=n1,cpu=total", line, sizeof line));
    CHECK_NEAR(c, field(line, "user_pct"), 10.0, 1e-9);
    CHECK_NEAR(c, field(line, "system_pct"), 5.0, 1e-9);
    CHECK_NEAR(c, field(line, "idle_pct"), 80.0, 1e-9);
    CHECK_NEAR(c, field(line, "iowait_pct"), 5.0, 1e-9);
    CHECK(c, find_line(b, "cpu,host=n1,cpu=cpu1", line, sizeof line));
    CHECK_NEAR(c, field(line, "idle_pct"), 85.0, 1e-9);
    CHECK_NEAR(c, field(line, "iowait_pct"), 10.0, 1e-9);
    /* Timestamp = the scheduled instant given to the cycle. */
    CHECK(c, strstr(line, " 1732270003000000000") != NULL);

    CHECK(c, find_line(b, "load,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "load5"), 1.25, 1e-9);
    CHECK(c, strstr(line, "procs_running=3i") && strstr(line, "procs_blocked=1i"));

    CHECK(c, find_line(b, "mem,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "total_bytes"), 16000000.0 * 1024, 0.5);
    CHECK_NEAR(c, field(line, "used_pct"), 25.0, 1e-9);
    CHECK(c, isnan(field(line, "shmem_bytes"))); /* not in the file: absent, not 0 */

    CHECK(c, find_line(b, "vm,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "pgpgin_per_s"), 1000.0, 1e-9);
    CHECK_NEAR(c, field(line, "pswpin_per_s"), 200.0, 1e-9);
    CHECK_NEAR(c, field(line, "pgmajfault_per_s"), 1.0, 1e-9);
    CHECK(c, isnan(field(line, "oom_kill_per_s")));

    CHECK(c, find_line(b, "disk,host=n1,device=sda", line, sizeof line));
    CHECK_NEAR(c, field(line, "reads_per_s"), 100.0, 1e-9);
    CHECK_NEAR(c, field(line, "read_bytes_per_s"), 1048576.0, 1e-6);
    CHECK_NEAR(c, field(line, "writes_per_s"), 50.0, 1e-9);
    CHECK_NEAR(c, field(line, "busy_pct"), 50.0, 1e-9);
    CHECK(c, !find_line(b, "disk,host=n1,device=sda1", line, sizeof line)); /* partition */
    CHECK(c, !find_line(b, "disk,host=n1,device=loop0", line, sizeof line));
    CHECK(c, !find_line(b, "disk,host=n1,device=sdb", line, sizeof line)); /* reset: no rate */

    CHECK(c, find_line(b, "net,host=n1,iface=eth0", line, sizeof line));
    CHECK_NEAR(c, field(line, "rx_bytes_per_s"), 100000.0, 1e-6);
    CHECK_NEAR(c, field(line, "tx_packets_per_s"), 20.0, 1e-9);
    CHECK_NEAR(c, field(line, "tx_errors_per_s"), 1.0, 1e-9);
    CHECK_NEAR(c, field(line, "speed_bits_per_s"), 25e9, 0.5); /* sys/class/net/eth0/speed */
    CHECK(c, isnan(field(line, "capacity_bits_per_s"))); /* not configured: absent */
    CHECK(c, find_line(b, "net,host=n1,iface=eth1", line, sizeof line));
    CHECK_NEAR(c, field(line, "rx_bytes_per_s"), 500.0, 1e-9); /* wrapped at 2^32 */
    CHECK(c, isnan(field(line, "speed_bits_per_s"))); /* the driver reports none */

    CHECK(c, find_line(b, "ib,host=n1,device=mlx5_0,port=1", line, sizeof line));
    CHECK_NEAR(c, field(line, "rx_bytes_per_s"), 1000000.0, 1e-6); /* 4-byte words */
    CHECK_NEAR(c, field(line, "tx_bytes_per_s"), 500000.0, 1e-6);
    CHECK_NEAR(c, field(line, "tx_packets_per_s"), 2000.0, 1e-9);
    rig_close(&r);
}

static void test_jobs_and_cgroups(hm_test_counts *c)
{
    const char *const sources[] = {"cpu", "jobs", "cgroup"};
    rig r;
    rig_open(&r, c, sources, 3, 0); /* list Slurm's directory every period */
    hm_error err;
    /* An announced job with a cgroup that does not exist: warned, skipped. */
    CHECK(c, hm_jobs_begin(&r.jobs, "77", "no/such/cgroup", HM_JOB_ANNOUNCED, &err) == 0);
    const char *b0 = rig_sample(&r, c, 1000000000);
    char line[2048];
    CHECK(c, find_line(b0, "job,host=n1,job=1234", line, sizeof line));
    CHECK(c, strstr(line, "active=1i") != NULL);
    CHECK(c, find_line(b0, "job,host=n1,job=77", line, sizeof line));
    CHECK(c, find_line(b0, "cgroup,host=n1,job=1234,cgroup=system.slice/slurmstepd.scope/job_1234",
                       line, sizeof line));
    CHECK(c, isnan(field(line, "cpu_usage_pct"))); /* no rate yet */
    CHECK_NEAR(c, field(line, "mem_current_bytes"), 1048576.0, 0);
    CHECK(c, !find_line(b0, "cgroup,host=n1,job=77", line, sizeof line));

    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "cgroup,host=n1,job=1234,cgroup=system.slice/slurmstepd.scope/job_1234",
                       line, sizeof line));
    CHECK_NEAR(c, field(line, "cpu_usage_pct"), 50.0, 1e-9); /* 1 of 2 CPUs */
    CHECK_NEAR(c, field(line, "cpu_user_pct"), 40.0, 1e-9);
    CHECK_NEAR(c, field(line, "io_read_bytes_per_s"), 100000.0, 1e-6);
    CHECK_NEAR(c, field(line, "io_write_bytes_per_s"), 200000.0, 1e-6); /* summed over devices */
    CHECK_NEAR(c, field(line, "mem_swap_bytes"), 0.0, 0);

    /* The job's cgroup goes away: the Slurm job ends, sampling goes on. It
     * ran in this period, so its job line is written once more (jobs.h);
     * its cgroup is no longer read. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s/sys/fs/cgroup/system.slice/slurmstepd.scope/job_1234",
             r.root);
    CHECK(c, run(cmd) == 0);
    const char *b2 = rig_sample(&r, c, 5000000000);
    CHECK(c, find_line(b2, "job,host=n1,job=1234", line, sizeof line));
    CHECK(c, !find_line(b2, "cgroup,host=n1,job=1234", line, sizeof line));
    CHECK(c, find_line(b2, "job,host=n1,job=77", line, sizeof line));
    const char *b3 = rig_sample(&r, c, 7000000000);
    CHECK(c, strstr(b3, "job=1234") == NULL);
    CHECK(c, find_line(b3, "job,host=n1,job=77", line, sizeof line)); /* still sampling */
    /* An announced job ended between two periods: its line once more, then none. */
    CHECK(c, hm_jobs_end(&r.jobs, "77", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_count(&r.jobs) == 0);
    CHECK(c, find_line(rig_sample(&r, c, 9000000000), "job,host=n1,job=77", line, sizeof line));
    CHECK(c, !find_line(rig_sample(&r, c, 11000000000), "job,host=n1,job=77", line, sizeof line));
    rig_close(&r);
}

static void test_slurm_scan_interval(hm_test_counts *c)
{
    const char *const sources[] = {"jobs"};
    rig r;
    rig_open(&r, c, sources, 1, 5000);
    char line[512];
    CHECK(c, find_line(rig_sample(&r, c, 1000000000), "job,host=n1,job=1234", line, sizeof line));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s/sys/fs/cgroup/system.slice/slurmstepd.scope/job_1234",
             r.root);
    CHECK(c, run(cmd) == 0);
    /* 2 s later: not listed again yet; 5 s after the last listing: found
     * gone, its line written once more (it ended since the last one), then
     * none. */
    CHECK(c, find_line(rig_sample(&r, c, 3000000000), "job,host=n1,job=1234", line, sizeof line));
    CHECK(c, find_line(rig_sample(&r, c, 6000000000), "job,host=n1,job=1234", line, sizeof line));
    CHECK(c, !find_line(rig_sample(&r, c, 7000000000), "job,host=n1,job=1234", line, sizeof line));
    rig_close(&r);
}

static void test_unreadable_source(hm_test_counts *c)
{
    const char *const sources[] = {"mem"};
    rig r;
    rig_open(&r, c, sources, 1, 5000);
    /* A source file missing at open is an error the agent logs. */
    hm_agent_config cfg;
    hm_config_defaults(&cfg);
    strcpy(cfg.root, "/nonexistent-root");
    hm_sampler_env env = {.cfg = &cfg, .jobs = &r.jobs};
    void *state = NULL;
    hm_error err;
    CHECK(c, hm_sampler_find("mem")->open(&state, &env, &err) == -1);
    CHECK(c, strstr(err.msg, "/nonexistent-root/proc/meminfo") != NULL);
    rig_close(&r);
}

/* Node scope, cgroup v2 (node-v2/): node n1 has cpuset "1" (1 of the
 * host's 2 CPUs) and a 1.5-CPU quota, so its capacity is 1 CPU. From t0
 * to t1 (2 s) it used 1.5 s of CPU (1.2 user, 0.3 system): 75 % busy. */
static void test_node_scope_v2(hm_test_counts *c)
{
    const char *const sources[] = {"node", "cpu", "mem", "cgroup"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/node-v2", "hushmon-testbed/n1", NULL, sources, 4, 0);
    CHECK(c, r.n == 4);
    hm_error err;
    CHECK(c, hm_jobs_begin(&r.jobs, "42", "hushmon-testbed/n1", HM_JOB_ANNOUNCED, &err) == 0);
    const char *b0 = rig_sample(&r, c, 1000000000);
    char line[2048];
    CHECK(c, !find_line(b0, "cpu,host=n1,cpu=total", line, sizeof line)); /* no rate yet */
    CHECK(c, find_line(b0, "mem,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "used_bytes"), 2.5 * 1073741824.0, 0.5);
    CHECK(c, find_line(b0, "node_cgroup,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "cpus"), 1.0, 0);
    CHECK(c, isnan(field(line, "throttled_pct")) && isnan(field(line, "oom_kill_per_s")));

    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    /* The node's own lines, under the names of the host-wide ones. */
    CHECK(c, find_line(b, "cpu,host=n1,cpu=total", line, sizeof line));
    CHECK_NEAR(c, field(line, "user_pct"), 60.0, 1e-9);
    CHECK_NEAR(c, field(line, "system_pct"), 15.0, 1e-9);
    CHECK_NEAR(c, field(line, "idle_pct"), 25.0, 1e-9);
    CHECK(c, isnan(field(line, "iowait_pct"))); /* a cgroup does not count it: absent */
    CHECK(c, find_line(b, "mem,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "total_bytes"), 6.0 * 1073741824, 0.5); /* memory.max < MemTotal */
    CHECK_NEAR(c, field(line, "used_bytes"), 3.0 * 1073741824, 0.5); /* 4 GiB - 1 GiB inactive file */
    CHECK_NEAR(c, field(line, "available_bytes"), 3.0 * 1073741824, 0.5);
    CHECK_NEAR(c, field(line, "free_bytes"), 2.0 * 1073741824, 0.5);
    CHECK_NEAR(c, field(line, "used_pct"), 50.0, 1e-9);
    CHECK_NEAR(c, field(line, "anon_bytes"), 2.0 * 1073741824, 0.5);
    CHECK_NEAR(c, field(line, "cached_bytes"), 2.0 * 1073741824, 0.5);
    CHECK_NEAR(c, field(line, "swap_used_bytes"), 100.0 * 1048576, 0.5);
    CHECK(c, find_line(b, "node_cgroup,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "cpus"), 1.0, 0);
    CHECK(c, strstr(line, "cpuset_cpus=1i") != NULL);
    CHECK_NEAR(c, field(line, "quota_cpus"), 1.5, 1e-12);
    CHECK_NEAR(c, field(line, "throttled_pct"), 25.0, 1e-9); /* 5 of 20 periods */
    CHECK_NEAR(c, field(line, "oom_kill_per_s"), 1.0, 1e-9);
    CHECK_NEAR(c, field(line, "io_read_bytes_per_s"), 1000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "io_write_bytes_per_s"), 2000000.0, 1e-6); /* two devices */
    /* Host-wide lines are tagged; of the per-CPU lines only the node's CPU. */
    CHECK(c, find_line(b, "cpu,host=n1,cpu=total,scope=host", line, sizeof line));
    CHECK_NEAR(c, field(line, "user_pct"), 50.0, 1e-9);
    CHECK_NEAR(c, field(line, "idle_pct"), 40.0, 1e-9);
    CHECK(c, find_line(b, "cpu,host=n1,cpu=cpu1,scope=host", line, sizeof line));
    CHECK_NEAR(c, field(line, "user_pct"), 75.0, 1e-9);
    CHECK(c, strstr(b, "cpu=cpu0") == NULL);
    CHECK(c, find_line(b, "mem,host=n1,scope=host", line, sizeof line));
    CHECK_NEAR(c, field(line, "total_bytes"), 8192000000.0, 0.5);
    /* A job's CPU share is of the node's capacity too: 0.75 CPU of 1. */
    CHECK(c, find_line(b, "cgroup,host=n1,job=42,cgroup=hushmon-testbed/n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "cpu_usage_pct"), 75.0, 1e-9);
    rig_close(&r);

    /* "self": the agent's cgroup from /proc/self/cgroup, the same node. */
    rig_open_tree(&r, c, "tests/fixtures/agent/node-v2", "self", NULL, sources, 1, 0);
    CHECK(c, find_line(rig_sample(&r, c, 1000000000), "node_cgroup,host=n1", line, sizeof line));
    CHECK(c, strstr(line, "cpuset_cpus=1i") != NULL);
    rig_close(&r);

    /* Without a cpuset the node has the host's online CPUs (2), and the
     * quota (1.5) is the capacity: 0.75 CPU is 50 %; every CPU is shown. */
    rig_open_tree(&r, c, "tests/fixtures/agent/node-v2", "/hushmon-testbed/n1",
                  "rm sys/fs/cgroup/hushmon-testbed/n1/cpuset.cpus.effective", sources, 2, 0);
    rig_sample(&r, c, 1000000000);
    rig_step_to_t1(&r, c);
    b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "cpu,host=n1,cpu=total", line, sizeof line));
    CHECK_NEAR(c, field(line, "user_pct"), 40.0, 1e-9);
    CHECK_NEAR(c, field(line, "idle_pct"), 50.0, 1e-9);
    CHECK(c, find_line(b, "node_cgroup,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "cpus"), 1.5, 1e-12);
    CHECK(c, strstr(line, "cpuset_cpus=2i") != NULL);
    CHECK(c, find_line(b, "cpu,host=n1,cpu=cpu0,scope=host", line, sizeof line));
    CHECK(c, find_line(b, "cpu,host=n1,cpu=cpu1,scope=host", line, sizeof line));
    rig_close(&r);
}

/* Node scope, cgroup v1 (node-v1/): cpu and cpuacct mounted together
 * (cpu, cpuacct -> cpu,cpuacct), node n2 with cpuset "0" and a 0.5-CPU
 * quota: capacity 0.5 CPU. It used 0.5 s of CPU in 2 s (0.4 user, 0.1
 * system): 50 % busy. No memory limit: the host's 8 GB are its total. */
static void test_node_scope_v1(hm_test_counts *c)
{
    const char *const sources[] = {"node", "cpu", "mem"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/node-v1", "/hushmon-testbed/n2", NULL, sources, 3, 0);
    CHECK(c, r.n == 3);
    rig_sample(&r, c, 1000000000);
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    char line[2048];
    CHECK(c, find_line(b, "cpu,host=n1,cpu=total", line, sizeof line));
    CHECK_NEAR(c, field(line, "user_pct"), 40.0, 1e-9);
    CHECK_NEAR(c, field(line, "system_pct"), 10.0, 1e-9);
    CHECK_NEAR(c, field(line, "idle_pct"), 50.0, 1e-9);
    CHECK(c, find_line(b, "mem,host=n1", line, sizeof line));
    double used = 2147483648.0 - 536870912.0; /* usage - total_inactive_file */
    CHECK_NEAR(c, field(line, "total_bytes"), 8192000000.0, 0.5);
    CHECK_NEAR(c, field(line, "used_bytes"), used, 0.5);
    CHECK_NEAR(c, field(line, "available_bytes"), 8192000000.0 - used, 0.5);
    CHECK_NEAR(c, field(line, "free_bytes"), 8192000000.0 - 2147483648.0, 0.5);
    CHECK_NEAR(c, field(line, "used_pct"), 100.0 * used / 8192000000.0, 1e-3); /* 3 decimals */
    CHECK_NEAR(c, field(line, "anon_bytes"), 1073741824.0, 0.5);   /* total_rss, not total_rss_huge */
    CHECK_NEAR(c, field(line, "cached_bytes"), 1073741824.0, 0.5); /* total_cache */
    CHECK_NEAR(c, field(line, "swap_used_bytes"), 50.0 * 1048576, 0.5);
    CHECK(c, find_line(b, "node_cgroup,host=n1", line, sizeof line));
    CHECK_NEAR(c, field(line, "cpus"), 0.5, 1e-12);
    CHECK(c, strstr(line, "cpuset_cpus=1i") != NULL);
    CHECK_NEAR(c, field(line, "throttled_pct"), 50.0, 1e-9); /* 10 of 20 periods */
    CHECK_NEAR(c, field(line, "oom_kill_per_s"), 1.0, 1e-9);
    CHECK(c, isnan(field(line, "io_read_bytes_per_s"))); /* v1 blkio is not read */
    CHECK(c, find_line(b, "cpu,host=n1,cpu=cpu0,scope=host", line, sizeof line));
    CHECK_NEAR(c, field(line, "user_pct"), 25.0, 1e-9);
    CHECK(c, strstr(b, "cpu=cpu1") == NULL);
    rig_close(&r);

    /* "self": per controller, from /proc/self/cgroup: cpuacct and memory
     * in n2, cpuset at the root (both CPUs, so the quota is the capacity). */
    rig_open_tree(&r, c, "tests/fixtures/agent/node-v1", "self", NULL, sources, 2, 0);
    rig_sample(&r, c, 1000000000);
    rig_step_to_t1(&r, c);
    b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "cpu,host=n1,cpu=total", line, sizeof line));
    CHECK_NEAR(c, field(line, "idle_pct"), 50.0, 1e-9);
    CHECK(c, find_line(b, "node_cgroup,host=n1", line, sizeof line));
    CHECK(c, strstr(line, "cpuset_cpus=2i") != NULL);
    CHECK(c, find_line(b, "cpu,host=n1,cpu=cpu0,scope=host", line, sizeof line));
    CHECK(c, find_line(b, "cpu,host=n1,cpu=cpu1,scope=host", line, sizeof line));
    rig_close(&r);

    /* Kernels before 4.7 have only cpuacct.stat (USER_HZ ticks). */
    rig_open_tree(&r, c, "tests/fixtures/agent/node-v1", "hushmon-testbed/n2",
                  "rm 'sys/fs/cgroup/cpu,cpuacct/hushmon-testbed/n2/cpuacct.usage_user'", sources,
                  1, 0);
    rig_sample(&r, c, 1000000000);
    rig_step_to_t1(&r, c);
    b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "cpu,host=n1,cpu=total", line, sizeof line));
    CHECK_NEAR(c, field(line, "user_pct"), 40.0, 1e-6);
    CHECK_NEAR(c, field(line, "system_pct"), 10.0, 1e-6);
    CHECK_NEAR(c, field(line, "idle_pct"), 50.0, 1e-9);
    rig_close(&r);
}

static void test_node_scope_errors(hm_test_counts *c)
{
    const hm_sampler_ops *node = hm_sampler_find("node");
    CHECK(c, node != NULL && node->default_on && node->node_local);
    if (node == NULL)
        return;
    hm_agent_config cfg;
    hm_config_defaults(&cfg);
    hm_jobs jobs;
    memset(&jobs, 0, sizeof jobs);
    hm_sampler_env env = {.cfg = &cfg, .jobs = &jobs};
    void *state = &cfg;
    hm_error err;
    /* Host-wide (the default): nothing to do, no warning, no state. */
    CHECK(c, node->open(&state, &env, &err) == 0 && state == NULL);
    CHECK(c, hm_sampler_scope(hm_sampler_find("cpu"), &cfg) == NULL);
    /* A cgroup that is in neither hierarchy. */
    strcpy(cfg.root, "tests/fixtures/agent/node-v2/t0");
    strcpy(cfg.scope_cgroup, "hushmon-testbed/n9");
    CHECK(c, node->open(&state, &env, &err) == -1);
    CHECK(c, strstr(err.msg, "scope.cgroup 'hushmon-testbed/n9': neither") != NULL);
    CHECK(c, strstr(err.msg, "n9/cgroup.controllers (cgroup v2)") != NULL);
    CHECK(c, strcmp(hm_sampler_scope(hm_sampler_find("cpu"), &cfg), "host") == 0);
    CHECK(c, hm_sampler_scope(hm_sampler_find("net"), &cfg) == NULL);
    CHECK(c, hm_sampler_scope(hm_sampler_find("cgroup"), &cfg) == NULL);
    /* "self" where there is no /proc/self/cgroup. */
    strcpy(cfg.root, "tests/fixtures/agent/t0");
    strcpy(cfg.scope_cgroup, "self");
    CHECK(c, node->open(&state, &env, &err) == -1);
    CHECK(c, strstr(err.msg, "scope.cgroup = \"self\"") != NULL && strstr(err.msg, "proc/self/cgroup"));
}

/* perf_sw's context switches and page faults come from /proc/stat ctxt and
 * /proc/vmstat pgfault: the readings of `cpu` and `vm` when they ran this
 * period, its own reads of the files otherwise; both give the same rates.
 * Migrations (perf_event, an IPI per CPU) are off here: absent, not 0. */
static void test_perf_sw_from_proc(hm_test_counts *c)
{
    const char *const shared[] = {"cpu", "vm", "perf_sw"};
    const char *const alone[] = {"perf_sw"};
    for (int variant = 0; variant < 2; variant++) {
        rig r;
        rig_open_tree(&r, c, "tests/fixtures/agent", "", NULL, variant ? alone : shared,
                      variant ? 1 : 3, 5000);
        r.cfg.perf_sw_migrations_every = 0; /* read live by the source */
        char line[512];
        CHECK(c, !find_line(rig_sample(&r, c, 1000000000), "perf_sw,host=n1", line, sizeof line));
        rig_step_to_t1(&r, c);
        CHECK(c, find_line(rig_sample(&r, c, 3000000000), "perf_sw,host=n1", line, sizeof line));
        CHECK_NEAR(c, field(line, "context_switches_per_s"), 50000.0, 1e-9); /* 99999 -> 199999 */
        CHECK_NEAR(c, field(line, "page_faults_per_s"), 200.0, 1e-9);         /* 100000 -> 100400 */
        CHECK(c, isnan(field(line, "cpu_migrations_per_s")));
        rig_close(&r);
    }
}

/* rapl: tests/fixtures/agent/rapl, two seconds apart. package-0 200 J
 * (100 W); dram wraps at its max_energy_range_uj (65532000000 ->
 * 9389013 with range 65532610987: 610987 + 9389013 uJ = 10 J, 5 W);
 * core (part of the package) and intel-rapl-mmio (a second view of the
 * package) are not sampled. energy_uj made unreadable: no lines (as a
 * non-root user only: root reads a file whatever its mode). */
static void test_rapl(hm_test_counts *c)
{
    const char *const sources[] = {"rapl"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/rapl", "", NULL, sources, 1, 5000);
    char line[512];
    CHECK(c, r.n == 1);
    CHECK(c, !find_line(rig_sample(&r, c, 1000000000), "rapl,host=n1,zone=intel-rapl:0,domain=package-0",
                        line, sizeof line));
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "rapl,host=n1,zone=intel-rapl:0,domain=package-0", line, sizeof line));
    CHECK_NEAR(c, field(line, "energy_j"), 200.0, 1e-9);
    CHECK_NEAR(c, field(line, "power_w"), 100.0, 1e-9);
    CHECK(c, find_line(b, "rapl,host=n1,zone=intel-rapl:0:1,domain=dram", line, sizeof line));
    CHECK_NEAR(c, field(line, "energy_j"), 10.0, 1e-9);
    CHECK_NEAR(c, field(line, "power_w"), 5.0, 1e-9);
    CHECK(c, strstr(b, "domain=core") == NULL && strstr(b, "intel-rapl-mmio") == NULL);
    /* Power limits: package-0's long_term (PL1) 105 W over 27.98 s, near
     * the 100 W it drew, and short_term (PL2) 125 W over 2.44 ms, enabled;
     * dram's long_term 0 W, not enabled; no peak_power constraint. */
    CHECK(c, find_line(b, "rapl,host=n1,zone=intel-rapl:0,domain=package-0", line, sizeof line));
    CHECK_NEAR(c, field(line, "long_term_limit_w"), 105.0, 1e-9);
    CHECK_NEAR(c, field(line, "long_term_window_s"), 27.983872, 1e-3); /* lp prints 6 digits */
    CHECK_NEAR(c, field(line, "short_term_limit_w"), 125.0, 1e-9);
    CHECK_NEAR(c, field(line, "short_term_window_s"), 0.00244, 1e-12);
    CHECK(c, isnan(field(line, "peak_limit_w")));
    CHECK(c, strstr(line, "limits_enabled=1i") != NULL);
    CHECK(c, find_line(b, "rapl,host=n1,zone=intel-rapl:0:1,domain=dram", line, sizeof line));
    CHECK_NEAR(c, field(line, "long_term_limit_w"), 0.0, 0);
    CHECK(c, strstr(line, "limits_enabled=0i") != NULL);
    /* A new limit (as root writes one) is read within 60 s, not at once:
     * the constraint files are read every 60 s. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "echo 90000000 > %s/sys/class/powercap/intel-rapl:0/"
             "constraint_0_power_limit_uw", r.root);
    CHECK(c, run(cmd) == 0);
    CHECK(c, find_line(rig_sample(&r, c, 5000000000), "rapl,host=n1,zone=intel-rapl:0,domain=package-0",
                       line, sizeof line));
    CHECK_NEAR(c, field(line, "long_term_limit_w"), 105.0, 1e-9);
    CHECK(c, find_line(rig_sample(&r, c, 62000000000), "rapl,host=n1,zone=intel-rapl:0,domain=package-0",
                       line, sizeof line));
    CHECK_NEAR(c, field(line, "long_term_limit_w"), 90.0, 1e-9);
    CHECK_NEAR(c, field(line, "power_w"), 0.0, 0); /* nothing used since */
    rig_close(&r);

    if (geteuid() != 0) {
        rig_open_tree(&r, c, "tests/fixtures/agent/rapl", "",
                      "chmod 000 sys/class/powercap/intel-rapl:0/energy_uj", sources, 1, 5000);
        CHECK(c, r.n == 0); /* refused: one notice, the source stays off */
        rig_close(&r);
    }
}

/* rapl through rapl.sysfs_root: tests/fixtures/agent/raplsim (t0, t1: sim/)
 * is a powercap tree like the test bed's simulated one, each zone marked by
 * a hushmon_sim file: lines tagged backend=sim, and in node scope no scope
 * tag (the tree is the node's own). Over 2 s: package 60 J (30 W), dram
 * 10 J (5 W). */
static void test_rapl_sysfs_root(hm_test_counts *c)
{
    const char *const sources[] = {"rapl"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/raplsim", "", NULL, NULL, 0, 5000);
    snprintf(r.cfg.rapl_sysfs_root, sizeof r.cfg.rapl_sysfs_root, "%s/sim", r.root);
    hm_error err;
    hm_sampler_env env = {.cfg = &r.cfg, .jobs = &r.jobs};
    r.ops[0] = hm_sampler_find(sources[0]);
    CHECK(c, r.ops[0]->open(&r.state[0], &env, &err) == 0);
    CHECK(c, r.state[0] != NULL);
    r.n = r.state[0] != NULL ? 1 : 0;
    char line[1024];
    CHECK(c, strstr(rig_sample(&r, c, 1000000000), "rapl,") == NULL);
    rig_step_to_t1(&r, c);
    strcpy(r.cfg.scope_cgroup, "hushmon-testbed/n1");
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "rapl,host=n1,zone=intel-rapl:0,domain=package-0,backend=sim", line,
                       sizeof line));
    CHECK_NEAR(c, field(line, "energy_j"), 60.0, 1e-9);
    CHECK_NEAR(c, field(line, "power_w"), 30.0, 1e-9);
    CHECK(c, find_line(b, "rapl,host=n1,zone=intel-rapl:0:0,domain=dram,backend=sim", line,
                       sizeof line));
    CHECK_NEAR(c, field(line, "power_w"), 5.0, 1e-9);
    CHECK(c, strstr(b, "scope=host") == NULL);
    rig_close(&r);
}

/* thermal: tests/fixtures/agent/thermal, t0 and t1 ten seconds apart.
 * Package 0 (cpu0-3: cores 0 and 1, two threads each) 50 throttle events
 * (5/s), 2500 ms throttled (25 %), 10 power-limit events (1/s); its core 0
 * 40 events and 4000 ms (40 %), core 1 none. Package 1 (cpu4, cpu5: an
 * older kernel without the time files) no package events, its core 0 two
 * (0.2/s). Cores are read every 10 s, so a period 2 s later has package
 * figures only; cpuidle/ and online are not CPUs. */
static void test_thermal(hm_test_counts *c)
{
    const char *const sources[] = {"thermal"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/thermal", "", NULL, sources, 1, 5000);
    char line[1024];
    CHECK(c, r.n == 1);
    CHECK(c, strstr(rig_sample(&r, c, 1000000000), "thermal,") == NULL);
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 11000000000);
    CHECK(c, find_line(b, "thermal,host=n1,package=0", line, sizeof line));
    CHECK_NEAR(c, field(line, "package_throttles_per_s"), 5.0, 1e-9);
    CHECK_NEAR(c, field(line, "package_throttled_pct"), 25.0, 1e-9);
    CHECK_NEAR(c, field(line, "package_power_limits_per_s"), 1.0, 1e-9);
    CHECK_NEAR(c, field(line, "core_throttles_per_s"), 4.0, 1e-9);
    CHECK_NEAR(c, field(line, "core_throttled_pct_max"), 40.0, 1e-9);
    CHECK(c, strstr(line, "cores_throttled=1i") != NULL);
    CHECK(c, find_line(b, "thermal,host=n1,package=1", line, sizeof line));
    CHECK_NEAR(c, field(line, "package_throttles_per_s"), 0.0, 0);
    CHECK(c, isnan(field(line, "package_throttled_pct")));
    CHECK(c, isnan(field(line, "package_power_limits_per_s")));
    CHECK_NEAR(c, field(line, "core_throttles_per_s"), 0.2, 1e-9);
    CHECK(c, isnan(field(line, "core_throttled_pct_max")));
    CHECK(c, strstr(line, "cores_throttled=1i") != NULL);
    /* 2 s later, nothing moved: package rates 0, the cores not read yet. */
    b = rig_sample(&r, c, 13000000000);
    CHECK(c, find_line(b, "thermal,host=n1,package=0", line, sizeof line));
    CHECK_NEAR(c, field(line, "package_throttled_pct"), 0.0, 0);
    CHECK(c, isnan(field(line, "core_throttles_per_s")));
    /* A counter that went down (a CPU offlined and back): no rate. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd %s/sys/devices/system/cpu && for n in 0 1 2 3; do echo 3 > "
             "cpu$n/thermal_throttle/package_throttle_count; done", r.root);
    CHECK(c, run(cmd) == 0);
    b = rig_sample(&r, c, 21000000000);
    CHECK(c, find_line(b, "thermal,host=n1,package=0", line, sizeof line));
    CHECK(c, isnan(field(line, "package_throttles_per_s")));
    CHECK_NEAR(c, field(line, "core_throttles_per_s"), 0.0, 0); /* the cores' read is due */
    CHECK(c, strstr(line, "cores_throttled=0i") != NULL);
    rig_close(&r);

    /* No thermal_throttle directory (AMD, VMs): the source stays off. */
    rig_open_tree(&r, c, "tests/fixtures/agent/rapl", "", NULL, sources, 1, 5000);
    CHECK(c, r.n == 0);
    rig_close(&r);
}

/* cpu_info: tests/fixtures/agent/cpuinfo (t0 only), 2 sockets x 2 cores x
 * 2 threads of a model name holding what a tag value cannot keep (',' '='
 * '[' ']' and a trailing blank): one line in each of the first two
 * periods, none after until an hour has passed; the model cleaned to
 * spaces, runs of blanks made one. */
static void test_cpu_info(hm_test_counts *c)
{
    const char *const sources[] = {"cpu_info"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/cpuinfo", "", NULL, sources, 1, 5000);
    char line[1024];
    CHECK(c, r.n == 1);
    const char *key = "cpu_info,host=n1,model=Intel(R)\\ Xeon(R)\\ Gold\\ 6148\\ CPU\\ @\\ "
                      "2.40GHz\\ ES\\ rev\\ 2";
    CHECK(c, find_line(rig_sample(&r, c, 1000000000), key, line, sizeof line));
    CHECK(c, strstr(line, "family=6i") && strstr(line, "model_number=85i") &&
                 strstr(line, "stepping=4i"));
    CHECK(c, strstr(line, "sockets=2i") && strstr(line, "cores=4i") && strstr(line, "cpus=8i"));
    CHECK(c, find_line(rig_sample(&r, c, 2000000000), key, line, sizeof line));
    CHECK(c, strstr(rig_sample(&r, c, 3000000000), "cpu_info") == NULL);
    CHECK(c, strstr(rig_sample(&r, c, 3601000000000), "cpu_info") == NULL);
    CHECK(c, find_line(rig_sample(&r, c, 3602000000000), key, line, sizeof line));
    rig_close(&r);

    /* No model name (an Arm kernel's cpuinfo): "unknown", as the probe says. */
    rig_open_tree(&r, c, "tests/fixtures/agent/cpuinfo", "",
                  "printf 'processor\\t: 0\\nBogoMIPS\\t: 50.00\\nCPU part\\t: 0xd0c\\n\\n' > "
                  "proc/cpuinfo",
                  sources, 1, 5000);
    CHECK(c, find_line(rig_sample(&r, c, 1000000000), "cpu_info,host=n1,model=unknown", line,
                       sizeof line));
    CHECK(c, strstr(line, "cpus=1i") && !strstr(line, "family") && !strstr(line, "sockets"));
    rig_close(&r);
}

/* procio: tests/fixtures/agent/procio, job 77's cgroup tree jobs/j77 with
 * tasks in step_0/slurm (100) and step_0/user/task_0 (200, 201; then
 * 200, 202). 201 ends and its parent 200 reaps it: 200's counters jump
 * by 201's final totals, of which the last reading (t0) was counted
 * already, so it is credited back; 202 is new and counts from zero; 300
 * is no task of the job. Over 2 s: rchar 2.7 MB + 0.1 MB - 0.5 MB. */
static void test_procio(hm_test_counts *c)
{
    const char *const sources[] = {"procio"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/procio", "", NULL, sources, 1, 5000);
    hm_error err;
    CHECK(c, hm_jobs_begin(&r.jobs, "77", "jobs/j77", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_begin(&r.jobs, "78", "jobs/not_yet", HM_JOB_ANNOUNCED, &err) == 0);
    char line[1024];
    const char *b0 = rig_sample(&r, c, 1000000000);
    CHECK(c, strstr(b0, "procio") == NULL); /* first reading: no rates */
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "procio,host=n1,job=77", line, sizeof line));
    CHECK_NEAR(c, field(line, "rchar_bytes_per_s"), 1150000.0, 1e-6);
    CHECK_NEAR(c, field(line, "wchar_bytes_per_s"), 550000.0, 1e-6);
    CHECK_NEAR(c, field(line, "read_bytes_per_s"), 4096.0, 1e-6);
    CHECK_NEAR(c, field(line, "write_bytes_per_s"), 20480.0, 1e-6);
    CHECK_NEAR(c, field(line, "syscr_per_s"), 115.0, 1e-9);
    CHECK_NEAR(c, field(line, "syscw_per_s"), 55.0, 1e-9);
    CHECK(c, strstr(line, "tasks=3i") != NULL && strstr(line, "tasks_refused=0i") != NULL);
    /* /proc/PID/stat (a command name with spaces and parentheses): 200 ran
     * 60 ticks and waited 100 for block I/O, the new 202 20 and 40; 201's
     * times are not credited (a reaped child's go to cutime and nowhere):
     * 80 ticks of CPU and 140 of wait at USER_HZ over 2 s. */
    double hz = (double)sysconf(_SC_CLK_TCK);
    CHECK_NEAR(c, field(line, "cpu_pct"), 100.0 * 80 / hz / 2, 1e-9);
    CHECK_NEAR(c, field(line, "blkio_wait_pct"), 100.0 * 140 / hz / 2, 1e-9);
    CHECK(c, strstr(line, "tasks_blocked=2i") != NULL);
    CHECK(c, !find_line(b, "procio,host=n1,job=78", line, sizeof line)); /* no cgroup: no line */
    /* Nothing moves: zero, with no credit left over. */
    /* With delay accounting switched off the wait is not known: left out. */
    char off[512];
    snprintf(off, sizeof off, "echo 0 > %s/proc/sys/kernel/task_delayacct", r.root);
    CHECK(c, run(off) == 0);
    b = rig_sample(&r, c, 5000000000);
    CHECK(c, find_line(b, "procio,host=n1,job=77", line, sizeof line));
    CHECK_NEAR(c, field(line, "rchar_bytes_per_s"), 0.0, 0);
    CHECK_NEAR(c, field(line, "cpu_pct"), 0.0, 0);
    CHECK(c, strstr(line, "blkio_wait_pct") == NULL);
    if (geteuid() != 0) { /* root reads any task's io whatever the mode */
        char cmd[512];
        /* A new task the agent may not read (another user's). */
        snprintf(cmd, sizeof cmd,
                 "cd %s && mkdir proc/203 && cp proc/202/io proc/202/stat proc/203/ && chmod 000 proc/203/io"
                 " && echo 203 >> sys/fs/cgroup/jobs/j77/step_0/user/task_0/cgroup.procs",
                 r.root);
        CHECK(c, run(cmd) == 0);
        b = rig_sample(&r, c, 7000000000);
        CHECK(c, find_line(b, "procio,host=n1,job=77", line, sizeof line));
        CHECK(c, strstr(line, "tasks=3i") != NULL && strstr(line, "tasks_refused=1i") != NULL);
    }
    /* A new job step (a new cgroup in the tree) is found when the tree is
     * listed again, within 5 periods; its task's bytes count from zero. */
    char step[512];
    snprintf(step, sizeof step,
             "cd %s && mkdir -p proc/205 sys/fs/cgroup/jobs/j77/step_1 && printf 'rchar: 4000\\n"
             "wchar: 0\\nsyscr: 4\\nsyscw: 0\\nread_bytes: 0\\nwrite_bytes: 0\\n' > proc/205/io"
             " && cp proc/202/stat proc/205/stat"
             " && echo 205 > sys/fs/cgroup/jobs/j77/step_1/cgroup.procs",
             r.root);
    CHECK(c, run(step) == 0);
    bool seen = false;
    for (int k = 0; k < 6 && !seen; k++) {
        b = rig_sample(&r, c, 9000000000 + k * 2000000000LL);
        CHECK(c, find_line(b, "procio,host=n1,job=77", line, sizeof line));
        seen = field(line, "rchar_bytes_per_s") == 2000.0; /* 4000 B over 2 s */
    }
    CHECK(c, seen);
    rig_close(&r);
}

/* nfs: tests/fixtures/agent/nfs (/proc/self/mountstats, 2 s apart): an
 * nfs4 mount /scratch with 21 MB read by applications (1 MB of it
 * O_DIRECT) and 22 MB from the server, 200 READs of 5 ms RTT and 7 ms
 * execute, 30 WRITEs of 10 and 12 ms, 2 retransmissions, 1 timeout; /home
 * unmounted by t1 and /data mounted at t1 (no rates); other file systems
 * ignored. */
static void test_nfs(hm_test_counts *c)
{
    const char *const sources[] = {"nfs"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/nfs", "", NULL, sources, 1, 5000);
    char line[1024];
    CHECK(c, strstr(rig_sample(&r, c, 1000000000), "nfs,") == NULL);
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "nfs,host=n1,mount=/scratch,server=10.0.0.5:/export/scratch,fstype=nfs4",
                       line, sizeof line));
    CHECK_NEAR(c, field(line, "read_bytes_per_s"), 10500000.0, 1e-6);
    CHECK_NEAR(c, field(line, "write_bytes_per_s"), 2000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "server_read_bytes_per_s"), 11000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "server_write_bytes_per_s"), 2000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "read_ops_per_s"), 100.0, 1e-9);
    CHECK_NEAR(c, field(line, "write_ops_per_s"), 15.0, 1e-9);
    CHECK_NEAR(c, field(line, "read_rtt_ms"), 5.0, 1e-9);
    CHECK_NEAR(c, field(line, "read_exe_ms"), 7.0, 1e-9);
    CHECK_NEAR(c, field(line, "write_rtt_ms"), 10.0, 1e-9);
    CHECK_NEAR(c, field(line, "write_exe_ms"), 12.0, 1e-9);
    CHECK_NEAR(c, field(line, "retrans_per_s"), 1.0, 1e-9);
    CHECK_NEAR(c, field(line, "timeouts_per_s"), 0.5, 1e-9);
    CHECK(c, strstr(b, "mount=/home") == NULL && strstr(b, "mount=/data") == NULL);
    CHECK(c, strstr(b, "mount=/sys") == NULL);
    /* No RPC in a period: the mean times are absent, not 0. */
    b = rig_sample(&r, c, 5000000000);
    CHECK(c, find_line(b, "nfs,host=n1,mount=/scratch,server=10.0.0.5:/export/scratch,fstype=nfs4",
                       line, sizeof line));
    CHECK_NEAR(c, field(line, "read_ops_per_s"), 0.0, 0);
    CHECK(c, isnan(field(line, "read_rtt_ms")));
    CHECK(c, find_line(b, "nfs,host=n1,mount=/data,server=10.0.0.7:/data,fstype=nfs4", line, sizeof line));
    rig_close(&r);

    /* No NFS mount at first: the file is looked at again only 30 s later. */
    rig_open_tree(&r, c, "tests/fixtures/agent/nfs", "",
                  "printf 'device proc mounted on /proc with fstype proc\\n' > proc/self/mountstats",
                  sources, 1, 5000);
    CHECK(c, strstr(rig_sample(&r, c, 1000000000), "nfs,") == NULL);
    rig_step_to_t1(&r, c);
    CHECK(c, strstr(rig_sample(&r, c, 3000000000), "nfs,") == NULL);
    CHECK(c, strstr(rig_sample(&r, c, 30000000000), "nfs,") == NULL); /* not read yet */
    CHECK(c, strstr(rig_sample(&r, c, 31000000000), "nfs,") == NULL); /* read: first values */
    b = rig_sample(&r, c, 33000000000);
    CHECK(c, find_line(b, "nfs,host=n1,mount=/scratch,server=10.0.0.5:/export/scratch,fstype=nfs4",
                       line, sizeof line));
    rig_close(&r);
}

/* lustre: tests/fixtures/agent/lustre, 2 s apart: client scratch (under
 * /proc/fs/lustre) 40 MiB read in 2000 calls, 8 MiB written in 200, 80
 * metadata ops, 4 fsyncs; its OST0000 200 RPCs of 500 us mean wait with
 * 4 in flight, 20 MiB read; client work under /sys/kernel/debug/lustre. */
static void test_lustre(hm_test_counts *c)
{
    const char *const sources[] = {"lustre"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/lustre", "", NULL, sources, 1, 5000);
    char line[1024];
    CHECK(c, r.n == 1);
    CHECK(c, strstr(rig_sample(&r, c, 1000000000), "lustre") == NULL);
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "lustre,host=n1,fs=scratch,client=scratch-ffff9a0b3c4d5000", line,
                       sizeof line));
    CHECK_NEAR(c, field(line, "read_bytes_per_s"), 20971520.0, 1e-6);
    CHECK_NEAR(c, field(line, "write_bytes_per_s"), 4194304.0, 1e-6);
    CHECK_NEAR(c, field(line, "reads_per_s"), 1000.0, 1e-9);
    CHECK_NEAR(c, field(line, "writes_per_s"), 100.0, 1e-9);
    CHECK_NEAR(c, field(line, "metadata_ops_per_s"), 40.0, 1e-9);
    CHECK_NEAR(c, field(line, "fsync_per_s"), 2.0, 1e-9);
    CHECK(c, find_line(b, "lustre_osc,host=n1,fs=scratch,ost=OST0000", line, sizeof line));
    CHECK_NEAR(c, field(line, "rpcs_per_s"), 100.0, 1e-9);
    CHECK_NEAR(c, field(line, "rpc_wait_us"), 500.0, 1e-9);
    CHECK_NEAR(c, field(line, "rpcs_active"), 4.0, 1e-9);
    CHECK_NEAR(c, field(line, "read_bytes_per_s"), 10485760.0, 1e-6);
    CHECK_NEAR(c, field(line, "write_bytes_per_s"), 0.0, 0);
    CHECK(c, find_line(b, "lustre,host=n1,fs=work,client=work-ffff9a0b11110000", line, sizeof line));
    CHECK_NEAR(c, field(line, "read_bytes_per_s"), 1000.0, 1e-9);
    rig_close(&r);

    /* No Lustre client: the source stays off, quietly. */
    rig_open_tree(&r, c, "tests/fixtures/agent/rapl", "", NULL, sources, 1, 5000);
    CHECK(c, r.n == 0);
    rig_close(&r);
}

/* ib: tests/fixtures/agent/ib, 2 s apart. mlx5_0 port 1: 1 MB/s in, 5 MB/s
 * out (4-byte words), xmit_wait 100000 ticks/s, 2 discards/s,
 * port_rcv_errors stuck at 65535 (16 bits: saturated, no rate),
 * hw_counters 10 receive-buffer drops/s, 1 ACK timeout/s, 1000 CNPs
 * sent/s, 500 handled/s; port_rcv_remote_physical_errors absent (no
 * field). qib0: the 32-bit counters saturated, the 64-bit counters_ext
 * read instead: 1 MB/s out, 2 MB/s in. */
static void test_ib_counters(hm_test_counts *c)
{
    const char *const sources[] = {"ib"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/ib", "", NULL, sources, 1, 5000);
    char line[2048];
    CHECK(c, strstr(rig_sample(&r, c, 1000000000), "ib,") == NULL);
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "ib,host=n1,device=mlx5_0,port=1", line, sizeof line));
    CHECK_NEAR(c, field(line, "rx_bytes_per_s"), 1000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "tx_bytes_per_s"), 5000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "tx_packets_per_s"), 2000.0, 1e-9);
    CHECK_NEAR(c, field(line, "xmit_wait_per_s"), 100000.0, 1e-9);
    CHECK_NEAR(c, field(line, "xmit_discards_per_s"), 2.0, 1e-9);
    CHECK(c, isnan(field(line, "rcv_errors_per_s")));
    CHECK_NEAR(c, field(line, "symbol_errors_per_s"), 0.0, 0);
    CHECK_NEAR(c, field(line, "link_downed_per_s"), 0.0, 0);
    CHECK(c, isnan(field(line, "rcv_remote_physical_errors_per_s")));
    CHECK_NEAR(c, field(line, "hw_out_of_buffer_per_s"), 10.0, 1e-9);
    CHECK_NEAR(c, field(line, "hw_ack_timeouts_per_s"), 1.0, 1e-9);
    CHECK_NEAR(c, field(line, "hw_seq_errors_per_s"), 0.0, 0);
    CHECK_NEAR(c, field(line, "hw_cnp_sent_per_s"), 1000.0, 1e-9);
    CHECK_NEAR(c, field(line, "hw_cnp_handled_per_s"), 500.0, 1e-9);
    CHECK(c, strstr(line, "saturated=1i") != NULL);
    CHECK(c, find_line(b, "ib,host=n1,device=qib0,port=1", line, sizeof line));
    CHECK_NEAR(c, field(line, "tx_bytes_per_s"), 1000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "rx_bytes_per_s"), 2000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "rx_packets_per_s"), 2000.0, 1e-9);
    CHECK(c, isnan(field(line, "xmit_wait_per_s")));
    CHECK(c, strstr(line, "saturated=0i") != NULL);
    rig_close(&r);
}

/* cxi: tests/fixtures/agent/cxi (Slingshot telemetry, "value@s.ns"), 2 s
 * apart: 2000 packets/s sent over two traffic classes, 3000/s received
 * with class 1 wrapping at 2^56, sending paused 2e8 of 2e9 cycles (10 %),
 * 5 blocked cycles per posted packet. */
static void test_cxi(hm_test_counts *c)
{
    const char *const sources[] = {"cxi"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/cxi", "", NULL, sources, 1, 5000);
    char line[1024];
    CHECK(c, r.n == 1);
    CHECK(c, strstr(rig_sample(&r, c, 1000000000), "cxi,") == NULL);
    rig_step_to_t1(&r, c);
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "cxi,host=n1,device=cxi0", line, sizeof line));
    CHECK_NEAR(c, field(line, "tx_packets_per_s"), 2000.0, 1e-9);
    CHECK_NEAR(c, field(line, "rx_packets_per_s"), 3000.0, 1e-9);
    CHECK_NEAR(c, field(line, "tx_paused_pct"), 10.0, 1e-9);
    CHECK_NEAR(c, field(line, "rx_paused_pct"), 0.0, 0);
    CHECK_NEAR(c, field(line, "host_blocked_cycles_per_pkt"), 5.0, 1e-9);
    /* Counters cleared (reset_counters): no rate for that period, then on. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "echo 10@1732270004.0 > %s/sys/class/cxi/cxi0/device/telemetry/"
             "hni_pkts_sent_by_tc_0", r.root);
    CHECK(c, run(cmd) == 0);
    CHECK(c, strstr(rig_sample(&r, c, 5000000000), "cxi,") == NULL);
    CHECK(c, find_line(rig_sample(&r, c, 7000000000), "cxi,host=n1,device=cxi0", line, sizeof line));
    CHECK_NEAR(c, field(line, "tx_packets_per_s"), 0.0, 0);
    rig_close(&r);
}

/* ib through ib.sysfs_root: tests/fixtures/agent/ibsim (t0, t1: sim/) is a tree
 * like the test bed's (values right-aligned, written in place), its
 * device marked by a hushmon_sim file: lines tagged backend=sim; the
 * node's own <root>/sys is not read, and in node scope the lines have no
 * scope tag (the tree is the node's own). Over 2 s: 500 KB/s out, 1 MB/s in,
 * 20 wait ticks/s, 1 discard/s. */
static void test_ib_sysfs_root(hm_test_counts *c)
{
    const char *const sources[] = {"ib"};
    rig r;
    rig_open_tree(&r, c, "tests/fixtures/agent/ibsim", "", NULL, NULL, 0, 5000);
    snprintf(r.cfg.ib_sysfs_root, sizeof r.cfg.ib_sysfs_root, "%s/sim", r.root);
    hm_error err;
    hm_sampler_env env = {.cfg = &r.cfg, .jobs = &r.jobs};
    r.ops[0] = hm_sampler_find(sources[0]);
    CHECK(c, r.ops[0]->open(&r.state[0], &env, &err) == 0);
    r.n = 1;
    char line[1024];
    CHECK(c, strstr(rig_sample(&r, c, 1000000000), "ib,") == NULL);
    rig_step_to_t1(&r, c);
    /* In node scope too: the tree given is the node's own, no scope=host. */
    strcpy(r.cfg.scope_cgroup, "hushmon-testbed/n1");
    const char *b = rig_sample(&r, c, 3000000000);
    CHECK(c, find_line(b, "ib,host=n1,device=simib0,port=1,backend=sim", line, sizeof line));
    CHECK_NEAR(c, field(line, "tx_bytes_per_s"), 500000.0, 1e-6);
    CHECK_NEAR(c, field(line, "rx_bytes_per_s"), 1000000.0, 1e-6);
    CHECK_NEAR(c, field(line, "xmit_wait_per_s"), 20.0, 1e-9);
    CHECK_NEAR(c, field(line, "xmit_discards_per_s"), 1.0, 1e-9);
    CHECK(c, strstr(b, "mlx5_0") == NULL);
    rig_close(&r);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_perf_sw_from_proc(&c);
    test_node_sources(&c);
    test_jobs_and_cgroups(&c);
    test_slurm_scan_interval(&c);
    test_unreadable_source(&c);
    test_node_scope_v2(&c);
    test_node_scope_v1(&c);
    test_node_scope_errors(&c);
    test_rapl(&c);
    test_thermal(&c);
    test_cpu_info(&c);
    test_procio(&c);
    test_nfs(&c);
    test_lustre(&c);
    test_ib_counters(&c);
    test_cxi(&c);
    test_ib_sysfs_root(&c);
    test_rapl_sysfs_root(&c);
    return hm_test_finish("test_agent_samplers", &c);
}
