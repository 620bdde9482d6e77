/* spool: batches appended to files in a local directory, for `hushmon
 * ingest` (or a forwarder) to pick up; see docs/formats.md "Spool files".
 * The files themselves are spool_files.c (shared with the nats sink). */
#include <stdio.h>

#include "sink.h"
#include "spool_files.h"

static int spool_open(void **state, const hm_agent_config *cfg, int64_t start_ns, hm_error *err)
{
    hm_spool *s;
    if (hm_spool_open(&s, cfg, start_ns, NULL, NULL, err) < 0)
        return -1;
    *state = s;
    return 0;
}

static int spool_write(void *state, const char *buf, size_t len, uint64_t lines, hm_error *err)
{
    (void)lines;
    hm_spool_pos pos;
    if (hm_spool_reserve(state, len, &pos, err) < 0)
        return -1;
    return hm_spool_append(state, buf, len, err);
}

static int spool_flush(void *state, hm_error *err)
{
    return hm_spool_flush(state, err);
}

static uint64_t spool_dropped(void *state)
{
    return hm_spool_dropped_lines(state);
}

static void spool_describe(void *state, char *out, size_t size)
{
    snprintf(out, size, "sink=spool spool=%s spool_bytes=%llu files_closed=%llu",
             hm_spool_dir(state), (unsigned long long)hm_spool_bytes(state),
             (unsigned long long)hm_spool_files_closed(state));
}

static int spool_close(void *state, hm_error *err)
{
    return hm_spool_close(state, err);
}

const hm_sink_ops hm_sink_spool = {
    .name = "spool",
    .description = "rotating line-protocol files in spool_dir",
    .open = spool_open,
    .write = spool_write,
    .flush = spool_flush,
    .dropped_lines = spool_dropped,
    .describe = spool_describe,
    .close = spool_close,
};
