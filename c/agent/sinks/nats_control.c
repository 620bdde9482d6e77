/* The nats sink's control requests (nats_control.h). A request's Hm-Uid
 * header is the requester's claimed uid, which the server's publish
 * permissions vouch for (docs/agent.md, "Control channel"); the answer
 * goes to the request's reply subject and names the host, since a
 * broadcast (hm.ctl.all) gathers the answers of many. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hm_log.h"
#include "hm_nats_client.h"
#include "nats_control.h"

/* A request is one line of at most this many bytes. */
#define REQUEST_MAX 1023

int hm_nats_control_subscribe(hm_nats_control *c, natsConnection *nc, const char *host,
                              hm_error *err)
{
    snprintf(c->host, sizeof c->host, "%s", host);
    char subject[2][128];
    snprintf(subject[0], sizeof subject[0], "hm.ctl.host.%s", host);
    snprintf(subject[1], sizeof subject[1], "hm.ctl.all");
    for (int i = 0; i < 2; i++) {
        natsStatus st = natsConnection_SubscribeSync(&c->sub[i], nc, subject[i]);
        if (st != NATS_OK)
            return hm_error_set(err, "subscribing to %s: %s", subject[i], hm_nats_error_text(st));
    }
    return 0;
}

void hm_nats_control_unsubscribe(hm_nats_control *c)
{
    for (int i = 0; i < 2; i++) {
        if (c->sub[i] != NULL)
            natsSubscription_Destroy(c->sub[i]);
        c->sub[i] = NULL;
    }
}

static long claimed_uid(natsMsg *m)
{
    const char *text = NULL;
    if (natsMsgHeader_Get(m, "Hm-Uid", &text) != NATS_OK || text == NULL)
        return -1;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    return end != text && *end == '\0' && v >= 0 ? v : -1;
}

/* One request: answered through handler, or refused here when it is not
 * one line of at most REQUEST_MAX bytes. */
static void answer_one(const hm_nats_control *c, natsMsg *m, hm_sink_request_handler handler,
                       void *arg, char *response, size_t size)
{
    char line[REQUEST_MAX + 1];
    int len = natsMsg_GetDataLength(m);
    if (len >= 0 && len <= REQUEST_MAX) {
        memcpy(line, natsMsg_GetData(m), (size_t)len);
        line[len] = '\0';
    }
    if (len < 0 || len > REQUEST_MAX || memchr(line, '\n', (size_t)len) != NULL)
        snprintf(response, size, "error host=%s a request is one line of at most %d bytes",
                 c->host, REQUEST_MAX);
    else
        handler(arg, claimed_uid(m), line, response, size);
}

bool hm_nats_control_answer(hm_nats_control *c, natsConnection *nc,
                            hm_sink_request_handler handler, void *arg)
{
    bool answered = false;
    for (int i = 0; i < 2 && nc != NULL; i++) {
        for (;;) {
            /* NextMsg(0) on an empty queue costs a futex(2): look first. */
            int pending_msgs = 0, pending_bytes = 0;
            if (c->sub[i] == NULL ||
                natsSubscription_GetPending(c->sub[i], &pending_msgs, &pending_bytes) != NATS_OK ||
                pending_msgs == 0)
                break;
            natsMsg *m = NULL;
            if (natsSubscription_NextMsg(&m, c->sub[i], 0) != NATS_OK)
                break;
            char response[1024];
            answer_one(c, m, handler, arg, response, sizeof response);
            char named[sizeof response + 96];
            if (strncmp(response, "error ", 6) == 0 && strncmp(response + 6, "host=", 5) != 0)
                snprintf(named, sizeof named, "error host=%s %s", c->host, response + 6);
            else
                snprintf(named, sizeof named, "%s", response);
            const char *reply_to = natsMsg_GetReply(m);
            if (reply_to != NULL && reply_to[0] != '\0') {
                natsStatus st = natsConnection_PublishString(nc, reply_to, named);
                if (st != NATS_OK)
                    hm_log_warn("nats: answering a control request: %s", hm_nats_error_text(st));
                answered = true;
            }
            natsMsg_Destroy(m);
        }
    }
    return answered;
}
