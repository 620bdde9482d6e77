/* Strict parsing of command-line values: the whole string must be a number
 * in range, or the caller gets an error message naming what was wrong. */
#ifndef HM_PARSE_H
#define HM_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

/* Integer in [min, max]. Accepts the suffixes K, M, G (powers of 1024)
 * when allow_suffix is non-zero, e.g. "64K" = 65536. */
int hm_parse_int64(const char *s, int64_t min, int64_t max, int allow_suffix,
                   int64_t *out, hm_error *err);
/* Finite double in [min, max]. */
int hm_parse_double(const char *s, double min, double max, double *out, hm_error *err);

/* A list of non-negative sizes, e.g. "0,8,1K", "1:1M:x2" (from 1 to 1M,
 * doubling) or "0:1000:+100" (arithmetic). Items of both forms may be
 * mixed with commas. On success *out is malloc'ed (caller frees) and
 * *count set; duplicates are kept in the order given. */
int hm_parse_size_list(const char *s, int64_t **out, size_t *count, hm_error *err);

/* Splits a list like "nats://a:4222, nats://b:4222" in place at commas and
 * spaces: items[] points into text. Returns the number of items, or -1 when
 * there are more than max (nothing to rely on then). */
int hm_split_list(char *text, char **items, int max);

#endif
