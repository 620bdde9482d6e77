#include "entity.h"

#include <stdlib.h>
#include <string.h>

int hm_entity_table_init(hm_entity_table *t, size_t cap, hm_error *err)
{
    t->e = calloc(cap, sizeof *t->e);
    if (t->e == NULL)
        return hm_error_set(err, "out of memory for %zu devices", cap);
    t->cap = cap;
    t->hint = 0;
    return 0;
}

void hm_entity_table_free(hm_entity_table *t)
{
    free(t->e);
    t->e = NULL;
    t->cap = 0;
}

static bool name_is(const hm_entity *e, const char *name, size_t len)
{
    return e->used && strncmp(e->name, name, len) == 0 && e->name[len] == '\0';
}

hm_entity *hm_entity_get(hm_entity_table *t, const char *name, size_t len, int64_t stamp,
                         bool *created)
{
    *created = false;
    if (len >= HM_ENTITY_NAME_MAX)
        len = HM_ENTITY_NAME_MAX - 1;
    for (size_t k = 0; k < t->cap; k++) {
        size_t i = (t->hint + k) % t->cap;
        if (name_is(&t->e[i], name, len)) {
            t->hint = i + 1;
            t->e[i].seen_stamp = stamp;
            return &t->e[i];
        }
    }
    /* New device: a free slot, or one whose device was not seen last time. */
    hm_entity *slot = NULL;
    for (size_t i = 0; i < t->cap && slot == NULL; i++)
        if (!t->e[i].used)
            slot = &t->e[i];
    for (size_t i = 0; i < t->cap && slot == NULL; i++)
        if (t->e[i].seen_stamp < stamp - 1) /* gone since before the last sample */
            slot = &t->e[i];
    if (slot == NULL)
        return NULL;
    memset(slot, 0, sizeof *slot);
    slot->used = true;
    memcpy(slot->name, name, len);
    slot->name[len] = '\0';
    slot->seen_stamp = stamp;
    *created = true;
    return slot;
}
