/* The rack reducer: raw batches of one rack in, partial summaries per
 * (job, period) out (docs/transport.md). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "groups.h"
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

/* One numeric value of the batch being read, before it goes to groups. */
typedef struct entry {
    int64_t time_ns;
    uint32_t key_off, key_len;
    double value;
} entry;

typedef struct job_at {
    int64_t time_ns;
    uint32_t off, len;
} job_at;

typedef struct rack {
    const hm_reduce_opts *o;
    hm_nats nats;
    hm_groups groups;
    hm_strmap nodes; /* host -> node_bad* */
    char raw_prefix[256];
    char sum_subject[256];
    int64_t period_ms;
    uint64_t batches, lines, partials, partials_dup, late, unknown_subject, publish_errors;
    uint64_t bad[BAD_N];
    int64_t last_publish_error_log_ns;
    /* Scratch of the batch being read, reused. */
    hm_lp_line line;
    char *scratch;
    size_t scratch_cap;
    entry *entries;
    size_t nentries, cap_entries;
    char *keys;
    size_t keys_len, keys_cap;
    job_at *jobs;
    size_t njobs, cap_jobs;
} rack;

static int64_t grace_ns(const rack *r)
{
    return (r->o->grace_ms >= 0 ? r->o->grace_ms : 2 * r->period_ms) * NS_PER_MS;
}

/* The longest a group stays open (then a later batch makes a late partial):
 * bounds memory and stays under the consumer's AckWait. */
static int64_t max_hold_ns(const rack *r, int64_t ack_wait_ns)
{
    int64_t hold = 5 * grace_ns(r) + 10 * NS_PER_S;
    return hold < ack_wait_ns / 2 ? hold : ack_wait_ns / 2;
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

static void *grow(void *items, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap)
        return items;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *p = realloc(items, c * item);
    if (p)
        *cap = c;
    return p;
}

static int append_key(rack *r, const char *s, size_t len)
{
    if (r->keys_len + len > r->keys_cap) {
        char *k = grow(r->keys, &r->keys_cap, r->keys_len + len, 1);
        if (k == NULL)
            return -1;
        r->keys = k;
    }
    if (s) /* NULL: room only, the caller fills it */
        memcpy(r->keys + r->keys_len, s, len);
    r->keys_len += len;
    return 0;
}

/* Appends a name escaped as line protocol writes it (a backslash before
 * each of specials), so the key reads back with the store's parse_key. */
static int append_escaped(rack *r, hm_lp_str v, const char *specials)
{
    size_t plain = 0;
    while (plain < v.len && strchr(specials, v.s[plain]) == NULL)
        plain++;
    if (append_key(r, v.s, plain) != 0)
        return -1;
    for (size_t i = plain; i < v.len; i++) {
        if (strchr(specials, v.s[i]) != NULL && append_key(r, "\\", 1) != 0)
            return -1;
        if (append_key(r, v.s + i, 1) != 0)
            return -1;
    }
    return 0;
}

#define MEASUREMENT_SPECIALS ", "
#define TAG_SPECIALS ",= "

/* Reads one line into entries and jobs. 1 = its host tag is not the
 * subject's (the batch is refused), 0 = done (bad lines counted), -1 = out
 * of memory. */
static int read_line(rack *r, const char *host, const char *text, size_t len, uint64_t *ok_lines)
{
    hm_lp_line *l = &r->line;
    char reason[160];
    if (hm_lp_parse_line(text, len, l, r->scratch, reason, sizeof reason) != 0) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s: %.60s", reason, text);
        note_bad(r, host, BAD_LINES, detail);
        return 0;
    }
    const hm_lp_str *line_host = NULL;
    for (uint32_t i = 0; i < l->ntags; i++)
        if (hm_lp_str_eq(l->tag_key[i], "host"))
            line_host = &l->tag_value[i];
    if (line_host == NULL || !hm_lp_str_eq(*line_host, host)) {
        char detail[256];
        snprintf(detail, sizeof detail, "a line says host=%.*s on the subject of %s, batch refused",
                 line_host ? (int)(line_host->len > 64 ? 64 : line_host->len) : 6,
                 line_host ? line_host->s : "(none)", host);
        note_bad(r, host, BAD_HOST, detail);
        return 1;
    }
    (*ok_lines)++;
    bool is_job = hm_lp_str_eq(l->measurement, "job");
    bool is_agent = hm_lp_str_eq(l->measurement, "hushmon_agent");
    /* The sensor key's prefix: measurement and tags but host, in line order. */
    size_t prefix_off = r->keys_len;
    if (append_escaped(r, l->measurement, MEASUREMENT_SPECIALS) != 0)
        return -1;
    for (uint32_t i = 0; i < l->ntags; i++) {
        if (&l->tag_value[i] == line_host)
            continue;
        if (append_key(r, ",", 1) || append_escaped(r, l->tag_key[i], TAG_SPECIALS) ||
            append_key(r, "=", 1) || append_escaped(r, l->tag_value[i], TAG_SPECIALS))
            return -1;
        /* Job ids are plain names (Slurm numbers); one with escapes is
         * taken as its escaped text. */
        if (is_job && hm_lp_str_eq(l->tag_key[i], "job")) {
            job_at *j = grow(r->jobs, &r->cap_jobs, r->njobs + 1, sizeof *j);
            if (j == NULL)
                return -1;
            r->jobs = j;
            /* The value was just appended: it ends the keys so far. */
            r->jobs[r->njobs++] = (job_at){l->time_ns, (uint32_t)(r->keys_len - l->tag_value[i].len),
                                           l->tag_value[i].len};
        }
    }
    size_t prefix_len = r->keys_len - prefix_off;
    bool prefix_used = false;
    for (uint32_t f = 0; f < l->nfields; f++) {
        if (l->field_is_string[f])
            continue;
        if (is_agent && hm_lp_str_eq(l->field_name[f], "period_ms") && l->field_value[f] >= 1)
            r->period_ms = (int64_t)l->field_value[f];
        entry *e = grow(r->entries, &r->cap_entries, r->nentries + 1, sizeof *e);
        if (e == NULL)
            return -1;
        r->entries = e;
        /* Keys are contiguous: the first field's follows the prefix just
         * written, the others get a copy of it. */
        size_t key_off = prefix_off;
        if (prefix_used) {
            key_off = r->keys_len;
            if (append_key(r, NULL, prefix_len) != 0)
                return -1;
            memcpy(r->keys + key_off, r->keys + prefix_off, prefix_len);
        }
        prefix_used = true;
        if (append_key(r, " ", 1) || append_escaped(r, l->field_name[f], TAG_SPECIALS))
            return -1;
        r->entries[r->nentries++] =
            (entry){l->time_ns, (uint32_t)key_off, (uint32_t)(r->keys_len - key_off), l->field_value[f]};
    }
    return 0;
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

/* Adds the batch's entries to their groups; the message is held by each. */
static int add_batch(rack *r, const char *host, uint64_t epoch, uint64_t seq, hm_pending *msg,
                     hm_error *err)
{
    int64_t now = hm_reduce_now_ns();
    bool late = false;
    size_t done = 0;
    /* Entries come in time order per batch (usually one time): a run of
     * equal times at a time. */
    while (done < r->nentries) {
        int64_t t = r->entries[done].time_ns;
        size_t end = done;
        while (end < r->nentries && r->entries[end].time_ns == t)
            end++;
        size_t njobs_at_t = 0;
        for (size_t j = 0; j < r->njobs + 1; j++) {
            char job[256];
            if (j < r->njobs) {
                if (r->jobs[j].time_ns != t)
                    continue;
                snprintf(job, sizeof job, "%.*s", (int)r->jobs[j].len, r->keys + r->jobs[j].off);
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
                for (size_t i = done; i < end; i++)
                    if (hm_partial_add_value(&grp->cur, r->keys + r->entries[i].key_off,
                                             r->entries[i].key_len, r->entries[i].value, err) != 0)
                        return -1;
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

static int cmp_entry_time(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
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
    /* Pass 1: read every line; the batch goes to groups only if no line
     * lies about its host. */
    if ((size_t)data_len + 1 > r->scratch_cap) {
        char *s = grow(r->scratch, &r->scratch_cap, (size_t)data_len + 1, 1);
        if (s == NULL)
            return hm_error_set(err, "out of memory for a batch of %d bytes", data_len);
        r->scratch = s;
    }
    r->nentries = r->njobs = r->keys_len = 0;
    uint64_t ok_lines = 0, all_lines = 0;
    const char *p = data, *end = data + data_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = (size_t)((nl ? nl : end) - p);
        if (!hm_lp_skippable(p, len)) {
            all_lines++;
            int rc = read_line(r, host, p, len, &ok_lines);
            if (rc < 0)
                return hm_error_set(err, "out of memory reading a batch");
            if (rc > 0) {
                if (reply)
                    hm_nats_ack(&r->nats, reply, true);
                return 0;
            }
        }
        p = nl ? nl + 1 : end;
    }
    r->batches++;
    r->lines += ok_lines;
    if (ok_lines == 0 && all_lines > 0) {
        note_bad(r, host, BAD_MALFORMED, "no valid line in the batch");
        if (reply)
            hm_nats_ack(&r->nats, reply, true);
        return 0;
    }
    /* Pass 2: into groups. Batches hold one period; sort in case not. */
    for (size_t i = 1; i < r->nentries; i++) {
        if (r->entries[i].time_ns != r->entries[i - 1].time_ns) {
            qsort(r->entries, r->nentries, sizeof *r->entries, cmp_entry_time);
            break;
        }
    }
    hm_pending *msg = hm_pending_new(&r->groups, reply, err);
    if (msg == NULL)
        return -1;
    int rc = add_batch(r, host, epoch, seq, msg, err);
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
    fprintf(stderr, " publish_errors=%" PRIu64 " open_groups=%zu held_msgs=%zu grace_ms=%" PRId64
                    " cpu_s=%.3f\n",
            r->publish_errors, hm_groups_open(&r->groups), r->groups.pending_msgs,
            (int64_t)(grace_ns(r) / NS_PER_MS), hm_reduce_cpu_s());
}

static void rack_free(rack *r)
{
    hm_groups_free(&r->groups);
    for (size_t i = 0; i < r->nodes.cap; i++)
        free(r->nodes.slots[i].key ? r->nodes.slots[i].value : NULL);
    hm_strmap_free(&r->nodes);
    free(r->scratch);
    free(r->entries);
    free(r->keys);
    free(r->jobs);
}

int hm_reduce_rack(const hm_reduce_opts *o, volatile sig_atomic_t *stop, hm_error *err)
{
    rack *r = calloc(1, sizeof *r); /* the parsed-line scratch is large */
    if (r == NULL)
        return hm_error_set(err, "out of memory");
    r->o = o;
    r->period_ms = 1000;
    snprintf(r->raw_prefix, sizeof r->raw_prefix, "hm.raw.%s.", o->rack);
    snprintf(r->sum_subject, sizeof r->sum_subject, "hm.sum.rack.%s", o->rack);
    char name[128], durable[128], filter[256];
    snprintf(name, sizeof name, "hushmon-reduce %s", o->rack);
    snprintf(durable, sizeof durable, "reduce-%s", o->rack);
    snprintf(filter, sizeof filter, "hm.raw.%s.>", o->rack);
    int64_t ack_wait = hm_reduce_ack_wait_ns(o, 5 * grace_ns(r) + 10 * NS_PER_S);
    if (hm_nats_connect(&r->nats, o->url, name, err) != 0 ||
        hm_nats_pull(&r->nats, "HM_RAW", durable, filter, ack_wait, o->max_ack_pending, err) != 0) {
        hm_nats_close(&r->nats);
        rack_free(r);
        free(r);
        return -1;
    }
    hm_log_notice("rack %s: consuming %s as %s from %s", o->rack, filter, durable, o->url);
    int64_t start = hm_reduce_now_ns(), last_stats = start, last_prune = start;
    uint64_t stats_batches = 0, stats_lines = 0;
    int rc = 0;
    while (!*stop && rc == 0) {
        natsMsgList list;
        if (hm_nats_fetch(&r->nats, &list, (int)o->fetch_batch, 100, err) != 0) {
            hm_log_warn("%s (retrying)", err->msg);
            struct timespec pause = {0, 200 * 1000000L};
            nanosleep(&pause, NULL);
        }
        for (int i = 0; i < list.Count && rc == 0; i++)
            rc = process(r, list.Msgs[i], err);
        natsMsgList_Destroy(&list);
        int64_t now = hm_reduce_now_ns();
        hm_groups_due(&r->groups, now, grace_ns(r), max_hold_ns(r, ack_wait), false, publish_group, r);
        if (now - last_prune > NS_PER_S) {
            hm_groups_prune(&r->groups, now, o->keep_s * NS_PER_S);
            last_prune = now;
        }
        if (o->stats_every_s > 0 && now - last_stats >= o->stats_every_s * NS_PER_S) {
            print_stats(r, "stats", (double)(now - last_stats) / 1e9, r->batches - stats_batches,
                        r->lines - stats_lines);
            last_stats = now;
            stats_batches = r->batches;
            stats_lines = r->lines;
        }
    }
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
