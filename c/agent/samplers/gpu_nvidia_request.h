/* What the gpu_nvidia source asks NVML for each period, in its order: the
 * fields of its one nvmlDeviceGetFieldValues call and the GPM metrics of
 * its nvmlGpmMetricsGet. bench/nvml_call_cost.c times this same request,
 * so the two cannot drift apart. */
#ifndef HM_GPU_NVIDIA_REQUEST_H
#define HM_GPU_NVIDIA_REQUEST_H

#include <limits.h>

#include "nvml_api.h"

/* X(slot, NVML field id, short name) */
#define HM_GPU_FIELDS(X)                                                   \
    X(FV_POWER, NVML_FI_DEV_POWER_INSTANT, "POWER_INSTANT")                \
    X(FV_ENERGY, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, "TOTAL_ENERGY_CONSUMPTION") \
    X(FV_ECC_SBE, NVML_FI_DEV_ECC_SBE_VOL_TOTAL, "ECC_SBE_VOL_TOTAL")      \
    X(FV_ECC_DBE, NVML_FI_DEV_ECC_DBE_VOL_TOTAL, "ECC_DBE_VOL_TOTAL")      \
    X(FV_PCIE_TX, NVML_FI_DEV_PCIE_COUNT_TX_BYTES, "PCIE_COUNT_TX_BYTES")  \
    X(FV_PCIE_RX, NVML_FI_DEV_PCIE_COUNT_RX_BYTES, "PCIE_COUNT_RX_BYTES")  \
    X(FV_NVL_TX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, "NVLINK_THROUGHPUT_DATA_TX") \
    X(FV_NVL_RX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, "NVLINK_THROUGHPUT_DATA_RX")

/* X(slot, NVML GPM metric id) */
#define HM_GPU_GPM_METRICS(X)                                              \
    X(GPM_DRAM, NVML_GPM_METRIC_DRAM_BW_UTIL)                              \
    X(GPM_FP64, NVML_GPM_METRIC_FP64_UTIL)                                 \
    X(GPM_FP32, NVML_GPM_METRIC_FP32_UTIL)                                 \
    X(GPM_FP16, NVML_GPM_METRIC_FP16_UTIL)                                 \
    X(GPM_TENSOR, NVML_GPM_METRIC_ANY_TENSOR_UTIL)                         \
    X(GPM_OCC, NVML_GPM_METRIC_SM_OCCUPANCY)

#define HM_GPU_SLOT(slot, ...) slot,
#define HM_GPU_ID(slot, id, ...) id,
enum { HM_GPU_FIELDS(HM_GPU_SLOT) NFV };
enum { HM_GPU_GPM_METRICS(HM_GPU_SLOT) NGPM };

/* A field's scope: NVLink counters summed over all links, the others the
 * GPU itself (scope 0; power fields take it as "the whole GPU"). */
static inline unsigned hm_gpu_field_scope(unsigned field_id)
{
    return field_id == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX ||
                   field_id == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
               ? UINT_MAX
               : 0;
}

#endif
