/* A fake NVML for tests: the same exported symbols as libnvidia-ml.so.1
 * (c/agent/samplers/nvml_api.h), answering from a script named by
 * $HM_FAKE_NVML_SCRIPT, read at nvmlInit_v2. Built as
 * build/tests/fake_nvml/libnvidia-ml.so.1 and loaded by the agent through
 * the same dlopen as the real one (gpu.nvml_library / --nvml-library).
 * Script format: tests/fake_nvml/README.md; counters advance at their
 * step per second. With $HM_FAKE_NVML_CALLS set,
 * nvmlShutdown writes how often each function was called to that file,
 * and how many GPM samples are still allocated (gpm_samples_live).
 * Built twice: with the GPM functions, and with -DHM_FAKE_NVML_NO_GPM
 * without them (a driver before R520). */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml_api.h"

#define FAKE_GPUS 8
#define FAKE_PROCS 16
#define FAKE_XIDS 16

enum { V_SM, V_MEMUTIL, V_MEMUSED, V_MEMTOTAL, V_POWER, V_ENERGY, V_SMCLK, V_MEMCLK, V_TEMP,
       V_THROTTLE, V_PCIE_TX, V_PCIE_RX, V_NVL_TX, V_NVL_RX, V_ECC_SBE, V_ECC_DBE, V_PCIE_GEN,
       V_PCIE_WIDTH, NV };
static const char *const value_name[NV] = {
    "sm_pct", "mem_util_pct", "mem_used_bytes", "mem_total_bytes", "power_mw", "energy_mj",
    "sm_clock_mhz", "mem_clock_mhz", "temp_c", "throttle", "pcie_tx_bytes", "pcie_rx_bytes",
    "nvlink_tx_kib", "nvlink_rx_kib", "ecc_sbe", "ecc_dbe", "pcie_gen", "pcie_width",
};
/* What a `fail` line may name: a value (its field or call) or a call. */
enum { F_FIELDS = NV, F_PROCESSES, F_PROCESS_UTIL, F_EVENTS, F_GPM, NF };
static const char *const fail_name[NF - NV] = {"fields", "processes", "process_util", "events",
                                               "gpm"};

/* GPM metrics a script may set (`gpu I gpm NAME PCT`): a GPU with any of
 * them supports GPM; the others answer NOT_SUPPORTED per metric. */
enum { G_DRAM, G_FP64, G_FP32, G_FP16, G_TENSOR, G_OCC, NG };
static const char *const gpm_name[NG] = {"dram_bw_util", "fp64_util", "fp32_util",
                                         "fp16_util", "tensor_util", "sm_occupancy"};
#ifndef HM_FAKE_NVML_NO_GPM
static const unsigned gpm_metric_id[NG] = {
    NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_GPM_METRIC_FP64_UTIL, NVML_GPM_METRIC_FP32_UTIL,
    NVML_GPM_METRIC_FP16_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY,
};
#endif

typedef struct fake_proc {
    unsigned pid;
    unsigned long long mem;
    unsigned sm, memutil;
} fake_proc;

typedef struct fake_gpu {
    unsigned long long v[NV], step[NV];
    nvmlReturn_t fail[NF];
    nvmlReturn_t handle_fail;
    long lost_at;  /* 0: never */
    long field_calls;
    int nproc;
    fake_proc proc[FAKE_PROCS];
    bool events;
    bool gpm;          /* supports GPM */
    bool gpm_set[NG];
    double gpm_pct[NG];
    long gpm_samples;  /* nvmlGpmSampleGet calls that succeeded */
} fake_gpu;

typedef struct fake_xid {
    int gpu;
    unsigned long long code;
    long at;
    bool sent;
} fake_xid;

static struct {
    nvmlReturn_t init;
    unsigned ngpu;
    fake_gpu gpu[FAKE_GPUS];
    int nxid;
    fake_xid xid[FAKE_XIDS];
    long waits;
    int initialized;
    struct timespec init_at;
} fk;

/* Lives across nvmlInit_v2 (load_script clears fk): a leak stays counted. */
static long gpm_samples_live;

#define X(name, ret, args) static long calls_##name;
HM_NVML_FUNCTIONS(X)
#ifndef HM_FAKE_NVML_NO_GPM
HM_NVML_GPM_FUNCTIONS(X)
#endif
#undef X

static const struct { const char *name; nvmlReturn_t code; } codes[] = {
    {"SUCCESS", NVML_SUCCESS}, {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
    {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION}, {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
    {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED}, {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
    {"TIMEOUT", NVML_ERROR_TIMEOUT}, {"UNKNOWN", NVML_ERROR_UNKNOWN},
    {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE},
};

static int code_of(const char *name, nvmlReturn_t *out)
{
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(codes[i].name, name) == 0) {
            *out = codes[i].code;
            return 0;
        }
    return -1;
}

static int bad(const char *path, int line, const char *what)
{
    fprintf(stderr, "fake NVML: %s:%d: %s\n", path, line, what);
    return -1;
}

static int parse_gpu_line(const char *path, int ln, char *rest)
{
    char *tok = strtok(rest, " \t\n");
    if (tok == NULL)
        return bad(path, ln, "gpu: index missing");
    unsigned g = (unsigned)strtoul(tok, NULL, 10);
    if (g >= FAKE_GPUS)
        return bad(path, ln, "gpu index too large");
    fake_gpu *G = &fk.gpu[g];
    char *key = strtok(NULL, " \t\n");
    if (key == NULL)
        return bad(path, ln, "gpu: key missing");
    char *a = strtok(NULL, " \t\n"), *b = strtok(NULL, " \t\n");
    if (strcmp(key, "fail") == 0 || strcmp(key, "handle_fail") == 0) {
        nvmlReturn_t code;
        const char *cname = strcmp(key, "fail") == 0 ? b : a;
        if (cname == NULL || code_of(cname, &code) < 0)
            return bad(path, ln, "unknown NVML error name");
        if (strcmp(key, "handle_fail") == 0) {
            G->handle_fail = code;
            return 0;
        }
        for (int k = 0; k < NF; k++)
            if (strcmp(a, k < NV ? value_name[k] : fail_name[k - NV]) == 0) {
                G->fail[k] = code;
                return 0;
            }
        return bad(path, ln, "fail: unknown reading");
    }
    if (strcmp(key, "gpm") == 0) {
        for (int k = 0; k < NG; k++)
            if (a != NULL && b != NULL && strcmp(a, gpm_name[k]) == 0) {
                G->gpm = G->gpm_set[k] = true;
                G->gpm_pct[k] = strtod(b, NULL);
                return 0;
            }
        return bad(path, ln, "gpm NAME PCT (dram_bw_util fp64_util fp32_util fp16_util "
                             "tensor_util sm_occupancy)");
    }
    if (strcmp(key, "lost_at") == 0 && a != NULL) {
        G->lost_at = strtol(a, NULL, 10);
        return 0;
    }
    if (strcmp(key, "process") == 0) {
        char *c = strtok(NULL, " \t\n"), *d = strtok(NULL, " \t\n");
        if (a == NULL || b == NULL || c == NULL || d == NULL || G->nproc >= FAKE_PROCS)
            return bad(path, ln, "process PID MEM_BYTES SM_PCT MEM_PCT");
        G->proc[G->nproc++] = (fake_proc){(unsigned)strtoul(a, NULL, 10), strtoull(b, NULL, 10),
                                          (unsigned)strtoul(c, NULL, 10), (unsigned)strtoul(d, NULL, 10)};
        return 0;
    }
    if (strcmp(key, "xid") == 0) {
        if (a == NULL || b == NULL || fk.nxid >= FAKE_XIDS)
            return bad(path, ln, "xid CODE AT_WAIT");
        fk.xid[fk.nxid++] = (fake_xid){(int)g, strtoull(a, NULL, 10), strtol(b, NULL, 10), false};
        return 0;
    }
    for (int k = 0; k < NV; k++)
        if (strcmp(key, value_name[k]) == 0) {
            if (a == NULL)
                return bad(path, ln, "value missing");
            G->v[k] = strtoull(a, NULL, 0);
            G->step[k] = b != NULL ? strtoull(b, NULL, 0) : 0;
            return 0;
        }
    return bad(path, ln, "unknown gpu key");
}

static nvmlReturn_t load_script(void)
{
    memset(&fk, 0, sizeof fk);
    const char *path = getenv("HM_FAKE_NVML_SCRIPT");
    if (path == NULL)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "fake NVML: cannot open %s\n", path);
        return NVML_ERROR_UNKNOWN;
    }
    char line[512];
    int ln = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f) != NULL) {
        ln++;
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char *key = strtok(line, " \t\n");
        if (key == NULL)
            continue;
        char *rest = key + strlen(key) + 1;
        if (strcmp(key, "gpus") == 0) {
            char *n = strtok(NULL, " \t\n");
            fk.ngpu = n != NULL ? (unsigned)strtoul(n, NULL, 10) : 0;
            if (fk.ngpu > FAKE_GPUS)
                rc = bad(path, ln, "too many gpus");
        } else if (strcmp(key, "init") == 0) {
            char *n = strtok(NULL, " \t\n");
            if (n == NULL || code_of(n, &fk.init) < 0)
                rc = bad(path, ln, "init: unknown NVML error name");
        } else if (strcmp(key, "gpu") == 0) {
            rc = parse_gpu_line(path, ln, rest);
        } else {
            rc = bad(path, ln, "unknown line");
        }
    }
    fclose(f);
    return rc == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

static fake_gpu *gpu_of(nvmlDevice_t d)
{
    fake_gpu *g = (fake_gpu *)(void *)d;
    return g >= fk.gpu && g < fk.gpu + fk.ngpu ? g : NULL;
}

static bool is_lost(const fake_gpu *g)
{
    return g->lost_at > 0 && g->field_calls >= g->lost_at;
}

/* The answer of a reading: lost, scripted failure, or success. */
#define CHECK_GPU(dev, reading)                                                   \
    fake_gpu *g = gpu_of(dev);                                                    \
    if (g == NULL || !fk.initialized)                                             \
        return fk.initialized ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED; \
    if (is_lost(g))                                                               \
        return NVML_ERROR_GPU_IS_LOST;                                            \
    if (g->fail[reading] != NVML_SUCCESS)                                         \
        return g->fail[reading];

nvmlReturn_t nvmlInit_v2(void)
{
    calls_nvmlInit_v2++;
    nvmlReturn_t r = load_script();
    if (r == NVML_SUCCESS && fk.init != NVML_SUCCESS)
        r = fk.init;
    fk.initialized = r == NVML_SUCCESS;
    clock_gettime(CLOCK_MONOTONIC, &fk.init_at);
    return r;
}

nvmlReturn_t nvmlShutdown(void)
{
    calls_nvmlShutdown++;
    const char *out = getenv("HM_FAKE_NVML_CALLS");
    if (out != NULL) {
        FILE *f = fopen(out, "w");
        if (f != NULL) {
#define X(name, ret, args) fprintf(f, "%s %ld\n", #name, calls_##name);
            HM_NVML_FUNCTIONS(X)
#ifndef HM_FAKE_NVML_NO_GPM
            HM_NVML_GPM_FUNCTIONS(X)
#endif
#undef X
            fprintf(f, "gpm_samples_live %ld\n", gpm_samples_live);
            fclose(f);
        }
    }
    fk.initialized = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
    calls_nvmlErrorString++;
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    calls_nvmlDeviceGetCount_v2++;
    if (!fk.initialized)
        return NVML_ERROR_UNINITIALIZED;
    *count = fk.ngpu;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    calls_nvmlDeviceGetHandleByIndex_v2++;
    if (!fk.initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= fk.ngpu)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fk.gpu[index].handle_fail != NVML_SUCCESS)
        return fk.gpu[index].handle_fail;
    *device = (nvmlDevice_t)(void *)&fk.gpu[index];
    return NVML_SUCCESS;
}

static void set_ull(nvmlFieldValue_t *v, unsigned long long x)
{
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    v->value.ullVal = x;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int n, nvmlFieldValue_t *values)
{
    calls_nvmlDeviceGetFieldValues++;
    fake_gpu *g0 = gpu_of(device);
    if (g0 != NULL)
        g0->field_calls++;
    CHECK_GPU(device, F_FIELDS)
    /* Counters advance at `step` per second since nvmlInit_v2, so a rate
     * read over any interval is `step`. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double since_s = (double)(now.tv_sec - fk.init_at.tv_sec) + (now.tv_nsec - fk.init_at.tv_nsec) / 1e9;
    for (int i = 0; i < n; i++) {
        nvmlFieldValue_t *v = &values[i];
        int k;
        switch (v->fieldId) {
        case NVML_FI_DEV_POWER_INSTANT: k = V_POWER; break;
        case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: k = V_ENERGY; break;
        case NVML_FI_DEV_ECC_SBE_VOL_TOTAL: k = V_ECC_SBE; break;
        case NVML_FI_DEV_ECC_DBE_VOL_TOTAL: k = V_ECC_DBE; break;
        case NVML_FI_DEV_PCIE_COUNT_TX_BYTES: k = V_PCIE_TX; break;
        case NVML_FI_DEV_PCIE_COUNT_RX_BYTES: k = V_PCIE_RX; break;
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: k = V_NVL_TX; break;
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: k = V_NVL_RX; break;
        default: v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT; continue;
        }
        if ((k == V_NVL_TX || k == V_NVL_RX) && v->scopeId != UINT_MAX) {
            v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
            continue;
        }
        v->nvmlReturn = g->fail[k];
        if (v->nvmlReturn == NVML_SUCCESS) {
            if (k == V_POWER) {
                v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
                v->value.uiVal = (unsigned)g->v[k];
            } else {
                set_ull(v, g->v[k] + (unsigned long long)(g->step[k] * since_s));
            }
        }
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u)
{
    calls_nvmlDeviceGetUtilizationRates++;
    CHECK_GPU(device, V_SM)
    u->gpu = (unsigned)g->v[V_SM];
    u->memory = (unsigned)g->v[V_MEMUTIL];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *m)
{
    calls_nvmlDeviceGetMemoryInfo++;
    CHECK_GPU(device, V_MEMUSED)
    m->total = g->v[V_MEMTOTAL];
    m->used = g->v[V_MEMUSED];
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *mhz)
{
    calls_nvmlDeviceGetClockInfo++;
    int k = type == NVML_CLOCK_SM ? V_SMCLK : V_MEMCLK;
    CHECK_GPU(device, k)
    *mhz = (unsigned)g->v[k];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *t)
{
    calls_nvmlDeviceGetTemperature++;
    CHECK_GPU(device, V_TEMP)
    if (sensor != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    *t = (unsigned)g->v[V_TEMP];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r)
{
    calls_nvmlDeviceGetCurrentClocksThrottleReasons++;
    CHECK_GPU(device, V_THROTTLE)
    *r = g->v[V_THROTTLE];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen)
{
    calls_nvmlDeviceGetMaxPcieLinkGeneration++;
    CHECK_GPU(device, V_PCIE_GEN)
    *gen = (unsigned)g->v[V_PCIE_GEN];
    return *gen > 0 ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *width)
{
    calls_nvmlDeviceGetMaxPcieLinkWidth++;
    CHECK_GPU(device, V_PCIE_WIDTH)
    *width = (unsigned)g->v[V_PCIE_WIDTH];
    return *width > 0 ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *n,
                                                     nvmlProcessInfo_t *infos)
{
    calls_nvmlDeviceGetComputeRunningProcesses_v3++;
    CHECK_GPU(device, F_PROCESSES)
    if (*n < (unsigned)g->nproc) {
        *n = (unsigned)g->nproc;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int i = 0; i < g->nproc; i++)
        infos[i] = (nvmlProcessInfo_t){g->proc[i].pid, g->proc[i].mem, 0, 0};
    *n = (unsigned)g->nproc;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *n,
                                                     nvmlProcessInfo_t *infos)
{
    calls_nvmlDeviceGetComputeRunningProcesses_v2++;
    return nvmlDeviceGetComputeRunningProcesses_v3(device, n, infos);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *u,
                                             unsigned int *n, unsigned long long last_seen_us)
{
    calls_nvmlDeviceGetProcessUtilization++;
    CHECK_GPU(device, F_PROCESS_UTIL)
    if (g->nproc == 0)
        return NVML_ERROR_NOT_FOUND;
    if (*n < (unsigned)g->nproc) {
        *n = (unsigned)g->nproc;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    /* One sample per process, newer than asked for. */
    for (int i = 0; i < g->nproc; i++)
        u[i] = (nvmlProcessUtilizationSample_t){g->proc[i].pid, last_seen_us + 1000 + (unsigned)i,
                                                g->proc[i].sm, g->proc[i].memutil, 0, 0};
    *n = (unsigned)g->nproc;
    return NVML_SUCCESS;
}

static int event_set_token;

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    calls_nvmlEventSetCreate++;
    if (!fk.initialized)
        return NVML_ERROR_UNINITIALIZED;
    *set = (nvmlEventSet_t)(void *)&event_set_token;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set)
{
    calls_nvmlDeviceRegisterEvents++;
    CHECK_GPU(device, F_EVENTS)
    if (set != (nvmlEventSet_t)(void *)&event_set_token)
        return NVML_ERROR_INVALID_ARGUMENT;
    g->events = (types & NVML_EVENT_TYPE_XID_CRITICAL_ERROR) != 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    calls_nvmlEventSetWait_v2++;
    (void)timeoutms;
    if (set != (nvmlEventSet_t)(void *)&event_set_token)
        return NVML_ERROR_INVALID_ARGUMENT;
    fk.waits++;
    for (int i = 0; i < fk.nxid; i++) {
        fake_xid *x = &fk.xid[i];
        if (!x->sent && fk.waits >= x->at && fk.gpu[x->gpu].events) {
            x->sent = true;
            memset(data, 0, sizeof *data);
            data->device = (nvmlDevice_t)(void *)&fk.gpu[x->gpu];
            data->eventType = NVML_EVENT_TYPE_XID_CRITICAL_ERROR;
            data->eventData = x->code;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    calls_nvmlEventSetFree++;
    return set == (nvmlEventSet_t)(void *)&event_set_token ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

#ifndef HM_FAKE_NVML_NO_GPM
/* A GPM sample: the GPU it was taken on and that GPU's sample count then,
 * so nvmlGpmMetricsGet can check the pair is one GPU's, older first. */
#define GPM_SAMPLE_MAGIC 0x67706d73u
typedef struct nvmlGpmSample_st {
    unsigned magic;
    fake_gpu *gpu;  /* NULL until taken */
    long seq;
} fake_sample;

static fake_sample *sample_of(nvmlGpmSample_t s)
{
    return s != NULL && s->magic == GPM_SAMPLE_MAGIC ? s : NULL;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *sup)
{
    calls_nvmlGpmQueryDeviceSupport++;
    /* `fail gpm` is nvmlGpmSampleGet's: the query itself answers. */
    fake_gpu *g = gpu_of(device);
    if (g == NULL || !fk.initialized)
        return fk.initialized ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    if (is_lost(g))
        return NVML_ERROR_GPU_IS_LOST;
    if (sup == NULL || sup->version != NVML_GPM_SUPPORT_VERSION)
        return NVML_ERROR_INVALID_ARGUMENT;
    sup->isSupportedDevice = g->gpm;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *out)
{
    calls_nvmlGpmSampleAlloc++;
    if (!fk.initialized)
        return NVML_ERROR_UNINITIALIZED;
    fake_sample *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NVML_ERROR_UNKNOWN;
    s->magic = GPM_SAMPLE_MAGIC;
    gpm_samples_live++;
    *out = s;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample)
{
    calls_nvmlGpmSampleFree++;
    fake_sample *s = sample_of(sample);
    if (s == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    s->magic = 0;
    free(s);
    gpm_samples_live--;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample)
{
    calls_nvmlGpmSampleGet++;
    CHECK_GPU(device, F_GPM)
    fake_sample *s = sample_of(sample);
    if (s == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->gpm)
        return NVML_ERROR_NOT_SUPPORTED;
    s->gpu = g;
    s->seq = ++g->gpm_samples;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *q)
{
    calls_nvmlGpmMetricsGet++;
    if (!fk.initialized)
        return NVML_ERROR_UNINITIALIZED;
    if (q == NULL || q->version != NVML_GPM_METRICS_GET_VERSION ||
        q->numMetrics > HM_NVML_GPM_METRICS_CAP)
        return NVML_ERROR_INVALID_ARGUMENT;
    const fake_sample *a = sample_of(q->sample1), *b = sample_of(q->sample2);
    /* Two samples of one GPU, the older first, as NVML requires. */
    if (a == NULL || b == NULL || a->gpu == NULL || a->gpu != b->gpu || a->seq >= b->seq)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (is_lost(a->gpu))
        return NVML_ERROR_GPU_IS_LOST;
    for (unsigned i = 0; i < q->numMetrics; i++) {
        nvmlGpmMetric_t *m = &q->metrics[i];
        m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        for (int k = 0; k < NG; k++)
            if (m->metricId == gpm_metric_id[k] && a->gpu->gpm_set[k]) {
                m->value = a->gpu->gpm_pct[k];
                m->nvmlReturn = NVML_SUCCESS;
            }
    }
    return NVML_SUCCESS;
}
#endif
