/* Reading one node's batch (line protocol) into the values the rack
 * reducer adds to its summaries: (period, sensor, value) and the jobs of
 * each period. No libnats here.
 *
 * Hosts send the same line keys (measurement and tags) every period, so a
 * key's meaning (its host, its sensor prefix, job or not) is kept by its
 * bytes, and each (key, field) gets a small sensor id: a value after the
 * first costs its number's parse and an array index, no hashing. */
#ifndef HM_BATCH_H
#define HM_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lineproto.h"
#include "strmap.h"

#define HM_NO_SENSOR_ID UINT32_MAX

typedef struct hm_batch_value {
    int64_t time_ns;
    uint32_t id;                /* sensor id, or HM_NO_SENSOR_ID: key in keys[] */
    uint32_t key_off, key_len;  /* only without an id */
    double value;
} hm_batch_value;

typedef struct hm_batch_job {
    int64_t time_ns;
    const char *job;  /* valid until the next hm_batch_read */
    uint32_t len;
} hm_batch_job;

typedef struct hm_batch_buf {
    char *s;
    size_t len, cap;
} hm_batch_buf;

typedef struct hm_batch_reader {
    hm_strmap keys;           /* line key bytes -> key_info* */
    hm_strmap sensor_ids;     /* sensor key -> id + 1 */
    char **sensor_key;        /* id -> key (NUL-terminated) */
    uint32_t *sensor_key_len;
    size_t nsensors, cap_sensors;
    /* The last batch read. */
    hm_batch_value *values;
    size_t nvalues, cap_values;
    hm_batch_job *jobs;
    size_t njobs, cap_jobs;
    hm_batch_buf text;        /* keys of values without an id */
    uint64_t lines_ok, lines_bad;
    int64_t period_ms;        /* from hushmon_agent period_ms, the last seen; 0 if none */
    /* Scratch. */
    hm_lp_line line;
    hm_batch_buf scratch, tmpkey;
} hm_batch_reader;

/* Why a line was refused, and the line: the caller counts and logs. */
typedef void (*hm_bad_line_fn)(void *ctx, const char *reason, const char *line, size_t len);

enum hm_batch_result {
    HM_BATCH_OK = 0,          /* values and jobs filled (bad lines skipped, reported) */
    HM_BATCH_HOST_LIE = 1,    /* a line's host tag is not host: nothing may be used */
    HM_BATCH_NO_MEMORY = -1,
};

/* Reads data[0..len) of host. On HM_BATCH_HOST_LIE, lie_host names the
 * host the line claimed ("" if it had none). */
int hm_batch_read(hm_batch_reader *b, const char *host, const char *data, size_t len,
                  hm_bad_line_fn bad, void *ctx, char *lie_host, size_t lie_cap);
const char *hm_batch_value_key(const hm_batch_reader *b, const hm_batch_value *v, uint32_t *len);
void hm_batch_reader_free(hm_batch_reader *b);

#endif
