/* What identifies a node type and sizes the probe's arrays: the CPU model
 * (/proc/cpuinfo), the online CPU count, the last-level cache, the memory
 * available. Read from root (normally "/"; a fixture tree in tests). */
#ifndef HM_PROBE_NODE_H
#define HM_PROBE_NODE_H

#include <stdint.h>

typedef struct hm_probe_node {
    char host[256];
    char cpu_model[256];     /* "model name" (x86), else "unknown" */
    long online_cpus;
    int64_t llc_bytes;       /* the largest data or unified cache of cpu0; 0 unknown */
    int64_t mem_available_bytes;  /* 0 unknown */
} hm_probe_node;

void hm_probe_node_read(hm_probe_node *n, const char *root);

#endif
