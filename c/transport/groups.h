/* The open (job, period) summaries of a reducer, and the messages they
 * hold unacknowledged.
 *
 * A message (a raw batch at rack level, a rack partial at top level) is
 * acknowledged only once every summary that contains it has been accepted
 * by the stream: each holds a reference to the message's reply subject.
 * No libnats here: acks go through a callback. */
#ifndef HM_GROUPS_H
#define HM_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"
#include "partial.h"
#include "strmap.h"

typedef struct hm_pending {
    int refs;      /* summaries still holding it */
    char reply[];  /* where the ack goes; "" when none (one allocation) */
} hm_pending;

typedef struct hm_group {
    hm_partial cur;          /* contents not yet published */
    bool has_data;           /* cur holds something to publish */
    hm_strmap seen;          /* every source merged in any emission (top level) */
    int64_t first_add_ns;    /* monotonic, of cur */
    int64_t last_add_ns;
    int64_t published_ns;    /* last emission, 0 if none */
    uint64_t emissions;
    hm_pending **pending;    /* messages in cur */
    size_t npending, cap_pending;
} hm_group;

typedef struct hm_groups {
    hm_strmap map;           /* "job\ttime_ns" -> hm_group* */
    size_t pending_msgs;     /* messages held unacked */
} hm_groups;

/* The group of (job, time_ns), created when missing. */
hm_group *hm_groups_get(hm_groups *g, const char *job, int64_t time_ns, hm_error *err);

/* A message to hold: refs 0 until attached to groups. */
hm_pending *hm_pending_new(hm_groups *g, const char *reply, hm_error *err);
/* The group holds the message until it publishes. */
int hm_group_hold(hm_group *grp, hm_pending *msg, hm_error *err);
/* A message no group holds is acknowledged (or, with term, terminated)
 * through ack() and freed. */
typedef void (*hm_ack_fn)(void *ctx, const char *reply, bool term);
void hm_pending_release_if_free(hm_groups *g, hm_pending *msg, hm_ack_fn ack, void *ctx);

/* After cur was accepted by the stream: releases its messages (acked when
 * no other group holds them) and empties cur for a later emission. */
int hm_group_published(hm_groups *g, hm_group *grp, int64_t now_ns, hm_ack_fn ack, void *ctx,
                       hm_error *err);

/* Groups whose cur is due: quiet for grace_ns since its last addition, or
 * held for max_hold_ns since its first; all of them when force. Calls fn
 * for each; stops at the first non-zero return (and returns it). */
typedef int (*hm_group_fn)(void *ctx, hm_group *grp);
int hm_groups_due(hm_groups *g, int64_t now_ns, int64_t grace_ns, int64_t max_hold_ns, bool force,
                  hm_group_fn fn, void *ctx);

/* How long the next pull may wait, in ms: until the first open group is
 * due (so it is published on time), at least min_ms, at most max_ms (no
 * open group: max_ms). */
int64_t hm_groups_pull_wait_ms(const hm_groups *g, int64_t now_ns, int64_t grace_ns,
                               int64_t max_hold_ns, int64_t min_ms, int64_t max_ms);

/* Forgets groups with nothing open whose last emission is older than
 * keep_ns (the window in which a late or duplicate message is recognized). */
void hm_groups_prune(hm_groups *g, int64_t now_ns, int64_t keep_ns);
size_t hm_groups_open(const hm_groups *g);
void hm_groups_free(hm_groups *g);

#endif
