/* The reducer's use of libnats: one connection, one durable pull consumer,
 * JetStream publishes with a message id, acks by reply subject. */
#ifndef HM_NATS_IO_H
#define HM_NATS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "hm_error.h"

typedef struct hm_nats {
    natsConnection *nc;
    jsCtx *js;
    natsSubscription *sub;
    uint64_t ack_errors;
} hm_nats;

int hm_nats_connect(hm_nats *n, const char *url, const char *name, hm_error *err);
/* Binds to the durable pull consumer, creating it when missing (explicit
 * acks, the given AckWait and MaxAckPending). An existing consumer is used
 * as it is, so a second instance shares it. */
int hm_nats_pull(hm_nats *n, const char *stream, const char *durable, const char *filter,
                 int64_t ack_wait_ns, int64_t max_ack_pending, hm_error *err);
/* Up to batch messages, waiting up to timeout_ms; 0 messages is not an
 * error. The caller destroys the list. */
int hm_nats_fetch(hm_nats *n, natsMsgList *list, int batch, int64_t timeout_ms, hm_error *err);
/* A JetStream publish that waits for the stream's ack; *duplicate is set
 * when the stream dropped it as a duplicate of msg_id. */
int hm_nats_publish(hm_nats *n, const char *subject, const char *msg_id, const char *data,
                    size_t len, bool *duplicate, hm_error *err);
/* Acknowledges (or terminates: no redelivery) a message by its reply
 * subject. ctx is the hm_nats (matches hm_ack_fn). */
void hm_nats_ack(void *ctx, const char *reply, bool term);
/* Sends what is buffered (acks) and closes. */
void hm_nats_close(hm_nats *n);

#endif
