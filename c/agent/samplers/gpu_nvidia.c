/* gpu_nvidia: NVIDIA GPUs through NVML, loaded with dlopen at open time.
 *
 * hushmon is built without NVML: the library (gpu.nvml_library, default
 * libnvidia-ml.so.1) is opened when the source opens. No library, no
 * driver or no GPU is one notice and no lines (never zeros); a statically
 * linked agent cannot load it and says so. Per GPU and period: one
 * nvmlDeviceGetFieldValues call for everything NVML offers as a field
 * (power, energy counter, ECC, PCIe and NVLink byte counters), plus the
 * readings that have no field id (utilization, memory, clocks,
 * temperature, throttle reasons). A reading a GPU does not support is not
 * asked again. XID errors arrive as NVML events, drained without waiting.
 *
 * The energy counter is the exception: one read of it (field or function
 * alike) costs ~3.2 ms of CPU on an H100 with driver 580, 60 % of the
 * source's period (bench/nvml_call_cost.c, docs/agent.md), so it is in the
 * request every gpu.energy_every_ms only (and on the first two samples, so
 * --once and a fresh agent have power_avg_w at once); power_avg_w is then
 * the mean over the time since the counter's last read.
 *
 * Per process (every gpu.process_every_ms): the compute processes and
 * their utilization, summed per job; a process belongs to a job when its
 * cgroup (/proc/PID/cgroup under --root) is the job's cgroup or below it.
 *
 * GPM (Hopper and newer, drivers from R520): where nvmlGpmQueryDeviceSupport
 * says a GPU has it, each period takes a GPM sample and asks the metrics
 * between it and the previous period's (DRAM bandwidth, FP64/32/16 and
 * tensor pipe utilization, SM occupancy): the roofline factor's GPU
 * verdict. A driver without the GPM functions or a GPU without GPM is one
 * notice and those fields absent. NVML wants the two samples at least
 * 100 ms apart: the agent's period is longer.
 *
 * A GPU that falls off the bus (NVML_ERROR_GPU_IS_LOST) stops its lines;
 * sample() then reports it (logged once) and the other GPUs go on. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "counter.h"
#include "gpu_nvidia_request.h"
#include "hm_log.h"
#include "nvml_api.h"
#include "procfile.h"
#include "sampler.h"

/* One line per GPU; a reading the GPU does not support is absent. */
#define GPU_METRICS(X, P)                                                                     \
    X(P, sm_pct, "%", "time a kernel ran (NVML utilization.gpu)")                             \
    X(P, mem_util_pct, "%", "time memory was read or written")                                \
    X(P, mem_used_bytes, "B", "device memory in use")                                         \
    X(P, mem_total_bytes, "B", "device memory")                                               \
    X(P, mem_used_pct, "%", "100 x used / total")                                             \
    X(P, power_w, "W", "power draw now")                                                      \
    X(P, power_avg_w, "W", "energy since the counter's last read / that time")               \
    X(P, energy_mj, "mJ", "energy counter")                                                   \
    X(P, sm_clock_mhz, "MHz", "SM clock")                                                     \
    X(P, mem_clock_mhz, "MHz", "memory clock")                                                \
    X(P, temp_c, "C", "GPU temperature")                                                      \
    X(P, throttle_reasons, "", "NVML clocks-throttle bitmask")                                \
    X(P, throttle_power, "", "1: slowed by its power cap")                                    \
    X(P, throttle_thermal, "", "1: slowed by temperature")                                    \
    X(P, throttle_hw, "", "1: hardware slowdown")                                             \
    X(P, pcie_tx_bytes_per_s, "B/s", "PCIe sent")                                             \
    X(P, pcie_rx_bytes_per_s, "B/s", "PCIe received")                                         \
    X(P, pcie_capacity_bytes_per_s, "B/s", "the PCIe link's maximum")                         \
    X(P, nvlink_tx_bytes_per_s, "B/s", "NVLink data sent, all links")                         \
    X(P, nvlink_rx_bytes_per_s, "B/s", "NVLink data received, all links")                     \
    X(P, ecc_sbe_volatile, "", "single-bit ECC errors since the driver loaded")               \
    X(P, ecc_dbe_volatile, "", "double-bit ECC errors")                                       \
    X(P, xid_errors, "", "XID errors since the agent started")                                \
    X(P, xid_last, "", "the last XID")                                                        \
    X(P, processes, "", "compute processes, on the periods they are read")                   \
    X(P, dram_bw_util_pct, "%", "GPM: DRAM bandwidth used / its maximum, over the period")     \
    X(P, fp64_util_pct, "%", "GPM: time the SMs did non-tensor FP64 math")                     \
    X(P, fp32_util_pct, "%", "GPM: time the SMs did non-tensor FP32 math")                     \
    X(P, fp16_util_pct, "%", "GPM: time the SMs did non-tensor FP16 math")                     \
    X(P, tensor_util_pct, "%", "GPM: time the SMs did any tensor operation")                   \
    X(P, sm_occupancy_pct, "%", "GPM: active warps / the SMs' maximum")
HM_METRIC_ENUM(GPU, GPU_METRICS);
/* One line per GPU and job: the job's compute processes on that GPU. */
#define GPU_JOB_METRICS(X, P)                                                                 \
    X(P, processes, "", "the job's compute processes on the GPU")                             \
    X(P, mem_used_bytes, "B", "their device memory")                                          \
    X(P, sm_pct, "%", "their SM share (at most 100)")                                         \
    X(P, mem_util_pct, "%", "their memory utilization (at most 100)")
HM_METRIC_ENUM(GPUJ, GPU_JOB_METRICS);

#define GPUS_MAX 64
#define PROCS_MAX 256   /* compute processes per GPU read per scan */
#define XID_DRAIN_MAX 64

typedef struct nvml_fns {
#define X(name, ret, args) ret(*name) args;
    HM_NVML_FUNCTIONS(X)
    HM_NVML_GPM_FUNCTIONS(X)
#undef X
} nvml_fns;

/* The GPM metrics asked for and the fields of the field-values call, in
 * their order (gpu_nvidia_request.h: NGPM, NFV and their slots). */
static const unsigned gpm_id[NGPM] = {HM_GPU_GPM_METRICS(HM_GPU_ID)};
static const unsigned fv_id[NFV] = {HM_GPU_FIELDS(HM_GPU_ID)};

/* The readings that are calls of their own; a bit each in gpu_dev.off. */
enum { C_UTIL, C_MEM, C_CLK_SM, C_CLK_MEM, C_TEMP, C_THROTTLE, C_PROCS, C_PUTIL, NCALLS };
static const char *const call_name[NCALLS] = {
    "utilization", "memory", "SM clock", "memory clock", "temperature", "throttle reasons",
    "compute processes", "process utilization",
};

typedef struct gpu_dev {
    nvmlDevice_t h;
    char tag[12];              /* the gpu tag: NVML's index */
    bool lost;
    bool off[NCALLS];          /* not supported or not permitted: not asked again */
    bool fv_off[NFV];
    int nfv;                   /* the request, rebuilt when a field turns off */
    int fv_of[NFV];            /* request slot -> FV_* */
    nvmlFieldValue_t fv[NFV];
    bool prev_ok[NFV];
    uint64_t prev[NFV];
    int64_t prev_mono_ns[NFV]; /* when prev[k] was read: energy skips periods */
    bool req_energy;           /* the request holds FV_ENERGY */
    int energy_reads;          /* counted up to 2: the first two samples read it */
    double pcie_capacity_bytes_per_s; /* per direction, NaN if unknown */
    bool xid_registered;
    uint64_t xid_count;
    long long xid_last;        /* -1: none yet */
    unsigned long long util_seen_us; /* process utilization newer than this */
    int processes;             /* -1: not read this period */
    /* GPM: two sample buffers, swapped each period; on = supported and
     * allocated, prev_ok = gpm_prev holds the last period's sample. */
    bool gpm_on, gpm_prev_ok;
    nvmlGpmSample_t gpm_prev, gpm_cur;
} gpu_dev;

/* Per job of the job table (same index), per GPU, summed over its processes. */
typedef struct job_acc {
    int nproc;
    double mem_bytes;
    double sm_pct, mem_util_pct;
    bool have_util, have_mem;
} job_acc;

typedef struct pid_job {
    unsigned pid;
    int job;  /* index in the job table, -1 none */
} pid_job;

typedef struct gpu_state {
    void *lib;
    nvml_fns f;
    char root[PATH_MAX];
    unsigned ngpu;
    gpu_dev dev[GPUS_MAX];
    nvmlEventSet_t events;
    int64_t proc_every_ns;
    int64_t energy_every_ns;
    int64_t last_scan_mono_ns;
    bool primed;               /* the first sample sets the process utilization baseline */
    nvmlProcessInfo_t procs[PROCS_MAX];
    nvmlProcessUtilizationSample_t putil[PROCS_MAX];
    job_acc acc[HM_JOBS_MAX];
    pid_job pids[PROCS_MAX];
    int npids;
    bool proc_overflow_said;
    bool lost_said[GPUS_MAX];
    bool gpm_fns;              /* the library has every GPM function */
    nvmlGpmMetricsGet_t gpm_req; /* one request, filled per GPU in turn */
} gpu_state;

static const char *nvml_err(const gpu_state *s, nvmlReturn_t r)
{
    const char *m = s->f.nvmlErrorString != NULL ? s->f.nvmlErrorString(r) : NULL;
    return m != NULL ? m : "unknown NVML error";
}

static void gpm_free(gpu_state *s, gpu_dev *d)
{
    if (d->gpm_prev != NULL)
        s->f.nvmlGpmSampleFree(d->gpm_prev);
    if (d->gpm_cur != NULL)
        s->f.nvmlGpmSampleFree(d->gpm_cur);
    d->gpm_prev = d->gpm_cur = NULL;
    d->gpm_on = d->gpm_prev_ok = false;
}

static void gpu_close(void *state)
{
    gpu_state *s = state;
    if (s == NULL)
        return;
    for (unsigned g = 0; g < s->ngpu; g++)
        gpm_free(s, &s->dev[g]);
    if (s->events != NULL && s->f.nvmlEventSetFree != NULL)
        s->f.nvmlEventSetFree(s->events);
    if (s->f.nvmlShutdown != NULL)
        s->f.nvmlShutdown();
    if (s->lib != NULL)
        dlclose(s->lib);
    free(s);
}

/* Bytes per second per direction of one PCIe lane of each generation
 * (transfer rate x line code: 8b/10b to gen 2, 128b/130b from gen 3,
 * gen 6 FLIT mode taken as 64 GT/s x 242/256). */
static double pcie_lane_bytes_per_s(unsigned gen)
{
    static const double rate[] = {NAN, 250e6, 500e6, 984.6e6, 1969.2e6, 3938.5e6, 7563e6};
    return gen < sizeof rate / sizeof rate[0] ? rate[gen] : NAN;
}

static void build_request(gpu_dev *d, bool with_energy)
{
    d->nfv = 0;
    d->req_energy = with_energy;
    for (int k = 0; k < NFV; k++) {
        if (d->fv_off[k] || (k == FV_ENERGY && !with_energy))
            continue;
        nvmlFieldValue_t *v = &d->fv[d->nfv];
        memset(v, 0, sizeof *v);
        v->fieldId = fv_id[k];
        v->scopeId = hm_gpu_field_scope(fv_id[k]);
        d->fv_of[d->nfv++] = k;
    }
}

static int load_library(gpu_state *s, const char *name, hm_error *err, bool *absent)
{
    s->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (s->lib == NULL) {
        const char *why = dlerror();
        *absent = true;
        return hm_error_set(err, "%s", why != NULL ? why : name);
    }
#define X(fn, ret, args) *(void **)(&s->f.fn) = dlsym(s->lib, #fn);
    HM_NVML_FUNCTIONS(X)
    HM_NVML_GPM_FUNCTIONS(X)
#undef X
    s->gpm_fns = true;
#define X(fn, ret, args) s->gpm_fns = s->gpm_fns && s->f.fn != NULL;
    HM_NVML_GPM_FUNCTIONS(X)
#undef X
    if (s->f.nvmlInit_v2 == NULL || s->f.nvmlShutdown == NULL ||
        s->f.nvmlDeviceGetCount_v2 == NULL || s->f.nvmlDeviceGetHandleByIndex_v2 == NULL)
        return hm_error_set(err, "%s is not NVML (nvmlInit_v2, nvmlDeviceGetCount_v2 or "
                                 "nvmlDeviceGetHandleByIndex_v2 missing)", name);
    if (s->f.nvmlDeviceGetComputeRunningProcesses_v3 == NULL)
        s->f.nvmlDeviceGetComputeRunningProcesses_v3 = s->f.nvmlDeviceGetComputeRunningProcesses_v2;
    return 0;
}

/* GPM on one GPU: supported, and its two sample buffers allocated. An
 * answer other than "supported" leaves it off; the caller says which
 * GPUs, once. */
static bool gpm_open(gpu_state *s, gpu_dev *d)
{
    if (!s->gpm_fns)
        return false;
    nvmlGpmSupport_t sup = {.version = NVML_GPM_SUPPORT_VERSION, .isSupportedDevice = 0};
    nvmlReturn_t r = s->f.nvmlGpmQueryDeviceSupport(d->h, &sup);
    if (r != NVML_SUCCESS || !sup.isSupportedDevice)
        return false;
    r = s->f.nvmlGpmSampleAlloc(&d->gpm_prev);
    if (r == NVML_SUCCESS)
        r = s->f.nvmlGpmSampleAlloc(&d->gpm_cur);
    if (r != NVML_SUCCESS) {
        hm_log_warn("gpu_nvidia: GPU %s: nvmlGpmSampleAlloc: %s: no GPM fields", d->tag,
                    nvml_err(s, r));
        gpm_free(s, d);
        return false;
    }
    d->gpm_on = true;
    return true;
}

static void open_device(gpu_state *s, gpu_dev *d)
{
    build_request(d, true);
    d->pcie_capacity_bytes_per_s = NAN;
    d->xid_last = -1;
    d->processes = -1;
    unsigned gen = 0, width = 0;
    if (s->f.nvmlDeviceGetMaxPcieLinkGeneration != NULL && s->f.nvmlDeviceGetMaxPcieLinkWidth != NULL &&
        s->f.nvmlDeviceGetMaxPcieLinkGeneration(d->h, &gen) == NVML_SUCCESS &&
        s->f.nvmlDeviceGetMaxPcieLinkWidth(d->h, &width) == NVML_SUCCESS && width > 0)
        d->pcie_capacity_bytes_per_s = width * pcie_lane_bytes_per_s(gen);
    if (s->events != NULL && s->f.nvmlDeviceRegisterEvents != NULL)
        d->xid_registered = s->f.nvmlDeviceRegisterEvents(d->h, NVML_EVENT_TYPE_XID_CRITICAL_ERROR,
                                                          s->events) == NVML_SUCCESS;
    gpm_open(s, d);
}

/* One notice for the GPUs without GPM: why, and which. */
static void gpm_notice(gpu_state *s)
{
    if (!s->gpm_fns) {
        hm_log_notice("gpu_nvidia: this NVML has no GPM functions (a driver before R520): no "
                      "dram_bw_util_pct, fp*_util_pct, tensor_util_pct, sm_occupancy_pct");
        return;
    }
    char without[256] = "";
    size_t len = 0;
    unsigned n = 0;
    for (unsigned g = 0; g < s->ngpu; g++) {
        if (s->dev[g].gpm_on)
            continue;
        int w = snprintf(without + len, sizeof without - len, "%s%s", n ? " " : "", s->dev[g].tag);
        if (w > 0 && (size_t)w < sizeof without - len)
            len += (size_t)w;
        n++;
    }
    if (n > 0)
        hm_log_notice("gpu_nvidia: %u of %u GPUs without GPM (before Hopper, or a MIG or vGPU "
                      "slice): GPU %s: no dram_bw_util_pct, fp*_util_pct, tensor_util_pct, "
                      "sm_occupancy_pct for them", n, s->ngpu, without);
}

static int gpu_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    const hm_agent_config *cfg = env->cfg;
    /* A static binary has no dynamic loader to share with the library
     * (glibc's static dlopen loads a second libc): refuse rather than
     * risk NVML's threads on it. */
    if (getauxval(AT_BASE) == 0) {
        hm_log_notice("gpu_nvidia: this agent is linked statically and cannot load NVML: no GPU "
                      "lines (build with -DHUSHMON_AGENT_STATIC=OFF)");
        return 0;
    }
    gpu_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    snprintf(s->root, sizeof s->root, "%s", cfg->root);
    s->proc_every_ns = cfg->gpu_process_every_ms * 1000000;
    s->energy_every_ns = cfg->gpu_energy_every_ms * 1000000;
    bool absent = false;
    if (load_library(s, cfg->gpu_nvml_library, err, &absent) < 0) {
        s->f.nvmlShutdown = NULL; /* never initialized */
        gpu_close(s);
        if (!absent)
            return -1;
        hm_log_notice("gpu_nvidia: no NVML library (%s): no GPU lines", err->msg);
        return 0;
    }
    nvmlReturn_t r = s->f.nvmlInit_v2();
    if (r != NVML_SUCCESS) {
        /* The library is there but not the driver: a node without GPUs
         * that has the package installed. Anything else is a fault. */
        bool no_driver = r == NVML_ERROR_DRIVER_NOT_LOADED || r == NVML_ERROR_LIBRARY_NOT_FOUND;
        if (no_driver)
            hm_log_notice("gpu_nvidia: NVML finds no driver (%s): no GPU lines", nvml_err(s, r));
        else
            hm_error_set(err, "nvmlInit_v2 (%s): %s", cfg->gpu_nvml_library, nvml_err(s, r));
        s->f.nvmlShutdown = NULL; /* not initialized: nothing to shut down */
        gpu_close(s);
        return no_driver ? 0 : -1;
    }
    unsigned n = 0;
    r = s->f.nvmlDeviceGetCount_v2(&n);
    if (r != NVML_SUCCESS || n == 0) {
        if (r == NVML_SUCCESS)
            hm_log_notice("gpu_nvidia: NVML sees no GPU: no GPU lines");
        else
            hm_error_set(err, "nvmlDeviceGetCount_v2: %s", nvml_err(s, r));
        gpu_close(s);
        return r == NVML_SUCCESS ? 0 : -1;
    }
    if (n > GPUS_MAX) {
        hm_log_warn("gpu_nvidia: %u GPUs, reading the first %d", n, GPUS_MAX);
        n = GPUS_MAX;
    }
    if (s->f.nvmlEventSetCreate != NULL && s->f.nvmlEventSetWait_v2 != NULL &&
        s->f.nvmlEventSetCreate(&s->events) != NVML_SUCCESS)
        s->events = NULL;
    for (unsigned i = 0; i < n; i++) {
        gpu_dev *d = &s->dev[s->ngpu];
        r = s->f.nvmlDeviceGetHandleByIndex_v2(i, &d->h);
        if (r != NVML_SUCCESS) {
            /* One GPU NVML cannot open (lost, or not ours in a container)
             * does not stop the others. */
            hm_log_warn("gpu_nvidia: GPU %u: %s: no lines for it", i, nvml_err(s, r));
            continue;
        }
        snprintf(d->tag, sizeof d->tag, "%u", i);
        open_device(s, d);
        s->ngpu++;
    }
    gpm_notice(s);
    if (s->ngpu == 0) {
        gpu_close(s);
        return hm_error_set(err, "none of the %u GPUs could be opened", n);
    }
    *state = s;
    return 0;
}

/* Sorts one NVML answer: true = use the value. Lost GPUs stop; readings
 * that are not supported or not permitted are not asked again. */
static bool answer_ok(gpu_state *s, gpu_dev *d, int call, nvmlReturn_t r)
{
    if (r == NVML_SUCCESS)
        return true;
    if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_RESET_REQUIRED) {
        d->lost = true;
    } else if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) {
        if (call >= 0)
            d->off[call] = true;
    } else if (r == NVML_ERROR_NO_PERMISSION) {
        if (call >= 0 && !d->off[call])
            hm_log_notice("gpu_nvidia: GPU %s: %s: %s: left out from now on", d->tag,
                          call_name[call], nvml_err(s, r));
        if (call >= 0)
            d->off[call] = true;
    }
    return false;
}

static double field_f64(const nvmlFieldValue_t *v)
{
    switch (v->valueType) {
    case NVML_VALUE_TYPE_DOUBLE: return v->value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT: return v->value.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return (double)v->value.ulVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return (double)v->value.ullVal;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return (double)v->value.sllVal;
    }
    return NAN;
}

static bool field_u64(const nvmlFieldValue_t *v, uint64_t *out)
{
    switch (v->valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT: *out = v->value.uiVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: *out = v->value.ulVal; return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: *out = v->value.ullVal; return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        if (v->value.sllVal < 0)
            return false;
        *out = (uint64_t)v->value.sllVal;
        return true;
    case NVML_VALUE_TYPE_DOUBLE:
        if (!(v->value.dVal >= 0))
            return false;
        *out = (uint64_t)v->value.dVal;
        return true;
    }
    return false;
}

/* The fields of one GPU: values[k] NaN where not read; counters as rates. */
static void read_fields(gpu_state *s, gpu_dev *d, int64_t mono_ns, double value[NFV],
                        uint64_t raw[NFV], bool raw_ok[NFV], double rate[NFV])
{
    for (int k = 0; k < NFV; k++) {
        value[k] = rate[k] = NAN;
        raw_ok[k] = false;
    }
    /* The energy counter every energy_every_ns (5 % early, so a period's
     * jitter cannot push it a whole period late). */
    int64_t since_energy_ns = mono_ns - d->prev_mono_ns[FV_ENERGY];
    bool want_energy = d->energy_reads < 2 || s->energy_every_ns == 0 ||
                       since_energy_ns >= s->energy_every_ns - s->energy_every_ns / 20;
    if (want_energy != d->req_energy)
        build_request(d, want_energy);
    if (d->nfv == 0 || s->f.nvmlDeviceGetFieldValues == NULL)
        return;
    for (int i = 0; i < d->nfv; i++)
        d->fv[i].nvmlReturn = NVML_ERROR_UNKNOWN;
    nvmlReturn_t r = s->f.nvmlDeviceGetFieldValues(d->h, d->nfv, d->fv);
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) {
        for (int k = 0; k < NFV; k++)
            d->fv_off[k] = true; /* a driver older than field values */
        build_request(d, d->req_energy);
    }
    if (!answer_ok(s, d, -1, r))
        return;
    if (d->req_energy && d->energy_reads < 2)
        d->energy_reads++;
    bool rebuild = false;
    for (int i = 0; i < d->nfv; i++) {
        int k = d->fv_of[i];
        const nvmlFieldValue_t *v = &d->fv[i];
        if (v->nvmlReturn != NVML_SUCCESS) {
            if (v->nvmlReturn == NVML_ERROR_NOT_SUPPORTED || v->nvmlReturn == NVML_ERROR_NO_PERMISSION)
                d->fv_off[k] = rebuild = true;
            else if (v->nvmlReturn == NVML_ERROR_GPU_IS_LOST)
                d->lost = true;
            d->prev_ok[k] = false;
            continue;
        }
        value[k] = field_f64(v);
        raw_ok[k] = field_u64(v, &raw[k]);
        double dt = hm_dt_s(d->prev_mono_ns[k], mono_ns);
        if (raw_ok[k] && d->prev_ok[k] && dt > 0)
            rate[k] = hm_counter_rate(d->prev[k], raw[k], 64, dt);
        d->prev_ok[k] = raw_ok[k];
        d->prev[k] = raw[k];
        d->prev_mono_ns[k] = mono_ns;
    }
    if (rebuild)
        build_request(d, d->req_energy);
}

static void drain_xid(gpu_state *s)
{
    if (s->events == NULL)
        return;
    for (int i = 0; i < XID_DRAIN_MAX; i++) {
        nvmlEventData_t e;
        memset(&e, 0, sizeof e);
        if (s->f.nvmlEventSetWait_v2(s->events, &e, 0) != NVML_SUCCESS)
            return; /* NVML_ERROR_TIMEOUT: none waiting */
        if (!(e.eventType & NVML_EVENT_TYPE_XID_CRITICAL_ERROR))
            continue;
        for (unsigned g = 0; g < s->ngpu; g++)
            if (s->dev[g].h == e.device) {
                s->dev[g].xid_count++;
                s->dev[g].xid_last = (long long)e.eventData;
            }
    }
}

/* The job whose cgroup holds the process, from /proc/PID/cgroup
 * (hm_jobs_of_proc_cgroup: any hierarchy's line, the hybrid machine's
 * "unified/" v2 mount included); -1 if none. */
static int job_of_pid(const gpu_state *s, const hm_jobs *jobs, unsigned pid)
{
    char path[PATH_MAX], rel[64];
    snprintf(rel, sizeof rel, "/proc/%u/cgroup", pid);
    if (hm_path_join(path, sizeof path, s->root, rel, NULL) < 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1; /* gone, or another PID namespace */
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return hm_jobs_of_proc_cgroup(jobs, buf);
}

static int cached_job_of_pid(gpu_state *s, const hm_jobs *jobs, unsigned pid)
{
    for (int i = 0; i < s->npids; i++)
        if (s->pids[i].pid == pid)
            return s->pids[i].job;
    int j = job_of_pid(s, jobs, pid);
    if (s->npids < PROCS_MAX)
        s->pids[s->npids++] = (pid_job){.pid = pid, .job = j};
    return j;
}

/* Compute processes of one GPU and their utilization since the last scan,
 * summed per job into s->acc; `gpu_job` lines for the jobs present. */
static void scan_processes(gpu_state *s, gpu_dev *d, const hm_sample_ctx *ctx, hm_lp *out)
{
    memset(s->acc, 0, sizeof s->acc);
    d->processes = -1;
    unsigned np = 0;
    if (!d->off[C_PROCS] && s->f.nvmlDeviceGetComputeRunningProcesses_v3 != NULL) {
        np = PROCS_MAX;
        nvmlReturn_t r = s->f.nvmlDeviceGetComputeRunningProcesses_v3(d->h, &np, s->procs);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
            hm_log_warn_once(&s->proc_overflow_said,
                             "gpu_nvidia: GPU %s runs more than %d processes: per-job lines "
                             "left out while it does (said once)", d->tag, PROCS_MAX);
            np = 0;
        } else if (!answer_ok(s, d, C_PROCS, r)) {
            np = 0;
        } else {
            d->processes = (int)np;
        }
    }
    for (unsigned i = 0; i < np && i < PROCS_MAX; i++) {
        int j = cached_job_of_pid(s, ctx->jobs, s->procs[i].pid);
        if (j < 0)
            continue;
        s->acc[j].nproc++;
        if (s->procs[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) {
            s->acc[j].mem_bytes += (double)s->procs[i].usedGpuMemory;
            s->acc[j].have_mem = true;
        }
    }
    if (np > 0 && !d->off[C_PUTIL] && s->f.nvmlDeviceGetProcessUtilization != NULL) {
        unsigned nu = PROCS_MAX;
        nvmlReturn_t r = s->f.nvmlDeviceGetProcessUtilization(d->h, s->putil, &nu, d->util_seen_us);
        /* NVML_ERROR_NOT_FOUND: no sample since the last scan; the
         * utilization is then unknown, not 0. */
        if (r != NVML_ERROR_NOT_FOUND && answer_ok(s, d, C_PUTIL, r)) {
            unsigned long long newest = d->util_seen_us;
            for (unsigned i = 0; i < nu && i < PROCS_MAX; i++) {
                const nvmlProcessUtilizationSample_t *u = &s->putil[i];
                if (u->timeStamp > newest)
                    newest = u->timeStamp;
                /* Several samples of one process: the newest counts. */
                bool newer_exists = false;
                for (unsigned k = 0; k < nu && k < PROCS_MAX; k++)
                    if (k != i && s->putil[k].pid == u->pid &&
                        (s->putil[k].timeStamp > u->timeStamp ||
                         (s->putil[k].timeStamp == u->timeStamp && k > i)))
                        newer_exists = true;
                if (newer_exists)
                    continue;
                int j = cached_job_of_pid(s, ctx->jobs, u->pid);
                if (j < 0)
                    continue;
                s->acc[j].sm_pct += u->smUtil;
                s->acc[j].mem_util_pct += u->memUtil;
                s->acc[j].have_util = true;
            }
            d->util_seen_us = newest;
        }
    }
    for (int j = 0; j < HM_JOBS_MAX; j++) {
        const job_acc *a = &s->acc[j];
        if (a->nproc == 0 || !ctx->jobs->job[j].used)
            continue;
        hm_lp_begin(out, "gpu_job");
        hm_lp_tag(out, "gpu", d->tag);
        hm_lp_tag(out, "job", ctx->jobs->job[j].id);
        hm_lp_field_i64(out, HM_M(GPUJ, processes), a->nproc);
        hm_lp_field_f64(out, HM_M(GPUJ, mem_used_bytes), a->have_mem ? a->mem_bytes : NAN);
        hm_lp_field_f64(out, HM_M(GPUJ, sm_pct), a->have_util ? fmin(a->sm_pct, 100.0) : NAN);
        hm_lp_field_f64(out, HM_M(GPUJ, mem_util_pct), a->have_util ? fmin(a->mem_util_pct, 100.0) : NAN);
        hm_lp_end(out);
    }
}

/* This period's GPM sample, and the metrics between it and the last
 * one into value[] (NaN where not read). A failed sample breaks the pair:
 * the next period starts a new one. */
static void read_gpm(gpu_state *s, gpu_dev *d, double value[NGPM])
{
    for (int k = 0; k < NGPM; k++)
        value[k] = NAN;
    if (!d->gpm_on)
        return;
    nvmlReturn_t r = s->f.nvmlGpmSampleGet(d->h, d->gpm_cur);
    if (r != NVML_SUCCESS) {
        if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_RESET_REQUIRED) {
            d->lost = true;
        } else if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_NO_PERMISSION) {
            hm_log_notice("gpu_nvidia: GPU %s: nvmlGpmSampleGet: %s: GPM fields left out from "
                          "now on", d->tag, nvml_err(s, r));
            gpm_free(s, d);
        }
        d->gpm_prev_ok = false;
        return;
    }
    if (d->gpm_prev_ok) {
        nvmlGpmMetricsGet_t *q = &s->gpm_req;
        memset(q, 0, sizeof *q);
        q->version = NVML_GPM_METRICS_GET_VERSION;
        q->numMetrics = NGPM;
        q->sample1 = d->gpm_prev;
        q->sample2 = d->gpm_cur;
        for (int k = 0; k < NGPM; k++) {
            q->metrics[k].metricId = gpm_id[k];
            q->metrics[k].nvmlReturn = NVML_ERROR_UNKNOWN;
        }
        r = s->f.nvmlGpmMetricsGet(q);
        if (r == NVML_SUCCESS) {
            for (int k = 0; k < NGPM; k++)
                if (q->metrics[k].nvmlReturn == NVML_SUCCESS && isfinite(q->metrics[k].value))
                    value[k] = q->metrics[k].value;
        } else if (r == NVML_ERROR_GPU_IS_LOST) {
            d->lost = true;
        }
    }
    nvmlGpmSample_t t = d->gpm_prev; /* this sample is the next period's older one */
    d->gpm_prev = d->gpm_cur;
    d->gpm_cur = t;
    d->gpm_prev_ok = true;
}

static void sample_device(gpu_state *s, gpu_dev *d, const hm_sample_ctx *ctx, hm_lp *out,
                          bool scan)
{
    double value[NFV], rate[NFV];
    uint64_t raw[NFV] = {0};
    bool raw_ok[NFV];
    read_fields(s, d, ctx->mono_ns, value, raw, raw_ok, rate);

    nvmlUtilization_t util = {0, 0};
    bool have_util = !d->off[C_UTIL] && s->f.nvmlDeviceGetUtilizationRates != NULL &&
                     answer_ok(s, d, C_UTIL, s->f.nvmlDeviceGetUtilizationRates(d->h, &util));
    nvmlMemory_t mem = {0, 0, 0};
    bool have_mem = !d->off[C_MEM] && s->f.nvmlDeviceGetMemoryInfo != NULL &&
                    answer_ok(s, d, C_MEM, s->f.nvmlDeviceGetMemoryInfo(d->h, &mem));
    unsigned sm_mhz = 0, mem_mhz = 0, temp_c = 0;
    bool have_sm = !d->off[C_CLK_SM] && s->f.nvmlDeviceGetClockInfo != NULL &&
                   answer_ok(s, d, C_CLK_SM, s->f.nvmlDeviceGetClockInfo(d->h, NVML_CLOCK_SM, &sm_mhz));
    bool have_memclk =
        !d->off[C_CLK_MEM] && s->f.nvmlDeviceGetClockInfo != NULL &&
        answer_ok(s, d, C_CLK_MEM, s->f.nvmlDeviceGetClockInfo(d->h, NVML_CLOCK_MEM, &mem_mhz));
    bool have_temp =
        !d->off[C_TEMP] && s->f.nvmlDeviceGetTemperature != NULL &&
        answer_ok(s, d, C_TEMP, s->f.nvmlDeviceGetTemperature(d->h, NVML_TEMPERATURE_GPU, &temp_c));
    unsigned long long reasons = 0;
    bool have_thr = !d->off[C_THROTTLE] && s->f.nvmlDeviceGetCurrentClocksThrottleReasons != NULL &&
                    answer_ok(s, d, C_THROTTLE,
                              s->f.nvmlDeviceGetCurrentClocksThrottleReasons(d->h, &reasons));
    double gpm[NGPM];
    read_gpm(s, d, gpm);
    if (d->lost)
        return;
    if (scan)
        scan_processes(s, d, ctx, out);
    if (d->lost)
        return;

    hm_lp_begin(out, "gpu");
    hm_lp_tag(out, "gpu", d->tag);
    if (have_util) {
        hm_lp_field_f64(out, HM_M(GPU, sm_pct), util.gpu);
        hm_lp_field_f64(out, HM_M(GPU, mem_util_pct), util.memory);
    }
    if (have_mem) {
        hm_lp_field_f64(out, HM_M(GPU, mem_used_bytes), (double)mem.used);
        hm_lp_field_f64(out, HM_M(GPU, mem_total_bytes), (double)mem.total);
        hm_lp_field_f64(out, HM_M(GPU, mem_used_pct), mem.total > 0 ? 100.0 * (double)mem.used / (double)mem.total : NAN);
    }
    hm_lp_field_f64(out, HM_M(GPU, power_w), value[FV_POWER] / 1e3);
    hm_lp_field_f64(out, HM_M(GPU, power_avg_w), rate[FV_ENERGY] / 1e3);
    if (raw_ok[FV_ENERGY])
        hm_lp_field_i64(out, HM_M(GPU, energy_mj), (int64_t)raw[FV_ENERGY]);
    if (have_sm)
        hm_lp_field_f64(out, HM_M(GPU, sm_clock_mhz), sm_mhz);
    if (have_memclk)
        hm_lp_field_f64(out, HM_M(GPU, mem_clock_mhz), mem_mhz);
    if (have_temp)
        hm_lp_field_f64(out, HM_M(GPU, temp_c), temp_c);
    if (have_thr) {
        hm_lp_field_i64(out, HM_M(GPU, throttle_reasons), (int64_t)reasons);
        hm_lp_field_i64(out, HM_M(GPU, throttle_power),
                        (reasons & (NVML_THROTTLE_SW_POWER_CAP | NVML_THROTTLE_HW_POWER_BRAKE)) != 0);
        hm_lp_field_i64(out, HM_M(GPU, throttle_thermal),
                        (reasons & (NVML_THROTTLE_SW_THERMAL | NVML_THROTTLE_HW_THERMAL)) != 0);
        hm_lp_field_i64(out, HM_M(GPU, throttle_hw), (reasons & NVML_THROTTLE_HW_SLOWDOWN) != 0);
    }
    hm_lp_field_f64(out, HM_M(GPU, pcie_tx_bytes_per_s), rate[FV_PCIE_TX]);
    hm_lp_field_f64(out, HM_M(GPU, pcie_rx_bytes_per_s), rate[FV_PCIE_RX]);
    if (raw_ok[FV_PCIE_TX] || raw_ok[FV_PCIE_RX])
        hm_lp_field_f64(out, HM_M(GPU, pcie_capacity_bytes_per_s), d->pcie_capacity_bytes_per_s);
    hm_lp_field_f64(out, HM_M(GPU, nvlink_tx_bytes_per_s), rate[FV_NVL_TX] * 1024.0);
    hm_lp_field_f64(out, HM_M(GPU, nvlink_rx_bytes_per_s), rate[FV_NVL_RX] * 1024.0);
    if (raw_ok[FV_ECC_SBE])
        hm_lp_field_i64(out, HM_M(GPU, ecc_sbe_volatile), (int64_t)raw[FV_ECC_SBE]);
    if (raw_ok[FV_ECC_DBE])
        hm_lp_field_i64(out, HM_M(GPU, ecc_dbe_volatile), (int64_t)raw[FV_ECC_DBE]);
    if (d->xid_registered) {
        hm_lp_field_i64(out, HM_M(GPU, xid_errors), (int64_t)d->xid_count);
        if (d->xid_last >= 0)
            hm_lp_field_i64(out, HM_M(GPU, xid_last), d->xid_last);
    }
    if (scan && d->processes >= 0)
        hm_lp_field_i64(out, HM_M(GPU, processes), d->processes);
    hm_lp_field_f64(out, HM_M(GPU, dram_bw_util_pct), gpm[GPM_DRAM]);
    hm_lp_field_f64(out, HM_M(GPU, fp64_util_pct), gpm[GPM_FP64]);
    hm_lp_field_f64(out, HM_M(GPU, fp32_util_pct), gpm[GPM_FP32]);
    hm_lp_field_f64(out, HM_M(GPU, fp16_util_pct), gpm[GPM_FP16]);
    hm_lp_field_f64(out, HM_M(GPU, tensor_util_pct), gpm[GPM_TENSOR]);
    hm_lp_field_f64(out, HM_M(GPU, sm_occupancy_pct), gpm[GPM_OCC]);
    hm_lp_end(out);
}

static int gpu_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    gpu_state *s = state;
    drain_xid(s);
    bool scan = false;
    if (!s->primed) {
        /* Process utilization is "since a time stamp": start from now. */
        for (unsigned g = 0; g < s->ngpu; g++)
            s->dev[g].util_seen_us = (unsigned long long)(ctx->ts_ns / 1000);
        s->primed = true;
        s->last_scan_mono_ns = ctx->mono_ns - s->proc_every_ns; /* scan at the next sample */
    } else if (ctx->mono_ns - s->last_scan_mono_ns >= s->proc_every_ns) {
        scan = true;
        s->last_scan_mono_ns = ctx->mono_ns;
        s->npids = 0;
    }
    unsigned lost = 0;
    const char *first_lost = NULL;
    for (unsigned g = 0; g < s->ngpu; g++) {
        gpu_dev *d = &s->dev[g];
        if (!d->lost)
            sample_device(s, d, ctx, out, scan);
        if (d->lost) {
            lost++;
            if (first_lost == NULL)
                first_lost = d->tag;
            if (!s->lost_said[g])
                hm_log_warn("gpu_nvidia: GPU %s is lost (%s): its lines stop, the other GPUs go on",
                            d->tag, nvml_err(s, NVML_ERROR_GPU_IS_LOST));
            s->lost_said[g] = true;
        }
    }
    if (lost > 0)
        return hm_error_set(err, "%u of %u GPUs lost (first: GPU %s); no lines for them", lost,
                            s->ngpu, first_lost);
    return 0;
}

const hm_sampler_ops hm_sampler_gpu_nvidia = {
    .name = "gpu_nvidia",
    .reads = "NVIDIA GPUs through NVML (dlopen gpu.nvml_library); GPU processes' cgroups",
    .measurement = "gpu (tag gpu), gpu_job (tags gpu job)",
    .fields = "gpu:" HM_METRIC_NAMES(GPU_METRICS) "; gpu_job:" HM_METRIC_NAMES(GPU_JOB_METRICS),
    .default_on = true,
    .node_local = false,
    .open = gpu_open,
    .sample = gpu_sample,
    .close = gpu_close,
};
