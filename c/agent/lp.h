/* One batch of InfluxDB line protocol, built in a buffer allocated once.
 *
 * Samplers append lines with begin / tag / field / end; nothing allocates
 * while sampling. A field whose value is not finite is left out (a value
 * that was not measured is absent, never 0), and a line that ends up with
 * no field at all is rolled back, since line protocol requires one. */
#ifndef HM_LP_H
#define HM_LP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

typedef struct hm_lp {
    char *buf;
    size_t cap, len;
    size_t line_start;     /* where the open line began, for rollback */
    int fields_in_line;
    bool line_overflow;    /* the open line did not fit */
    bool in_line;
    int64_t ts_ns;         /* timestamp written at the end of each line */
    char ts_text[24];      /* " <ts_ns>\n", written once per batch by hm_lp_reset */
    size_t ts_text_len;
    char host_tag[160];    /* ",host=<escaped>", precomputed */
    size_t host_tag_len;
    char scope_tag[32];    /* ",scope=<value>" on the lines being written, or "" */
    size_t scope_tag_len;
    uint64_t lines;        /* complete lines in this batch */
    uint64_t lines_dropped;/* lines that did not fit in the buffer */
} hm_lp;

int hm_lp_init(hm_lp *lp, size_t capacity_bytes, const char *host, hm_error *err);
void hm_lp_free(hm_lp *lp);
/* Empties the batch; every following line is stamped ts_ns. */
void hm_lp_reset(hm_lp *lp, int64_t ts_ns);

/* Tags every following line scope=<value> (after its own tags) until
 * called again; NULL or "" for none. The agent sets it per source, so
 * sources need not know whether the agent runs in node scope. */
void hm_lp_set_scope(hm_lp *lp, const char *value);

void hm_lp_begin(hm_lp *lp, const char *measurement);
void hm_lp_tag(hm_lp *lp, const char *key, const char *value);
/* Field keys must be identifiers ([A-Za-z0-9_-]): they are not escaped. */
void hm_lp_field_f64(hm_lp *lp, const char *key, double value);
void hm_lp_field_i64(hm_lp *lp, const char *key, int64_t value);
/* A string field (quotes and backslashes escaped, control characters
 * turned into spaces). The store counts string fields as skipped. */
void hm_lp_field_str(hm_lp *lp, const char *key, const char *value);
void hm_lp_end(hm_lp *lp);

/* Formats v into out (at least 32 bytes) without stdio for the common
 * range; returns the length. Exposed for tests. */
size_t hm_lp_format_double(char *out, double v);

#endif
