#include "collect.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "collect_group.h"
#include "collect_pull.h"
#include "nats_io.h"

struct hm_collect {
    hm_nats nats;       /* connection; the consumer checked to exist */
    hm_puller puller;
    hm_collect_group group;
    hm_col held;        /* natsMsg* of the last group, until acked */
    hm_col msgs;        /* hm_collect_msg of held */
};

static void put(char *err, size_t cap, const hm_error *e)
{
    if (cap > 0)
        snprintf(err, cap, "%s", e->msg);
}

/* The consumer is there (an admin made it: the collector never creates
 * one). Only its info is asked: the pull is collect_pull.c's. */
static int consumer_exists(hm_nats *n, const char *stream, const char *durable, hm_error *err)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetConsumerInfo(&ci, n->js, stream, durable, NULL, &jerr);
    jsConsumerInfo_Destroy(ci);
    if (s == NATS_NOT_FOUND)
        return hm_error_set(err, "collect: consumer %s on %s does not exist: an admin declares it "
                                 "(python -m hushmon.transport.deploy streams URL --racks ...; "
                                 "docs/transport.md)", durable, stream);
    if (s != NATS_OK) {
        const char *last = nats_GetLastError(NULL);
        return hm_error_set(err, "collect: consumer %s on %s: %s", durable, stream,
                            last && *last ? last : natsStatus_GetText(s));
    }
    snprintf(n->stream, sizeof n->stream, "%s", stream);
    snprintf(n->durable, sizeof n->durable, "%s", durable);
    return 0;
}

hm_collect *hm_collect_open(const char *url, const char *stream, const char *durable,
                            int64_t max_batch_bytes, char *err, size_t cap)
{
    hm_error e;
    if (url == NULL || stream == NULL || durable == NULL || max_batch_bytes <= 0) {
        hm_error_set(&e, "collect: url, stream and durable are needed and max_batch_bytes > 0");
        put(err, cap, &e);
        return NULL;
    }
    hm_collect *c = calloc(1, sizeof *c);
    if (c == NULL) {
        hm_error_set(&e, "collect: out of memory");
        put(err, cap, &e);
        return NULL;
    }
    if (hm_group_init(&c->group, max_batch_bytes) != 0) {
        hm_error_set(&e, "collect: out of memory");
        goto fail;
    }
    hm_col_init(&c->msgs, sizeof(hm_collect_msg));
    hm_col_init(&c->held, sizeof(natsMsg *));
    if (hm_nats_connect_now(&c->nats, url, "hushmon-collect", &e) != 0) {
        hm_error_wrap(&e, "collect: connecting to %s", url);
        goto fail;
    }
    if (consumer_exists(&c->nats, stream, durable, &e) != 0)
        goto fail;
    if (hm_puller_open(&c->puller, c->nats.nc, stream, durable, &e) != 0) {
        hm_error_wrap(&e, "collect: pulling %s on %s", durable, stream);
        goto fail;
    }
    return c;
fail:
    put(err, cap, &e);
    hm_collect_close(c);
    return NULL;
}

static void let_go(hm_collect *c)
{
    natsMsg **held = c->held.p;
    for (size_t i = 0; i < c->held.n; i++)
        natsMsg_Destroy(held[i]);
    c->held.n = 0;
    c->msgs.n = 0;
}

/* "Name:" at the start of v, Name a header token: the next header line. */
static size_t line_name_len(const char *v)
{
    size_t i = 0;
    while ((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') ||
           v[i] == '-' || v[i] == '_')
        i++;
    return i > 0 && v[i] == ':' ? i : 0;
}

/* A header's value as nats-py (the Python path) reads it. libnats reads an
 * empty value ("Nats-Msg-Id:" then CRLF) as the whole next header line
 * ("Hm-Host: node18"), which then seems missing. So a value that is a
 * header line stands for "", and a header not found is looked for in the
 * other values. Rare (only a broken sender writes an empty header), so
 * the extra work is off the common path. */
static const char *header(natsMsg *m, const char *name)
{
    const char *v = NULL;
    if (natsMsgHeader_Get(m, name, &v) == NATS_OK && v != NULL)
        return line_name_len(v) ? "" : v;
    const char **keys = NULL;
    int nkeys = 0;
    if (natsMsgHeader_Keys(m, &keys, &nkeys) != NATS_OK)
        return NULL;
    const char *found = NULL;
    size_t nl = strlen(name);
    for (int i = 0; i < nkeys && found == NULL; i++) {
        const char *other = NULL;
        if (natsMsgHeader_Get(m, keys[i], &other) != NATS_OK || other == NULL)
            continue;
        while (line_name_len(other) != 0 && found == NULL) {
            size_t ol = line_name_len(other);
            const char *rest = other + ol + 1;
            while (*rest == ' ')
                rest++;
            if (ol == nl && strncasecmp(other, name, nl) == 0)
                found = rest;
            other = rest;
        }
    }
    free((void *)keys);
    return found;
}

/* The decimal token at t[0..n), or -1. */
static int64_t token_number(const char *t, size_t n)
{
    if (n == 0 || n > 18)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9')
            return -1;
        v = v * 10 + (t[i] - '0');
    }
    return v;
}

/* Delivery count and stream sequence from a JetStream ack subject, read
 * in place: "$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>...." (9
 * tokens) or, with a domain and account hash, "$JS.ACK.<domain>.<hash>.
 * <stream>.<consumer>.<delivered>.<sseq>...." (11 or more), as libnats
 * reads it. natsMsg_GetMetaData does the same with four allocations per
 * message; this is the fallback when the subject is neither. false:
 * not an ack subject of either form. */
static bool ack_meta(const char *reply, int64_t *delivered, int64_t *stream_seq)
{
    static const char prefix[] = "$JS.ACK.";
    if (reply == NULL || strncmp(reply, prefix, sizeof prefix - 1) != 0)
        return false;
    const char *start[16];
    size_t len[16], n = 0;
    const char *p = reply;
    for (;;) {
        const char *dot = strchr(p, '.');
        if (n == 16)
            return false;
        start[n] = p;
        len[n] = dot ? (size_t)(dot - p) : strlen(p);
        n++;
        if (dot == NULL)
            break;
        p = dot + 1;
    }
    size_t at = n == 9 ? 4 : n >= 11 ? 6 : 0;
    if (at == 0)
        return false;
    int64_t d = token_number(start[at], len[at]), q = token_number(start[at + 1], len[at + 1]);
    if (d < 0 || q < 0)
        return false;
    *delivered = d, *stream_seq = q;
    return true;
}

static hm_collect_strs strs(const hm_strcol *s)
{
    hm_collect_strs out = {s->offsets.p, s->bytes.p, (int64_t)s->bytes.n};
    return out;
}

static void fill_view(const hm_collect *c, hm_collect_view *v, int64_t bytes)
{
    const hm_collect_group *g = &c->group;
    const hm_group_cols *k = &g->cols;
    memset(v, 0, sizeof *v);
    v->messages = (int64_t)c->msgs.n;
    v->message_bytes = bytes;
    v->n_samples = (int64_t)k->s_series_id.n;
    v->s_series_id = k->s_series_id.p, v->s_time_ns = k->s_time_ns.p;
    v->s_value = k->s_value.p, v->s_batch = k->s_batch.p;
    v->n_series = (int64_t)k->se_id.n;
    v->se_id = k->se_id.p;
    v->se_host = strs(&k->se_host), v->se_measurement = strs(&k->se_measurement);
    v->se_tags = strs(&k->se_tags), v->se_field = strs(&k->se_field);
    v->n_activity = (int64_t)k->a_time_ns.n;
    v->a_job = strs(&k->a_job), v->a_host = strs(&k->a_host);
    v->a_time_ns = k->a_time_ns.p, v->a_batch = k->a_batch.p;
    v->n_batches = (int64_t)g->b_epoch.n;
    v->b_host = strs(&g->b_host), v->b_subject = strs(&g->b_subject);
    v->b_epoch = g->b_epoch.p, v->b_seq = g->b_seq.p, v->b_lines = g->b_lines.p;
    v->b_period_ns = g->b_period_ns.p, v->b_period_valid = g->b_period_valid.p;
    v->b_dropped = g->b_dropped.p, v->b_replay = g->b_replay.p;
    v->b_stream_seq = g->b_stream_seq.p, v->b_received_us = g->b_received_us.p;
    v->n_events = (int64_t)g->e_count.n;
    v->e_kind = strs(&g->e_kind), v->e_host = strs(&g->e_host);
    v->e_subject = strs(&g->e_subject), v->e_reason = strs(&g->e_reason);
    v->e_epoch = g->e_epoch.p, v->e_seq = g->e_seq.p, v->e_has_key = g->e_has_key.p;
    v->e_count = g->e_count.p;
    v->n_recheck = (int64_t)g->recheck.n;
    v->recheck = g->recheck.p;
}

int64_t hm_collect_fetch(hm_collect *c, int max_msgs, int64_t max_bytes, int64_t timeout_ms,
                         hm_collect_view *view, char *err, size_t cap)
{
    hm_error e;
    let_go(c);
    if (max_msgs <= 0 || max_bytes < 0 || timeout_ms < 0) {
        hm_error_set(&e, "collect: fetch needs max_msgs > 0, max_bytes >= 0, timeout_ms >= 0");
        put(err, cap, &e);
        return -1;
    }
    if (natsConnection_IsClosed(c->nats.nc)) {
        hm_error_set(&e, "collect: the connection to the server is closed");
        put(err, cap, &e);
        return -1;
    }
    if (hm_puller_fetch(&c->puller, &c->held, max_msgs, max_bytes, timeout_ms, &e) != 0) {
        hm_error_wrap(&e, "collect: fetching from %s", c->nats.durable);
        put(err, cap, &e);
        return -1;
    }
    natsMsg **held = c->held.p;
    int count = (int)c->held.n;
    if (hm_col_reserve(&c->msgs, (size_t)count) != 0) {
        hm_error_set(&e, "collect: out of memory");
        put(err, cap, &e);
        return -1;
    }
    int64_t bytes = 0;
    hm_collect_msg *out = c->msgs.p;
    for (int i = 0; i < count; i++) {
        natsMsg *m = held[i];
        hm_collect_msg *o = &out[i];
        o->subject = natsMsg_GetSubject(m);
        o->headers.host = header(m, "Hm-Host");
        o->headers.epoch = header(m, "Hm-Epoch");
        o->headers.seq = header(m, "Hm-Seq");
        o->headers.lines = header(m, "Hm-Lines");
        o->headers.dropped = header(m, "Hm-Dropped");
        o->headers.replay = header(m, "Hm-Replay");
        o->data = natsMsg_GetData(m);
        o->len = (size_t)natsMsg_GetDataLength(m);
        if (o->data == NULL)
            o->data = "";
        o->stream_seq = 0;
        o->delivered = 1;
        jsMsgMetaData *meta = NULL;
        /* the reply subject says how often it was delivered: a redelivery
         * may already be stored (a collector died before its ack) */
        if (!ack_meta(natsMsg_GetReply(m), &o->delivered, &o->stream_seq) &&
            natsMsg_GetMetaData(&meta, m) == NATS_OK) {
            o->stream_seq = (int64_t)meta->Sequence.Stream;
            o->delivered = (int64_t)meta->NumDelivered;
            jsMsgMetaData_Destroy(meta);
        }
        bytes += (int64_t)o->len;
    }
    c->msgs.n = (size_t)count;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t received_us = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
    if (hm_group_build(&c->group, c->msgs.p, c->msgs.n, received_us, &e) != 0) {
        put(err, cap, &e);
        return -1;
    }
    fill_view(c, view, bytes);
    return (int64_t)c->msgs.n;
}

int hm_collect_ack(hm_collect *c, char *err, size_t cap)
{
    hm_error e;
    if (c->held.n == 0)
        return 0;
    natsMsg **held = c->held.p;
    int count = (int)c->held.n;
    for (int i = 0; i < count; i++) {
        const char *reply = natsMsg_GetReply(held[i]);
        natsStatus s = reply ? natsConnection_PublishString(c->nats.nc, reply, "+ACK") : NATS_INVALID_ARG;
        if (s != NATS_OK) {
            hm_error_set(&e, "collect: ack of message %d of %d: %s", i + 1, count,
                         natsStatus_GetText(s));
            put(err, cap, &e);
            return -1;
        }
    }
    /* the acks reach the server before the caller counts them sent */
    natsStatus s = natsConnection_FlushTimeout(c->nats.nc, 10000);
    if (s != NATS_OK) {
        hm_error_set(&e, "collect: flushing %d acks: %s", count, natsStatus_GetText(s));
        put(err, cap, &e);
        return -1;
    }
    if (hm_group_committed(&c->group) != 0) {
        hm_error_set(&e, "collect: out of memory after the acks");
        put(err, cap, &e);
        return -1;
    }
    let_go(c);
    return 0;
}

int hm_collect_in_progress(hm_collect *c, char *err, size_t cap)
{
    hm_error e;
    natsMsg **held = c->held.p;
    for (size_t i = 0; i < c->held.n; i++) {
        const char *reply = natsMsg_GetReply(held[i]);
        natsStatus s = reply ? natsConnection_PublishString(c->nats.nc, reply, "+WPI") : NATS_INVALID_ARG;
        if (s != NATS_OK) {
            hm_error_set(&e, "collect: in-progress ack: %s", natsStatus_GetText(s));
            put(err, cap, &e);
            return -1;
        }
    }
    return 0;
}

int hm_collect_note_stored(hm_collect *c, const char *host, int64_t epoch, int64_t seq, char *err,
                           size_t cap)
{
    hm_error e;
    if (host == NULL || hm_group_note_stored(&c->group, host, strlen(host), epoch, seq) != 0) {
        hm_error_set(&e, "collect: out of memory noting a stored batch");
        put(err, cap, &e);
        return -1;
    }
    return 0;
}

void hm_collect_close(hm_collect *c)
{
    if (c == NULL)
        return;
    let_go(c);
    hm_puller_close(&c->puller);
    hm_col_free(&c->held);
    hm_col_free(&c->msgs);
    hm_group_free(&c->group);
    if (c->nats.nc != NULL)
        hm_nats_close(&c->nats);
    free(c);
}
