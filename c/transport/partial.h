/* One summary payload of docs/transport.md: the summaries of every sensor
 * of one (job, period), and the batches (sources) whose lines are in it.
 * Both reducer levels build them; the top level also reads them back from
 * JSON. No libnats here (unit-tested with the summary math). */
#ifndef HM_PARTIAL_H
#define HM_PARTIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "hm_error.h"
#include "strmap.h"
#include "summary.h"

typedef struct hm_source {
    int64_t epoch;
    uint64_t seq;
    char host[]; /* in the partial's arena */
} hm_source;

typedef struct hm_partial {
    char *job;
    int64_t time_ns;
    hm_strmap sensors;  /* "<measurement>[,tags] <field>" -> hm_summary* */
    hm_strmap sources;  /* "host epoch seq" -> hm_source*, keys and values in arena */
    hm_arena arena;     /* freed with the partial */
    hm_summary **by_id; /* the same summaries by the caller's sensor id (rack level) */
    uint32_t n_by_id;
} hm_partial;

int hm_partial_init(hm_partial *p, const char *job, int64_t time_ns, hm_error *err);
void hm_partial_free(hm_partial *p);

/* The text key of a source ("host epoch seq"), into buf; its length. */
size_t hm_source_key(char *buf, size_t cap, const char *host, int64_t epoch, uint64_t seq);
/* Adds a source; *added = 0 when it was already there. */
int hm_partial_add_source(hm_partial *p, const char *host, int64_t epoch, uint64_t seq,
                          int *added, hm_error *err);
int hm_partial_add_value(hm_partial *p, const char *sensor, size_t sensor_len, double value,
                         hm_error *err);
/* The same, the sensor also known by a small id (dense, from 0) that
 * skips the lookup by key after its first value. */
int hm_partial_add_value_id(hm_partial *p, uint32_t id, const char *sensor, size_t sensor_len,
                            double value, hm_error *err);
/* Merges the sensors and sources of from into p. */
int hm_partial_merge(hm_partial *p, const hm_partial *from, hm_error *err);

/* The JSON payload (level "rack" with its rack, or "job"), sensors and
 * sources sorted so equal contents give equal bytes. *out is malloc'ed. */
int hm_partial_to_json(const hm_partial *p, const char *level, const char *rack, char **out,
                       size_t *out_len, hm_error *err);
/* Reads a payload written by hm_partial_to_json (any level) into p
 * (initialized here); rack_out gets the rack ("" when none). */
int hm_partial_from_json(const char *text, size_t len, hm_partial *p, char *rack_out,
                         size_t rack_cap, hm_error *err);

/* A deterministic id for the stream's duplicate detection:
 * "<prefix>:<job>:<time_ns>:<n sources>:<hash of the sorted sources>". */
int hm_partial_msg_id(const hm_partial *p, const char *prefix, char *out, size_t cap,
                      hm_error *err);

#endif
