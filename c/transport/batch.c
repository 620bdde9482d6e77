#include "batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what is remembered across batches (a stream of random keys
 * must not grow memory without end): past them the key cache starts over,
 * and new sensors go without an id (looked up by key, slower). */
#define KEY_CACHE_MAX 262144
#define SENSOR_IDS_MAX 1048576

typedef struct key_info {
    char *host;           /* NULL: the line has no host tag */
    uint32_t host_len;
    bool is_job, is_agent;
    char *job;            /* the job tag of a job line */
    uint32_t job_len;
    char *prefix;         /* "measurement[,tags but host]", escaped */
    uint32_t prefix_len;
    uint32_t nfields, cap_fields;
    char **field;         /* field names (unescaped) in line order */
    uint32_t *field_len;
    uint32_t *field_id;
} key_info;

static int buf_add(hm_batch_buf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (p == NULL)
            return -1;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    return 0;
}

static bool special(char c, bool tag)
{
    return c == ',' || c == ' ' || (tag && c == '=');
}

/* A name escaped as line protocol writes it, so a sensor key reads back
 * with the store's parse_key. */
static int buf_add_escaped(hm_batch_buf *b, hm_lp_str v, bool tag)
{
    size_t plain = 0;
    while (plain < v.len && !special(v.s[plain], tag))
        plain++;
    if (buf_add(b, v.s, plain) != 0)
        return -1;
    for (size_t i = plain; i < v.len; i++)
        if ((special(v.s[i], tag) && buf_add(b, "\\", 1) != 0) || buf_add(b, v.s + i, 1) != 0)
            return -1;
    return 0;
}

static void *grow(void *items, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap)
        return items;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *p = realloc(items, c * item);
    if (p)
        *cap = c;
    return p;
}

static char *dup_str(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

static void key_info_free(key_info *k)
{
    if (k == NULL)
        return;
    for (uint32_t i = 0; i < k->nfields; i++)
        free(k->field[i]);
    free(k->field);
    free(k->field_len);
    free(k->field_id);
    free(k->host);
    free(k->job);
    free(k->prefix);
    free(k);
}

static void clear_key_cache(hm_batch_reader *b)
{
    for (size_t i = 0; i < b->keys.cap; i++)
        if (b->keys.slots[i].key)
            key_info_free(b->keys.slots[i].value);
    hm_strmap_free(&b->keys);
}

/* What a parsed key says, with the host tag left out of the prefix. */
static key_info *key_info_new(hm_batch_reader *b, const hm_lp_line *l)
{
    key_info *k = calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->is_job = hm_lp_str_eq(l->measurement, "job");
    k->is_agent = hm_lp_str_eq(l->measurement, "hushmon_agent");
    b->tmpkey.len = 0;
    if (buf_add_escaped(&b->tmpkey, l->measurement, false) != 0)
        goto fail;
    for (uint32_t i = 0; i < l->ntags; i++) {
        if (hm_lp_str_eq(l->tag_key[i], "host")) {
            free(k->host);
            if ((k->host = dup_str(l->tag_value[i].s, l->tag_value[i].len)) == NULL)
                goto fail;
            k->host_len = l->tag_value[i].len;
            continue;
        }
        if (buf_add(&b->tmpkey, ",", 1) || buf_add_escaped(&b->tmpkey, l->tag_key[i], true) ||
            buf_add(&b->tmpkey, "=", 1) || buf_add_escaped(&b->tmpkey, l->tag_value[i], true))
            goto fail;
        if (k->is_job && hm_lp_str_eq(l->tag_key[i], "job")) {
            free(k->job);
            if ((k->job = dup_str(l->tag_value[i].s, l->tag_value[i].len)) == NULL)
                goto fail;
            k->job_len = l->tag_value[i].len;
        }
    }
    if ((k->prefix = dup_str(b->tmpkey.s, b->tmpkey.len)) == NULL)
        goto fail;
    k->prefix_len = (uint32_t)b->tmpkey.len;
    return k;
fail:
    key_info_free(k);
    return NULL;
}

static uint32_t sensor_id(hm_batch_reader *b, const char *key, size_t len, int *oom)
{
    hm_strmap_slot *slot = hm_strmap_find(&b->sensor_ids, key, len);
    if (slot)
        return (uint32_t)((uintptr_t)slot->value - 1);
    if (b->nsensors >= SENSOR_IDS_MAX)
        return HM_NO_SENSOR_ID;
    char **keys = grow(b->sensor_key, &b->cap_sensors, b->nsensors + 1, sizeof *keys);
    if (keys == NULL)
        goto oom;
    b->sensor_key = keys;
    size_t cap = b->cap_sensors;
    uint32_t *lens = realloc(b->sensor_key_len, cap * sizeof *lens);
    if (lens == NULL)
        goto oom;
    b->sensor_key_len = lens;
    int added;
    char *copy = dup_str(key, len);
    if (copy == NULL || (slot = hm_strmap_upsert(&b->sensor_ids, key, len, &added)) == NULL) {
        free(copy);
        goto oom;
    }
    uint32_t id = (uint32_t)b->nsensors++;
    b->sensor_key[id] = copy;
    b->sensor_key_len[id] = (uint32_t)len;
    slot->value = (void *)(uintptr_t)(id + 1);
    return id;
oom:
    *oom = 1;
    return HM_NO_SENSOR_ID;
}

/* The sensor id of field f (name) of a line with key k; the key text goes
 * to b->tmpkey when a lookup was needed. */
static uint32_t field_sensor(hm_batch_reader *b, key_info *k, uint32_t f, hm_lp_str name, int *oom)
{
    if (f < k->nfields && k->field_len[f] == name.len && hm_same_bytes(k->field[f], name.s, name.len))
        return k->field_id[f];
    b->tmpkey.len = 0;
    if (buf_add(&b->tmpkey, k->prefix, k->prefix_len) || buf_add(&b->tmpkey, " ", 1) ||
        buf_add_escaped(&b->tmpkey, name, true)) {
        *oom = 1;
        return HM_NO_SENSOR_ID;
    }
    uint32_t id = sensor_id(b, b->tmpkey.s, b->tmpkey.len, oom);
    if (*oom || id == HM_NO_SENSOR_ID || f > k->nfields)
        return id;
    /* Remembered at its position for the next batch. */
    char *copy = dup_str(name.s, name.len);
    if (copy == NULL)
        return id;
    if (f == k->nfields) {
        if (k->nfields == k->cap_fields) {
            uint32_t cap = k->cap_fields ? k->cap_fields * 2 : 8;
            char **fl = realloc(k->field, cap * sizeof *fl);
            if (fl)
                k->field = fl;
            uint32_t *ln = realloc(k->field_len, cap * sizeof *ln);
            if (ln)
                k->field_len = ln;
            uint32_t *ids = realloc(k->field_id, cap * sizeof *ids);
            if (ids)
                k->field_id = ids;
            if (fl == NULL || ln == NULL || ids == NULL) {
                free(copy);
                return id;
            }
            k->cap_fields = cap;
        }
        k->nfields++;
    } else {
        free(k->field[f]);
    }
    k->field[f] = copy;
    k->field_len[f] = name.len;
    k->field_id[f] = id;
    return id;
}

/* 0 read (or skipped as bad), 1 host lie, -1 out of memory. */
static int read_line(hm_batch_reader *b, const char *host, size_t host_len, const char *text, size_t len,
                     hm_bad_line_fn bad, void *ctx, char *lie_host, size_t lie_cap)
{
    hm_lp_line *l = &b->line;
    char reason[160];
    hm_lp_cut cut;
    if (hm_lp_sections(text, len, &cut, reason, sizeof reason) != 0) {
        b->lines_bad++;
        bad(ctx, reason, text, len);
        return 0;
    }
    hm_strmap_slot *slot = hm_strmap_find(&b->keys, text, cut.key_end);
    key_info *k = slot ? slot->value : NULL;
    if (k == NULL) {
        if (hm_lp_parse_key(text, &cut, l, b->scratch.s, reason, sizeof reason) != 0) {
            b->lines_bad++;
            bad(ctx, reason, text, len);
            return 0;
        }
        if ((k = key_info_new(b, l)) == NULL)
            return -1;
        int added;
        if ((slot = hm_strmap_upsert(&b->keys, text, cut.key_end, &added)) == NULL) {
            key_info_free(k);
            return -1;
        }
        slot->value = k;
    }
    if (k->host == NULL || k->host_len != host_len || memcmp(k->host, host, host_len) != 0) {
        snprintf(lie_host, lie_cap, "%.*s", k->host ? (int)(k->host_len > 64 ? 64 : k->host_len) : 0,
                 k->host ? k->host : "");
        return 1;
    }
    if (hm_lp_parse_rest(text, &cut, l, b->scratch.s, reason, sizeof reason) != 0) {
        b->lines_bad++;
        bad(ctx, reason, text, len);
        return 0;
    }
    b->lines_ok++;
    if (k->is_job && k->job) {
        hm_batch_job *j = grow(b->jobs, &b->cap_jobs, b->njobs + 1, sizeof *j);
        if (j == NULL)
            return -1;
        b->jobs = j;
        b->jobs[b->njobs++] = (hm_batch_job){l->time_ns, k->job, k->job_len};
    }
    for (uint32_t f = 0; f < l->nfields; f++) {
        if (l->field_is_string[f])
            continue;
        if (k->is_agent && hm_lp_str_eq(l->field_name[f], "period_ms") && l->field_value[f] >= 1)
            b->period_ms = (int64_t)l->field_value[f];
        int oom = 0;
        uint32_t id = field_sensor(b, k, f, l->field_name[f], &oom);
        if (oom)
            return -1;
        hm_batch_value *v = grow(b->values, &b->cap_values, b->nvalues + 1, sizeof *v);
        if (v == NULL)
            return -1;
        b->values = v;
        hm_batch_value *out = &b->values[b->nvalues++];
        *out = (hm_batch_value){l->time_ns, id, 0, 0, l->field_value[f]};
        if (id == HM_NO_SENSOR_ID) { /* the key is in tmpkey: keep it */
            out->key_off = (uint32_t)b->text.len;
            out->key_len = (uint32_t)b->tmpkey.len;
            if (buf_add(&b->text, b->tmpkey.s, b->tmpkey.len) != 0)
                return -1;
        }
    }
    return 0;
}

static int cmp_value_time(const void *a, const void *b)
{
    const hm_batch_value *x = a, *y = b;
    return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

int hm_batch_read(hm_batch_reader *b, const char *host, const char *data, size_t len,
                  hm_bad_line_fn bad, void *ctx, char *lie_host, size_t lie_cap)
{
    b->nvalues = b->njobs = b->text.len = 0;
    b->lines_ok = b->lines_bad = 0;
    if (b->keys.count >= KEY_CACHE_MAX)
        clear_key_cache(b); /* only between batches: jobs point into it */
    b->scratch.len = 0;
    if (len + 1 > b->scratch.cap) {
        char *s = realloc(b->scratch.s, len + 1);
        if (s == NULL)
            return HM_BATCH_NO_MEMORY;
        b->scratch.s = s;
        b->scratch.cap = len + 1;
    }
    size_t host_len = strlen(host);
    const char *p = data, *end = data + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        if (!hm_lp_skippable(p, n)) {
            int rc = read_line(b, host, host_len, p, n, bad, ctx, lie_host, lie_cap);
            if (rc < 0)
                return HM_BATCH_NO_MEMORY;
            if (rc > 0)
                return HM_BATCH_HOST_LIE;
        }
        p = nl ? nl + 1 : end;
    }
    /* A batch holds one period; sort in case it holds more. */
    for (size_t i = 1; i < b->nvalues; i++) {
        if (b->values[i].time_ns != b->values[i - 1].time_ns) {
            qsort(b->values, b->nvalues, sizeof *b->values, cmp_value_time);
            break;
        }
    }
    return HM_BATCH_OK;
}

const char *hm_batch_value_key(const hm_batch_reader *b, const hm_batch_value *v, uint32_t *len)
{
    if (v->id != HM_NO_SENSOR_ID) {
        *len = b->sensor_key_len[v->id];
        return b->sensor_key[v->id];
    }
    *len = v->key_len;
    return b->text.s + v->key_off;
}

void hm_batch_reader_free(hm_batch_reader *b)
{
    clear_key_cache(b);
    for (size_t i = 0; i < b->nsensors; i++)
        free(b->sensor_key[i]);
    free(b->sensor_key);
    free(b->sensor_key_len);
    hm_strmap_free(&b->sensor_ids);
    free(b->values);
    free(b->jobs);
    free(b->text.s);
    free(b->scratch.s);
    free(b->tmpkey.s);
}
