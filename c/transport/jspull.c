#include "jspull.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hm_jspull_open(hm_jspull *p, natsConnection *nc, const char *stream, const char *durable,
                   hm_error *err)
{
    memset(p, 0, sizeof *p);
    p->nc = nc;
    natsInbox *box = NULL;
    natsStatus s = natsInbox_Create(&box);
    if (s != NATS_OK)
        return hm_error_set(err, "inbox: %s", natsStatus_GetText(s));
    /* a login reads only its own inbox prefix (natsusers.inbox_prefix) */
    const char *user = getenv("HUSHMON_NATS_USER");
    const char *unique = strchr((const char *)box, '.');
    snprintf(p->inbox, sizeof p->inbox, "_INBOX.%s%s%s", user && *user ? user : "",
             user && *user ? "." : "", unique ? unique + 1 : (const char *)box);
    natsInbox_Destroy(box);
    if ((size_t)snprintf(p->next_subject, sizeof p->next_subject, "$JS.API.CONSUMER.MSG.NEXT.%s.%s",
                         stream, durable) >= sizeof p->next_subject)
        return hm_error_set(err, "consumer %s on %s: name too long", durable, stream);
    char wildcard[sizeof p->inbox + 2];
    snprintf(wildcard, sizeof wildcard, "%s.*", p->inbox);
    s = natsConnection_SubscribeSync(&p->sub, nc, wildcard);
    /* A collector's group of 2048 batches of up to 1 MiB may wait here;
     * what waits is bounded by what was asked for (the requests' batch). */
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(p->sub, -1, -1);
    if (s != NATS_OK) {
        const char *last = nats_GetLastError(NULL);
        natsSubscription_Destroy(p->sub);
        p->sub = NULL;
        return hm_error_set(err, "subscribing %s: %s", wildcard,
                            last && *last ? last : natsStatus_GetText(s));
    }
    return 0;
}

/* A status message of the pull protocol: its code, or NULL for a message. */
static const char *status_of(natsMsg *m)
{
    const char *st = NULL;
    if (natsMsg_GetDataLength(m) != 0 || natsMsgHeader_Get(m, "Status", &st) != NATS_OK)
        return NULL;
    return st;
}

/* The request a status replies to: the number after "<inbox>.", 0 if none. */
static uint64_t request_of(const hm_jspull *p, natsMsg *m)
{
    const char *subject = natsMsg_GetSubject(m);
    size_t n = strlen(p->inbox);
    if (subject == NULL || strncmp(subject, p->inbox, n) != 0 || subject[n] != '.')
        return 0;
    char *end = NULL;
    unsigned long long id = strtoull(subject + n + 1, &end, 10);
    return end && *end == '\0' ? (uint64_t)id : 0;
}

static void end_open(hm_jspull *p, hm_jspull_end *end, hm_jspull_end how)
{
    p->open_id = 0;
    p->open_left = 0;
    *end = how;
}

/* One message from the inbox, waiting up to timeout_ms (0: only one
 * already queued). 1: data, appended to out; 0: nothing came, or a status
 * (handled here: one that ends the open request sets *end); -1: error. */
static int take(hm_jspull *p, hm_col *out, int64_t timeout_ms, hm_jspull_end *end, hm_error *err)
{
    natsMsg *m = NULL;
    natsStatus s = natsSubscription_NextMsg(&m, p->sub, timeout_ms);
    if (s == NATS_TIMEOUT)
        return 0;
    if (s == NATS_NO_RESPONDERS) { /* libnats turns the 503 into this */
        end_open(p, end, HM_JSPULL_NO_RESPONDERS);
        return 0;
    }
    if (s != NATS_OK)
        return hm_error_set(err, "pull: %s", natsStatus_GetText(s));
    const char *st = status_of(m);
    if (st == NULL) {
        if (hm_col_push(out, &m) != 0) {
            natsMsg_Destroy(m);
            return hm_error_set(err, "pull: out of memory");
        }
        if (p->open_id != 0 && --p->open_left <= 0)
            end_open(p, end, HM_JSPULL_FULL);
        return 1;
    }
    int rc = 0;
    if (strcmp(st, "100") == 0) {
        /* An idle heartbeat, or a flow control request (it has a reply
         * subject) that the server waits for before it sends more. */
        const char *reply = natsMsg_GetReply(m);
        if (reply != NULL && *reply != '\0') {
            p->flow_controls++;
            natsConnection_Publish(p->nc, reply, NULL, 0);
        } else {
            p->heartbeats++;
        }
    } else if (strcmp(st, "404") == 0 || strcmp(st, "408") == 0 || strcmp(st, "409") == 0) {
        uint64_t id = request_of(p, m);
        if (st[2] == '9') {
            const char *why = NULL;
            natsMsgHeader_Get(m, "Description", &why);
            snprintf(p->conflict, sizeof p->conflict, "%s", why ? why : "");
        }
        if (id == 0 || id != p->open_id) {
            p->stale_status++; /* an earlier request's end, after we gave it up */
        } else {
            if (st[2] == '9')
                p->conflicts++;
            end_open(p, end, st[2] == '4' ? HM_JSPULL_NO_MESSAGES
                             : st[2] == '8' ? HM_JSPULL_EXPIRED
                                            : HM_JSPULL_CONFLICT);
        }
    } else {
        const char *why = NULL;
        natsMsgHeader_Get(m, "Description", &why);
        rc = hm_error_set(err, "pull refused: %s %s", st, why ? why : "");
    }
    natsMsg_Destroy(m);
    return rc;
}

/* Publishes a request and makes it the open one. */
static int send_request(hm_jspull *p, int ask, int64_t max_bytes, int64_t expires_ms, hm_error *err)
{
    char req[200], reply[sizeof p->inbox + 24];
    if (expires_ms <= 0)
        snprintf(req, sizeof req, "{\"batch\":%d,\"max_bytes\":%" PRId64 ",\"no_wait\":true}", ask,
                 max_bytes);
    else
        snprintf(req, sizeof req, "{\"batch\":%d,\"max_bytes\":%" PRId64 ",\"expires\":%" PRId64 "}",
                 ask, max_bytes, expires_ms * 1000000);
    uint64_t id = ++p->next_id;
    snprintf(reply, sizeof reply, "%s.%" PRIu64, p->inbox, id);
    natsStatus s = natsConnection_PublishRequestString(p->nc, p->next_subject, reply, req);
    if (s != NATS_OK)
        return hm_error_set(err, "pull request: %s", natsStatus_GetText(s));
    p->requests++;
    p->open_id = id;
    p->open_left = ask;
    p->open_deadline_ms = nats_Now() + (expires_ms > 0 ? expires_ms : 0) + HM_JSPULL_LOST_MS;
    return 0;
}

/* The open request is past its deadline: what the inbox holds already is
 * read first (its 408 may have come while the caller was away, in a long
 * publish on a loaded machine), and only a request with nothing queued is
 * given up as lost. 1: lost; 0: answered, or still taking (out full); -1:
 * error. */
static int expire_open(hm_jspull *p, hm_col *out, size_t stop, hm_jspull_end *end, hm_error *err)
{
    uint64_t queued = 0;
    while (p->open_id != 0 && out->n < stop &&
           natsSubscription_QueuedMsgs(p->sub, &queued) == NATS_OK && queued > 0)
        if (take(p, out, 0, end, err) < 0)
            return -1;
    if (p->open_id == 0 || out->n >= stop)
        return 0;
    p->lost++;
    end_open(p, end, HM_JSPULL_LOST);
    return 1;
}

int hm_jspull_request(hm_jspull *p, hm_col *out, int ask, int64_t max_bytes, int64_t expires_ms,
                      hm_jspull_end *end, hm_error *err)
{
    *end = HM_JSPULL_OPEN;
    if (send_request(p, ask, max_bytes, expires_ms, err) != 0)
        return -1;
    uint64_t id = p->open_id;
    size_t stop = out->n + (size_t)ask;
    while (out->n < stop && p->open_id == id) {
        int64_t left = p->open_deadline_ms - nats_Now();
        if (left <= 0)
            return expire_open(p, out, stop, end, err) < 0 ? -1 : 0;
        if (take(p, out, left, end, err) < 0)
            return -1;
    }
    return 0;
}

/* Ends that leave the caller to decide (back off, check the consumer)
 * rather than ask again at once. */
static bool trouble(hm_jspull_end e)
{
    return e == HM_JSPULL_CONFLICT || e == HM_JSPULL_NO_RESPONDERS || e == HM_JSPULL_LOST;
}

int hm_jspull_next(hm_jspull *p, hm_col *out, int batch, int64_t wait_ms, hm_jspull_end *end,
                   hm_error *err)
{
    *end = HM_JSPULL_OPEN;
    size_t had = out->n, stop = out->n + (size_t)batch;
    int64_t deadline = nats_Now() + wait_ms;
    bool lingered = false;
    for (;;) {
        int64_t now = nats_Now();
        if (p->open_id != 0 && now >= p->open_deadline_ms) {
            int gone = expire_open(p, out, stop, end, err);
            if (gone != 0 || out->n >= stop || trouble(*end))
                return gone < 0 ? -1 : 0;
        }
        if (p->open_id == 0 && send_request(p, batch, 0, wait_ms, err) != 0)
            return -1;
        int64_t left = deadline - now;
        /* With messages in hand, only what is queued already; else wait. */
        int got = take(p, out, out->n > had || left < 0 ? 0 : left, end, err);
        if (got < 0)
            return -1;
        if (out->n >= stop || trouble(*end))
            return 0;
        if (got == 0 && out->n > had && p->open_id != 0 && !lingered) {
            /* A burst still arriving: let a few milliseconds' worth queue
             * up, so a call takes tens of messages rather than each one
             * as it comes, with one wake-up per linger. */
            nats_Sleep(HM_JSPULL_LINGER_MS);
            lingered = true;
            continue;
        }
        if (got == 0 && p->open_id != 0 && (out->n > had || nats_Now() >= deadline))
            return 0; /* nothing more queued, or the caller's wait is up */
        if (got == 1)
            lingered = false;
        /* got 1: keep taking; a request that ended (full, expired) is
         * followed by the next one while the caller's wait lasts */
        if (got == 0 && p->open_id == 0 && nats_Now() >= deadline)
            return 0;
    }
}

void hm_jspull_reset(hm_jspull *p)
{
    p->open_id = 0;
    p->open_left = 0;
}

void hm_jspull_close(hm_jspull *p)
{
    if (p->sub) /* what it held unacked: the server sends it again */
        natsSubscription_Destroy(p->sub);
    memset(p, 0, sizeof *p);
}
