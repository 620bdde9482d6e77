/* Where a period's batch goes. One file per sink in sinks/, listed once
 * in sinks/sinks.def (declarations here and the table in sink.c). */
#ifndef HM_SINK_H
#define HM_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "hm_error.h"

/* Answers one request that came through a sink's own connection;
 * claimed_uid is what the request says (-1 none). */
typedef void (*hm_sink_request_handler)(void *arg, long claimed_uid, const char *request,
                                        char *response, size_t size);

typedef struct hm_sink_ops {
    const char *name;
    const char *description;
    int (*open)(void **state, const hm_agent_config *cfg, int64_t start_ns, hm_error *err);
    /* Writes one whole batch (lines complete lines). */
    int (*write)(void *state, const char *buf, size_t len, uint64_t lines, hm_error *err);
    /* Makes everything written so far visible to readers. */
    int (*flush)(void *state, hm_error *err);
    /* Lines lost so far to the sink's own bounds (spool size limit). */
    uint64_t (*dropped_lines)(void *state);
    /* One "key=value ..." summary for `status`. */
    void (*describe)(void *state, char *out, size_t size);
    /* Answers the control requests that came through the sink's own
     * connection since the last call, without waiting (nats: hm.ctl.*);
     * NULL for sinks without one. Called once per period. */
    void (*serve_requests)(void *state, hm_sink_request_handler handler, void *arg);
    /* Flushes and releases. */
    int (*close)(void *state, hm_error *err);
} hm_sink_ops;

typedef struct hm_sink {
    const hm_sink_ops *ops;
    void *state;
} hm_sink;

#define HM_SINK(name) extern const hm_sink_ops hm_sink_##name;
#include "sinks.def"
#undef HM_SINK

/* The sinks of this build, in sinks.def's order. */
extern const hm_sink_ops *const hm_sinks[];
extern const size_t hm_sinks_count;

/* Opens the sink named cfg->sink. */
int hm_sink_open(hm_sink *sink, const hm_agent_config *cfg, int64_t start_ns, hm_error *err);
int hm_sink_close(hm_sink *sink, hm_error *err);

#endif
