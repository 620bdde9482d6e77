/* The collector's group of messages, pulled as the Python collector pulls
 * (collector._Puller): every request no_wait (what is there now) for at
 * most 512 messages and the bytes left, again every 20 ms until the group
 * is full (count or bytes) or its time is up. Messages that come after
 * their group ended stay queued on the inbox and begin the next one. The
 * pull protocol itself is jspull.c's, shared with the reducers. */
#ifndef HM_COLLECT_PULL_H
#define HM_COLLECT_PULL_H

#include <stdint.h>

#include <nats/nats.h>

#include "collect_cols.h"
#include "hm_error.h"
#include "jspull.h"

typedef struct hm_puller {
    hm_jspull pull;
} hm_puller;

int hm_puller_open(hm_puller *p, natsConnection *nc, const char *stream, const char *durable,
                   hm_error *err);
/* Up to batch messages (and max_bytes, 0: none) into out (natsMsg*,
 * the caller destroys them): the group ends full or after timeout_ms. -1
 * with err when the server refuses the pull (a status other than 100,
 * 404, 408, 409), nothing answers the API subject, or the connection
 * fails. */
int hm_puller_fetch(hm_puller *p, hm_col *out, int batch, int64_t max_bytes, int64_t timeout_ms,
                    hm_error *err);
void hm_puller_close(hm_puller *p);

#endif
