/* A TOML subset, enough for the agent's config and the PMU profiles:
 * comments, [table] headers (dotted names allowed), key = value with basic
 * strings, integers (with _ separators), floats, booleans and one-line
 * arrays of strings or integers. Anything else is an error that names the
 * file and line, so a typo never silently changes behaviour. */
#ifndef HM_TOML_H
#define HM_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

#define HM_TOML_KEY_MAX 96
#define HM_TOML_STR_MAX 512
#define HM_TOML_ARRAY_MAX 64

typedef enum hm_toml_type {
    HM_TOML_STRING,
    HM_TOML_INT,
    HM_TOML_FLOAT,
    HM_TOML_BOOL,
    HM_TOML_ARRAY,
} hm_toml_type;

typedef struct hm_toml_value {
    hm_toml_type type;
    char str[HM_TOML_STR_MAX];   /* HM_TOML_STRING */
    int64_t i;                   /* HM_TOML_INT */
    double f;                    /* HM_TOML_FLOAT (also set for INT) */
    bool b;
    size_t n;                    /* HM_TOML_ARRAY: items, all strings or all ints */
    hm_toml_type item_type;
    char (*items)[HM_TOML_STR_MAX];
    int64_t *ints;
} hm_toml_value;

typedef struct hm_toml_entry {
    char key[HM_TOML_KEY_MAX];   /* "table.key" or "key" at top level */
    int line;
    bool used;                   /* set by lookups, to report unknown keys */
    hm_toml_value value;
} hm_toml_entry;

typedef struct hm_toml_doc {
    char source[256];            /* file name for messages */
    hm_toml_entry *entries;
    size_t count, cap;
} hm_toml_doc;

/* Parses text; err names source and line on failure. */
int hm_toml_parse(hm_toml_doc *doc, const char *text, const char *source, hm_error *err);
int hm_toml_load(hm_toml_doc *doc, const char *path, hm_error *err);
void hm_toml_free(hm_toml_doc *doc);

/* Looks up "table.key"; marks it used. NULL when absent. */
hm_toml_entry *hm_toml_get(hm_toml_doc *doc, const char *key);
/* Typed getters: 0 if absent (out untouched), 1 if set, -1 wrong type. */
int hm_toml_get_string(hm_toml_doc *doc, const char *key, char *out, size_t size, hm_error *err);
int hm_toml_get_int(hm_toml_doc *doc, const char *key, int64_t *out, hm_error *err);
int hm_toml_get_double(hm_toml_doc *doc, const char *key, double *out, hm_error *err);
int hm_toml_get_bool(hm_toml_doc *doc, const char *key, bool *out, hm_error *err);
/* The first unused entry, to report "unknown key"; NULL if all used. */
const hm_toml_entry *hm_toml_first_unused(const hm_toml_doc *doc, const char *prefix);

#endif
