/* The nats sink's outbox (c/agent/sinks/nats_outbox.c): sequence numbers,
 * the acked cursor over out-of-order acks and drops, what a restart reads
 * back (after a clean close and after a kill), a log cut mid-record, a
 * damaged log, and the rewrite. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hm_test.h"
#include "sinks/nats_outbox.h"

static char top[] = "/tmp/hm_outbox_XXXXXX";
static char dir[200]; /* this case's spool directory */

static void fresh_dir(const char *name)
{
    snprintf(dir, sizeof dir, "%s/%s", top, name);
    if (mkdir(dir, 0755) < 0)
        perror(dir);
}

static void append_raw(const char *text)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, HM_OUTBOX_FILE);
    FILE *f = fopen(path, "a");
    if (f != NULL) {
        fputs(text, f);
        fclose(f);
    }
}

static uint64_t add(hm_outbox *o, uint64_t file_seq, uint64_t off)
{
    uint64_t seq = 0;
    hm_error err;
    if (hm_outbox_add(o, 100, file_seq, off, 10, 2, &seq, &err) < 0)
        fprintf(stderr, "add: %s\n", err.msg);
    return seq;
}

static void test_sequence_and_cursor(hm_test_counts *c)
{
    fresh_dir("sequence_and_cursor");
    hm_outbox o;
    hm_error err;
    CHECK(c, hm_outbox_open(&o, dir, 100, 5000, &err) == 0);
    CHECK(c, o.epoch_ns == 5000 && o.next_seq == 1 && o.acked_seq == 0);
    for (int i = 0; i < 5; i++)
        CHECK(c, add(&o, 0, (uint64_t)i * 10) == (uint64_t)i + 1);
    CHECK(c, hm_outbox_pending(&o) == 5);
    hm_outbox_entry *e;
    for (uint64_t s = 1; s <= 5; s++) {
        e = hm_outbox_next_unsent(&o);
        CHECK(c, e != NULL && e->seq == s);
        hm_outbox_mark_sent(&o, e, 1000);
    }
    CHECK(c, o.inflight == 5 && hm_outbox_next_unsent(&o) == NULL);
    /* Out of order: 2 then 1 moves the cursor to 2 only after 1. */
    hm_outbox_ack(&o, 2);
    CHECK(c, o.acked_seq == 0);
    hm_outbox_ack(&o, 1);
    CHECK(c, o.acked_seq == 2 && o.inflight == 3);
    hm_outbox_ack(&o, 1); /* again: ignored */
    CHECK(c, o.acked_seq == 2 && o.inflight == 3);
    /* Lost acks: 3 and 4 go back to unsent after the timeout, 5 too. */
    CHECK(c, hm_outbox_requeue(&o, 999) == 0);
    CHECK(c, hm_outbox_requeue(&o, 1001) == 3 && o.inflight == 0);
    e = hm_outbox_next_unsent(&o);
    CHECK(c, e != NULL && e->seq == 3);
    /* 3 dropped (its lines counted), 4 acked: cursor jumps to 4. */
    CHECK(c, hm_outbox_drop(&o, 3, 2, &err) == 0);
    hm_outbox_ack(&o, 4);
    CHECK(c, o.acked_seq == 4 && o.dropped_batches == 1 && o.dropped_lines == 2);
    CHECK(c, hm_outbox_pending(&o) == 1 && hm_outbox_find(&o, 4) == NULL);
    CHECK(c, hm_outbox_find(&o, 5) != NULL && hm_outbox_find(&o, 6) == NULL);
    CHECK(c, hm_outbox_sync(&o, &err) == 0);
    CHECK(c, hm_outbox_close(&o, &err) == 0);

    /* Restart: same epoch, seq goes on, 5 pending and unsent. */
    CHECK(c, hm_outbox_open(&o, dir, 200, 9999, &err) == 0);
    CHECK(c, o.epoch_ns == 5000 && o.next_seq == 6 && o.acked_seq == 4);
    CHECK(c, o.dropped_batches == 1 && o.dropped_lines == 2);
    CHECK(c, hm_outbox_pending(&o) == 1);
    e = hm_outbox_next_unsent(&o);
    CHECK(c, e != NULL && e->seq == 5 && e->start_ns == 100 && e->offset == 40 && e->len == 10);
    CHECK(c, hm_outbox_known_run(&o, 100) && hm_outbox_known_run(&o, 200));
    CHECK(c, add(&o, 0, 0) == 6);
    hm_outbox_close(&o, &err);
}

static void test_kill_and_cut_record(hm_test_counts *c)
{
    fresh_dir("kill_and_cut_record");
    hm_outbox o;
    hm_error err;
    CHECK(c, hm_outbox_open(&o, dir, 300, 1, &err) == 0);
    uint64_t first = o.next_seq;
    add(&o, 1, 0);
    add(&o, 1, 10);
    add(&o, 2, 0);
    hm_outbox_mark_sent(&o, hm_outbox_next_unsent(&o), 5);
    hm_outbox_ack(&o, first);
    /* A kill -9: no close, no sync (the ack of `first` is not written),
     * and a record cut in the middle. */
    free(o.e);
    close(o.fd);
    append_raw("B 999 300 2 10 1");
    CHECK(c, hm_outbox_open(&o, dir, 400, 2, &err) == 0);
    CHECK(c, o.next_seq == first + 3); /* the cut record is not a batch */
    CHECK(c, o.acked_seq == first - 1); /* its ack was lost: sent again */
    CHECK(c, hm_outbox_pending(&o) == 3);
    CHECK(c, hm_outbox_file_pending(&o, 100, 1) == first + 1);
    CHECK(c, hm_outbox_file_pending(&o, 100, 2) == first + 2);
    /* The spool bound removed file 1 (of run 100, as add() writes): its
     * two batches are dropped. */
    uint64_t dropped = o.dropped_batches;
    CHECK(c, hm_outbox_file_removed(&o, 100, 1, &err) == 0);
    CHECK(c, o.dropped_batches == dropped + 2 && o.acked_seq == first + 1);
    CHECK(c, hm_outbox_file_pending(&o, 100, 1) == 0);
    hm_outbox_close(&o, &err);
    CHECK(c, hm_outbox_open(&o, dir, 500, 3, &err) == 0);
    CHECK(c, o.dropped_batches == dropped + 2 && o.acked_seq == first + 1);
    CHECK(c, hm_outbox_pending(&o) == 1);
    hm_outbox_close(&o, &err);
}

static void test_drops_inside_window_survive_rewrite(hm_test_counts *c)
{
    fresh_dir("drops_inside_window_survive_rewrite");
    hm_outbox o;
    hm_error err;
    CHECK(c, hm_outbox_open(&o, dir, 600, 1, &err) == 0);
    uint64_t a = add(&o, 7, 0), b = add(&o, 7, 10);
    uint64_t dropped = o.dropped_batches;
    CHECK(c, hm_outbox_drop(&o, b, 2, &err) == 0); /* behind a pending one */
    CHECK(c, o.acked_seq == a - 1);
    hm_outbox_close(&o, &err);
    /* Two reopenings (two rewrites): the drop is counted once. */
    CHECK(c, hm_outbox_open(&o, dir, 601, 1, &err) == 0);
    hm_outbox_close(&o, &err);
    CHECK(c, hm_outbox_open(&o, dir, 602, 1, &err) == 0);
    CHECK(c, o.dropped_batches == dropped + 1);
    CHECK(c, hm_outbox_pending(&o) == 1 && hm_outbox_find(&o, a) != NULL);
    hm_outbox_ack(&o, a);
    CHECK(c, o.acked_seq == b);
    hm_outbox_close(&o, &err);
}

static void test_damaged_log_starts_a_new_epoch(hm_test_counts *c)
{
    /* after the last case's log */
    append_raw("this is not a record\n");
    hm_outbox o;
    hm_error err;
    CHECK(c, hm_outbox_open(&o, dir, 700, 777, &err) == 0);
    CHECK(c, o.epoch_ns == 777 && o.next_seq == 1 && hm_outbox_pending(&o) == 0);
    hm_outbox_close(&o, &err);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q '^%s.bad-'", dir, HM_OUTBOX_FILE);
    CHECK(c, system(cmd) == 0); /* kept for a person to look at */
}

int main(void)
{
    hm_test_counts c = {0, 0};
    if (mkdtemp(top) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_sequence_and_cursor(&c);
    test_kill_and_cut_record(&c);
    test_drops_inside_window_survive_rewrite(&c);
    test_damaged_log_starts_a_new_epoch(&c);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", top);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", top);
    return hm_test_finish("test_agent_outbox", &c);
}
