#include "collect_pull.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Messages asked per request: a group takes several, so the processes
 * sharing the consumer take turns within a group's time. */
#define REQUEST_MAX 512

/* A request the server never answered (lost to a reconnect) ends after
 * its own wait and this much more. */
#define PULL_LOST_MS 5000

int hm_puller_open(hm_puller *p, natsConnection *nc, const char *stream, const char *durable,
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
    snprintf(p->next_subject, sizeof p->next_subject, "$JS.API.CONSUMER.MSG.NEXT.%s.%s", stream,
             durable);
    s = natsConnection_SubscribeSync(&p->sub, nc, p->inbox);
    if (s == NATS_OK) /* a group of 2048 batches of up to 1 MiB may wait here */
        s = natsSubscription_SetPendingLimits(p->sub, -1, -1);
    if (s != NATS_OK) {
        const char *last = nats_GetLastError(NULL);
        return hm_error_set(err, "subscribing %s: %s", p->inbox, last && *last ? last : natsStatus_GetText(s));
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

static int64_t now_ms(void)
{
    return nats_Now();
}

/* One request for what batch still lacks; messages into out until batch,
 * a status that ends it, or its wait without one. */
static int pull(hm_puller *p, hm_col *out, int batch, int64_t max_bytes, int64_t expires_ms,
                hm_error *err)
{
    char req[200];
    int ask = batch - (int)out->n;
    if (ask > REQUEST_MAX)
        ask = REQUEST_MAX;
    if (expires_ms <= 0)
        snprintf(req, sizeof req, "{\"batch\":%d,\"max_bytes\":%" PRId64 ",\"no_wait\":true}", ask,
                 max_bytes);
    else
        snprintf(req, sizeof req, "{\"batch\":%d,\"max_bytes\":%" PRId64 ",\"expires\":%" PRId64 "}",
                 ask, max_bytes, expires_ms * 1000000);
    natsStatus s = natsConnection_PublishRequestString(p->nc, p->next_subject, p->inbox, req);
    if (s != NATS_OK)
        return hm_error_set(err, "pull request: %s", natsStatus_GetText(s));
    int64_t deadline = now_ms() + (expires_ms > 0 ? expires_ms : 0) + PULL_LOST_MS;
    size_t stop = out->n + (size_t)ask;
    while (out->n < stop) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return 0;
        natsMsg *m = NULL;
        s = natsSubscription_NextMsg(&m, p->sub, left);
        if (s == NATS_TIMEOUT)
            return 0;
        if (s != NATS_OK)
            return hm_error_set(err, "pull: %s", natsStatus_GetText(s));
        const char *st = status_of(m);
        if (st == NULL) {
            if (hm_col_push(out, &m) != 0) {
                natsMsg_Destroy(m);
                return hm_error_set(err, "pull: out of memory");
            }
            continue;
        }
        bool heartbeat = strcmp(st, "100") == 0;
        bool ends = strcmp(st, "404") == 0 || strcmp(st, "408") == 0 || strcmp(st, "409") == 0;
        if (!heartbeat && !ends) {
            const char *why = NULL;
            natsMsgHeader_Get(m, "Description", &why);
            hm_error_set(err, "pull refused: %s %s", st, why ? why : "");
            natsMsg_Destroy(m);
            return -1;
        }
        natsMsg_Destroy(m);
        if (ends)
            return 0;
    }
    return 0;
}

/* How often a group that is not full asks again. */
#define POLL_MS 20

int hm_puller_fetch(hm_puller *p, hm_col *out, int batch, int64_t max_bytes, int64_t timeout_ms,
                    hm_error *err)
{
    out->n = 0;
    /* The group fills until full (count or bytes) or timeout_ms: a lake
     * commit per group costs the same for 10 batches as for 2048, so a
     * group is not cut at the first lull. Messages of an earlier request
     * that came late are still queued on the inbox and counted here. */
    int64_t end = now_ms() + timeout_ms, bytes = 0;
    for (;;) {
        size_t had = out->n;
        int64_t room = max_bytes > 0 ? max_bytes - bytes : 0;
        if (max_bytes > 0 && room <= 0)
            return 0;
        if (pull(p, out, batch, room, 0, err) != 0)
            return -1;
        natsMsg **got = out->p;
        for (size_t i = had; i < out->n; i++)
            bytes += natsMsg_GetDataLength(got[i]);
        if ((int)out->n >= batch || now_ms() >= end)
            return 0;
        if (out->n == had) { /* nothing there now: ask again soon */
            int64_t left = end - now_ms();
            nats_Sleep(left < POLL_MS ? left : POLL_MS);
        }
    }
}

void hm_puller_close(hm_puller *p)
{
    if (p->sub) /* what it held unacked: the server sends it again */
        natsSubscription_Destroy(p->sub);
    memset(p, 0, sizeof *p);
}
