/* The collector's reading of one batch's lines into samples, series and
 * job activity, with the decisions and reasons of the Python ingest
 * (python/hushmon/store/ingest.py, fastparse.py, lineproto.py;
 * collect_store.py's host check), so both paths store the same rows and
 * count the same malformed lines.
 *
 * A line key's meaning (host, measurement, sorted tags, job) and each of
 * its fields' series id are kept by the key's bytes: a value after the
 * first costs its number's parse and a compare of its field name. Series
 * ids are lake.series_id_of: FNV-1a 64 over host\x1fmeasurement\x1ftags
 * \x1ffield, top bit cleared; the key keeps the hash state after its
 * prefix, so a field costs the hash of its own name only. */
#ifndef HM_COLLECT_LINES_H
#define HM_COLLECT_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "collect_cols.h"
#include "lineproto.h"
#include "pytext.h"
#include "strmap.h"

typedef struct hm_field_info {
    char *name;
    uint32_t len;
    uint8_t known;   /* in a series table the caller committed */
    uint32_t gen;    /* the group that last put it in its series table */
    int64_t series_id;
} hm_field_info;

typedef struct hm_key_info {
    const char *bad;      /* why the key cannot be stored (NUL-terminated), or NULL */
    bool bad_parse;       /* bad came from the key's syntax, not its tags' meaning */
    const char *host, *measurement, *tags, *job;
    uint32_t host_len, measurement_len, tags_len, job_len;
    bool is_job;
    uint64_t prefix_hash; /* FNV-1a state after host\x1fmeasurement\x1ftags\x1f */
    uint32_t nfields, cap_fields;
    hm_field_info *fields;
} hm_key_info;

typedef struct hm_series_ref {
    hm_key_info *key;
    uint32_t field;
} hm_series_ref;

/* The columns of one group (collect_group.c fills the batch rows). */
typedef struct hm_group_cols {
    hm_col s_series_id, s_time_ns, s_value, s_batch;        /* samples */
    hm_col se_id;                                            /* series */
    hm_strcol se_host, se_measurement, se_tags, se_field;
    hm_strcol a_job, a_host;                                 /* activity */
    hm_col a_time_ns, a_batch;
    hm_col pending;                                          /* hm_series_ref of the series table */
    /* (key, time) of each line read: a line that repeats one may repeat
     * its values, which the group then drops (the first kept) */
    uint64_t *line_set;
    size_t line_set_cap, line_set_count;
    bool maybe_repeats;
    hm_strmap activity_seen;                                 /* job, host, time of the group */
    struct sample_row *sort_rows;                            /* hm_group_cols_sort's scratch */
    size_t sort_rows_cap, sort_count_cap;
    uint32_t *sort_count;
    /* the most each buffer above held since the last hm_group_cols_settle */
    size_t line_set_peak, sort_rows_peak, sort_count_peak;
} hm_group_cols;

/* A new group's columns: rows dropped, sets emptied (memory kept). */
void hm_group_cols_reset(hm_group_cols *c);
/* After a reset: gives back the room of every column and scratch buffer
 * that the groups since the last settle used under a quarter of
 * (hm_room_settle), so a backlog's big groups leave nothing behind. */
void hm_group_cols_settle(hm_group_cols *c);
void hm_group_cols_free(hm_group_cols *c);
/* Drops every value after the first of its (series, time), keeping the
 * order (collect_raw._samples): only when maybe_repeats. -1: no memory. */
int hm_group_cols_dedupe(hm_group_cols *c);
/* Orders the samples by (series_id, time_ns) (the lake's layout).
 * series_max: at most this many distinct series ids among them (the
 * reader's series_made; 0: unknown): it sizes the buckets. -1: no memory. */
int hm_group_cols_sort(hm_group_cols *c, size_t series_max);

/* What reading one batch found besides its rows. Reasons live in the
 * reader's text buffers until the next batch. */
typedef struct hm_batch_verdict {
    bool liar;
    int64_t lines;                   /* lines of the batch (a last one without '\n' counts) */
    int64_t malformed;               /* lines rejected */
    const char *reason_fast_mode;    /* first reason as collect_raw orders them: fastparse's, then the exact parser's */
    const char *reason_exact_mode;   /* first in line order (a group not valid UTF-8) */
    const char *lie;                 /* "line N tagged host=X, headers say Hm-Host=H" */
    bool has_fast_time;
    int64_t newest_fast_time_ns;     /* the period: newest time of the fast path's lines */
} hm_batch_verdict;

typedef struct hm_line_reader {
    hm_strmap keys;       /* key bytes -> hm_key_info* (keys and infos in arena) */
    hm_arena arena;
    uint32_t gen;         /* the current group */
    size_t series_made;   /* fields (series) in the key cache: a bound on a group's */
    hm_lp_line line;
    char *scratch;
    size_t scratch_cap;
    char reason[8192];
    char text_fast[8192], text_exact[8192], text_fastkey[8192], text_lie[1024], text_lie2[1024];
} hm_line_reader;

int hm_line_reader_init(hm_line_reader *r);
void hm_line_reader_free(hm_line_reader *r);
/* A new group: forgets series put in the last one but not committed;
 * starts the key cache over when it grew past its bound. */
void hm_line_reader_new_group(hm_line_reader *r);
/* The series of the last group's tables are stored. */
void hm_line_reader_committed(hm_line_reader *r, hm_group_cols *cols);

/* Reads data[0..len) (whole lines, each ending in '\n') of the batch of
 * row batch_row sent by host; exact_mode: the group is not valid UTF-8
 * (Python reads every line with its exact parser). Rows are appended to
 * cols; a liar's rows are taken back. -1 only when memory runs out. */
int hm_read_batch(hm_line_reader *r, hm_group_cols *cols, int32_t batch_row, const char *host,
                  size_t host_len, const char *data, size_t len, bool exact_mode,
                  hm_batch_verdict *v);

#endif
