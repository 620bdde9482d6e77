/* stdout: batches to standard output, for pipes and `--once`. */
#include <stdio.h>

#include "sink.h"
#include "write_all.h"

static int stdout_open(void **state, const hm_agent_config *cfg, int64_t start_ns, hm_error *err)
{
    (void)cfg;
    (void)start_ns;
    (void)err;
    *state = NULL;
    return 0;
}

static int stdout_write(void *state, const char *buf, size_t len, uint64_t lines, hm_error *err)
{
    (void)state;
    (void)lines;
    if (hm_write_all(1, buf, len) < 0)
        return hm_error_errno(err, "writing to stdout");
    return 0;
}

static int stdout_flush(void *state, hm_error *err)
{
    (void)state;
    (void)err;
    return 0;
}

static uint64_t stdout_dropped(void *state)
{
    (void)state;
    return 0;
}

static void stdout_describe(void *state, char *out, size_t size)
{
    (void)state;
    snprintf(out, size, "sink=stdout");
}

static int stdout_close(void *state, hm_error *err)
{
    (void)state;
    (void)err;
    return 0;
}

const hm_sink_ops hm_sink_stdout = {
    .name = "stdout",
    .description = "line protocol to standard output",
    .open = stdout_open,
    .write = stdout_write,
    .flush = stdout_flush,
    .dropped_lines = stdout_dropped,
    .describe = stdout_describe,
    .close = stdout_close,
};
