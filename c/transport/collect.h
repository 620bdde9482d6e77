/* libhushmon_collect: the collector's hot path in C (docs/transport.md,
 * "The C hot path"). Pulls raw batches from the durable consumer
 * collect-raw on HM_RAW (several processes may bind it: a work queue),
 * checks and reads them as the Python path does, and hands each group's
 * rows as columns (python/hushmon/transport/fastcollect.py makes them a
 * RawGroup). The caller stores the group, then acks it: one ack per
 * message, never AckAll (which would ack another collector's messages).
 *
 * Errors: functions return -1 (NULL for open) with one line in the
 * caller's err[0..cap). A handle is used by one thread at a time; the
 * library holds no global state of its own. */
#ifndef HM_COLLECT_H
#define HM_COLLECT_H

#include <stddef.h>
#include <stdint.h>

/* The library's only exported names (the rest is built hidden). */
#define HM_COLLECT_API __attribute__((visibility("default")))

typedef struct hm_collect hm_collect;

/* A string column: rows + 1 int32 offsets into bytes (Arrow's layout). */
typedef struct hm_collect_strs {
    const int32_t *offsets;
    const char *bytes;
    int64_t nbytes;
} hm_collect_strs;

/* The last group's columns, valid until the next fetch or close. */
typedef struct hm_collect_view {
    int64_t messages, message_bytes;
    int64_t n_samples;
    const int64_t *s_series_id, *s_time_ns;
    const double *s_value;
    const int32_t *s_batch;
    int64_t n_series;
    const int64_t *se_id;
    hm_collect_strs se_host, se_measurement, se_tags, se_field;
    int64_t n_activity;
    hm_collect_strs a_job, a_host;
    const int64_t *a_time_ns;
    const int32_t *a_batch;
    int64_t n_batches;
    hm_collect_strs b_host, b_subject;
    const int64_t *b_epoch, *b_seq, *b_lines, *b_period_ns;
    const uint8_t *b_period_valid;
    const int64_t *b_dropped;
    const uint8_t *b_replay;
    const int64_t *b_stream_seq, *b_received_us;
    int64_t n_events;
    hm_collect_strs e_kind, e_host, e_subject, e_reason;
    const int64_t *e_epoch, *e_seq;
    const uint8_t *e_has_key;
    const int64_t *e_count;
    int64_t n_recheck;
    const int32_t *recheck;
} hm_collect_view;

/* Connects (login and TLS from the environment, as every hushmon NATS
 * client: c/common/hm_nats_client.h) and binds the durable consumer
 * (never creates it). A batch above max_batch_bytes is rejected
 * ("oversized"). */
HM_COLLECT_API hm_collect *hm_collect_open(const char *url, const char *stream, const char *durable,
                            int64_t max_batch_bytes, char *err, size_t cap);
/* Pulls up to max_msgs messages and max_bytes (0: no byte bound), waiting
 * up to timeout_ms when none is there, and builds their group into view.
 * Messages of a previous group not acked are let go (the server sends
 * them again after AckWait). Returns the number of messages (0: none
 * came), or -1. */
HM_COLLECT_API int64_t hm_collect_fetch(hm_collect *c, int max_msgs, int64_t max_bytes, int64_t timeout_ms,
                         hm_collect_view *view, char *err, size_t cap);
/* Acks each message of the last group and flushes; its series count as
 * stored from now on. 0, or -1 (then nothing is known stored: the
 * messages come again and are looked up as redeliveries). */
HM_COLLECT_API int hm_collect_ack(hm_collect *c, char *err, size_t cap);
/* Tells the server the last group is still being stored (+WPI for each
 * of its messages): its ack wait starts again, so a slow commit is not
 * redelivered to another collector meanwhile. Call it a few times per
 * ack wait while a group is in hand. 0, or -1. */
HM_COLLECT_API int hm_collect_in_progress(hm_collect *c, char *err, size_t cap);
/* Tells the source the newest seq stored for (host, epoch) (the store's,
 * at start: transport_batches): a later batch at or below it goes to
 * recheck. Batches it acked count by themselves. 0, or -1. */
HM_COLLECT_API int hm_collect_note_stored(hm_collect *c, const char *host, int64_t epoch, int64_t seq,
                                          char *err, size_t cap);
/* Lets unacked messages go, closes the connection, frees c. */
HM_COLLECT_API void hm_collect_close(hm_collect *c);

#endif
