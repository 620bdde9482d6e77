/* One fetched group of raw messages made into the tables of a RawGroup
 * (python/hushmon/transport/raw_group.py): each message checked as
 * collect_store._accept does, repeats inside the group dropped as
 * duplicates, liars rejected whole, lines read (collect_lines.c), batch
 * rows, events and the batches to look up again. No libnats here: the
 * caller gives the messages (collect_source.c from JetStream). */
#ifndef HM_COLLECT_GROUP_H
#define HM_COLLECT_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect_check.h"
#include "collect_cols.h"
#include "collect_lines.h"
#include "hm_error.h"

typedef struct hm_collect_msg {
    const char *subject;  /* NUL-terminated */
    hm_raw_headers headers;
    const char *data;
    size_t len;
    int64_t stream_seq;
    int64_t delivered;    /* 1 the first time */
} hm_collect_msg;

typedef struct hm_collect_group {
    hm_group_cols cols;
    /* batches */
    hm_strcol b_host, b_subject;
    hm_col b_epoch, b_seq, b_lines, b_period_ns, b_period_valid, b_dropped, b_replay, b_stream_seq,
        b_received_us;
    /* events; epoch and seq are NULL where has_key is 0 */
    hm_strcol e_kind, e_host, e_subject, e_reason;
    hm_col e_epoch, e_seq, e_has_key, e_count;
    hm_col recheck; /* int32 rows of batches */
    int64_t max_batch_bytes;
    hm_line_reader reader;
    hm_strmap seen;  /* host:epoch:seq of the group */
    hm_strmap newest; /* host:epoch -> int64_t* the newest seq stored (acked) */
    /* per accepted message of the group, while it is built */
    hm_col work;
    unsigned groups_since_settle; /* builds since room was last given back */
} hm_collect_group;

int hm_group_init(hm_collect_group *g, int64_t max_batch_bytes);
void hm_group_free(hm_collect_group *g);
/* Builds the group's tables from msgs (the last group's are dropped;
 * series put in it and not committed are forgotten). -1 with err only
 * when memory runs out: a bad message is an event, never an error. */
int hm_group_build(hm_collect_group *g, const hm_collect_msg *msgs, size_t n, int64_t received_us,
                   hm_error *err);
/* The group's rows are stored: its series are known from now on, its
 * batches raise the newest seq stored per (host, epoch). -1: no memory. */
int hm_group_committed(hm_collect_group *g);
/* A batch stored (by any collector, read from the store at start): later
 * batches at or below it go to recheck. -1: no memory. */
int hm_group_note_stored(hm_collect_group *g, const char *host, size_t host_len, int64_t epoch,
                         int64_t seq);

#endif
