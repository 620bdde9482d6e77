/* JetStream pull of a durable consumer on an inbox of our own, written on
 * libnats' core calls only (a plain subscription and publishes), for the
 * reducers and the collector alike.
 *
 * Why not libnats' pull subscription (js_PullSubscribe + Fetch): with
 * libnats 3.4.1 its handling of pull status replies that come after their
 * fetch ended races with the next fetch, and the rack reducers died of
 * heap corruption under live load (docs/transport.md, "The pull").
 *
 * The protocol (the server's, as in its docs): a request is published on
 * $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable> with a reply subject and a
 * JSON body {"batch":N, "max_bytes":B, "expires":NS} or {..., "no_wait":
 * true}; the server sends up to N messages to the reply subject (each
 * with its $JS.ACK reply for the ack), and ends a request it did not fill
 * with a status message: no body, a "Status" header: 404 (no messages,
 * no_wait), 408 (expired), 409 (consumer deleted, leadership change,
 * server shutdown, exceeded limits...). 100 is an idle heartbeat, or a
 * flow control request when it has a reply subject (answered empty).
 *
 * Each request replies to its own subject, <inbox>.<n>, under one
 * wildcard subscription <inbox>.*: a status reply is matched to the
 * request it ends, so a late 408 of an earlier request (lost to a
 * reconnect, or ended by our own deadline) is counted and ignored instead
 * of ending the request now open. Data messages carry their stream
 * subject, not the reply subject; one that comes late is simply taken by
 * the next call (it is delivered and unacked either way). */
#ifndef HM_JSPULL_H
#define HM_JSPULL_H

#include <stdbool.h>
#include <stdint.h>

#include <nats/nats.h>

#include "collect_cols.h"
#include "hm_error.h"

/* How a request ended (or the call returned with it still open). */
typedef enum hm_jspull_end {
    HM_JSPULL_OPEN,          /* still open on the server: more may come */
    HM_JSPULL_FULL,          /* every message asked for came */
    HM_JSPULL_NO_MESSAGES,   /* 404: nothing there (no_wait) */
    HM_JSPULL_EXPIRED,       /* 408: its expires passed */
    HM_JSPULL_CONFLICT,      /* 409: see hm_jspull.conflict */
    HM_JSPULL_LOST,          /* no answer by its expires + HM_JSPULL_LOST_MS */
    HM_JSPULL_NO_RESPONDERS, /* nothing serves the API subject (JetStream away) */
} hm_jspull_end;

/* hm_jspull_next, with messages in hand and none queued, waits this long
 * for more before it returns (a burst arriving): the caller's work per
 * call is not per message. Rack reducer CPU per batch against libnats'
 * own fetch, side by side (bench_reduce_soak --compare-bin): 1.12 with no
 * wait, 1.04-1.10 with 1 ms, 1.02 with 5 ms. */
#define HM_JSPULL_LINGER_MS 5

/* A request the server never answered (lost to a reconnect) is given up
 * this long after its own expiry. */
#define HM_JSPULL_LOST_MS 5000

typedef struct hm_jspull {
    natsConnection *nc;      /* not owned */
    natsSubscription *sub;   /* <inbox>.* */
    char inbox[256], next_subject[512];
    /* The request now open (0: none), what it may still bring, and when it
     * is given up for lost (nats_Now() ms). */
    uint64_t next_id, open_id;
    int64_t open_left, open_deadline_ms;
    /* The last 409's description (e.g. "Consumer Deleted"). */
    char conflict[128];
    /* Counters (for the callers' stats lines). */
    uint64_t requests, stale_status, heartbeats, flow_controls, conflicts, lost;
} hm_jspull;

/* Subscribes to a fresh inbox under the login's prefix (HUSHMON_NATS_USER:
 * a login reads only _INBOX.<user>.>, natsusers.inbox_prefix). */
int hm_jspull_open(hm_jspull *p, natsConnection *nc, const char *stream, const char *durable,
                   hm_error *err);

/* One request for up to ask messages and max_bytes (0: no limit), no_wait
 * when expires_ms is 0; its messages (natsMsg*, the caller destroys them)
 * are appended to out until it ends (*end). Messages already queued on the
 * inbox (late ones of an earlier request) are taken first and counted. -1
 * with err when the server refuses the request (a status other than 100,
 * 404, 408, 409) or the connection fails. */
int hm_jspull_request(hm_jspull *p, hm_col *out, int ask, int64_t max_bytes, int64_t expires_ms,
                      hm_jspull_end *end, hm_error *err);

/* The reducers' pull: up to batch messages appended to out, waiting at
 * most wait_ms for the first; returns once some came and nothing more
 * came in HM_JSPULL_LINGER_MS. Keeps one request (batch, expires wait_ms)
 * open on the server at a time: a new one is sent only when the last
 * ended (filled, 404/408/409, or lost), so a burst is taken by the request
 * already waiting and a quiet stream costs one request per wait_ms.
 * *end says how the open request ended during this call (HM_JSPULL_OPEN:
 * it did not, or none did). -1 as hm_jspull_request. */
int hm_jspull_next(hm_jspull *p, hm_col *out, int batch, int64_t wait_ms, hm_jspull_end *end,
                   hm_error *err);

/* Forgets the open request (the consumer was made anew: the old one died
 * with it), so the next call asks again. */
void hm_jspull_reset(hm_jspull *p);

/* Unsubscribes; what was delivered and not acked is sent again by the
 * server after the consumer's AckWait. */
void hm_jspull_close(hm_jspull *p);

#endif
