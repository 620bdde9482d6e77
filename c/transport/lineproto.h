/* InfluxDB line protocol, one line at a time, by the rules of
 * python/hushmon/store/lineproto.py (the store's exact parser), so the
 * reducer accepts and rejects the same lines the store does:
 *   measurement[,tag=value...] field=value[,field=value...] timestamp
 * Backslash escapes `, = \ "` (and space); sections split on unescaped
 * spaces outside quoted strings; a field is `name=value` split at its first
 * '='; values are floats, integers (`i`, `u` suffix), booleans or quoted
 * strings. Non-finite values and missing timestamps are errors.
 *
 * Differences from the Python parser, both on lines no agent writes:
 * Python's int()/float() also take underscores ("1_000") and surrounding
 * whitespace, and integers past 64 bits in timestamps; these are rejected
 * here. A signed timestamp is read (the store's fast path, fastparse.py,
 * stores "-5"; its exact parser refuses signs): the collector
 * (collect_lines.c) decides as the store does. Reasons are the Python
 * parser's texts, reprs included (pytext.h). */
#ifndef HM_LINEPROTO_H
#define HM_LINEPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HM_LP_MAX_TAGS 64
#define HM_LP_MAX_FIELDS 512

/* A string that is either a slice of the line (no escapes in it) or its
 * unescaped copy in the caller's scratch buffer. Not NUL-terminated. */
typedef struct hm_lp_str {
    const char *s;
    uint32_t len;
} hm_lp_str;

typedef struct hm_lp_line {
    hm_lp_str measurement;
    uint32_t ntags;
    hm_lp_str tag_key[HM_LP_MAX_TAGS];
    hm_lp_str tag_value[HM_LP_MAX_TAGS];
    uint32_t nfields;
    hm_lp_str field_name[HM_LP_MAX_FIELDS];
    double field_value[HM_LP_MAX_FIELDS];   /* 0 for string fields */
    bool field_is_string[HM_LP_MAX_FIELDS];
    int64_t time_ns;
    /* The last timestamp's text and value: a batch's lines share one, so
     * the next line compares bytes instead of parsing (zero it first). */
    char last_ts[24];
    uint32_t last_ts_len;
    int64_t last_ts_ns;
} hm_lp_line;

/* Parses line[0..len) (no newline; a trailing '\r' is dropped). Unescaped
 * copies go to scratch, which must hold len bytes. Returns 0, or -1 with a
 * short reason in reason[0..reason_cap). Empty and comment lines are the
 * caller's to skip (hm_lp_skippable). */
int hm_lp_parse_line(const char *line, size_t len, hm_lp_line *out, char *scratch,
                     char *reason, size_t reason_cap);

/* The same in steps, so a caller that has seen a line's key before (same
 * bytes) can skip parsing it: sections, then key, then the rest (fields and
 * timestamp). scratch as above, shared by the key and the rest. */
typedef struct hm_lp_cut {
    size_t len;        /* without a trailing '\r' */
    size_t key_end;    /* the key is line[0..key_end) */
    size_t fields_end; /* fields line[key_end+1..fields_end), timestamp after */
    bool simple;       /* no backslash, no quote: separators found with memchr */
} hm_lp_cut;
int hm_lp_sections(const char *line, size_t len, hm_lp_cut *cut, char *reason, size_t reason_cap);
int hm_lp_parse_key(const char *line, const hm_lp_cut *cut, hm_lp_line *out, char *scratch,
                    char *reason, size_t reason_cap);
int hm_lp_parse_rest(const char *line, const hm_lp_cut *cut, hm_lp_line *out, char *scratch,
                     char *reason, size_t reason_cap);

/* A line that carries no data: empty (after a trailing '\r') or a '#'
 * comment. */
bool hm_lp_skippable(const char *line, size_t len);

bool hm_lp_str_eq(hm_lp_str a, const char *s);

#endif
