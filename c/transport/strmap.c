#include "strmap.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

uint64_t hm_fnv1a(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The table's hash: 8 bytes at a time (FNV's byte loop is a chain of
 * multiplies, too slow per value). */
static uint64_t key_hash(const char *key, size_t len)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, key + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    uint64_t w = 0;
    memcpy(&w, key + i, len - i);
    h = (h ^ w) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

static hm_strmap_slot *probe(hm_strmap_slot *slots, size_t cap, const char *key, size_t len,
                             uint64_t hash)
{
    size_t i = (size_t)hash & (cap - 1);
    for (;;) {
        hm_strmap_slot *s = &slots[i];
        if (s->key == NULL || (s->hash == hash && s->len == len && hm_same_bytes(s->key, key, len)))
            return s;
        i = (i + 1) & (cap - 1);
    }
}

hm_strmap_slot *hm_strmap_find(const hm_strmap *m, const char *key, size_t len)
{
    if (m->cap == 0)
        return NULL;
    hm_strmap_slot *s = probe(m->slots, m->cap, key, len, key_hash(key, len));
    return s->key ? s : NULL;
}

static int grow(hm_strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    hm_strmap_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        hm_strmap_slot *old = &m->slots[i];
        if (old->key)
            *probe(slots, cap, old->key, old->len, old->hash) = *old;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

static hm_strmap_slot *upsert(hm_strmap *m, hm_arena *arena, const char *key, size_t len, int *added);

hm_strmap_slot *hm_strmap_upsert(hm_strmap *m, const char *key, size_t len, int *added)
{
    return upsert(m, NULL, key, len, added);
}

hm_strmap_slot *hm_strmap_upsert_in(hm_strmap *m, hm_arena *arena, const char *key, size_t len,
                                    int *added)
{
    m->keys_in_arena = true;
    return upsert(m, arena, key, len, added);
}

static hm_strmap_slot *upsert(hm_strmap *m, hm_arena *arena, const char *key, size_t len, int *added)
{
    *added = 0;
    if ((m->count + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return NULL;
    uint64_t hash = key_hash(key, len);
    hm_strmap_slot *s = probe(m->slots, m->cap, key, len, hash);
    if (s->key)
        return s;
    char *copy = arena ? hm_arena_alloc(arena, len + 1) : malloc(len + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, key, len);
    copy[len] = '\0';
    s->key = copy;
    s->len = (uint32_t)len;
    s->hash = hash;
    s->value = NULL;
    m->count++;
    *added = 1;
    return s;
}

void hm_strmap_remove(hm_strmap *m, hm_strmap_slot *slot)
{
    size_t mask = m->cap - 1, i = (size_t)(slot - m->slots);
    if (!m->keys_in_arena)
        free(slot->key);
    slot->key = NULL;
    m->count--;
    /* Backward shift: pull later members of the probe run into the hole
     * when their home slot does not lie between the hole and them. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        hm_strmap_slot *s = &m->slots[j];
        if (s->key == NULL)
            return;
        size_t home = (size_t)s->hash & mask;
        bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (between)
            continue;
        m->slots[i] = *s;
        s->key = NULL;
        i = j;
    }
}

void hm_strmap_free(hm_strmap *m)
{
    for (size_t i = 0; m->keys_in_arena == false && i < m->cap; i++)
        free(m->slots[i].key);
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
    m->keys_in_arena = false;
}
