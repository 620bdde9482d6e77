/* Per-device state (disks, interfaces, IB ports) in a table sized once.
 *
 * Devices are found by name every period, usually at the same position as
 * last time, so the lookup starts there. A device that disappeared frees
 * its slot for a new one; when every slot is taken by live devices the new
 * one is not sampled, and the caller logs that once. */
#ifndef HM_ENTITY_H
#define HM_ENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

#define HM_ENTITY_NAME_MAX 64
#define HM_ENTITY_COUNTERS 16

typedef struct hm_entity {
    bool used;
    bool have_prev;
    char name[HM_ENTITY_NAME_MAX];
    int64_t prev_mono_ns;
    int64_t seen_stamp;       /* the sample that last saw it */
    uint64_t prev[HM_ENTITY_COUNTERS];
    int flags;                /* source-specific (e.g. "is a partition") */
} hm_entity;

typedef struct hm_entity_table {
    hm_entity *e;
    size_t cap;
    size_t hint;
} hm_entity_table;

int hm_entity_table_init(hm_entity_table *t, size_t cap, hm_error *err);
void hm_entity_table_free(hm_entity_table *t);
/* The entity called name (len bytes), created if new; NULL if full.
 * *created tells the caller to fill in flags. */
hm_entity *hm_entity_get(hm_entity_table *t, const char *name, size_t len, int64_t stamp,
                         bool *created);

#endif
