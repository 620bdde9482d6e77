#include "collect_group.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 8192
/* Groups between two looks at the room the last ones used
 * (hm_group_cols_settle): a backlog's groups of 8192 batches grow the
 * columns and scratch buffers to ~50 MiB, which steady groups of a few
 * hundred would otherwise keep for good. At a group a second, room is
 * given back a minute or two after a backlog. */
#define SETTLE_EVERY_GROUPS 64

typedef struct accepted {
    const hm_collect_msg *msg;
    hm_batch_header h;
    char *host;       /* NUL-terminated copy of the subject's host */
    bool valid_utf8;
    hm_batch_verdict v;
    char *reason_fast, *reason_exact, *lie; /* copies: the reader's buffers are reused */
} accepted;

int hm_group_init(hm_collect_group *g, int64_t max_batch_bytes)
{
    memset(g, 0, sizeof *g);
    hm_group_cols *c = &g->cols;
    hm_col_init(&c->s_series_id, 8), hm_col_init(&c->s_time_ns, 8), hm_col_init(&c->s_value, 8);
    hm_col_init(&c->s_batch, 4), hm_col_init(&c->se_id, 8), hm_col_init(&c->a_time_ns, 8);
    hm_col_init(&c->a_batch, 4), hm_col_init(&c->pending, sizeof(hm_series_ref));
    hm_strcol *strs[] = {&c->se_host, &c->se_measurement, &c->se_tags, &c->se_field, &c->a_job,
                         &c->a_host, &g->b_host, &g->b_subject, &g->e_kind, &g->e_host,
                         &g->e_subject, &g->e_reason};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        hm_strcol_init(strs[i]);
    hm_col *i64[] = {&g->b_epoch, &g->b_seq, &g->b_lines, &g->b_period_ns, &g->b_dropped,
                     &g->b_stream_seq, &g->b_received_us, &g->e_epoch, &g->e_seq, &g->e_count};
    for (size_t i = 0; i < sizeof i64 / sizeof i64[0]; i++)
        hm_col_init(i64[i], 8);
    hm_col_init(&g->b_period_valid, 1), hm_col_init(&g->b_replay, 1), hm_col_init(&g->e_has_key, 1);
    hm_col_init(&g->recheck, 4);
    hm_col_init(&g->work, sizeof(accepted));
    g->max_batch_bytes = max_batch_bytes;
    return hm_line_reader_init(&g->reader);
}

static void free_work(hm_collect_group *g)
{
    accepted *a = g->work.p;
    for (size_t i = 0; i < g->work.n; i++) {
        free(a[i].host);
        free(a[i].reason_fast);
        free(a[i].reason_exact);
        free(a[i].lie);
    }
    hm_col_clear(&g->work);
}

/* Does num to each of the batch and event columns and to work (already
 * emptied by free_work), str to each string column. */
static void each_col(hm_collect_group *g, void (*num)(hm_col *), void (*str)(hm_strcol *))
{
    hm_col *cols[] = {&g->b_epoch, &g->b_seq, &g->b_lines, &g->b_period_ns, &g->b_period_valid,
                      &g->b_dropped, &g->b_replay, &g->b_stream_seq, &g->b_received_us,
                      &g->e_epoch, &g->e_seq, &g->e_has_key, &g->e_count, &g->recheck, &g->work};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        num(cols[i]);
    hm_strcol *strs[] = {&g->b_host, &g->b_subject, &g->e_kind, &g->e_host, &g->e_subject,
                         &g->e_reason};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        str(strs[i]);
}

void hm_group_free(hm_collect_group *g)
{
    free_work(g);
    hm_group_cols_free(&g->cols);
    each_col(g, hm_col_free, hm_strcol_free);
    hm_strmap_free(&g->seen);
    hm_strmap *newest = &g->newest;
    for (size_t i = 0; i < newest->cap; i++)
        if (newest->slots[i].key)
            free(newest->slots[i].value);
    hm_strmap_free(newest);
    hm_line_reader_free(&g->reader);
}

static void reset(hm_collect_group *g)
{
    hm_group_cols_reset(&g->cols);
    free_work(g);
    each_col(g, hm_col_clear, hm_strcol_reset);
    hm_strmap_free(&g->seen);
    memset(&g->seen, 0, sizeof g->seen);
    if (++g->groups_since_settle < SETTLE_EVERY_GROUPS)
        return;
    g->groups_since_settle = 0;
    hm_group_cols_settle(&g->cols);
    each_col(g, hm_col_settle, hm_strcol_settle);
}

static int event(hm_collect_group *g, const char *kind, const char *host, size_t host_len,
                 const char *subject, const hm_batch_header *key, int64_t count, const char *reason)
{
    if (hm_strcol_add(&g->e_kind, kind, strlen(kind)) != 0 ||
        hm_strcol_add(&g->e_host, host, host_len) != 0 ||
        hm_strcol_add(&g->e_subject, subject, strlen(subject)) != 0 ||
        hm_strcol_add(&g->e_reason, reason, strlen(reason)) != 0 ||
        hm_col_i64(&g->e_epoch, key ? key->epoch : 0) != 0 ||
        hm_col_i64(&g->e_seq, key ? key->seq : 0) != 0 || hm_col_u8(&g->e_has_key, key != NULL) != 0 ||
        hm_col_i64(&g->e_count, count) != 0)
        return -1;
    return 0;
}

/* A NUL-terminated copy of s[0..n) (strndup is POSIX, not C11). */
static char *copy_of(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (out != NULL) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

static char *dup_or_null(const char *s)
{
    return s ? copy_of(s, strlen(s)) : NULL;
}

/* Checks each message; the accepted ones go to g->work. */
static int accept_all(hm_collect_group *g, const hm_collect_msg *msgs, size_t n)
{
    char why_buf[REASON_MAX], sender_buf[1024];
    for (size_t i = 0; i < n; i++) {
        const hm_collect_msg *m = &msgs[i];
        hm_text why = {why_buf, 0, sizeof why_buf};
        hm_text sender = {sender_buf, 0, sizeof sender_buf};
        why_buf[0] = sender_buf[0] = '\0';
        accepted a;
        memset(&a, 0, sizeof a);
        a.msg = m;
        int bad = hm_check_header(m->subject, &m->headers, &a.h, &why);
        if (bad || m->delivered > 1)
            hm_sender_of(m->subject, m->headers.host, &sender);
        if (m->delivered > 1) {
            const char *host = bad ? sender_buf : a.h.host;
            size_t hl = bad ? sender.len : a.h.host_len;
            if (event(g, "redelivered", host, hl, m->subject, NULL, 1, "redelivered") != 0)
                return -1;
        }
        if (bad) {
            if (event(g, "rejected", sender_buf, sender.len, m->subject, NULL, 1, why_buf) != 0)
                return -1;
            continue;
        }
        if (hm_check_body(m->data, m->len, g->max_batch_bytes, &why) != 0) {
            if (event(g, "rejected", a.h.host, a.h.host_len, m->subject, &a.h, 1, why_buf) != 0)
                return -1;
            continue;
        }
        /* repeats inside the group (collect_store._not_stored) */
        char key[512];
        int kl = snprintf(key, sizeof key, "%.*s:%" PRId64 ":%" PRId64, (int)a.h.host_len, a.h.host,
                          a.h.epoch, a.h.seq);
        int added = 0;
        if (hm_strmap_upsert(&g->seen, key, (size_t)kl, &added) == NULL)
            return -1;
        if (!added) {
            if (event(g, "duplicate", a.h.host, a.h.host_len, m->subject, &a.h, 1,
                      "batch already stored (same host, epoch, seq)") != 0)
                return -1;
            continue;
        }
        a.host = copy_of(a.h.host, a.h.host_len);
        if (a.host == NULL)
            return -1;
        a.valid_utf8 = hm_utf8_valid(m->data, m->len);
        if (hm_col_push(&g->work, &a) != 0) {
            free(a.host);
            return -1;
        }
    }
    return 0;
}

/* The newest seq stored per host:epoch (NUL-free key), as int64_t*. */
static int64_t *newest_of(hm_collect_group *g, const char *host, size_t host_len, int64_t epoch,
                          bool add)
{
    char key[256];
    int kl = snprintf(key, sizeof key, "%.*s:%" PRId64, (int)host_len, host, epoch);
    if (kl < 0 || (size_t)kl >= sizeof key)
        return NULL;
    if (!add) {
        hm_strmap_slot *s = hm_strmap_find(&g->newest, key, (size_t)kl);
        return s ? s->value : NULL;
    }
    int added = 0;
    hm_strmap_slot *s = hm_strmap_upsert(&g->newest, key, (size_t)kl, &added);
    if (s == NULL)
        return NULL;
    if (added) {
        s->value = calloc(1, sizeof(int64_t));
        if (s->value == NULL) {
            hm_strmap_remove(&g->newest, s);
            return NULL;
        }
    }
    return s->value;
}

/* collect_raw._maybe_stored: a redelivery, a replay, or at or below the
 * newest seq stored for its (host, epoch). */
static bool maybe_stored(hm_collect_group *g, const hm_batch_header *h, const hm_collect_msg *m)
{
    if (m->delivered > 1 || h->replay)
        return true;
    const int64_t *newest = newest_of(g, h->host, h->host_len, h->epoch, false);
    return newest != NULL && h->seq <= *newest;
}

int hm_group_note_stored(hm_collect_group *g, const char *host, size_t host_len, int64_t epoch,
                         int64_t seq)
{
    int64_t *newest = newest_of(g, host, host_len, epoch, true);
    if (newest == NULL)
        return -1;
    if (seq > *newest)
        *newest = seq;
    return 0;
}

int hm_group_build(hm_collect_group *g, const hm_collect_msg *msgs, size_t n, int64_t received_us,
                   hm_error *err)
{
    reset(g);
    hm_line_reader_new_group(&g->reader);
    if (accept_all(g, msgs, n) != 0)
        return hm_error_set(err, "collect: out of memory checking %zu messages", n);
    accepted *a = g->work.p;
    size_t na = g->work.n;
    /* Python reads a group that is not valid UTF-8 with its exact parser
     * only: decided over the batches before the host check... */
    bool all_valid = true;
    for (size_t i = 0; i < na; i++)
        all_valid &= a[i].valid_utf8;
    int32_t row = 0;
    bool honest_valid = true;
    for (size_t i = 0; i < na; i++) {
        const hm_collect_msg *m = a[i].msg;
        if (hm_read_batch(&g->reader, &g->cols, row, a[i].h.host, a[i].h.host_len, m->data, m->len,
                          !all_valid, &a[i].v) != 0)
            return hm_error_set(err, "collect: out of memory reading a batch of %s", a[i].host);
        if (a[i].v.liar) {
            a[i].lie = dup_or_null(a[i].v.lie);
            if (a[i].lie == NULL)
                return hm_error_set(err, "collect: out of memory");
            continue;
        }
        a[i].reason_fast = dup_or_null(a[i].v.reason_fast_mode);
        a[i].reason_exact = dup_or_null(a[i].v.reason_exact_mode);
        honest_valid &= a[i].valid_utf8;
        row++;
    }
    /* ... and again over the honest ones for the ingest's reasons and periods */
    for (size_t i = 0; i < na; i++) {
        if (a[i].v.liar &&
            event(g, "rejected", a[i].h.host, a[i].h.host_len, a[i].msg->subject, &a[i].h, 1, a[i].lie) != 0)
            return hm_error_set(err, "collect: out of memory");
    }
    if (hm_group_cols_dedupe(&g->cols) != 0 || hm_group_cols_sort(&g->cols, g->reader.series_made) != 0)
        return hm_error_set(err, "collect: out of memory");
    row = 0;
    for (size_t i = 0; i < na; i++) {
        if (a[i].v.liar)
            continue;
        const hm_collect_msg *m = a[i].msg;
        const hm_batch_header *h = &a[i].h;
        bool period = honest_valid && a[i].v.has_fast_time;
        const char *reason = honest_valid ? a[i].reason_fast : a[i].reason_exact;
        if (hm_strcol_add(&g->b_host, h->host, h->host_len) != 0 ||
            hm_strcol_add(&g->b_subject, m->subject, strlen(m->subject)) != 0 ||
            hm_col_i64(&g->b_epoch, h->epoch) != 0 || hm_col_i64(&g->b_seq, h->seq) != 0 ||
            hm_col_i64(&g->b_lines, a[i].v.lines) != 0 ||
            hm_col_i64(&g->b_period_ns, period ? a[i].v.newest_fast_time_ns : 0) != 0 ||
            hm_col_u8(&g->b_period_valid, period) != 0 || hm_col_i64(&g->b_dropped, h->dropped) != 0 ||
            hm_col_u8(&g->b_replay, h->replay) != 0 || hm_col_i64(&g->b_stream_seq, m->stream_seq) != 0 ||
            hm_col_i64(&g->b_received_us, received_us) != 0 ||
            (maybe_stored(g, h, m) && hm_col_i32(&g->recheck, row) != 0) ||
            (a[i].v.malformed > 0 && event(g, "malformed_lines", h->host, h->host_len, m->subject, h,
                                           a[i].v.malformed, reason ? reason : "") != 0))
            return hm_error_set(err, "collect: out of memory");
        row++;
    }
    return 0;
}

int hm_group_committed(hm_collect_group *g)
{
    hm_line_reader_committed(&g->reader, &g->cols);
    const int64_t *epoch = g->b_epoch.p, *seq = g->b_seq.p;
    const int32_t *off = g->b_host.offsets.p;
    const char *hosts = g->b_host.bytes.p;
    for (size_t i = 0; i < g->b_epoch.n; i++)
        if (hm_group_note_stored(g, hosts + off[i], (size_t)(off[i + 1] - off[i]), epoch[i], seq[i]) != 0)
            return -1;
    return 0;
}
