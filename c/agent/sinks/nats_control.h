/* Control requests over the nats sink's connection: hm.ctl.host.<host>
 * and hm.ctl.all (docs/transport.md), plain request/reply that no stream
 * keeps. The sink owns the connection and reads it; this part subscribes
 * and answers what was read, once per period (agent_control.c decides). */
#ifndef HM_NATS_CONTROL_H
#define HM_NATS_CONTROL_H

#include <nats/nats.h>
#include <stdbool.h>

#include "hm_error.h"
#include "sink.h"

typedef struct hm_nats_control {
    natsSubscription *sub[2]; /* hm.ctl.host.<host>, hm.ctl.all */
    char host[64];
} hm_nats_control;

/* Subscribes on a new connection (nc's SUBs are written by the caller). */
int hm_nats_control_subscribe(hm_nats_control *c, natsConnection *nc, const char *host,
                              hm_error *err);
/* Before the connection goes. */
void hm_nats_control_unsubscribe(hm_nats_control *c);
/* Answers every request read so far, without waiting; true when an
 * answer was published (for the caller to write). */
bool hm_nats_control_answer(hm_nats_control *c, natsConnection *nc,
                            hm_sink_request_handler handler, void *arg);

#endif
