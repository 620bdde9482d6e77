#include "groups.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void group_free(hm_group *grp)
{
    hm_partial_free(&grp->cur);
    hm_strmap_free(&grp->seen);
    free(grp->pending);
    free(grp);
}

hm_group *hm_groups_get(hm_groups *g, const char *job, int64_t time_ns, hm_error *err)
{
    /* Key: the job, a tab, the time's 8 bytes (no formatting per batch). */
    char key[512];
    size_t jl = strlen(job);
    if (jl + 1 + sizeof time_ns > sizeof key) {
        hm_error_set(err, "job name too long (%zu bytes)", jl);
        return NULL;
    }
    memcpy(key, job, jl);
    key[jl] = '\t';
    memcpy(key + jl + 1, &time_ns, sizeof time_ns);
    size_t n = jl + 1 + sizeof time_ns;
    int added;
    hm_strmap_slot *slot = hm_strmap_upsert(&g->map, key, n, &added);
    if (slot == NULL) {
        hm_error_set(err, "out of memory for a group");
        return NULL;
    }
    if (!added)
        return slot->value;
    hm_group *grp = calloc(1, sizeof *grp);
    if (grp == NULL || hm_partial_init(&grp->cur, job, time_ns, err) != 0) {
        free(grp);
        hm_strmap_remove(&g->map, slot);
        hm_error_set(err, "out of memory for a group");
        return NULL;
    }
    slot->value = grp;
    return grp;
}

hm_pending *hm_pending_new(hm_groups *g, const char *reply, hm_error *err)
{
    size_t len = reply ? strlen(reply) : 0;
    hm_pending *msg = malloc(sizeof *msg + len + 1);
    if (msg == NULL) {
        hm_error_set(err, "out of memory holding a message");
        return NULL;
    }
    memcpy(msg->reply, reply ? reply : "", len + 1);
    msg->refs = 0;
    g->pending_msgs++;
    return msg;
}

int hm_group_hold(hm_group *grp, hm_pending *msg, hm_error *err)
{
    if (grp->npending == grp->cap_pending) {
        size_t cap = grp->cap_pending ? grp->cap_pending * 2 : 16;
        hm_pending **p = realloc(grp->pending, cap * sizeof *p);
        if (p == NULL)
            return hm_error_set(err, "out of memory holding a message");
        grp->pending = p;
        grp->cap_pending = cap;
    }
    grp->pending[grp->npending++] = msg;
    msg->refs++;
    return 0;
}

void hm_pending_release_if_free(hm_groups *g, hm_pending *msg, hm_ack_fn ack, void *ctx)
{
    if (msg->refs > 0)
        return;
    if (msg->reply[0])
        ack(ctx, msg->reply, false);
    free(msg);
    g->pending_msgs--;
}

int hm_group_published(hm_groups *g, hm_group *grp, int64_t now_ns, hm_ack_fn ack, void *ctx,
                       hm_error *err)
{
    for (size_t i = 0; i < grp->npending; i++) {
        hm_pending *msg = grp->pending[i];
        msg->refs--;
        hm_pending_release_if_free(g, msg, ack, ctx);
    }
    /* A published group is kept --keep-s (300 s) to recognize late and
     * duplicate messages, mostly never to hold one again: its array of
     * held messages (up to the rack's node count) goes now, not with it. */
    free(grp->pending);
    grp->pending = NULL;
    grp->npending = grp->cap_pending = 0;
    char *job = strdup(grp->cur.job);
    if (job == NULL)
        return hm_error_set(err, "out of memory");
    int64_t time_ns = grp->cur.time_ns;
    hm_partial_free(&grp->cur);
    int rc = hm_partial_init(&grp->cur, job, time_ns, err);
    free(job);
    grp->has_data = false;
    grp->published_ns = now_ns;
    grp->emissions++;
    return rc;
}

int hm_groups_due(hm_groups *g, int64_t now_ns, int64_t grace_ns, int64_t max_hold_ns, bool force,
                  hm_group_fn fn, void *ctx)
{
    for (size_t i = 0; i < g->map.cap; i++) {
        hm_group *grp = g->map.slots[i].key ? g->map.slots[i].value : NULL;
        if (grp == NULL || !grp->has_data)
            continue;
        if (force || now_ns - grp->last_add_ns >= grace_ns || now_ns - grp->first_add_ns >= max_hold_ns) {
            int rc = fn(ctx, grp);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

int64_t hm_groups_pull_wait_ms(const hm_groups *g, int64_t now_ns, int64_t grace_ns,
                               int64_t max_hold_ns, int64_t min_ms, int64_t max_ms)
{
    int64_t wait_ms = max_ms;
    for (size_t i = 0; i < g->map.cap; i++) {
        const hm_group *grp = g->map.slots[i].key ? g->map.slots[i].value : NULL;
        if (grp == NULL || !grp->has_data)
            continue;
        int64_t due = grp->last_add_ns + grace_ns;
        if (grp->first_add_ns + max_hold_ns < due)
            due = grp->first_add_ns + max_hold_ns;
        int64_t left_ms = (due - now_ns + 999999) / 1000000;
        if (left_ms < wait_ms)
            wait_ms = left_ms;
    }
    return wait_ms < min_ms ? min_ms : wait_ms;
}

void hm_groups_prune(hm_groups *g, int64_t now_ns, int64_t keep_ns)
{
    /* Removal moves slots: restart the scan after each (rare, small maps). */
    for (size_t i = 0; i < g->map.cap;) {
        hm_strmap_slot *slot = &g->map.slots[i];
        hm_group *grp = slot->key ? slot->value : NULL;
        if (grp && !grp->has_data && grp->npending == 0 && grp->published_ns > 0 &&
            now_ns - grp->published_ns > keep_ns) {
            group_free(grp);
            hm_strmap_remove(&g->map, slot);
            continue; /* the slot may now hold another group */
        }
        i++;
    }
}

size_t hm_groups_open(const hm_groups *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->map.cap; i++) {
        const hm_group *grp = g->map.slots[i].key ? g->map.slots[i].value : NULL;
        n += grp && grp->has_data;
    }
    return n;
}

void hm_groups_free(hm_groups *g)
{
    for (size_t i = 0; i < g->map.cap; i++)
        if (g->map.slots[i].key && g->map.slots[i].value)
            group_free(g->map.slots[i].value);
    hm_strmap_free(&g->map);
}
