/* The part of NVIDIA's NVML API that the gpu_nvidia source uses, written
 * from NVIDIA's public API reference (docs.nvidia.com/deploy/nvml-api):
 * types, constants and the signatures of the functions it looks up with
 * dlsym. hushmon has no build-time dependency on NVML; the fake library
 * of the tests (tests/fake_nvml/) implements these same symbols.
 *
 * Values below are NVML's published ABI (field ids "never change",
 * structure layouts are versioned by the _v2/_v3 function names). */
#ifndef HM_NVML_API_H
#define HM_NVML_API_H

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_NO_DATA = 20,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;    /* % of the last sample period with a kernel running */
    unsigned int memory; /* % of it with device memory being read or written */
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
    unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;

/* nvmlDeviceGetComputeRunningProcesses_v2 and _v3 both fill this layout. */
typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes; NVML_VALUE_NOT_AVAILABLE if unknown */
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp; /* CPU time stamp, microseconds */
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

typedef enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
} nvmlValueType_t;

typedef union nvmlValue_st {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;   /* a link for NVLink fields; UINT_MAX = all links */
    long long timestamp;    /* microseconds since 1970 */
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn; /* per field: check before reading value */
    nvmlValue_t value;
} nvmlFieldValue_t;

/* Field ids (nvmlDeviceGetFieldValues). */
#define NVML_FI_DEV_ECC_SBE_VOL_TOTAL 3
#define NVML_FI_DEV_ECC_DBE_VOL_TOTAL 4
#define NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION 83 /* mJ since the driver loaded */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138 /* KiB, counter */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
#define NVML_FI_DEV_POWER_INSTANT 186 /* mW */
#define NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197 /* bytes, counter */
#define NVML_FI_DEV_PCIE_COUNT_RX_BYTES 198

enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };
enum { NVML_TEMPERATURE_GPU = 0 };

/* nvmlDeviceGetCurrentClocksThrottleReasons bits. */
#define NVML_THROTTLE_GPU_IDLE 0x1ULL
#define NVML_THROTTLE_APP_CLOCKS 0x2ULL
#define NVML_THROTTLE_SW_POWER_CAP 0x4ULL
#define NVML_THROTTLE_HW_SLOWDOWN 0x8ULL
#define NVML_THROTTLE_SYNC_BOOST 0x10ULL
#define NVML_THROTTLE_SW_THERMAL 0x20ULL
#define NVML_THROTTLE_HW_THERMAL 0x40ULL
#define NVML_THROTTLE_HW_POWER_BRAKE 0x80ULL

/* nvmlEventSetWait_v2 */
#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x8ULL
typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData; /* the XID */
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

/* GPU Performance Monitoring (GPM): Hopper and newer, drivers from R520.
 * Two samples of the GPU's counters, taken with nvmlGpmSampleGet into
 * buffers from nvmlGpmSampleAlloc, give metrics over the time between
 * them (nvmlGpmMetricsGet). Metric ids and struct layouts as published in
 * NVML's API reference (GPM Enums, GPM Structs). */
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;

#define NVML_GPM_SUPPORT_VERSION 1
typedef struct nvmlGpmSupport_st {
    unsigned int version;           /* in: NVML_GPM_SUPPORT_VERSION */
    unsigned int isSupportedDevice; /* out: nonzero where the GPU has GPM */
} nvmlGpmSupport_t;

/* Percentages (0-100) over the interval between the two samples. */
enum {
    NVML_GPM_METRIC_SM_OCCUPANCY = 3,    /* active warps / the SMs' maximum */
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5, /* time the SMs did any tensor operation */
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10,   /* DRAM bandwidth used / its theoretical maximum */
    NVML_GPM_METRIC_FP64_UTIL = 11,      /* time the SMs did non-tensor FP64 math */
    NVML_GPM_METRIC_FP32_UTIL = 12,
    NVML_GPM_METRIC_FP16_UTIL = 13,
};

typedef struct nvmlGpmMetric_st {
    unsigned int metricId;   /* in */
    nvmlReturn_t nvmlReturn; /* out, per metric: value is valid only on NVML_SUCCESS */
    double value;            /* out */
    struct {
        char *shortName, *longName, *unit; /* out, owned by NVML, may be NULL */
    } metricInfo;
} nvmlGpmMetric_t;

/* NVML's header sizes metrics[] with NVML_GPM_METRIC_MAX, which grows
 * with the driver (98 in R525, 333 in R550); NVML reads and writes only
 * the first numMetrics entries, so any size at least numMetrics is the
 * same layout up to there. hushmon takes the largest published one. */
#define HM_NVML_GPM_METRICS_CAP 333
#define NVML_GPM_METRICS_GET_VERSION 1
typedef struct nvmlGpmMetricsGet_st {
    unsigned int version;    /* in: NVML_GPM_METRICS_GET_VERSION */
    unsigned int numMetrics; /* in: entries of metrics[] asked for */
    nvmlGpmSample_t sample1; /* in: the older sample */
    nvmlGpmSample_t sample2; /* in: the newer sample */
    nvmlGpmMetric_t metrics[HM_NVML_GPM_METRICS_CAP];
} nvmlGpmMetricsGet_t;

/* Every function, as X(name, return, arguments): expanded into function
 * pointer members by the source and into definitions by the fake. */
#define HM_NVML_FUNCTIONS(X)                                                                     \
    X(nvmlInit_v2, nvmlReturn_t, (void))                                                          \
    X(nvmlShutdown, nvmlReturn_t, (void))                                                         \
    X(nvmlErrorString, const char *, (nvmlReturn_t result))                                       \
    X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *count))                                 \
    X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int index, nvmlDevice_t *device))    \
    X(nvmlDeviceGetFieldValues, nvmlReturn_t,                                                     \
      (nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values))                           \
    X(nvmlDeviceGetUtilizationRates, nvmlReturn_t,                                                \
      (nvmlDevice_t device, nvmlUtilization_t *utilization))                                      \
    X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_t *memory))         \
    X(nvmlDeviceGetClockInfo, nvmlReturn_t,                                                       \
      (nvmlDevice_t device, int type, unsigned int *clock_mhz))                                   \
    X(nvmlDeviceGetTemperature, nvmlReturn_t,                                                     \
      (nvmlDevice_t device, int sensor, unsigned int *temp_c))                                    \
    X(nvmlDeviceGetCurrentClocksThrottleReasons, nvmlReturn_t,                                    \
      (nvmlDevice_t device, unsigned long long *reasons))                                         \
    X(nvmlDeviceGetMaxPcieLinkGeneration, nvmlReturn_t,                                           \
      (nvmlDevice_t device, unsigned int *gen))                                                   \
    X(nvmlDeviceGetMaxPcieLinkWidth, nvmlReturn_t, (nvmlDevice_t device, unsigned int *width))    \
    X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                                      \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                   \
    X(nvmlDeviceGetComputeRunningProcesses_v2, nvmlReturn_t,                                      \
      (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                   \
    X(nvmlDeviceGetProcessUtilization, nvmlReturn_t,                                              \
      (nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,                          \
       unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp))                  \
    X(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t *set))                                    \
    X(nvmlDeviceRegisterEvents, nvmlReturn_t,                                                     \
      (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set))                   \
    X(nvmlEventSetWait_v2, nvmlReturn_t,                                                          \
      (nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms))                        \
    X(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t set))

/* The GPM functions, a list of their own: a driver before R520 has none
 * of them (the source then leaves their fields out), and the fake NVML
 * builds a variant without them (tests/fake_nvml). */
#define HM_NVML_GPM_FUNCTIONS(X)                                                                 \
    X(nvmlGpmQueryDeviceSupport, nvmlReturn_t,                                                    \
      (nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport))                                        \
    X(nvmlGpmSampleAlloc, nvmlReturn_t, (nvmlGpmSample_t *gpmSample))                             \
    X(nvmlGpmSampleFree, nvmlReturn_t, (nvmlGpmSample_t gpmSample))                               \
    X(nvmlGpmSampleGet, nvmlReturn_t, (nvmlDevice_t device, nvmlGpmSample_t gpmSample))           \
    X(nvmlGpmMetricsGet, nvmlReturn_t, (nvmlGpmMetricsGet_t *metricsGet))

#endif
