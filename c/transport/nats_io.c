#include "nats_io.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hm_log.h"
#include "hm_nats_client.h"
#include "hm_parse.h"

static int nats_fail(hm_error *err, natsStatus s, jsErrCode jerr, const char *what)
{
    const char *last = nats_GetLastError(NULL);
    if (jerr)
        return hm_error_set(err, "%s: %s (JetStream error %d)", what, last ? last : natsStatus_GetText(s),
                            (int)jerr);
    return hm_error_set(err, "%s: %s", what, last && *last ? last : natsStatus_GetText(s));
}

static int connect_with(hm_nats *n, const char *url, const char *name, bool retry_first,
                        hm_error *err)
{
    memset(n, 0, sizeof *n);
    natsOptions *opts = NULL;
    natsStatus s = natsOptions_Create(&opts);
    /* A comma list (the rack leaf's servers, the hub's three) goes in as a
     * server list: libnats then tries each and reconnects to any. */
    char urls[1024];
    char *list[32];
    int count = -1;
    if ((size_t)snprintf(urls, sizeof urls, "%s", url) < sizeof urls)
        count = hm_split_list(urls, list, 32);
    if (count <= 0) {
        natsOptions_Destroy(opts);
        return hm_error_set(err, "--url: expected 1 to 32 server URLs, got '%s'", url);
    }
    if (s == NATS_OK)
        s = natsOptions_SetServers(opts, (const char **)list, count);
    if (s == NATS_OK)
        s = natsOptions_SetName(opts, name);
    if (s == NATS_OK && hm_nats_client_setup(opts, list[0], NULL, err) < 0) {
        natsOptions_Destroy(opts);
        return -1;
    }
    /* Replies (pulled messages, publish acks, API answers) come to an
     * inbox of this login's own, the only one its permissions let it read
     * (python/hushmon/transport/natsusers.py, inbox_prefix). */
    const char *user = getenv("HUSHMON_NATS_USER");
    if (s == NATS_OK && user != NULL && *user != '\0') {
        char prefix[sizeof "_INBOX." + HM_NATS_USER_MAX];
        snprintf(prefix, sizeof prefix, "_INBOX.%s", user);
        s = natsOptions_SetCustomInboxPrefix(opts, prefix);
    }
    /* Keep trying for ever: the reducer is a service, the server comes back. */
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(opts, -1);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(opts, 250);
    if (s == NATS_OK && retry_first)
        s = natsOptions_SetRetryOnFailedConnect(opts, true, NULL, NULL);
    if (s == NATS_OK)
        s = natsConnection_Connect(&n->nc, opts);
    natsOptions_Destroy(opts);
    if (s == NATS_NOT_YET_CONNECTED && retry_first)
        s = NATS_OK; /* connects in the background */
    if (s != NATS_OK) {
        nats_fail(err, s, 0, url);
        natsConnection_Destroy(n->nc);
        n->nc = NULL;
        return -1;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = 10000;
    s = natsConnection_JetStream(&n->js, n->nc, &jo);
    if (s != NATS_OK)
        return nats_fail(err, s, 0, "JetStream context");
    return 0;
}

int hm_nats_connect(hm_nats *n, const char *url, const char *name, hm_error *err)
{
    return connect_with(n, url, name, true, err);
}

int hm_nats_connect_now(hm_nats *n, const char *url, const char *name, hm_error *err)
{
    return connect_with(n, url, name, false, err);
}

/* Transient trouble is logged at most this often (the counts go on). */
#define HM_NATS_LOG_EVERY_NS ((int64_t)10 * 1000000000)
/* A pull that brought nothing for this long checks that its consumer is
 * still there (a deleted consumer makes pull requests go unanswered). */
#define HM_NATS_IDLE_CHECK_NS ((int64_t)5 * 1000000000)
#define HM_NATS_BACKOFF_MIN_NS ((int64_t)100 * 1000000)
#define HM_NATS_BACKOFF_MAX_NS ((int64_t)5 * 1000000000)

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int consumer_missing(hm_error *err, const hm_nats *n)
{
    return hm_error_set(err, "consumer %s on %s does not exist: an admin declares it "
                             "(python -m hushmon.transport.deploy streams URL --racks ...; "
                             "docs/transport.md)", n->durable, n->stream);
}

/* The consumer exists (an admin made it: a reducer never creates one, its
 * login may not) and the pull is open on it (asked anew after it was
 * made anew: *rebound set). *missing tells a missing consumer from other
 * trouble. */
static int bind_consumer(hm_nats *n, bool *rebound, bool *missing, hm_error *err)
{
    jsErrCode jerr = 0;
    jsConsumerInfo *ci = NULL;
    *rebound = *missing = false;
    natsStatus s = js_GetConsumerInfo(&ci, n->js, n->stream, n->durable, NULL, &jerr);
    if (s == NATS_OK) {
        n->ack_wait_ns = ci->Config->AckWait;
        if (n->created_ns != 0 && ci->Created != n->created_ns)
            *rebound = true; /* deleted and made again */
        n->created_ns = ci->Created;
    }
    jsConsumerInfo_Destroy(ci);
    if (s == NATS_NOT_FOUND) {
        *missing = true;
        return consumer_missing(err, n);
    }
    if (s != NATS_OK)
        return nats_fail(err, s, jerr, "consumer");
    if (*rebound) {
        /* The open request died with the old consumer; its unacked
         * messages come again from the new one (acks to the old one's
         * reply subjects go nowhere). */
        hm_jspull_reset(&n->pull);
        n->resubscribed++;
    }
    if (!n->pulling) {
        if (hm_jspull_open(&n->pull, n->nc, n->stream, n->durable, err) != 0)
            return -1;
        n->pulling = true;
    }
    return 0;
}

int hm_nats_pull(hm_nats *n, const char *stream, const char *durable, const char *filter,
                 hm_error *err)
{
    if (strlen(stream) >= sizeof n->stream || strlen(durable) >= sizeof n->durable ||
        strlen(filter) >= sizeof n->filter)
        return hm_error_set(err, "consumer %s on %s: name too long", durable, stream);
    snprintf(n->stream, sizeof n->stream, "%s", stream);
    snprintf(n->durable, sizeof n->durable, "%s", durable);
    snprintf(n->filter, sizeof n->filter, "%s", filter);
    bool rebound, missing;
    if (bind_consumer(n, &rebound, &missing, err) != 0)
        return -1;
    n->last_msg_ns = n->last_check_ns = mono_ns();
    return 0;
}

/* Counts a transient error, logs it (rate-limited) and backs off. */
static void transient(hm_nats *n, int64_t now, const char *what)
{
    n->fetch_errors++;
    n->backoff_ns = n->backoff_ns ? n->backoff_ns * 2 : HM_NATS_BACKOFF_MIN_NS;
    if (n->backoff_ns > HM_NATS_BACKOFF_MAX_NS)
        n->backoff_ns = HM_NATS_BACKOFF_MAX_NS;
    n->retry_at_ns = now + n->backoff_ns;
    n->last_check_ns = 0; /* check the consumer before the next pull */
    if (n->last_log_ns != 0 && now - n->last_log_ns < HM_NATS_LOG_EVERY_NS) {
        n->fetch_errors_unlogged++;
        return;
    }
    hm_log_warn("pulling from %s as %s: %s (retrying in %" PRId64 " ms; %" PRIu64
                " errors in all, %" PRIu64 " not logged since the last)",
                n->stream, n->durable, what, n->backoff_ns / 1000000, n->fetch_errors,
                n->fetch_errors_unlogged);
    n->last_log_ns = now;
    n->fetch_errors_unlogged = 0;
}

/* The pull's end as a transient error's text, or NULL when it is none. */
static const char *trouble_text(const hm_nats *n, hm_jspull_end end, char *buf, size_t cap)
{
    switch (end) {
    case HM_JSPULL_CONFLICT:
        snprintf(buf, cap, "pull ended by the server: 409 %s", n->pull.conflict);
        return buf;
    case HM_JSPULL_NO_RESPONDERS:
        return "no JetStream answers the pull (server or hub away)";
    case HM_JSPULL_LOST:
        return "a pull request went unanswered (lost to a reconnect?)";
    default:
        return NULL;
    }
}

int hm_nats_fetch(hm_nats *n, hm_col *out, int batch, int64_t timeout_ms, hm_error *err)
{
    if (natsConnection_IsClosed(n->nc))
        return hm_error_set(err, "the connection to the server is closed");
    int64_t now = mono_ns();
    if (now < n->retry_at_ns) { /* backing off: wait, but keep the caller's loop going */
        int64_t wait_ns = n->retry_at_ns - now;
        if (wait_ns > timeout_ms * 1000000)
            wait_ns = timeout_ms * 1000000;
        struct timespec pause = {(time_t)(wait_ns / 1000000000), (long)(wait_ns % 1000000000)};
        nanosleep(&pause, NULL);
        return 0;
    }
    if (!n->pulling ||
        (now - n->last_msg_ns >= HM_NATS_IDLE_CHECK_NS && now - n->last_check_ns >= HM_NATS_IDLE_CHECK_NS)) {
        bool rebound = false, missing = false;
        hm_error cerr;
        n->last_check_ns = now;
        if (bind_consumer(n, &rebound, &missing, &cerr) != 0) {
            /* Gone under a running reducer (deleted, lost with a server's
             * store): wait for the admin to declare it again. */
            n->consumer_missing += missing;
            transient(n, now, cerr.msg);
            return 0;
        }
        if (rebound)
            hm_log_warn("consumer %s on %s was made anew: pulling it again (its unacked messages come again)",
                        n->durable, n->stream);
    }
    size_t had = out->n;
    hm_jspull_end end;
    hm_error perr;
    if (hm_jspull_next(&n->pull, out, batch, timeout_ms, &end, &perr) != 0) {
        if (strstr(perr.msg, "out of memory") != NULL)
            return hm_error_set(err, "%s", perr.msg);
        if (natsConnection_IsClosed(n->nc))
            return hm_error_set(err, "the connection to the server is closed");
        transient(n, now, perr.msg);
        return 0;
    }
    if (out->n > had) {
        n->last_msg_ns = mono_ns();
        n->backoff_ns = 0;
    }
    char buf[200];
    const char *what = trouble_text(n, end, buf, sizeof buf);
    if (what != NULL)
        transient(n, now, what);
    return 0;
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
    if (n->pulling)
        hm_jspull_close(&n->pull);
    jsCtx_Destroy(n->js);
    natsConnection_Destroy(n->nc);
    memset(n, 0, sizeof *n);
}
