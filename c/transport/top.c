/* The top reducer: rack partials in, job-wide summaries per (job, period)
 * out (docs/transport.md). A partial whose sources are all merged already
 * is a duplicate (dropped); one that shares only some is an overlap
 * (counted, logged, not merged: see docs/transport.md "Crashes"). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "groups.h"
#include "hm_heap.h"
#include "hm_log.h"
#include "nats_io.h"
#include "reduce.h"

#define NS_PER_MS ((int64_t)1000000)
#define NS_PER_S ((int64_t)1000000000)
#define LOG_EVERY_NS (10 * NS_PER_S)
#define TOP_DEFAULT_GRACE_MS 2000

typedef struct top {
    const hm_reduce_opts *o;
    hm_nats nats;
    hm_groups groups;
    uint64_t partials_in, merged, duplicates, overlaps, late, summaries, summaries_dup;
    uint64_t bad_partials, unknown_subject, publish_errors;
    int64_t last_log_ns;
    hm_reduce_upkeep upkeep;
} top;

static int64_t grace_ns(const top *t)
{
    return (t->o->grace_ms >= 0 ? t->o->grace_ms : TOP_DEFAULT_GRACE_MS) * NS_PER_MS;
}

static bool may_log(top *t)
{
    int64_t now = hm_reduce_now_ns();
    if (t->last_log_ns && now - t->last_log_ns < LOG_EVERY_NS)
        return false;
    t->last_log_ns = now;
    return true;
}

static int process(top *t, natsMsg *m, hm_error *err)
{
    const char *subject = natsMsg_GetSubject(m);
    const char *reply = natsMsg_GetReply(m);
    static const char prefix[] = "hm.sum.rack.";
    if (strncmp(subject, prefix, sizeof prefix - 1) != 0) {
        t->unknown_subject++;
        if (reply)
            hm_nats_ack(&t->nats, reply, true);
        return 0;
    }
    t->partials_in++;
    hm_partial p;
    char rack[128];
    hm_error perr;
    if (hm_partial_from_json(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &p, rack, sizeof rack,
                             &perr) != 0) {
        t->bad_partials++;
        if (may_log(t))
            hm_log_warn("partial on %s refused: %s", subject, perr.msg);
        if (reply)
            hm_nats_ack(&t->nats, reply, true);
        return 0;
    }
    hm_group *grp = hm_groups_get(&t->groups, p.job, p.time_ns, err);
    if (grp == NULL) {
        hm_partial_free(&p);
        return -1;
    }
    size_t seen = 0;
    for (size_t i = 0; i < p.sources.cap; i++)
        if (p.sources.slots[i].key &&
            hm_strmap_find(&grp->seen, p.sources.slots[i].key, p.sources.slots[i].len))
            seen++;
    if (seen > 0) {
        if (seen == p.sources.count) {
            t->duplicates++;
        } else {
            t->overlaps++;
            if (may_log(t))
                hm_log_warn("partial of rack %s for job %s period %" PRId64 " shares %zu of its %zu "
                            "sources with what is merged: not merged (overlap %" PRIu64 ")",
                            rack, p.job, p.time_ns, seen, p.sources.count, t->overlaps);
        }
        hm_partial_free(&p);
        if (reply)
            hm_nats_ack(&t->nats, reply, false);
        return 0;
    }
    int rc = hm_partial_merge(&grp->cur, &p, err);
    for (size_t i = 0; rc == 0 && i < p.sources.cap; i++) {
        int added;
        if (p.sources.slots[i].key &&
            hm_strmap_upsert(&grp->seen, p.sources.slots[i].key, p.sources.slots[i].len, &added) == NULL)
            rc = hm_error_set(err, "out of memory");
    }
    hm_partial_free(&p);
    if (rc != 0)
        return -1;
    int64_t now = hm_reduce_now_ns();
    if (!grp->has_data)
        grp->first_add_ns = now;
    grp->has_data = true;
    grp->last_add_ns = now;
    t->late += grp->emissions > 0;
    t->merged++;
    hm_pending *msg = hm_pending_new(&t->groups, reply, err);
    if (msg == NULL || hm_group_hold(grp, msg, err) != 0)
        return -1;
    return 0;
}

static int publish_group(void *ctx, hm_group *grp)
{
    top *t = ctx;
    hm_error err;
    char *json = NULL;
    size_t len = 0;
    char id[768], subject[300], token[256];
    bool dup = false;
    hm_reduce_subject_token(token, sizeof token, grp->cur.job);
    snprintf(subject, sizeof subject, "hm.sum.job.%s", token);
    if (hm_partial_to_json(&grp->cur, "job", NULL, &json, &len, &err) != 0 ||
        hm_partial_msg_id(&grp->cur, "job", id, sizeof id, &err) != 0 ||
        hm_nats_publish(&t->nats, subject, id, json, len, &dup, &err) != 0) {
        free(json);
        t->publish_errors++;
        if (may_log(t))
            hm_log_warn("publishing job %s period %" PRId64 ": %s (kept, retried)", grp->cur.job,
                        grp->cur.time_ns, err.msg);
        return 1;
    }
    free(json);
    t->summaries++;
    t->summaries_dup += dup;
    if (hm_group_published(&t->groups, grp, hm_reduce_now_ns(), hm_nats_ack, &t->nats, &err) != 0) {
        hm_log_warn("after publishing: %s", err.msg);
        return 1;
    }
    return 0;
}

static int64_t max_hold_ns(const top *t)
{
    return hm_reduce_max_hold_ns(grace_ns(t), t->nats.ack_wait_ns);
}

static void print_stats(top *t, const char *what, double dt_s, uint64_t d_in)
{
    fprintf(stderr,
            "hushmon-reduce: %s level=top partials_in=%" PRIu64 " partials_per_s=%.0f merged=%" PRIu64
            " duplicates=%" PRIu64 " overlaps=%" PRIu64 " late=%" PRIu64 " summaries=%" PRIu64
            " summaries_dup=%" PRIu64 " bad_partials=%" PRIu64 " unknown_subject=%" PRIu64
            " publish_errors=%" PRIu64 " fetch_errors=%" PRIu64 " consumer_missing=%" PRIu64
            " ack_errors=%" PRIu64 " pull_requests=%" PRIu64 " pull_stale=%" PRIu64
            " pull_lost=%" PRIu64 " open_groups=%zu held_msgs=%zu grace_ms=%" PRId64
            " cpu_s=%.3f heap_mib=%.1f heap_trims=%" PRIu64 "\n",
            what, t->partials_in, dt_s > 0 ? (double)d_in / dt_s : 0.0, t->merged, t->duplicates,
            t->overlaps, t->late, t->summaries, t->summaries_dup, t->bad_partials, t->unknown_subject,
            t->publish_errors, t->nats.fetch_errors, t->nats.consumer_missing, t->nats.ack_errors,
            t->nats.pull.requests, t->nats.pull.stale_status, t->nats.pull.lost,
            hm_groups_open(&t->groups), t->groups.pending_msgs,
            (int64_t)(grace_ns(t) / NS_PER_MS), hm_reduce_cpu_s(),
            hm_heap_in_use_mib(), t->upkeep.heap_trims);
}

int hm_reduce_top(const hm_reduce_opts *o, volatile sig_atomic_t *stop, hm_error *err)
{
    top t;
    memset(&t, 0, sizeof t);
    t.o = o;
    if (hm_nats_connect(&t.nats, o->url, "hushmon-reduce top", err) != 0 ||
        hm_nats_pull(&t.nats, "HM_SUM", "reduce-top", "hm.sum.rack.>", err) != 0) {
        hm_nats_close(&t.nats);
        return -1;
    }
    hm_log_notice("top: consuming hm.sum.rack.> as reduce-top from %s", o->url);
    int64_t start = hm_reduce_now_ns(), last_stats = start;
    uint64_t stats_in = 0;
    int rc = 0;
    hm_col msgs; /* natsMsg* of one pull */
    hm_col_init(&msgs, sizeof(natsMsg *));
    while (!*stop && rc == 0) {
        int64_t wait_ms = hm_groups_pull_wait_ms(&t.groups, hm_reduce_now_ns(), grace_ns(&t),
                                                 max_hold_ns(&t), HM_REDUCE_PULL_MIN_MS,
                                                 HM_REDUCE_PULL_MAX_MS);
        if (hm_nats_fetch(&t.nats, &msgs, (int)o->fetch_batch, wait_ms, err) != 0) {
            rc = -1; /* fatal (transient errors are retried inside): exit non-zero */
            break;
        }
        natsMsg **got = msgs.p;
        for (size_t i = 0; i < msgs.n; i++) {
            if (rc == 0)
                rc = process(&t, got[i], err);
            natsMsg_Destroy(got[i]);
        }
        msgs.n = 0;
        int64_t now = hm_reduce_now_ns();
        hm_groups_due(&t.groups, now, grace_ns(&t), max_hold_ns(&t), false, publish_group, &t);
        hm_reduce_upkeep_run(&t.upkeep, &t.groups, now, o->keep_s);
        if (o->stats_every_s > 0 && now - last_stats >= o->stats_every_s * NS_PER_S) {
            print_stats(&t, "stats", (double)(now - last_stats) / 1e9, t.partials_in - stats_in);
            last_stats = now;
            stats_in = t.partials_in;
        }
    }
    natsMsg **left = msgs.p; /* after a fatal pull error: what it appended */
    for (size_t i = 0; i < msgs.n; i++)
        natsMsg_Destroy(left[i]);
    hm_col_free(&msgs);
    int64_t deadline = hm_reduce_now_ns() + 10 * NS_PER_S;
    while (hm_groups_open(&t.groups) > 0 && hm_reduce_now_ns() < deadline)
        hm_groups_due(&t.groups, hm_reduce_now_ns(), 0, 0, true, publish_group, &t);
    print_stats(&t, "final", (double)(hm_reduce_now_ns() - start) / 1e9, t.partials_in);
    hm_nats_close(&t.nats);
    hm_groups_free(&t.groups);
    return rc;
}
