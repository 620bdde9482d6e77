#include "nats_io.h"

#include <string.h>

static int nats_fail(hm_error *err, natsStatus s, jsErrCode jerr, const char *what)
{
    const char *last = nats_GetLastError(NULL);
    if (jerr)
        return hm_error_set(err, "%s: %s (JetStream error %d)", what, last ? last : natsStatus_GetText(s),
                            (int)jerr);
    return hm_error_set(err, "%s: %s", what, last && *last ? last : natsStatus_GetText(s));
}

int hm_nats_connect(hm_nats *n, const char *url, const char *name, hm_error *err)
{
    memset(n, 0, sizeof *n);
    natsOptions *opts = NULL;
    natsStatus s = natsOptions_Create(&opts);
    if (s == NATS_OK)
        s = natsOptions_SetURL(opts, url);
    if (s == NATS_OK)
        s = natsOptions_SetName(opts, name);
    /* Keep trying for ever: the reducer is a service, the server comes back. */
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(opts, -1);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(opts, 250);
    if (s == NATS_OK)
        s = natsOptions_SetRetryOnFailedConnect(opts, true, NULL, NULL);
    if (s == NATS_OK)
        s = natsConnection_Connect(&n->nc, opts);
    natsOptions_Destroy(opts);
    if (s == NATS_NOT_YET_CONNECTED)
        s = NATS_OK; /* connects in the background */
    if (s != NATS_OK)
        return nats_fail(err, s, 0, url);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = 10000;
    s = natsConnection_JetStream(&n->js, n->nc, &jo);
    if (s != NATS_OK)
        return nats_fail(err, s, 0, "JetStream context");
    return 0;
}

int hm_nats_pull(hm_nats *n, const char *stream, const char *durable, const char *filter,
                 int64_t ack_wait_ns, int64_t max_ack_pending, hm_error *err)
{
    jsErrCode jerr = 0;
    jsConsumerInfo *ci = NULL;
    natsStatus s = js_GetConsumerInfo(&ci, n->js, stream, durable, NULL, &jerr);
    if (s == NATS_NOT_FOUND) {
        jsConsumerConfig cc;
        jsConsumerConfig_Init(&cc);
        cc.Durable = durable;
        cc.AckPolicy = js_AckExplicit;
        cc.AckWait = ack_wait_ns;
        cc.MaxAckPending = max_ack_pending;
        cc.FilterSubject = filter;
        cc.DeliverPolicy = js_DeliverAll;
        jerr = 0;
        s = js_AddConsumer(&ci, n->js, stream, &cc, NULL, &jerr);
        /* The other instance may have created it meanwhile: fine. */
        if (s != NATS_OK && jerr == JSConsumerNameExistErr)
            s = NATS_OK;
    }
    jsConsumerInfo_Destroy(ci);
    if (s != NATS_OK)
        return nats_fail(err, s, jerr, "consumer");
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = stream;
    so.Consumer = durable;
    jerr = 0;
    s = js_PullSubscribe(&n->sub, n->js, filter, durable, NULL, &so, &jerr);
    if (s != NATS_OK)
        return nats_fail(err, s, jerr, "pull subscription");
    return 0;
}

int hm_nats_fetch(hm_nats *n, natsMsgList *list, int batch, int64_t timeout_ms, hm_error *err)
{
    jsErrCode jerr = 0;
    memset(list, 0, sizeof *list);
    natsStatus s = natsSubscription_Fetch(list, n->sub, batch, timeout_ms, &jerr);
    if (s == NATS_OK || s == NATS_TIMEOUT)
        return 0;
    return nats_fail(err, s, jerr, "fetch");
}

int hm_nats_publish(hm_nats *n, const char *subject, const char *msg_id, const char *data,
                    size_t len, bool *duplicate, hm_error *err)
{
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = msg_id;
    po.MaxWait = 10000;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_Publish(&pa, n->js, subject, data, (int)len, &po, &jerr);
    if (s != NATS_OK)
        return nats_fail(err, s, jerr, subject);
    *duplicate = pa->Duplicate;
    jsPubAck_Destroy(pa);
    return 0;
}

void hm_nats_ack(void *ctx, const char *reply, bool term)
{
    hm_nats *n = ctx;
    /* Fire and forget: a lost ack means a redelivery, and a redelivered
     * batch gives a partial the stream or the top reducer drops. */
    if (natsConnection_PublishString(n->nc, reply, term ? "+TERM" : "+ACK") != NATS_OK)
        n->ack_errors++;
}

void hm_nats_close(hm_nats *n)
{
    if (n->nc)
        natsConnection_FlushTimeout(n->nc, 5000);
    if (n->sub)
        natsSubscription_Destroy(n->sub);
    jsCtx_Destroy(n->js);
    natsConnection_Destroy(n->nc);
    memset(n, 0, sizeof *n);
}
