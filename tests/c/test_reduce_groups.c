/* The reducer's groups (c/transport/groups.c): when a group is due, how
 * long the next pull may wait, and that held messages are acked once, when
 * the last group holding them has published. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "groups.h"
#include "hm_test.h"

#define MS (INT64_C(1000000))

typedef struct acks {
    int count;
    char last[64];
} acks;

static void on_ack(void *ctx, const char *reply, bool term)
{
    acks *a = ctx;
    a->count += term ? 1000 : 1;
    snprintf(a->last, sizeof a->last, "%s", reply);
}

static int count_due(void *ctx, hm_group *grp)
{
    (void)grp;
    ++*(int *)ctx;
    return 0;
}

static void check_pull_wait(hm_test_counts *c)
{
    hm_groups g;
    memset(&g, 0, sizeof g);
    hm_error err;
    /* nothing open: the longest wait */
    CHECK(c, hm_groups_pull_wait_ms(&g, 0, 500 * MS, 10000 * MS, 50, 1000) == 1000);
    hm_group *a = hm_groups_get(&g, "job1", 1000, &err);
    hm_group *b = hm_groups_get(&g, "job2", 1000, &err);
    CHECK(c, a != NULL && b != NULL && a != b);
    CHECK(c, hm_groups_get(&g, "job1", 1000, &err) == a);
    a->has_data = b->has_data = true;
    a->first_add_ns = 0, a->last_add_ns = 300 * MS;  /* due at 800 ms */
    b->first_add_ns = 0, b->last_add_ns = 100 * MS;  /* due at 600 ms */
    /* at 200 ms: b is due first, in 400 ms */
    CHECK(c, hm_groups_pull_wait_ms(&g, 200 * MS, 500 * MS, 10000 * MS, 50, 1000) == 400);
    /* the hold limit can come first */
    CHECK(c, hm_groups_pull_wait_ms(&g, 200 * MS, 500 * MS, 250 * MS, 50, 1000) == 50);
    /* overdue: the shortest wait, never zero or negative */
    CHECK(c, hm_groups_pull_wait_ms(&g, 900 * MS, 500 * MS, 10000 * MS, 50, 1000) == 50);
    int due = 0;
    CHECK(c, hm_groups_due(&g, 650 * MS, 500 * MS, 10000 * MS, false, count_due, &due) == 0);
    CHECK(c, due == 1);
    due = 0;
    CHECK(c, hm_groups_due(&g, 850 * MS, 500 * MS, 10000 * MS, false, count_due, &due) == 0);
    CHECK(c, due == 2);
    hm_groups_free(&g);
}

static void check_held_messages(hm_test_counts *c)
{
    hm_groups g;
    memset(&g, 0, sizeof g);
    hm_error err;
    acks a = {0, ""};
    hm_group *j1 = hm_groups_get(&g, "job1", 1000, &err);
    hm_group *j2 = hm_groups_get(&g, "job2", 1000, &err);
    /* one batch of a node running two jobs: held by both groups */
    hm_pending *msg = hm_pending_new(&g, "$JS.ACK.reply.1", &err);
    CHECK(c, msg != NULL && hm_group_hold(j1, msg, &err) == 0 && hm_group_hold(j2, msg, &err) == 0);
    hm_pending_release_if_free(&g, msg, on_ack, &a);
    CHECK(c, a.count == 0 && g.pending_msgs == 1);
    CHECK(c, hm_group_published(&g, j1, 1, on_ack, &a, &err) == 0);
    CHECK(c, a.count == 0 && g.pending_msgs == 1); /* job2 still holds it */
    CHECK(c, hm_group_published(&g, j2, 2, on_ack, &a, &err) == 0);
    CHECK(c, a.count == 1 && strcmp(a.last, "$JS.ACK.reply.1") == 0 && g.pending_msgs == 0);
    CHECK(c, j1->emissions == 1 && !j1->has_data && j1->npending == 0);
    /* a message no group took is acked at once */
    hm_pending *alone = hm_pending_new(&g, "r2", &err);
    hm_pending_release_if_free(&g, alone, on_ack, &a);
    CHECK(c, a.count == 2 && g.pending_msgs == 0);
    /* pruned only after keep_ns since its emission */
    hm_groups_prune(&g, 7, 10);
    CHECK(c, g.map.count == 2);
    hm_groups_prune(&g, 52, 10);
    CHECK(c, g.map.count == 0);
    hm_groups_free(&g);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    check_pull_wait(&c);
    check_held_messages(&c);
    return hm_test_finish("test_reduce_groups", &c);
}
