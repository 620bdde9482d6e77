/* A hash map from byte strings (copied in) to pointers: sensors of a
 * summary, (job, period) groups, per-node counters, merged sources. Open
 * addressing (linear probing, backward-shift removal), FNV-1a. */
#ifndef HM_STRMAP_H
#define HM_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"

typedef struct hm_strmap_slot {
    char *key;      /* NUL-terminated copy; NULL = empty slot */
    uint32_t len;
    uint64_t hash;
    void *value;
} hm_strmap_slot;

typedef struct hm_strmap {
    hm_strmap_slot *slots;
    size_t cap;   /* power of two, or 0 */
    size_t count;
    bool keys_in_arena; /* keys were copied into an arena (not freed here) */
} hm_strmap;

/* a[0..n) == b[0..n), inline: the names and keys compared per value are
 * short, and a call to memcmp per field costs more than the compare. */
static inline int hm_same_bytes(const char *a, const char *b, size_t n)
{
    while (n >= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
        a += 8, b += 8, n -= 8;
    }
    while (n--)
        if (*a++ != *b++)
            return 0;
    return 1;
}

uint64_t hm_fnv1a(const void *data, size_t len, uint64_t seed);
#define HM_FNV_SEED 0xcbf29ce484222325ull

/* The slot of key, or NULL. */
hm_strmap_slot *hm_strmap_find(const hm_strmap *m, const char *key, size_t len);
/* The slot of key, added (value NULL) if missing; NULL only when memory
 * runs out. *added says which. */
hm_strmap_slot *hm_strmap_upsert(hm_strmap *m, const char *key, size_t len, int *added);
/* The same, the key copied into arena, which must outlive the map; a map
 * takes its keys from upsert or from upsert_in, never both. */
hm_strmap_slot *hm_strmap_upsert_in(hm_strmap *m, hm_arena *arena, const char *key, size_t len,
                                    int *added);
/* Removes a slot found by find/upsert (its key freed, its value the
 * caller's); other slots may move, so do not iterate while removing. */
void hm_strmap_remove(hm_strmap *m, hm_strmap_slot *slot);
/* Frees the keys and the table (values are the caller's). */
void hm_strmap_free(hm_strmap *m);

#endif
