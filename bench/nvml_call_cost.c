/* nvml_call_cost: what each NVML call the gpu_nvidia source makes in one
 * period costs, on this machine's GPUs: the CPU time of the calling thread
 * (CLOCK_THREAD_CPUTIME_ID) and the wall time, medians over --reps calls
 * spaced --gap-ms apart (the daemon calls once a period, with cold caches,
 * not back to back).
 *
 * The agent's own --measure-cost gives the source's total per sample; this
 * splits it by call, so a site can see which reading costs what before it
 * turns one off (gpu.gpm, gpu.process_every_ms). NVML is loaded with dlopen
 * as the agent does (nvml_api.h); without it the tool says so and exits 2.
 *
 *   nvml_call_cost [--reps N] [--gap-ms MS] [--gpu I] [--library PATH]
 *
 * Prints one line per call: name, median CPU us, median wall us, the share
 * of the period's CPU, and the call's return code where it failed; then the
 * field call again one field at a time. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../c/agent/samplers/gpu_nvidia_request.h"

#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_TEMPERATURE_GPU 0
#define MAX_REPS 10000
#define MAX_PROCS 256

typedef struct {
#define HM_NVML_MEMBER(name, ret, args) ret(*name) args;
    HM_NVML_FUNCTIONS(HM_NVML_MEMBER)
    HM_NVML_GPM_FUNCTIONS(HM_NVML_MEMBER)
#undef HM_NVML_MEMBER
} nvml_api;

/* One call under test: fills nothing the report reads, returns NVML's code. */
typedef struct call_ctx {
    nvml_api *f;
    /* Not called by gpu_nvidia: the function forms of its power and energy
     * fields, to compare (NULL where the library lacks them). */
    nvmlReturn_t (*get_energy)(nvmlDevice_t, unsigned long long *energy_mj);
    nvmlReturn_t (*get_power)(nvmlDevice_t, unsigned int *power_mw);
    nvmlDevice_t dev;
    nvmlEventSet_t events;
    nvmlGpmSample_t gpm_sample[2];
    int gpm_next;
    nvmlGpmMetricsGet_t *gpm_req;
} call_ctx;

/* The fields gpu_nvidia asks for in its one nvmlDeviceGetFieldValues call. */
static const unsigned int field_ids[NFV] = {HM_GPU_FIELDS(HM_GPU_ID)};

/* first..first+count-1 of field_ids in one call, scoped as gpu_nvidia asks; a field's own return code
 * counts as the call's when it failed (a field the GPU lacks). */
static nvmlReturn_t field_values(call_ctx *c, int first, int count)
{
    nvmlFieldValue_t v[NFV];
    memset(v, 0, sizeof v);
    for (int k = 0; k < count; k++) {
        v[k].fieldId = field_ids[first + k];
        v[k].scopeId = hm_gpu_field_scope(v[k].fieldId);
    }
    nvmlReturn_t r = c->f->nvmlDeviceGetFieldValues(c->dev, count, v);
    for (int k = 0; r == NVML_SUCCESS && k < count; k++)
        if (v[k].nvmlReturn != NVML_SUCCESS)
            r = v[k].nvmlReturn;
    return r;
}

static nvmlReturn_t call_field_values(call_ctx *c, int field)
{
    return field < 0 ? field_values(c, 0, NFV) : field_values(c, field, 1);
}

static nvmlReturn_t call_energy_function(call_ctx *c, int unused)
{
    (void)unused;
    unsigned long long mj;
    return c->get_energy ? c->get_energy(c->dev, &mj) : NVML_ERROR_FUNCTION_NOT_FOUND;
}

static nvmlReturn_t call_power_function(call_ctx *c, int unused)
{
    (void)unused;
    unsigned int mw;
    return c->get_power ? c->get_power(c->dev, &mw) : NVML_ERROR_FUNCTION_NOT_FOUND;
}

static nvmlReturn_t call_utilization(call_ctx *c, int unused)
{
    (void)unused;
    nvmlUtilization_t u;
    return c->f->nvmlDeviceGetUtilizationRates(c->dev, &u);
}

static nvmlReturn_t call_memory(call_ctx *c, int unused)
{
    (void)unused;
    nvmlMemory_t m;
    return c->f->nvmlDeviceGetMemoryInfo(c->dev, &m);
}

static nvmlReturn_t call_clocks(call_ctx *c, int unused)
{
    (void)unused;
    unsigned int sm_mhz, mem_mhz;
    nvmlReturn_t r = c->f->nvmlDeviceGetClockInfo(c->dev, NVML_CLOCK_SM, &sm_mhz);
    return r != NVML_SUCCESS ? r : c->f->nvmlDeviceGetClockInfo(c->dev, NVML_CLOCK_MEM, &mem_mhz);
}

static nvmlReturn_t call_temperature(call_ctx *c, int unused)
{
    (void)unused;
    unsigned int t;
    return c->f->nvmlDeviceGetTemperature(c->dev, NVML_TEMPERATURE_GPU, &t);
}

static nvmlReturn_t call_throttle(call_ctx *c, int unused)
{
    (void)unused;
    unsigned long long reasons;
    return c->f->nvmlDeviceGetCurrentClocksThrottleReasons(c->dev, &reasons);
}

static nvmlReturn_t call_xid_events(call_ctx *c, int unused)
{
    (void)unused;
    if (!c->events)
        return NVML_ERROR_NOT_SUPPORTED;
    nvmlEventData_t d;
    nvmlReturn_t r = c->f->nvmlEventSetWait_v2(c->events, &d, 0);
    return r == NVML_ERROR_TIMEOUT ? NVML_SUCCESS : r; /* none waiting: the usual case */
}

static nvmlReturn_t call_processes(call_ctx *c, int unused)
{
    (void)unused;
    nvmlProcessInfo_t p[MAX_PROCS];
    unsigned int n = MAX_PROCS;
    return c->f->nvmlDeviceGetComputeRunningProcesses_v3(c->dev, &n, p);
}

static nvmlReturn_t call_process_utilization(call_ctx *c, int unused)
{
    (void)unused;
    nvmlProcessUtilizationSample_t s[MAX_PROCS];
    unsigned int n = MAX_PROCS;
    nvmlReturn_t r = c->f->nvmlDeviceGetProcessUtilization(c->dev, s, &n, 0);
    return r == NVML_ERROR_NOT_FOUND ? NVML_SUCCESS : r; /* no process ran: nothing to read */
}

static nvmlReturn_t call_gpm_sample(call_ctx *c, int unused)
{
    (void)unused;
    if (!c->gpm_sample[0])
        return NVML_ERROR_NOT_SUPPORTED;
    c->gpm_next ^= 1;
    return c->f->nvmlGpmSampleGet(c->dev, c->gpm_sample[c->gpm_next]);
}

static nvmlReturn_t call_gpm_metrics(call_ctx *c, int unused)
{
    (void)unused;
    static const unsigned int ids[NGPM] = {HM_GPU_GPM_METRICS(HM_GPU_ID)};
    if (!c->gpm_sample[0])
        return NVML_ERROR_NOT_SUPPORTED;
    nvmlGpmMetricsGet_t *q = c->gpm_req;
    memset(q, 0, sizeof *q);
    q->version = NVML_GPM_METRICS_GET_VERSION;
    q->numMetrics = NGPM;
    q->sample1 = c->gpm_sample[c->gpm_next ^ 1];
    q->sample2 = c->gpm_sample[c->gpm_next];
    for (unsigned k = 0; k < q->numMetrics; k++)
        q->metrics[k].metricId = ids[k];
    return c->f->nvmlGpmMetricsGet(q);
}

typedef struct {
    const char *name;
    nvmlReturn_t (*call)(call_ctx *, int arg);
    int arg; /* call_field_values: one field of field_ids alone; -1 all */
} nvml_call;

/* In the order gpu_nvidia's sample() makes them each period. */
static const nvml_call calls[] = {
    {"nvmlDeviceGetFieldValues (all fields)", call_field_values, -1},
    {"nvmlDeviceGetUtilizationRates", call_utilization, 0},
    {"nvmlDeviceGetMemoryInfo", call_memory, 0},
    {"nvmlDeviceGetClockInfo (SM, memory)", call_clocks, 0},
    {"nvmlDeviceGetTemperature", call_temperature, 0},
    {"nvmlDeviceGetCurrentClocksThrottleReasons", call_throttle, 0},
    {"nvmlEventSetWait_v2 (XID, no wait)", call_xid_events, 0},
    {"nvmlGpmSampleGet", call_gpm_sample, 0},
    {"nvmlGpmMetricsGet (all metrics)", call_gpm_metrics, 0},
    {"nvmlDeviceGetComputeRunningProcesses_v3", call_processes, 0},
    {"nvmlDeviceGetProcessUtilization", call_process_utilization, 0},
    /* The field call split by field: which one costs what. */
#define FIELD_ALONE(slot, id, name) {"  field " name " alone", call_field_values, slot},
    HM_GPU_FIELDS(FIELD_ALONE)
#undef FIELD_ALONE
    /* Not in the period: the same readings through their own functions. */
    {"  nvmlDeviceGetTotalEnergyConsumption", call_energy_function, 0},
    {"  nvmlDeviceGetPowerUsage", call_power_function, 0},
};
enum { n_calls = sizeof calls / sizeof calls[0] };

static double now_us(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int parse_int(const char *flag, const char *text, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < lo || v > hi) {
        fprintf(stderr, "nvml_call_cost: %s wants an integer in %d..%d, not '%s'\n", flag, lo, hi,
                text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    int reps = 50, gap_ms = 100, gpu = 0;
    const char *library = "libnvidia-ml.so.1";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--reps") && v)
            bad = parse_int(a, v, 3, MAX_REPS, &reps), i++;
        else if (!strcmp(a, "--gap-ms") && v)
            bad = parse_int(a, v, 0, 60000, &gap_ms), i++;
        else if (!strcmp(a, "--gpu") && v)
            bad = parse_int(a, v, 0, 1023, &gpu), i++;
        else if (!strcmp(a, "--library") && v)
            library = v, i++;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: nvml_call_cost [--reps N] [--gap-ms MS] [--gpu I] [--library PATH]\n"
                   "The CPU and wall time of each NVML call hushmon-agent's gpu_nvidia source\n"
                   "makes in a period, and of each field of its field-values call alone\n"
                   "(medians of N calls MS apart; default 50, 100 ms; GPU 0;\n"
                   "libnvidia-ml.so.1). Exits 2 without NVML.\n");
            return 0;
        } else {
            fprintf(stderr, "usage: nvml_call_cost [--reps N] [--gap-ms MS] [--gpu I] "
                            "[--library PATH] (unknown or incomplete: '%s')\n",
                    a);
            return 2;
        }
        if (bad)
            return 2;
    }
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "nvml_call_cost: no NVML here (%s): nothing to measure\n", dlerror());
        return 2;
    }
    nvml_api f = {0};
#define HM_NVML_LOOKUP(name, ret, args) f.name = (ret(*) args)dlsym(lib, #name);
    HM_NVML_FUNCTIONS(HM_NVML_LOOKUP)
    HM_NVML_GPM_FUNCTIONS(HM_NVML_LOOKUP)
#undef HM_NVML_LOOKUP
    if (!f.nvmlInit_v2 || !f.nvmlDeviceGetHandleByIndex_v2 || !f.nvmlDeviceGetFieldValues) {
        fprintf(stderr, "nvml_call_cost: %s lacks the NVML functions the agent calls\n", library);
        return 2;
    }
    nvmlReturn_t r = f.nvmlInit_v2();
    if (r != NVML_SUCCESS) {
        fprintf(stderr, "nvml_call_cost: nvmlInit_v2: %s\n", f.nvmlErrorString(r));
        return 2;
    }
    call_ctx c = {.f = &f};
    *(void **)&c.get_energy = dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption");
    *(void **)&c.get_power = dlsym(lib, "nvmlDeviceGetPowerUsage");
    r = f.nvmlDeviceGetHandleByIndex_v2((unsigned)gpu, &c.dev);
    if (r != NVML_SUCCESS) {
        fprintf(stderr, "nvml_call_cost: GPU %d: %s\n", gpu, f.nvmlErrorString(r));
        f.nvmlShutdown();
        return 2;
    }
    if (f.nvmlEventSetCreate(&c.events) != NVML_SUCCESS ||
        f.nvmlDeviceRegisterEvents(c.dev, NVML_EVENT_TYPE_XID_CRITICAL_ERROR, c.events) !=
            NVML_SUCCESS)
        c.events = NULL;
    nvmlGpmSupport_t support = {.version = NVML_GPM_SUPPORT_VERSION};
    if (f.nvmlGpmQueryDeviceSupport && f.nvmlGpmQueryDeviceSupport(c.dev, &support) ==
                                           NVML_SUCCESS && support.isSupportedDevice) {
        c.gpm_req = calloc(1, sizeof *c.gpm_req);
        if (!c.gpm_req || f.nvmlGpmSampleAlloc(&c.gpm_sample[0]) != NVML_SUCCESS ||
            f.nvmlGpmSampleAlloc(&c.gpm_sample[1]) != NVML_SUCCESS ||
            f.nvmlGpmSampleGet(c.dev, c.gpm_sample[0]) != NVML_SUCCESS)
            c.gpm_sample[0] = NULL;
    }
    double *cpu_us = calloc((size_t)n_calls * reps, sizeof *cpu_us);
    double *wall_us = calloc((size_t)n_calls * reps, sizeof *wall_us);
    nvmlReturn_t failed[n_calls] = {0};
    if (!cpu_us || !wall_us) {
        fprintf(stderr, "nvml_call_cost: out of memory for %d reps\n", reps);
        return 2;
    }
    struct timespec gap = {.tv_sec = gap_ms / 1000, .tv_nsec = (gap_ms % 1000) * 1000000L};
    for (int rep = 0; rep < reps; rep++) {
        if (gap_ms)
            nanosleep(&gap, NULL);
        for (int k = 0; k < n_calls; k++) {
            double c0 = now_us(CLOCK_THREAD_CPUTIME_ID), w0 = now_us(CLOCK_MONOTONIC);
            r = calls[k].call(&c, calls[k].arg);
            wall_us[k * reps + rep] = now_us(CLOCK_MONOTONIC) - w0;
            cpu_us[k * reps + rep] = now_us(CLOCK_THREAD_CPUTIME_ID) - c0;
            if (r != NVML_SUCCESS)
                failed[k] = r;
        }
    }
    double med_cpu[n_calls], total_cpu = 0;
    for (int k = 0; k < n_calls; k++) {
        med_cpu[k] = median(cpu_us + k * reps, reps);
        if (calls[k].name[0] != ' ')
            total_cpu += med_cpu[k]; /* the period's calls; not the indented rows */
    }
    printf("# NVML calls of one gpu_nvidia period, GPU %d, %d reps %d ms apart (medians)\n", gpu,
           reps, gap_ms);
    printf("%-44s %10s %10s %7s\n", "call", "cpu_us", "wall_us", "share");
    for (int k = 0; k < n_calls; k++) {
        printf("%-44s %10.1f %10.1f %6.1f%%", calls[k].name, med_cpu[k],
               median(wall_us + k * reps, reps), total_cpu > 0 ? 100 * med_cpu[k] / total_cpu : 0);
        if (failed[k])
            printf("  (%s)", f.nvmlErrorString(failed[k]));
        printf("\n");
    }
    printf("%-44s %10.1f\n", "total", total_cpu);
    free(cpu_us);
    free(wall_us);
    for (int k = 0; k < 2; k++)
        if (c.gpm_sample[k])
            f.nvmlGpmSampleFree(c.gpm_sample[k]);
    free(c.gpm_req);
    if (c.events)
        f.nvmlEventSetFree(c.events);
    f.nvmlShutdown();
    return 0;
}
