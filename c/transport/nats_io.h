/* The reducer's use of libnats: one connection, one durable pull consumer
 * (pulled by jspull.c on an inbox of our own, not by libnats' pull
 * subscription), JetStream publishes with a message id, acks by reply
 * subject. */
#ifndef HM_NATS_IO_H
#define HM_NATS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "collect_cols.h"
#include "hm_error.h"
#include "jspull.h"

typedef struct hm_nats {
    natsConnection *nc;
    jsCtx *js;
    hm_jspull pull;
    bool pulling; /* pull opened (hm_nats_pull) */
    uint64_t ack_errors;
    /* The consumer, to bind again when it was made anew (an admin's
     * `deploy streams` after it was deleted or lost with a server's store);
     * its AckWait and creation time as the server last told them. */
    char stream[64], durable[160], filter[300];
    int64_t ack_wait_ns, created_ns;
    /* Pull health: transient errors are retried with backoff and logged at
     * most every HM_NATS_LOG_EVERY_NS; a pull that stays silent is checked. */
    int64_t last_msg_ns, last_check_ns, retry_at_ns, backoff_ns, last_log_ns;
    uint64_t fetch_errors, fetch_errors_unlogged, consumer_missing, resubscribed;
} hm_nats;

int hm_nats_connect(hm_nats *n, const char *url, const char *name, hm_error *err);
/* The same, but a first connection that fails (server away, login
 * refused, TLS refused) is an error now instead of retried in the
 * background: for a library whose caller wants one clear line. */
int hm_nats_connect_now(hm_nats *n, const char *url, const char *name, hm_error *err);
/* Binds to the durable pull consumer the admin step made (`deploy streams`:
 * a reducer never creates or redefines one, its login may not); a second
 * instance shares it. A missing consumer is an error whose message tells
 * the operator to declare it. n->ack_wait_ns is then its AckWait. */
int hm_nats_pull(hm_nats *n, const char *stream, const char *durable, const char *filter,
                 hm_error *err);
/* Up to batch messages (natsMsg*, the caller destroys them) appended to
 * out, waiting up to timeout_ms for the first (jspull.c: one request
 * open at a time, expiring after timeout_ms); 0 messages is not an error.
 * A transient error (a 409 status: consumer deleted, leadership change,
 * server shutdown; nothing answering the JetStream API; a request that
 * went unanswered; the server away or restarting) is counted, logged at
 * most every 10 s and retried with backoff (100 ms doubling to 5 s); a
 * consumer that is missing is counted (consumer_missing) and looked for
 * again the same way, with a line saying an admin declares it; once made
 * anew it is pulled again (DeliverAll: what it had not acked comes
 * again, the partials' ids and sources drop what was summarized already).
 * When no message came for HM_NATS_IDLE_CHECK_NS the consumer is checked
 * the same way, so a pull that was silently lost is noticed. Returns -1
 * only on a fatal error (the connection closed for good, out of memory):
 * the caller exits non-zero and its supervisor restarts it. */
int hm_nats_fetch(hm_nats *n, hm_col *out, int batch, int64_t timeout_ms, hm_error *err);
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
