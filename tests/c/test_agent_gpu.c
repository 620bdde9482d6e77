/* The gpu_nvidia source on the fake NVML (tests/fake_nvml): the library
 * missing, no driver, permission denied at init and per reading, fields a
 * GPU does not support (not asked again), a GPU lost mid-run (its lines
 * stop, the other GPU goes on), XID events, and GPU processes attributed
 * to jobs through their cgroups in a fixture /proc; GPM metrics on a GPU
 * that has GPM and their absence on one that has not, on a GPU whose
 * sampling is refused and on a library without the GPM functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "hm_test.h"
#include "jobs.h"
#include "lp.h"
#include "sampler.h"

#ifndef HM_FAKE_NVML_PATH
#error "HM_FAKE_NVML_PATH: the fake libnvidia-ml.so.1 (tests/c/CMakeLists.txt)"
#endif

typedef struct rig {
    char dir[64];
    hm_agent_config cfg;
    hm_jobs jobs;
    hm_node_shared node;
    hm_self_stats self;
    hm_lp lp;
    const hm_sampler_ops *ops;
    void *state;
    int64_t mono_ns;
    bool real_clock; /* mono_ns from CLOCK_MONOTONIC, as the fake's counters */
} rig;

static void write_file(hm_test_counts *c, const char *dir, const char *rel, const char *text)
{
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    CHECK(c, system(cmd) == 0);
    FILE *f = fopen(path, "w");
    CHECK(c, f != NULL);
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

/* Writes the script and opens the source; returns open()'s result. */
static int rig_open(rig *r, hm_test_counts *c, const char *script, const char *library)
{
    memset(r, 0, sizeof *r);
    strcpy(r->dir, "/tmp/hm_gpu_XXXXXX");
    CHECK(c, mkdtemp(r->dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/script", r->dir);
    write_file(c, r->dir, "script", script);
    setenv("HM_FAKE_NVML_SCRIPT", path, 1);
    snprintf(path, sizeof path, "%s/calls", r->dir);
    setenv("HM_FAKE_NVML_CALLS", path, 1);
    hm_config_defaults(&r->cfg);
    strcpy(r->cfg.root, r->dir);
    strcpy(r->cfg.gpu_nvml_library, library);
    r->cfg.gpu_process_every_ms = 0;
    hm_error err;
    CHECK(c, hm_lp_init(&r->lp, 1 << 16, "n1", &err) == 0);
    r->ops = hm_sampler_find("gpu_nvidia");
    CHECK(c, r->ops != NULL);
    hm_sampler_env env = {.cfg = &r->cfg, .jobs = &r->jobs};
    int rc = r->ops->open(&r->state, &env, &err);
    if (rc != 0)
        fprintf(stderr, "(expected or not) open gpu_nvidia: %s\n", err.msg);
    return rc;
}

/* One period; returns sample()'s result, the batch in r->lp. */
static int rig_sample(rig *r, hm_error *err)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    r->mono_ns = r->real_clock ? now.tv_sec * INT64_C(1000000000) + now.tv_nsec
                               : r->mono_ns + 1000000000;
    hm_lp_reset(&r->lp, 1700000000000000000 + r->mono_ns);
    hm_sample_ctx ctx = {.ts_ns = r->lp.ts_ns, .mono_ns = r->mono_ns, .jobs = &r->jobs,
                         .node = &r->node, .self = &r->self};
    return r->ops->sample(r->state, &ctx, &r->lp, err);
}

/* The source closed and opened again with r->cfg as the test changed it. */
static int rig_reopen(rig *r, hm_error *err)
{
    r->ops->close(r->state);
    r->state = NULL;
    hm_sampler_env env = {.cfg = &r->cfg, .jobs = &r->jobs};
    return r->ops->open(&r->state, &env, err);
}

static void rig_close(rig *r)
{
    if (r->state != NULL)
        r->ops->close(r->state);
    r->state = NULL;
    hm_lp_free(&r->lp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", r->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", r->dir);
}

/* The line starting with `prefix` (e.g. "gpu,host=n1,gpu=0 "), or NULL. */
static const char *line_of(const rig *r, const char *prefix)
{
    const char *p = r->lp.buf, *end = r->lp.buf + r->lp.len;
    size_t n = strlen(prefix);
    while (p < end) {
        if ((size_t)(end - p) >= n && strncmp(p, prefix, n) == 0)
            return p;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return NULL;
}

/* Field `key` of a line as a number; NaN when the line lacks it. */
static double field_of(const char *line, const char *key)
{
    if (line == NULL)
        return NAN;
    const char *eol = strchr(line, '\n');
    char pat[64];
    for (int sep = 0; sep < 2; sep++) {
        snprintf(pat, sizeof pat, "%c%s=", sep ? ',' : ' ', key);
        const char *f = strstr(line, pat);
        if (f != NULL && (eol == NULL || f < eol))
            return strtod(f + strlen(pat), NULL);
    }
    return NAN;
}

static long calls_of(const rig *r, const char *fn)
{
    char path[128], name[96];
    long n;
    snprintf(path, sizeof path, "%s/calls", r->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fscanf(f, "%95s %ld", name, &n) == 2)
        if (strcmp(name, fn) == 0) {
            fclose(f);
            return n;
        }
    fclose(f);
    return -1;
}

static const char *two_gpus =
    "gpus 2\n"
    "gpu 0 sm_pct 75\ngpu 0 mem_util_pct 40\n"
    "gpu 0 mem_used_bytes 76000000000\ngpu 0 mem_total_bytes 80000000000\n"
    "gpu 0 power_mw 350000\ngpu 0 energy_mj 1000000 350000\n"
    "gpu 0 sm_clock_mhz 1980\ngpu 0 mem_clock_mhz 2619\ngpu 0 temp_c 61\n"
    "gpu 0 throttle 0x24\n" /* SW power cap + SW thermal */
    "gpu 0 pcie_tx_bytes 0 2000000000\ngpu 0 pcie_rx_bytes 0 1000000000\n"
    "gpu 0 nvlink_tx_kib 0 1000000\ngpu 0 ecc_sbe 3\ngpu 0 ecc_dbe 1\n"
    "gpu 0 pcie_gen 4\ngpu 0 pcie_width 16\n"
    "gpu 0 xid 79 2\n"
    "gpu 1 sm_pct 5\ngpu 1 mem_total_bytes 40000000000\ngpu 1 mem_used_bytes 1000000000\n"
    "gpu 1 fail pcie_tx_bytes NOT_SUPPORTED\ngpu 1 fail pcie_rx_bytes NOT_SUPPORTED\n"
    "gpu 1 fail temp_c NOT_SUPPORTED\n";

static void test_values(hm_test_counts *c)
{
    rig r;
    CHECK(c, rig_open(&r, c, two_gpus, HM_FAKE_NVML_PATH) == 0);
    CHECK(c, r.state != NULL);
    if (r.state == NULL)
        return rig_close(&r);
    hm_error err;
    r.real_clock = true;
    CHECK(c, rig_sample(&r, &err) == 0);
    const char *g0 = line_of(&r, "gpu,host=n1,gpu=0 ");
    CHECK(c, g0 != NULL);
    CHECK_NEAR(c, field_of(g0, "sm_pct"), 75, 0);
    CHECK(c, isnan(field_of(g0, "power_avg_w")));   /* a rate: needs two readings */
    CHECK(c, isnan(field_of(g0, "pcie_tx_bytes_per_s")));
    usleep(200000); /* the fake's counters run on the real clock, as the rig now */
    CHECK(c, rig_sample(&r, &err) == 0);
    g0 = line_of(&r, "gpu,host=n1,gpu=0 ");
    const char *g1 = line_of(&r, "gpu,host=n1,gpu=1 ");
    CHECK(c, g0 != NULL && g1 != NULL);
    CHECK_NEAR(c, field_of(g0, "mem_util_pct"), 40, 0);
    CHECK_NEAR(c, field_of(g0, "mem_used_pct"), 95, 1e-9);
    CHECK_NEAR(c, field_of(g0, "power_w"), 350, 1e-9);
    /* Rates: the fake's counters and the rig's mono_ns share one clock; only
     * a preemption between the two readings moves them (25 % = 50 ms). */
    CHECK_NEAR(c, field_of(g0, "power_avg_w"), 350, 350 * 0.25);
    CHECK_NEAR(c, field_of(g0, "pcie_tx_bytes_per_s"), 2e9, 2e9 * 0.25);
    CHECK_NEAR(c, field_of(g0, "pcie_rx_bytes_per_s"), 1e9, 1e9 * 0.25);
    CHECK_NEAR(c, field_of(g0, "nvlink_tx_bytes_per_s"), 1024e6, 1024e6 * 0.25);
    CHECK_NEAR(c, field_of(g0, "pcie_capacity_bytes_per_s"), 16 * 1969.2e6, 1);
    CHECK_NEAR(c, field_of(g0, "sm_clock_mhz"), 1980, 0);
    CHECK_NEAR(c, field_of(g0, "temp_c"), 61, 0);
    CHECK_NEAR(c, field_of(g0, "throttle_reasons"), 0x24, 0);
    CHECK_NEAR(c, field_of(g0, "throttle_power"), 1, 0);
    CHECK_NEAR(c, field_of(g0, "throttle_thermal"), 1, 0);
    CHECK_NEAR(c, field_of(g0, "throttle_hw"), 0, 0);
    CHECK_NEAR(c, field_of(g0, "ecc_sbe_volatile"), 3, 0);
    CHECK_NEAR(c, field_of(g0, "ecc_dbe_volatile"), 1, 0);
    CHECK_NEAR(c, field_of(g0, "xid_errors"), 1, 0);   /* delivered at the 2nd wait */
    CHECK_NEAR(c, field_of(g0, "xid_last"), 79, 0);
    /* GPU 1: what it does not support is absent, never 0. */
    CHECK_NEAR(c, field_of(g1, "sm_pct"), 5, 0);
    CHECK_NEAR(c, field_of(g1, "mem_used_pct"), 2.5, 1e-9);
    CHECK(c, isnan(field_of(g1, "pcie_tx_bytes_per_s")));
    CHECK(c, isnan(field_of(g1, "pcie_capacity_bytes_per_s")));
    CHECK(c, isnan(field_of(g1, "temp_c")));
    CHECK_NEAR(c, field_of(g1, "xid_errors"), 0, 0);
    CHECK(c, isnan(field_of(g1, "xid_last")));
    CHECK(c, rig_sample(&r, &err) == 0);
    r.ops->close(r.state); /* the fake writes its call counts at nvmlShutdown */
    r.state = NULL;
    /* Cheap: one field call per GPU per sample; a reading a GPU does not
     * support is asked once, not every period. */
    CHECK(c, calls_of(&r, "nvmlDeviceGetFieldValues") == 2 * 3);
    CHECK(c, calls_of(&r, "nvmlDeviceGetTemperature") == 3 + 1);
    CHECK(c, calls_of(&r, "nvmlShutdown") == 1);
    rig_close(&r);
}

static void test_no_library_no_driver(hm_test_counts *c)
{
    rig r;
    /* The library missing: no state, no error (the source stays off
     * after one notice). */
    CHECK(c, rig_open(&r, c, "gpus 1\n", "/nonexistent/libnvidia-ml.so.1") == 0);
    CHECK(c, r.state == NULL);
    rig_close(&r);
    /* A library that is not NVML. */
    CHECK(c, rig_open(&r, c, "gpus 1\n", "libm.so.6") == -1);
    CHECK(c, r.state == NULL);
    rig_close(&r);
    /* The library without a driver. */
    CHECK(c, rig_open(&r, c, "init DRIVER_NOT_LOADED\n", HM_FAKE_NVML_PATH) == 0);
    CHECK(c, r.state == NULL);
    rig_close(&r);
    /* No GPU. */
    CHECK(c, rig_open(&r, c, "gpus 0\n", HM_FAKE_NVML_PATH) == 0);
    CHECK(c, r.state == NULL);
    rig_close(&r);
}

static void test_permission_denied(hm_test_counts *c)
{
    rig r;
    /* At init: the source is off with an error naming the reason. */
    CHECK(c, rig_open(&r, c, "init NO_PERMISSION\n", HM_FAKE_NVML_PATH) == -1);
    CHECK(c, r.state == NULL);
    rig_close(&r);
    /* Per reading: that reading is left out, the rest goes on. */
    CHECK(c, rig_open(&r, c,
                      "gpus 1\ngpu 0 sm_pct 60\ngpu 0 power_mw 100000\n"
                      "gpu 0 fail power_mw NO_PERMISSION\ngpu 0 fail processes NO_PERMISSION\n"
                      "gpu 0 process 1234 1000 10 10\n",
                      HM_FAKE_NVML_PATH) == 0);
    hm_error err;
    for (int i = 0; i < 3; i++)
        CHECK(c, rig_sample(&r, &err) == 0);
    const char *g0 = line_of(&r, "gpu,host=n1,gpu=0 ");
    CHECK_NEAR(c, field_of(g0, "sm_pct"), 60, 0);
    CHECK(c, isnan(field_of(g0, "power_w")));
    CHECK(c, isnan(field_of(g0, "processes")));
    CHECK(c, line_of(&r, "gpu_job,") == NULL);
    r.ops->close(r.state);
    r.state = NULL;
    CHECK(c, calls_of(&r, "nvmlDeviceGetComputeRunningProcesses_v3") == 1);
    rig_close(&r);
}

static void test_gpu_lost(hm_test_counts *c)
{
    rig r;
    CHECK(c, rig_open(&r, c,
                      "gpus 2\ngpu 0 sm_pct 10\ngpu 1 sm_pct 20\ngpu 1 lost_at 3\n",
                      HM_FAKE_NVML_PATH) == 0);
    if (r.state == NULL)
        return rig_close(&r);
    hm_error err;
    for (int i = 0; i < 2; i++) {
        CHECK(c, rig_sample(&r, &err) == 0);
        CHECK(c, line_of(&r, "gpu,host=n1,gpu=1 ") != NULL);
    }
    for (int i = 0; i < 2; i++) {
        /* Lost from the 3rd sample on: its lines stop, the source reports
         * it, GPU 0 goes on. */
        CHECK(c, rig_sample(&r, &err) == -1);
        CHECK(c, strstr(err.msg, "1 of 2 GPUs lost (first: GPU 1)") != NULL);
        CHECK(c, line_of(&r, "gpu,host=n1,gpu=1 ") == NULL);
        CHECK_NEAR(c, field_of(line_of(&r, "gpu,host=n1,gpu=0 "), "sm_pct"), 10, 0);
    }
    r.ops->close(r.state);
    r.state = NULL;
    /* A lost GPU is not asked again: GPU 0 four times, GPU 1 three. */
    CHECK(c, calls_of(&r, "nvmlDeviceGetFieldValues") == 4 + 3);
    rig_close(&r);
}

static void test_jobs(hm_test_counts *c)
{
    rig r;
    CHECK(c, rig_open(&r, c,
                      "gpus 2\ngpu 0 sm_pct 90\n"
                      "gpu 0 process 1234 3000000000 50 20\n"   /* job 42, step 0 */
                      "gpu 0 process 1235 1000000000 30 10\n"   /* job 42, step 1 */
                      "gpu 0 process 777 5000000 5 1\n"         /* no job */
                      "gpu 1 process 2000 2000000000 70 30\n"   /* job 43 */
                      "gpu 1 process 2100 1000000000 20 5\n",   /* job 44 (hybrid) */
                      HM_FAKE_NVML_PATH) == 0);
    if (r.state == NULL)
        return rig_close(&r);
    write_file(c, r.dir, "proc/1234/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n");
    write_file(c, r.dir, "proc/1235/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_1\n");
    write_file(c, r.dir, "proc/777/cgroup", "0::/user.slice/user-1000.slice/session-3.scope\n");
    /* cgroup v1: any hierarchy's line may name the job. */
    write_file(c, r.dir, "proc/2000/cgroup", "12:memory:/slurm/uid_1000/job_43/step_0\n"
                                             "11:cpu,cpuacct:/slurm/uid_1000/job_43/step_0\n");
    /* A hybrid machine (v1 controllers, the v2 hierarchy at
     * /sys/fs/cgroup/unified, as the test bed's job cgroups): the job's
     * cgroup "unified/bed/n1/job_44" is the v2 line's "/bed/n1/job_44". */
    write_file(c, r.dir, "proc/2100/cgroup", "4:memory:/bed/n1\n0::/bed/n1/job_44/task\n");
    hm_error err;
    CHECK(c, hm_jobs_begin(&r.jobs, "44", "unified/bed/n1/job_44", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_begin(&r.jobs, "42", "system.slice/slurmstepd.scope/job_42", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_begin(&r.jobs, "43", "/slurm/uid_1000/job_43", HM_JOB_ANNOUNCED, &err) == 0);
    /* job_4 is a prefix of job_42's name, not its cgroup: no match. */
    CHECK(c, hm_jobs_begin(&r.jobs, "4", "system.slice/slurmstepd.scope/job_4", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, rig_sample(&r, &err) == 0);
    CHECK(c, line_of(&r, "gpu_job,") == NULL); /* the first sample sets the baseline */
    CHECK(c, rig_sample(&r, &err) == 0);
    const char *j42 = line_of(&r, "gpu_job,host=n1,gpu=0,job=42 ");
    const char *j43 = line_of(&r, "gpu_job,host=n1,gpu=1,job=43 ");
    CHECK(c, j42 != NULL && j43 != NULL);
    CHECK_NEAR(c, field_of(j42, "processes"), 2, 0);
    CHECK_NEAR(c, field_of(j42, "mem_used_bytes"), 4e9, 0);
    CHECK_NEAR(c, field_of(j42, "sm_pct"), 80, 0);
    CHECK_NEAR(c, field_of(j42, "mem_util_pct"), 30, 0);
    CHECK_NEAR(c, field_of(j43, "sm_pct"), 70, 0);
    const char *j44 = line_of(&r, "gpu_job,host=n1,gpu=1,job=44 ");
    CHECK(c, j44 != NULL);
    CHECK_NEAR(c, field_of(j44, "processes"), 1, 0);
    CHECK_NEAR(c, field_of(j44, "sm_pct"), 20, 0);
    CHECK(c, line_of(&r, "gpu_job,host=n1,gpu=0,job=4 ") == NULL);
    CHECK(c, line_of(&r, "gpu_job,host=n1,gpu=1,job=42 ") == NULL);
    CHECK_NEAR(c, field_of(line_of(&r, "gpu,host=n1,gpu=0 "), "processes"), 3, 0);
    rig_close(&r);
}

static void test_process_period(hm_test_counts *c)
{
    rig r;
    CHECK(c, rig_open(&r, c, "gpus 1\ngpu 0 process 1 1000 1 1\n", HM_FAKE_NVML_PATH) == 0);
    if (r.state == NULL)
        return rig_close(&r);
    r.cfg.gpu_process_every_ms = 3000;
    hm_error err;
    CHECK(c, rig_reopen(&r, &err) == 0);
    int scans = 0;
    for (int i = 0; i < 8; i++) { /* 1 s apart: the 2nd, then every 3rd */
        CHECK(c, rig_sample(&r, &err) == 0);
        scans += !isnan(field_of(line_of(&r, "gpu,host=n1,gpu=0 "), "processes"));
    }
    CHECK(c, scans == 3); /* samples 2, 5, 8 */
    rig_close(&r);
}

/* The energy counter (~3 ms of CPU a read on an H100) every
 * gpu.energy_every_ms, and on the first two samples; power_avg_w is the
 * mean since the counter's last read, whatever the periods between. */
static void test_energy_period(hm_test_counts *c)
{
    rig r;
    CHECK(c, rig_open(&r, c, "gpus 1\ngpu 0 power_mw 300000\ngpu 0 energy_mj 0 300000\n",
                      HM_FAKE_NVML_PATH) == 0);
    if (r.state == NULL)
        return rig_close(&r);
    r.cfg.gpu_energy_every_ms = 4000;
    hm_error err;
    CHECK(c, rig_reopen(&r, &err) == 0);
    char read_at[16] = "";
    for (int i = 0; i < 12; i++) { /* 1 s apart: the 1st, the 2nd, then every 4th */
        CHECK(c, rig_sample(&r, &err) == 0);
        const char *g0 = line_of(&r, "gpu,host=n1,gpu=0 ");
        bool energy = !isnan(field_of(g0, "energy_mj"));
        strcat(read_at, energy ? "E" : ".");
        CHECK(c, !isnan(field_of(g0, "power_w"))); /* the cheap reading stays every period */
        CHECK(c, !isnan(field_of(g0, "power_avg_w")) == (energy && i >= 1)); /* a rate */
    }
    CHECK(c, strcmp(read_at, "EE...E...E..") == 0);
    if (strcmp(read_at, "EE...E...E..") != 0)
        fprintf(stderr, "energy read at %s\n", read_at);
    r.cfg.gpu_energy_every_ms = 0; /* 0: every period */
    CHECK(c, rig_reopen(&r, &err) == 0); /* the fake writes its call counts at the close */
    CHECK(c, calls_of(&r, "nvmlDeviceGetFieldValues") == 12); /* one request a period */
    int reads = 0;
    for (int i = 0; i < 4; i++) {
        CHECK(c, rig_sample(&r, &err) == 0);
        reads += !isnan(field_of(line_of(&r, "gpu,host=n1,gpu=0 "), "energy_mj"));
    }
    CHECK(c, reads == 4);
    rig_close(&r);
}

/* The fake built without the GPM functions (tests/fake_nvml/CMakeLists.txt):
 * no_gpm/ beside HM_FAKE_NVML_PATH. */
static void no_gpm_library(char *out, size_t size)
{
    snprintf(out, size, "%s", HM_FAKE_NVML_PATH);
    char *slash = strrchr(out, '/');
    size_t dir = slash != NULL ? (size_t)(slash - out) : 0;
    snprintf(out + dir, size - dir, "/no_gpm/libnvidia-ml.so.1");
}

static const char *gpm_script =
    "gpus 2\n"
    "gpu 0 sm_pct 88\n"
    "gpu 0 gpm dram_bw_util 82.5\ngpu 0 gpm fp64_util 3\ngpu 0 gpm fp32_util 12.25\n"
    "gpu 0 gpm tensor_util 1\ngpu 0 gpm sm_occupancy 45\n" /* fp16 not set: per metric NOT_SUPPORTED */
    "gpu 1 sm_pct 40\n";                                   /* no GPM: before Hopper */

static void test_gpm(hm_test_counts *c)
{
    rig r;
    CHECK(c, rig_open(&r, c, gpm_script, HM_FAKE_NVML_PATH) == 0);
    if (r.state == NULL)
        return rig_close(&r);
    hm_error err;
    CHECK(c, rig_sample(&r, &err) == 0);
    /* One sample is no interval: nothing yet. */
    CHECK(c, isnan(field_of(line_of(&r, "gpu,host=n1,gpu=0 "), "dram_bw_util_pct")));
    for (int i = 0; i < 2; i++) {
        CHECK(c, rig_sample(&r, &err) == 0);
        const char *g0 = line_of(&r, "gpu,host=n1,gpu=0 ");
        const char *g1 = line_of(&r, "gpu,host=n1,gpu=1 ");
        CHECK(c, g0 != NULL && g1 != NULL);
        CHECK_NEAR(c, field_of(g0, "dram_bw_util_pct"), 82.5, 1e-9);
        CHECK_NEAR(c, field_of(g0, "fp64_util_pct"), 3, 1e-9);
        CHECK_NEAR(c, field_of(g0, "fp32_util_pct"), 12.25, 1e-9);
        CHECK_NEAR(c, field_of(g0, "tensor_util_pct"), 1, 1e-9);
        CHECK_NEAR(c, field_of(g0, "sm_occupancy_pct"), 45, 1e-9);
        CHECK(c, isnan(field_of(g0, "fp16_util_pct")));
        CHECK_NEAR(c, field_of(g0, "sm_pct"), 88, 0);
        /* GPU 1 has no GPM: its fields absent, the others there. */
        CHECK(c, isnan(field_of(g1, "dram_bw_util_pct")));
        CHECK(c, isnan(field_of(g1, "sm_occupancy_pct")));
        CHECK_NEAR(c, field_of(g1, "sm_pct"), 40, 0);
    }
    r.ops->close(r.state);
    r.state = NULL;
    /* Two buffers for the GPU with GPM, none for the other; one sample and,
     * from the second period on, one metrics call per period; all freed. */
    CHECK(c, calls_of(&r, "nvmlGpmQueryDeviceSupport") == 2);
    CHECK(c, calls_of(&r, "nvmlGpmSampleAlloc") == 2);
    CHECK(c, calls_of(&r, "nvmlGpmSampleFree") == 2);
    CHECK(c, calls_of(&r, "nvmlGpmSampleGet") == 3);
    CHECK(c, calls_of(&r, "nvmlGpmMetricsGet") == 2);
    CHECK(c, calls_of(&r, "gpm_samples_live") == 0);
    rig_close(&r);

    /* Sampling refused: left out from then on, its buffers freed at once. */
    char script[512];
    snprintf(script, sizeof script, "%sgpu 0 fail gpm NO_PERMISSION\n", gpm_script);
    CHECK(c, rig_open(&r, c, script, HM_FAKE_NVML_PATH) == 0);
    if (r.state == NULL)
        return rig_close(&r);
    for (int i = 0; i < 3; i++)
        CHECK(c, rig_sample(&r, &err) == 0);
    CHECK(c, isnan(field_of(line_of(&r, "gpu,host=n1,gpu=0 "), "dram_bw_util_pct")));
    CHECK_NEAR(c, field_of(line_of(&r, "gpu,host=n1,gpu=0 "), "sm_pct"), 88, 0);
    r.ops->close(r.state);
    r.state = NULL;
    CHECK(c, calls_of(&r, "nvmlGpmSampleGet") == 1);
    CHECK(c, calls_of(&r, "nvmlGpmMetricsGet") == 0);
    CHECK(c, calls_of(&r, "gpm_samples_live") == 0);
    rig_close(&r);

    /* A driver before R520: no GPM functions to find; the rest as ever. */
    char lib[512];
    no_gpm_library(lib, sizeof lib);
    CHECK(c, rig_open(&r, c, gpm_script, lib) == 0);
    if (r.state == NULL)
        return rig_close(&r);
    for (int i = 0; i < 3; i++)
        CHECK(c, rig_sample(&r, &err) == 0);
    const char *g0 = line_of(&r, "gpu,host=n1,gpu=0 ");
    CHECK(c, g0 != NULL);
    CHECK(c, isnan(field_of(g0, "dram_bw_util_pct")));
    CHECK(c, isnan(field_of(g0, "fp32_util_pct")));
    CHECK_NEAR(c, field_of(g0, "sm_pct"), 88, 0);
    r.ops->close(r.state);
    r.state = NULL;
    CHECK(c, calls_of(&r, "nvmlGpmSampleGet") == -1); /* the variant has no such function */
    CHECK(c, calls_of(&r, "nvmlDeviceGetFieldValues") == 2 * 3);
    rig_close(&r);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_values(&c);
    test_no_library_no_driver(&c);
    test_permission_denied(&c);
    test_gpu_lost(&c);
    test_jobs(&c);
    test_process_period(&c);
    test_energy_period(&c);
    test_gpm(&c);
    return hm_test_finish("test_agent_gpu", &c);
}
