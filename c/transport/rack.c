/* The rack reducer: raw batches of one rack in, partial summaries per
 * (job, period) out (docs/transport.md). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "groups.h"
#include "hm_heap.h"
#include "hm_log.h"
#include "lineproto.h"
#include "nats_io.h"
#include "reduce.h"

#define NS_PER_MS ((int64_t)1000000)
#define NS_PER_S ((int64_t)1000000000)
/* A node's bad input is logged at most this often (the counts go on). */
#define BAD_LOG_EVERY_NS (10 * NS_PER_S)

enum bad_reason { BAD_LINES, BAD_MALFORMED, BAD_OVERSIZED, BAD_HOST, BAD_HEADERS, BAD_N };
static const char *const bad_name[BAD_N] = {"bad_lines", "bad_malformed", "bad_oversized",
                                            "bad_host", "bad_headers"};

typedef struct node_bad {
    uint64_t count[BAD_N];
    int64_t last_log_ns;
    uint64_t unlogged;
} node_bad;

typedef struct rack {
    const hm_reduce_opts *o;
    hm_nats nats;
    hm_groups groups;
    hm_strmap nodes; /* host -> node_bad* */
    char raw_prefix[256];
    char sum_subject[256];
    hm_batch_reader reader;
    uint64_t batches, lines, partials, partials_dup, late, unknown_subject, publish_errors;
    uint64_t bad[BAD_N];
    int64_t last_publish_error_log_ns;
    hm_reduce_upkeep upkeep;
} rack;

static int64_t grace_ns(const rack *r)
{
    int64_t period_ms = r->reader.period_ms > 0 ? r->reader.period_ms : 1000;
    return (r->o->grace_ms >= 0 ? r->o->grace_ms : 2 * period_ms) * NS_PER_MS;
}

static int64_t max_hold_ns(const rack *r)
{
    return hm_reduce_max_hold_ns(grace_ns(r), r->nats.ack_wait_ns);
}

static void note_bad(rack *r, const char *host, enum bad_reason why, const char *detail)
{
    r->bad[why]++;
    int added;
    hm_strmap_slot *slot = hm_strmap_upsert(&r->nodes, host, strlen(host), &added);
    node_bad *nb = slot ? slot->value : NULL;
    if (slot && added) {
        nb = calloc(1, sizeof *nb);
        slot->value = nb;
    }
    if (nb == NULL) {
        hm_log_warn("node %s: %s: %s (out of memory counting it)", host, bad_name[why], detail);
        return;
    }
    nb->count[why]++;
    int64_t now = hm_reduce_now_ns();
    if (nb->last_log_ns && now - nb->last_log_ns < BAD_LOG_EVERY_NS) {
        nb->unlogged++;
        return;
    }
    hm_log_warn("rack %s node %s: %s: %s (node totals: lines %" PRIu64 ", malformed %" PRIu64
                ", oversized %" PRIu64 ", host %" PRIu64 ", headers %" PRIu64 "; %" PRIu64
                " not logged since the last)",
                r->o->rack, host, bad_name[why], detail, nb->count[BAD_LINES], nb->count[BAD_MALFORMED],
                nb->count[BAD_OVERSIZED], nb->count[BAD_HOST], nb->count[BAD_HEADERS], nb->unlogged);
    nb->last_log_ns = now;
    nb->unlogged = 0;
}

static void bad_line(void *ctx, const char *reason, const char *line, size_t len)
{
    void **args = ctx;
    char detail[256];
    snprintf(detail, sizeof detail, "%s: %.*s", reason, (int)(len > 60 ? 60 : len), line);
    note_bad(args[0], args[1], BAD_LINES, detail);
}

static bool header_u64(natsMsg *m, const char *key, uint64_t *out)
{
    const char *v = NULL;
    if (natsMsgHeader_Get(m, key, &v) != NATS_OK || v == NULL || *v == '\0')
        return false;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end != '\0' || *v == '-')
        return false;
    *out = x;
    return true;
}

/* Adds the batch's values to their groups; the message is held by each. */
static int add_batch(rack *r, const char *host, uint64_t epoch, uint64_t seq, hm_pending *msg,
                     hm_error *err)
{
    const hm_batch_reader *b = &r->reader;
    int64_t now = hm_reduce_now_ns();
    bool late = false;
    size_t done = 0;
    /* Values are in time order (usually one time): a run of equal times
     * at a time. */
    while (done < b->nvalues) {
        int64_t t = b->values[done].time_ns;
        size_t end = done;
        while (end < b->nvalues && b->values[end].time_ns == t)
            end++;
        size_t njobs_at_t = 0;
        for (size_t j = 0; j < b->njobs + 1; j++) {
            char job[256];
            if (j < b->njobs) {
                if (b->jobs[j].time_ns != t)
                    continue;
                snprintf(job, sizeof job, "%.*s", (int)b->jobs[j].len, b->jobs[j].job);
            } else if (njobs_at_t == 0) {
                snprintf(job, sizeof job, "-"); /* a node without a job */
            } else {
                break;
            }
            njobs_at_t++;
            hm_group *grp = hm_groups_get(&r->groups, job, t, err);
            if (grp == NULL)
                return -1;
            int added;
            if (hm_partial_add_source(&grp->cur, host, (int64_t)epoch, seq, &added, err) != 0)
                return -1;
            if (added) {
                for (size_t i = done; i < end; i++) {
                    const hm_batch_value *v = &b->values[i];
                    uint32_t klen;
                    const char *key = hm_batch_value_key(b, v, &klen);
                    int rc = v->id != HM_NO_SENSOR_ID
                                 ? hm_partial_add_value_id(&grp->cur, v->id, key, klen, v->value, err)
                                 : hm_partial_add_value(&grp->cur, key, klen, v->value, err);
                    if (rc != 0)
                        return -1;
                }
                if (!grp->has_data)
                    grp->first_add_ns = now;
                grp->has_data = true;
                grp->last_add_ns = now;
                late |= grp->emissions > 0;
            }
            /* Held even when the source was there already (a redelivery of
             * a batch still open): acked with the group. */
            if (hm_group_hold(grp, msg, err) != 0)
                return -1;
        }
        done = end;
    }
    r->late += late;
    return 0;
}

static int process(rack *r, natsMsg *m, hm_error *err)
{
    const char *subject = natsMsg_GetSubject(m);
    const char *reply = natsMsg_GetReply(m);
    size_t plen = strlen(r->raw_prefix);
    const char *host = subject + plen;
    if (strncmp(subject, r->raw_prefix, plen) != 0 || *host == '\0' || strchr(host, '.') != NULL) {
        r->unknown_subject++;
        if (reply)
            hm_nats_ack(&r->nats, reply, true);
        return 0;
    }
    int data_len = natsMsg_GetDataLength(m);
    const char *data = natsMsg_GetData(m);
    if ((int64_t)data_len > r->o->max_batch_bytes) {
        char detail[128];
        snprintf(detail, sizeof detail, "batch of %d bytes, limit %" PRId64, data_len, r->o->max_batch_bytes);
        note_bad(r, host, BAD_OVERSIZED, detail);
        if (reply)
            hm_nats_ack(&r->nats, reply, true);
        return 0;
    }
    const char *hdr_host = NULL;
    uint64_t epoch = 0, seq = 0;
    bool have_host = natsMsgHeader_Get(m, "Hm-Host", &hdr_host) == NATS_OK && hdr_host != NULL;
    if (have_host && strcmp(hdr_host, host) != 0) {
        char detail[160];
        snprintf(detail, sizeof detail, "header Hm-Host=%.64s on the subject of %s", hdr_host, host);
        note_bad(r, host, BAD_HOST, detail);
        if (reply)
            hm_nats_ack(&r->nats, reply, true);
        return 0;
    }
    if (!have_host || !header_u64(m, "Hm-Epoch", &epoch) || !header_u64(m, "Hm-Seq", &seq)) {
        note_bad(r, host, BAD_HEADERS, "Hm-Host, Hm-Epoch or Hm-Seq missing or not a number");
        if (reply)
            hm_nats_ack(&r->nats, reply, true);
        return 0;
    }
    /* Every line is read first: the batch goes to groups only if no line
     * lies about its host. */
    void *ctx[2] = {r, (void *)host};
    char lie[80];
    int rc = hm_batch_read(&r->reader, host, data, (size_t)data_len, bad_line, ctx, lie, sizeof lie);
    if (rc == HM_BATCH_NO_MEMORY)
        return hm_error_set(err, "out of memory reading a batch of %d bytes", data_len);
    if (rc == HM_BATCH_HOST_LIE) {
        char detail[200];
        snprintf(detail, sizeof detail, "a line says host=%s on the subject of %s, batch refused",
                 *lie ? lie : "(none)", host);
        note_bad(r, host, BAD_HOST, detail);
        if (reply)
            hm_nats_ack(&r->nats, reply, true);
        return 0;
    }
    r->batches++;
    r->lines += r->reader.lines_ok;
    if (r->reader.lines_ok == 0 && r->reader.lines_bad > 0) {
        note_bad(r, host, BAD_MALFORMED, "no valid line in the batch");
        if (reply)
            hm_nats_ack(&r->nats, reply, true);
        return 0;
    }
    hm_pending *msg = hm_pending_new(&r->groups, reply, err);
    if (msg == NULL)
        return -1;
    rc = add_batch(r, host, epoch, seq, msg, err);
    hm_pending_release_if_free(&r->groups, msg, hm_nats_ack, &r->nats);
    return rc;
}

static int publish_group(void *ctx, hm_group *grp)
{
    rack *r = ctx;
    hm_error err;
    char *json = NULL;
    size_t len = 0;
    char id[768];
    bool dup = false;
    if (hm_partial_to_json(&grp->cur, "rack", r->o->rack, &json, &len, &err) != 0 ||
        hm_partial_msg_id(&grp->cur, r->o->rack, id, sizeof id, &err) != 0 ||
        hm_nats_publish(&r->nats, r->sum_subject, id, json, len, &dup, &err) != 0) {
        free(json);
        r->publish_errors++;
        int64_t now = hm_reduce_now_ns();
        if (now - r->last_publish_error_log_ns > BAD_LOG_EVERY_NS) {
            hm_log_warn("publishing job %s period %" PRId64 ": %s (kept, retried)", grp->cur.job,
                        grp->cur.time_ns, err.msg);
            r->last_publish_error_log_ns = now;
        }
        return 1; /* the server is away: try again next round */
    }
    free(json);
    r->partials++;
    r->partials_dup += dup;
    if (hm_group_published(&r->groups, grp, hm_reduce_now_ns(), hm_nats_ack, &r->nats, &err) != 0) {
        hm_log_warn("after publishing: %s", err.msg);
        return 1;
    }
    return 0;
}

static void print_stats(rack *r, const char *what, double dt_s, uint64_t d_batches, uint64_t d_lines)
{
    fprintf(stderr,
            "hushmon-reduce: %s level=rack rack=%s batches=%" PRIu64 " batches_per_s=%.0f lines=%" PRIu64
            " lines_per_s=%.0f partials=%" PRIu64 " partials_dup=%" PRIu64 " late=%" PRIu64
            " unknown_subject=%" PRIu64,
            what, r->o->rack, r->batches, dt_s > 0 ? (double)d_batches / dt_s : 0.0, r->lines,
            dt_s > 0 ? (double)d_lines / dt_s : 0.0, r->partials, r->partials_dup, r->late,
            r->unknown_subject);
    for (int i = 0; i < BAD_N; i++)
        fprintf(stderr, " %s=%" PRIu64, bad_name[i], r->bad[i]);
    fprintf(stderr,
            " publish_errors=%" PRIu64 " fetch_errors=%" PRIu64 " consumer_missing=%" PRIu64
            " ack_errors=%" PRIu64 " pull_requests=%" PRIu64 " pull_stale=%" PRIu64
            " pull_lost=%" PRIu64 " open_groups=%zu held_msgs=%zu grace_ms=%" PRId64
            " cpu_s=%.3f heap_mib=%.1f heap_trims=%" PRIu64 "\n",
            r->publish_errors, r->nats.fetch_errors, r->nats.consumer_missing, r->nats.ack_errors,
            r->nats.pull.requests, r->nats.pull.stale_status, r->nats.pull.lost,
            hm_groups_open(&r->groups), r->groups.pending_msgs,
            (int64_t)(grace_ns(r) / NS_PER_MS), hm_reduce_cpu_s(),
            hm_heap_in_use_mib(), r->upkeep.heap_trims);
}

static void rack_free(rack *r)
{
    hm_groups_free(&r->groups);
    for (size_t i = 0; i < r->nodes.cap; i++)
        free(r->nodes.slots[i].key ? r->nodes.slots[i].value : NULL);
    hm_strmap_free(&r->nodes);
    hm_batch_reader_free(&r->reader);
}

int hm_reduce_rack(const hm_reduce_opts *o, volatile sig_atomic_t *stop, hm_error *err)
{
    rack *r = calloc(1, sizeof *r); /* the parsed-line scratch is large */
    if (r == NULL)
        return hm_error_set(err, "out of memory");
    r->o = o;
    snprintf(r->raw_prefix, sizeof r->raw_prefix, "hm.raw.%s.", o->rack);
    snprintf(r->sum_subject, sizeof r->sum_subject, "hm.sum.rack.%s", o->rack);
    char name[128], durable[128], filter[256];
    snprintf(name, sizeof name, "hushmon-reduce %s", o->rack);
    snprintf(durable, sizeof durable, "reduce-%s", o->rack);
    snprintf(filter, sizeof filter, "hm.raw.%s.>", o->rack);
    if (hm_nats_connect(&r->nats, o->url, name, err) != 0 ||
        hm_nats_pull(&r->nats, "HM_RAW", durable, filter, err) != 0) {
        hm_nats_close(&r->nats);
        rack_free(r);
        free(r);
        return -1;
    }
    hm_log_notice("rack %s: consuming %s as %s from %s", o->rack, filter, durable, o->url);
    int64_t start = hm_reduce_now_ns(), last_stats = start;
    uint64_t stats_batches = 0, stats_lines = 0;
    int rc = 0;
    hm_col msgs; /* natsMsg* of one pull */
    hm_col_init(&msgs, sizeof(natsMsg *));
    while (!*stop && rc == 0) {
        int64_t wait_ms = hm_groups_pull_wait_ms(&r->groups, hm_reduce_now_ns(), grace_ns(r),
                                                 max_hold_ns(r), HM_REDUCE_PULL_MIN_MS,
                                                 HM_REDUCE_PULL_MAX_MS);
        if (hm_nats_fetch(&r->nats, &msgs, (int)o->fetch_batch, wait_ms, err) != 0) {
            rc = -1; /* fatal (transient errors are retried inside): exit non-zero */
            break;
        }
        natsMsg **got = msgs.p;
        for (size_t i = 0; i < msgs.n; i++) {
            if (rc == 0)
                rc = process(r, got[i], err);
            natsMsg_Destroy(got[i]);
        }
        msgs.n = 0;
        int64_t now = hm_reduce_now_ns();
        hm_groups_due(&r->groups, now, grace_ns(r), max_hold_ns(r), false, publish_group, r);
        hm_reduce_upkeep_run(&r->upkeep, &r->groups, now, o->keep_s);
        if (o->stats_every_s > 0 && now - last_stats >= o->stats_every_s * NS_PER_S) {
            print_stats(r, "stats", (double)(now - last_stats) / 1e9, r->batches - stats_batches,
                        r->lines - stats_lines);
            last_stats = now;
            stats_batches = r->batches;
            stats_lines = r->lines;
        }
    }
    natsMsg **left = msgs.p; /* after a fatal pull error: what it appended */
    for (size_t i = 0; i < msgs.n; i++)
        natsMsg_Destroy(left[i]);
    hm_col_free(&msgs);
    /* Drain: publish what is open (a later batch of these periods becomes a
     * late partial elsewhere), so the acks go out before we leave. */
    int64_t deadline = hm_reduce_now_ns() + 10 * NS_PER_S;
    while (hm_groups_open(&r->groups) > 0 && hm_reduce_now_ns() < deadline)
        hm_groups_due(&r->groups, hm_reduce_now_ns(), 0, 0, true, publish_group, r);
    if (hm_groups_open(&r->groups) > 0)
        hm_log_warn("rack %s: %zu summaries not published at exit (their batches are redelivered)",
                    o->rack, hm_groups_open(&r->groups));
    int64_t end = hm_reduce_now_ns();
    print_stats(r, "final", (double)(end - start) / 1e9, r->batches, r->lines);
    hm_nats_close(&r->nats);
    rack_free(r);
    free(r);
    return rc;
}
