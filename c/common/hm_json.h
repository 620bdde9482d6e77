/* A streaming JSON writer: values go straight to a FILE, commas and nesting
 * are tracked so callers cannot produce invalid JSON by forgetting one.
 * Non-finite numbers are written as null (JSON has no NaN). */
#ifndef HM_JSON_H
#define HM_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define HM_JSON_MAX_DEPTH 32

typedef struct hm_json {
    FILE *out;
    int depth;
    bool pretty;
    bool need_comma[HM_JSON_MAX_DEPTH];
    bool after_key;
    bool overflow;   /* nesting deeper than HM_JSON_MAX_DEPTH: output invalid */
} hm_json;

void hm_json_init(hm_json *j, FILE *out, bool pretty);
void hm_json_object_begin(hm_json *j);
void hm_json_object_end(hm_json *j);
void hm_json_array_begin(hm_json *j);
void hm_json_array_end(hm_json *j);
void hm_json_key(hm_json *j, const char *key);
void hm_json_string(hm_json *j, const char *s);
void hm_json_double(hm_json *j, double v);
void hm_json_int(hm_json *j, int64_t v);
void hm_json_uint(hm_json *j, uint64_t v);
void hm_json_bool(hm_json *j, bool v);
void hm_json_null(hm_json *j);

/* key + value in one call, for the common case inside objects. */
void hm_json_kv_string(hm_json *j, const char *key, const char *s);
void hm_json_kv_double(hm_json *j, const char *key, double v);
void hm_json_kv_int(hm_json *j, const char *key, int64_t v);
void hm_json_kv_uint(hm_json *j, const char *key, uint64_t v);
void hm_json_kv_bool(hm_json *j, const char *key, bool v);

/* Ends the document with a newline. Returns 0, or -1 if nesting was
 * unbalanced, too deep, or the stream reported a write error. */
int hm_json_finish(hm_json *j);

#endif
