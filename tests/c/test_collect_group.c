/* The collector's groups (c/transport/collect_group.c): a backlog's big
 * group grows the columns and the sort's scratch; once the groups of a
 * whole settle window are small again that room is given back, and the
 * groups built after it hold the same rows as before. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect_group.h"
#include "hm_test.h"

#define FIELDS 4
#define MAX_BATCH_BYTES (1 << 20)
#define T0_NS INT64_C(1700000000000000000)

typedef struct batch {
    char subject[64], host[32], epoch[24], seq[24], lines[24];
    char *data;
} batch;

/* n batches of lines lines each (FIELDS values a line), hosts n0..n{n-1},
 * seq from seq0: times rise within a host, so the samples come in
 * host order, not (series, time) order, and the group sorts them. */
static int make_group(batch *b, hm_collect_msg *msgs, size_t n, int lines, int64_t seq0)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(b[i].host, sizeof b[i].host, "n%zu", i);
        snprintf(b[i].subject, sizeof b[i].subject, "hm.raw.r1.%s", b[i].host);
        snprintf(b[i].epoch, sizeof b[i].epoch, "1");
        snprintf(b[i].seq, sizeof b[i].seq, "%" PRId64, seq0);
        snprintf(b[i].lines, sizeof b[i].lines, "%d", lines);
        size_t cap = (size_t)lines * 128, len = 0;
        b[i].data = malloc(cap);
        if (b[i].data == NULL)
            return -1;
        for (int k = 0; k < lines; k++)
            len += (size_t)snprintf(b[i].data + len, cap - len,
                                    "cpu,host=%s f0=%d,f1=2.5,f2=3,f3=4 %" PRId64 "\n", b[i].host,
                                    k, T0_NS + (seq0 * lines + k) * INT64_C(1000000000));
        hm_collect_msg *m = &msgs[i];
        memset(m, 0, sizeof *m);
        m->subject = b[i].subject;
        m->headers.host = b[i].host;
        m->headers.epoch = b[i].epoch;
        m->headers.seq = b[i].seq;
        m->headers.lines = b[i].lines;
        m->headers.dropped = "0";
        m->data = b[i].data;
        m->len = len;
        m->stream_seq = seq0 * (int64_t)n + (int64_t)i + 1;
        m->delivered = 1;
    }
    return 0;
}

static void free_group(batch *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(b[i].data);
}

/* Builds a group of n batches; 0 when its rows are all there and sorted. */
static int build(hm_collect_group *g, size_t n, int lines, int64_t seq0)
{
    batch *b = calloc(n, sizeof *b);
    hm_collect_msg *msgs = calloc(n, sizeof *msgs);
    hm_error err;
    int rc = b && msgs && make_group(b, msgs, n, lines, seq0) == 0 &&
                     hm_group_build(g, msgs, n, 0, &err) == 0 && hm_group_committed(g) == 0
                 ? 0
                 : -1;
    if (rc == 0 && g->cols.s_value.n != n * (size_t)lines * FIELDS)
        rc = -1;
    const int64_t *sid = g->cols.s_series_id.p, *t = g->cols.s_time_ns.p;
    for (size_t i = 1; rc == 0 && i < g->cols.s_series_id.n; i++)
        if (sid[i] < sid[i - 1] || (sid[i] == sid[i - 1] && t[i] <= t[i - 1]))
            rc = -1;
    if (b)
        free_group(b, n);
    free(b);
    free(msgs);
    return rc;
}

static size_t room_bytes(const hm_collect_group *g)
{
    const hm_group_cols *c = &g->cols;
    return c->s_series_id.cap * c->s_series_id.item + c->s_time_ns.cap * c->s_time_ns.item +
           c->s_value.cap * c->s_value.item + c->s_batch.cap * c->s_batch.item +
           c->sort_rows_cap * 32 + c->line_set_cap * sizeof *c->line_set;
}

static void check_backlog_room_given_back(hm_test_counts *c)
{
    hm_collect_group g;
    CHECK(c, hm_group_init(&g, MAX_BATCH_BYTES) == 0);
    /* a backlog: 2000 batches of 20 lines, 160,000 samples */
    CHECK(c, build(&g, 2000, 20, 1) == 0);
    size_t big = room_bytes(&g);
    CHECK(c, big > (size_t)8 << 20);
    CHECK(c, g.cols.sort_rows_cap >= 160000);
    /* steady groups of 10 batches: the room stays for the window the big
     * group is in, then goes */
    int ok = 0;
    for (int64_t k = 0; k < 40; k++)
        ok += build(&g, 10, 2, 100 + k) == 0;
    CHECK(c, ok == 40);
    CHECK(c, room_bytes(&g) == big);
    for (int64_t k = 40; k < 140; k++)
        ok += build(&g, 10, 2, 100 + k) == 0;
    CHECK(c, ok == 140);
    size_t small = room_bytes(&g);
    CHECK(c, small < (size_t)1 << 20);
    if (small >= (size_t)1 << 20)
        fprintf(stderr, "room after the backlog: %zu bytes (%zu at it)\n", small, big);
    /* a big group again grows it again, rows intact */
    CHECK(c, build(&g, 2000, 20, 1000) == 0);
    CHECK(c, room_bytes(&g) >= big / 2);
    hm_group_free(&g);
}

static void check_steady_room_kept(hm_test_counts *c)
{
    /* groups of one size never lose their room (no realloc each window) */
    hm_collect_group g;
    CHECK(c, hm_group_init(&g, MAX_BATCH_BYTES) == 0);
    int ok = 0;
    CHECK(c, build(&g, 500, 20, 1) == 0);
    void *p = g.cols.s_value.p;
    size_t cap = g.cols.s_value.cap;
    for (int64_t k = 0; k < 140; k++)
        ok += build(&g, 500, 20, 2 + k) == 0;
    CHECK(c, ok == 140);
    CHECK(c, g.cols.s_value.p == p && g.cols.s_value.cap == cap);
    hm_group_free(&g);
}

static void check_room_settle(hm_test_counts *c)
{
    /* under 1 MiB: kept whatever it held */
    void *p = malloc(1000 * 8);
    CHECK(c, hm_room_settle(&p, 1000, 0, 8) == 1000);
    free(p);
    /* 4 MiB that held 1000 items: 1024 of them kept */
    p = malloc((size_t)1 << 22);
    CHECK(c, hm_room_settle(&p, (size_t)1 << 19, 1000, 8) == 1024);
    free(p);
    /* used more than a quarter of it: kept */
    p = malloc((size_t)1 << 22);
    CHECK(c, hm_room_settle(&p, (size_t)1 << 19, 140000, 8) == (size_t)1 << 19);
    free(p);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    check_room_settle(&c);
    check_backlog_room_given_back(&c);
    check_steady_room_kept(&c);
    return hm_test_finish("test_collect_group", &c);
}
