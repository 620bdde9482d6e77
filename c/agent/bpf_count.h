/* A software event counted on every CPU by a ten-instruction BPF program
 * into a per-CPU array, read with one bpf() call and no IPIs.
 *
 * Reading a CPU-bound perf_event from another CPU interrupts that CPU
 * (perf_event_read -> smp_call_function_single): on a full node, every
 * rank, every read. Here the event is opened per CPU with sample_period 1
 * and a BPF_PROG_TYPE_PERF_EVENT program as its overflow handler: each
 * event adds 1 to the CPU's slot of a BPF_MAP_TYPE_PERCPU_ARRAY on the CPU
 * where it happens (where the kernel is anyway), and reading the map
 * copies every CPU's slot from memory. The events are never read, so
 * nobody is interrupted. Needs CAP_BPF and CAP_PERFMON (root); without
 * them hm_bpf_count_open fails and the caller reads perf_events. */
#ifndef HM_BPF_COUNT_H
#define HM_BPF_COUNT_H

#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

typedef struct hm_bpf_count {
    int map_fd, prog_fd;
    int *event_fd; /* one per CPU, -1 offline */
    size_t ncpu;   /* CPUs with an event */
    size_t nslots; /* the map's per-CPU slots (possible CPUs) */
    uint64_t *values;
} hm_bpf_count;

/* Counts software event `config` (PERF_COUNT_SW_*) on CPUs 0..ncpu-1. */
int hm_bpf_count_open(hm_bpf_count *c, uint64_t config, size_t ncpu, hm_error *err);
/* The sum over all CPUs since open. */
int hm_bpf_count_read(hm_bpf_count *c, uint64_t *total, hm_error *err);
void hm_bpf_count_close(hm_bpf_count *c);

#endif
