/* The nats sink's outbox: which spooled batches are not yet acknowledged
 * by the stream, and the per-agent sequence that numbers them. No libnats
 * here, so the unit test (tests/c/test_agent_outbox.c) and the sanitizer
 * build cover it whole.
 *
 * State lives in <spool_dir>/nats.outbox, an append-only text log of one
 * record per line (a record is one write(2), so a kill -9 leaves whole
 * records; a power loss may lose the last ones, as it loses the unsynced
 * tail of the spool file itself):
 *
 *   hm-outbox 1 epoch=E next=N acked=A dropped=D dropped_lines=L   header
 *   R <start_ns>                          a run of the agent (spool file prefix)
 *   B <seq> <start_ns> <file_seq> <offset> <len> <lines>   a batch, written
 *                                         BEFORE its bytes go to the spool
 *   A <seq>                               every batch <= seq is done
 *   X <seq> <lines>                       batch dropped (spool bound, cut)
 *
 * "Done" = acknowledged by the stream or dropped; acked_seq is the highest
 * seq with every batch up to it done. On open the log is read and
 * rewritten (header, runs, pending batches), and again when it grows. */
#ifndef HM_NATS_OUTBOX_H
#define HM_NATS_OUTBOX_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

#define HM_OUTBOX_FILE "nats.outbox"
#define HM_OUTBOX_RUNS_MAX 64

typedef enum hm_outbox_state {
    HM_OUTBOX_UNSENT = 0, /* in the spool, to be published */
    HM_OUTBOX_SENT,       /* published, ack awaited */
    HM_OUTBOX_ACKED,
    HM_OUTBOX_DROPPED,
} hm_outbox_state;

typedef struct hm_outbox_entry {
    uint64_t seq;
    int64_t start_ns;   /* spool file: <host>-<start_ns>-<file_seq>.lp */
    uint64_t file_seq;
    uint64_t offset, len, lines;
    int64_t sent_ns;    /* when published (SENT) */
    hm_outbox_state state;
} hm_outbox_entry;

typedef struct hm_outbox {
    char path[PATH_MAX];
    int fd;
    int64_t epoch_ns;
    uint64_t next_seq;        /* the next batch's seq (first is 1) */
    uint64_t acked_seq;       /* every batch <= this is done */
    uint64_t acked_written;   /* acked_seq as the log last says it */
    uint64_t dropped_batches; /* this epoch */
    uint64_t dropped_lines;
    uint64_t inflight;        /* entries SENT */
    uint64_t records;         /* records appended since the last rewrite */
    int64_t runs[HM_OUTBOX_RUNS_MAX];
    size_t nruns;
    hm_outbox_entry *e;       /* e[head .. n-1]: seq > acked_seq, ascending */
    size_t head, n, cap;
} hm_outbox;

/* Reads (or creates, with epoch now_ns) <dir>/nats.outbox, records run
 * run_ns and rewrites the log. Every pending batch is UNSENT after it. */
int hm_outbox_open(hm_outbox *o, const char *dir, int64_t run_ns, int64_t now_ns, hm_error *err);
/* Writes the acked cursor and releases (the log stays for the next run). */
int hm_outbox_close(hm_outbox *o, hm_error *err);

/* Numbers a batch about to be spooled at (start_ns, file_seq, offset). */
int hm_outbox_add(hm_outbox *o, int64_t start_ns, uint64_t file_seq, uint64_t offset,
                  uint64_t len, uint64_t lines, uint64_t *seq, hm_error *err);
/* The pending entry for seq, NULL if done or unknown. */
hm_outbox_entry *hm_outbox_find(hm_outbox *o, uint64_t seq);
/* The lowest-seq UNSENT entry, NULL if none. */
hm_outbox_entry *hm_outbox_next_unsent(hm_outbox *o);
void hm_outbox_mark_sent(hm_outbox *o, hm_outbox_entry *e, int64_t now_ns);
/* The stream acknowledged seq (unknown or done seqs are ignored). */
void hm_outbox_ack(hm_outbox *o, uint64_t seq);
/* Back to UNSENT: a failed publish or a negative ack. */
void hm_outbox_unsend(hm_outbox *o, hm_outbox_entry *e);
/* SENT entries published before older_than_ns go back to UNSENT (lost
 * acks; INT64_MAX = all, after a reconnection). Returns how many. */
uint64_t hm_outbox_requeue(hm_outbox *o, int64_t older_than_ns);
/* Drops a pending batch; lines lost (0 when counted elsewhere) are added
 * to dropped_lines. */
int hm_outbox_drop(hm_outbox *o, uint64_t seq, uint64_t lines_lost, hm_error *err);
/* The spool's bound removed a file: every pending batch in it is dropped. */
int hm_outbox_file_removed(hm_outbox *o, int64_t start_ns, uint64_t file_seq, hm_error *err);
/* Highest pending seq in a file, 0 if none is pending there. */
uint64_t hm_outbox_file_pending(const hm_outbox *o, int64_t start_ns, uint64_t file_seq);
bool hm_outbox_known_run(const hm_outbox *o, int64_t start_ns);
/* Entries not done. */
uint64_t hm_outbox_pending(const hm_outbox *o);
/* Appends "A <acked_seq>" if it moved, and rewrites the log when long. */
int hm_outbox_sync(hm_outbox *o, hm_error *err);

#endif
