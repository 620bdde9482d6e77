#include "collect_pull.h"

/* Messages asked per request: a group takes several, so the processes
 * sharing the consumer take turns within a group's time. */
#define REQUEST_MAX 512

/* How often a group that is not full asks again. */
#define POLL_MS 20

int hm_puller_open(hm_puller *p, natsConnection *nc, const char *stream, const char *durable,
                   hm_error *err)
{
    return hm_jspull_open(&p->pull, nc, stream, durable, err);
}

int hm_puller_fetch(hm_puller *p, hm_col *out, int batch, int64_t max_bytes, int64_t timeout_ms,
                    hm_error *err)
{
    out->n = 0;
    /* The group fills until full (count or bytes) or timeout_ms: a lake
     * commit per group costs the same for 10 batches as for 2048, so a
     * group is not cut at the first lull. Messages of an earlier request
     * that came late are still queued on the inbox and counted here. */
    int64_t end = nats_Now() + timeout_ms, bytes = 0;
    for (;;) {
        size_t had = out->n;
        int64_t room = max_bytes > 0 ? max_bytes - bytes : 0;
        if (max_bytes > 0 && room <= 0)
            return 0;
        int ask = batch - (int)out->n;
        hm_jspull_end how;
        if (hm_jspull_request(&p->pull, out, ask > REQUEST_MAX ? REQUEST_MAX : ask, room, 0, &how,
                              err) != 0)
            return -1;
        if (how == HM_JSPULL_NO_RESPONDERS)
            return hm_error_set(err, "pull: %s", natsStatus_GetText(NATS_NO_RESPONDERS));
        natsMsg **got = out->p;
        for (size_t i = had; i < out->n; i++)
            bytes += natsMsg_GetDataLength(got[i]);
        if ((int)out->n >= batch || nats_Now() >= end)
            return 0;
        if (out->n == had) { /* nothing there now: ask again soon */
            int64_t left = end - nats_Now();
            nats_Sleep(left < POLL_MS ? left : POLL_MS);
        }
    }
}

void hm_puller_close(hm_puller *p)
{
    hm_jspull_close(&p->pull);
}
