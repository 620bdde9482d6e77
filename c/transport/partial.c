#include "partial.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

#include "hm_digits.h"
#include "hm_json.h"
#include "json_read.h"

int hm_partial_init(hm_partial *p, const char *job, int64_t time_ns, hm_error *err)
{
    memset(p, 0, sizeof *p);
    p->job = strdup(job);
    if (p->job == NULL)
        return hm_error_set(err, "out of memory");
    p->time_ns = time_ns;
    return 0;
}

void hm_partial_free(hm_partial *p)
{
    for (size_t i = 0; i < p->sensors.cap; i++) {
        hm_summary *s = p->sensors.slots[i].value;
        if (s) {
            hm_summary_free(s);
            free(s);
        }
    }
    hm_strmap_free(&p->sensors);
    hm_strmap_free(&p->sources);
    hm_arena_free(&p->arena);
    free(p->by_id);
    p->by_id = NULL;
    p->n_by_id = 0;
    free(p->job);
    p->job = NULL;
}

size_t hm_source_key(char *buf, size_t cap, const char *host, int64_t epoch, uint64_t seq)
{
    size_t hl = strlen(host);
    if (cap < 64 || hl > cap - 64) { /* long hosts: the slow way */
        int n = snprintf(buf, cap, "%s %" PRId64 " %" PRIu64, host, epoch, seq);
        return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
    }
    memcpy(buf, host, hl);
    size_t n = hl;
    buf[n++] = ' ';
    if (epoch < 0) {
        buf[n++] = '-';
        n += hm_u64_digits(buf + n, 0 - (uint64_t)epoch);
    } else {
        n += hm_u64_digits(buf + n, (uint64_t)epoch);
    }
    buf[n++] = ' ';
    n += hm_u64_digits(buf + n, seq);
    buf[n] = '\0';
    return n;
}

int hm_partial_add_source(hm_partial *p, const char *host, int64_t epoch, uint64_t seq,
                          int *added, hm_error *err)
{
    char key[512];
    size_t len = hm_source_key(key, sizeof key, host, epoch, seq);
    hm_strmap_slot *slot = hm_strmap_upsert_in(&p->sources, &p->arena, key, len, added);
    if (slot == NULL)
        return hm_error_set(err, "out of memory adding a source");
    if (!*added)
        return 0;
    size_t hl = strlen(host);
    hm_source *src = hm_arena_alloc(&p->arena, sizeof *src + hl + 1);
    if (src == NULL)
        return hm_error_set(err, "out of memory adding a source");
    src->epoch = epoch;
    src->seq = seq;
    memcpy(src->host, host, hl + 1);
    slot->value = src;
    return 0;
}

static hm_summary *sensor(hm_partial *p, const char *key, size_t len, hm_error *err)
{
    int added;
    hm_strmap_slot *slot = hm_strmap_upsert(&p->sensors, key, len, &added);
    if (slot == NULL) {
        hm_error_set(err, "out of memory adding a sensor");
        return NULL;
    }
    if (added) {
        hm_summary *s = malloc(sizeof *s);
        if (s == NULL) {
            hm_error_set(err, "out of memory adding a sensor");
            return NULL;
        }
        hm_summary_init(s);
        slot->value = s;
    }
    return slot->value;
}

int hm_partial_add_value(hm_partial *p, const char *key, size_t len, double value, hm_error *err)
{
    hm_summary *s = sensor(p, key, len, err);
    return s == NULL ? -1 : hm_summary_add(s, value, err);
}

int hm_partial_add_value_id(hm_partial *p, uint32_t id, const char *key, size_t len, double value,
                            hm_error *err)
{
    if (id >= p->n_by_id) {
        uint32_t n = p->n_by_id ? p->n_by_id : 64;
        while (n <= id)
            n *= 2;
        hm_summary **by_id = realloc(p->by_id, n * sizeof *by_id);
        if (by_id == NULL)
            return hm_error_set(err, "out of memory for sensor ids");
        memset(by_id + p->n_by_id, 0, (n - p->n_by_id) * sizeof *by_id);
        p->by_id = by_id;
        p->n_by_id = n;
    }
    hm_summary *s = p->by_id[id];
    if (s == NULL && (s = p->by_id[id] = sensor(p, key, len, err)) == NULL)
        return -1;
    return hm_summary_add(s, value, err);
}

int hm_partial_merge(hm_partial *p, const hm_partial *from, hm_error *err)
{
    for (size_t i = 0; i < from->sensors.cap; i++) {
        const hm_strmap_slot *slot = &from->sensors.slots[i];
        if (slot->key == NULL)
            continue;
        hm_summary *s = sensor(p, slot->key, slot->len, err);
        if (s == NULL || hm_summary_merge(s, slot->value, err) != 0)
            return -1;
    }
    for (size_t i = 0; i < from->sources.cap; i++) {
        const hm_source *src = from->sources.slots[i].value;
        int added;
        if (src && hm_partial_add_source(p, src->host, src->epoch, src->seq, &added, err) != 0)
            return -1;
    }
    return 0;
}

/* Slots of a map in key order: deterministic output. */
static int cmp_slot_key(const void *a, const void *b)
{
    const hm_strmap_slot *x = *(const hm_strmap_slot *const *)a, *y = *(const hm_strmap_slot *const *)b;
    return strcmp(x->key, y->key);
}

static int cmp_source(const void *a, const void *b)
{
    const hm_source *x = (*(const hm_strmap_slot *const *)a)->value;
    const hm_source *y = (*(const hm_strmap_slot *const *)b)->value;
    int c = strcmp(x->host, y->host);
    if (c)
        return c;
    if (x->epoch != y->epoch)
        return x->epoch < y->epoch ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const hm_strmap_slot **sorted_slots(const hm_strmap *m, int (*cmp)(const void *, const void *))
{
    const hm_strmap_slot **out = malloc((m->count ? m->count : 1) * sizeof *out);
    if (out == NULL)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            out[n++] = &m->slots[i];
    qsort(out, n, sizeof *out, cmp);
    return out;
}

static void write_store(hm_json *j, const char *name, const hm_sketch_store *st)
{
    hm_json_key(j, name);
    hm_json_object_begin(j);
    for (uint32_t i = 0; i < st->len; i++) {
        if (st->counts[i] == 0)
            continue;
        char key[16];
        snprintf(key, sizeof key, "%" PRId32, st->offset + (int32_t)i);
        hm_json_kv_uint(j, key, st->counts[i]);
    }
    hm_json_object_end(j);
}

static void write_summary(hm_json *j, const hm_summary *s)
{
    hm_json_object_begin(j);
    hm_json_kv_uint(j, "count", s->count);
    hm_json_kv_double(j, "sum", hm_summary_sum(s));
    /* The exact sum's parts: a merge downstream stays exact. */
    hm_json_key(j, "sum_parts");
    hm_json_array_begin(j);
    for (int i = 0; i < s->sum.n; i++)
        hm_json_double(j, s->sum.part[i]);
    hm_json_array_end(j);
    hm_json_kv_double(j, "mean", s->mean);
    hm_json_kv_double(j, "m2", s->m2);
    hm_json_kv_double(j, "min", s->min);
    hm_json_kv_double(j, "max", s->max);
    hm_json_key(j, "sketch");
    hm_json_object_begin(j);
    hm_json_kv_double(j, "alpha", HM_SKETCH_ALPHA);
    hm_json_kv_uint(j, "zero", s->sketch.zero);
    write_store(j, "pos", &s->sketch.pos);
    write_store(j, "neg", &s->sketch.neg);
    hm_json_object_end(j);
    hm_json_object_end(j);
}

int hm_partial_to_json(const hm_partial *p, const char *level, const char *rack, char **out,
                       size_t *out_len, hm_error *err)
{
    const hm_strmap_slot **sensors = sorted_slots(&p->sensors, cmp_slot_key);
    const hm_strmap_slot **sources = sorted_slots(&p->sources, cmp_source);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    if (sensors == NULL || sources == NULL || (f = open_memstream(&buf, &len)) == NULL) {
        free(sensors);
        free(sources);
        return hm_error_set(err, "out of memory writing a summary");
    }
    /* Only this thread writes f: no lock per character. */
    __fsetlocking(f, FSETLOCKING_BYCALLER);
    hm_json j;
    hm_json_init(&j, f, false);
    hm_json_object_begin(&j);
    hm_json_kv_int(&j, "v", 1);
    hm_json_kv_string(&j, "level", level);
    if (rack)
        hm_json_kv_string(&j, "rack", rack);
    hm_json_kv_string(&j, "job", p->job);
    hm_json_kv_int(&j, "time_ns", p->time_ns);
    hm_json_key(&j, "sources");
    hm_json_array_begin(&j);
    for (size_t i = 0; i < p->sources.count; i++) {
        const hm_source *src = sources[i]->value;
        hm_json_array_begin(&j);
        hm_json_string(&j, src->host);
        hm_json_int(&j, src->epoch);
        hm_json_uint(&j, src->seq);
        hm_json_array_end(&j);
    }
    hm_json_array_end(&j);
    hm_json_key(&j, "sensors");
    hm_json_object_begin(&j);
    for (size_t i = 0; i < p->sensors.count; i++) {
        hm_json_key(&j, sensors[i]->key);
        write_summary(&j, sensors[i]->value);
    }
    hm_json_object_end(&j);
    hm_json_object_end(&j);
    int rc = hm_json_finish(&j);
    free(sensors);
    free(sources);
    if (fclose(f) != 0 || rc != 0) {
        free(buf);
        return hm_error_set(err, "writing a summary failed");
    }
    *out = buf;
    *out_len = len;
    return 0;
}

static int read_store(hm_sketch *k, int sign, const hm_jnode *obj, hm_error *err)
{
    if (obj == NULL)
        return 0;
    if (obj->type != HM_JOBJ)
        return hm_error_set(err, "sketch buckets are not an object");
    for (size_t i = 0; i < obj->n; i++) {
        const hm_jnode *c = obj->items[i];
        char *end;
        long key = strtol(c->key, &end, 10);
        if (*end != '\0' || key < INT32_MIN || key > INT32_MAX || c->type != HM_JNUM || !c->is_int ||
            c->i < 0)
            return hm_error_set(err, "bad sketch bucket %s", c->key);
        if (hm_sketch_add_count(k, sign, (int32_t)key, (uint64_t)c->i, err) != 0)
            return -1;
    }
    return 0;
}

static int num(const hm_jnode *obj, const char *key, double *out, hm_error *err)
{
    const hm_jnode *n = hm_jget(obj, key);
    if (n == NULL || n->type != HM_JNUM)
        return hm_error_set(err, "'%s' missing or not a number", key);
    *out = n->d;
    return 0;
}

static int read_summary(hm_summary *s, const hm_jnode *obj, hm_error *err)
{
    const hm_jnode *count = hm_jget(obj, "count");
    if (count == NULL || count->type != HM_JNUM || !count->is_int || count->i < 1)
        return hm_error_set(err, "'count' missing or not a positive integer");
    s->count = (uint64_t)count->i;
    if (num(obj, "mean", &s->mean, err) || num(obj, "m2", &s->m2, err) || num(obj, "min", &s->min, err) ||
        num(obj, "max", &s->max, err))
        return -1;
    const hm_jnode *parts = hm_jget(obj, "sum_parts");
    if (parts && parts->type == HM_JARR) {
        for (size_t i = 0; i < parts->n; i++) {
            if (parts->items[i]->type != HM_JNUM)
                return hm_error_set(err, "'sum_parts' holds a non-number");
            hm_exact_sum_add(&s->sum, parts->items[i]->d);
        }
    } else {
        double sum = 0;
        if (num(obj, "sum", &sum, err))
            return -1;
        hm_exact_sum_add(&s->sum, sum);
    }
    const hm_jnode *sk = hm_jget(obj, "sketch");
    double alpha = 0;
    if (sk == NULL || num(sk, "alpha", &alpha, err) != 0)
        return hm_error_wrap(err, "sketch");
    if (alpha != HM_SKETCH_ALPHA)
        return hm_error_set(err, "sketch alpha %g, this reducer merges %g only", alpha, HM_SKETCH_ALPHA);
    double zero = 0;
    if (num(sk, "zero", &zero, err) != 0)
        return -1;
    s->sketch.zero = (uint64_t)zero;
    if (read_store(&s->sketch, 1, hm_jget(sk, "pos"), err) != 0 ||
        read_store(&s->sketch, -1, hm_jget(sk, "neg"), err) != 0)
        return -1;
    if (hm_sketch_count(&s->sketch) != s->count)
        return hm_error_set(err, "sketch holds %" PRIu64 " values, count says %" PRIu64,
                            hm_sketch_count(&s->sketch), s->count);
    return 0;
}

static int from_doc(const hm_jnode *root, hm_partial *p, char *rack_out, size_t rack_cap, hm_error *err)
{
    const hm_jnode *v = hm_jget(root, "v"), *job = hm_jget(root, "job"), *t = hm_jget(root, "time_ns");
    const hm_jnode *rack = hm_jget(root, "rack"), *sources = hm_jget(root, "sources");
    const hm_jnode *sensors = hm_jget(root, "sensors");
    if (v == NULL || v->type != HM_JNUM || v->d != 1)
        return hm_error_set(err, "not a version 1 summary");
    if (job == NULL || job->type != HM_JSTR || t == NULL || t->type != HM_JNUM || !t->is_int)
        return hm_error_set(err, "'job' or 'time_ns' missing");
    if (sources == NULL || sources->type != HM_JARR || sensors == NULL || sensors->type != HM_JOBJ)
        return hm_error_set(err, "'sources' or 'sensors' missing");
    snprintf(rack_out, rack_cap, "%s", rack && rack->type == HM_JSTR ? rack->s : "");
    if (hm_partial_init(p, job->s, t->i, err) != 0)
        return -1;
    for (size_t i = 0; i < sources->n; i++) {
        const hm_jnode *s = sources->items[i];
        if (s->type != HM_JARR || s->n != 3 || s->items[0]->type != HM_JSTR || !s->items[1]->is_int ||
            s->items[2]->type != HM_JNUM || s->items[2]->d < 0)
            return hm_error_set(err, "bad source #%zu", i);
        int added;
        if (hm_partial_add_source(p, s->items[0]->s, s->items[1]->i, (uint64_t)s->items[2]->d, &added, err))
            return -1;
    }
    for (size_t i = 0; i < sensors->n; i++) {
        const hm_jnode *s = sensors->items[i];
        int added;
        hm_strmap_slot *slot = hm_strmap_upsert(&p->sensors, s->key, strlen(s->key), &added);
        if (slot == NULL)
            return hm_error_set(err, "out of memory reading a summary");
        if (!added)
            return hm_error_set(err, "sensor %s twice", s->key);
        hm_summary *sum = malloc(sizeof *sum);
        if (sum == NULL)
            return hm_error_set(err, "out of memory reading a summary");
        hm_summary_init(sum);
        slot->value = sum;
        if (s->type != HM_JOBJ || read_summary(sum, s, err) != 0)
            return hm_error_wrap(err, "sensor %s", s->key);
    }
    return 0;
}

int hm_partial_from_json(const char *text, size_t len, hm_partial *p, char *rack_out, size_t rack_cap,
                         hm_error *err)
{
    hm_jdoc doc;
    memset(p, 0, sizeof *p);
    if (hm_json_read(text, len, &doc, err) != 0)
        return -1;
    int rc = from_doc(doc.root, p, rack_out, rack_cap, err);
    hm_jdoc_free(&doc);
    if (rc != 0)
        hm_partial_free(p);
    return rc;
}

int hm_partial_msg_id(const hm_partial *p, const char *prefix, char *out, size_t cap, hm_error *err)
{
    const hm_strmap_slot **sources = sorted_slots(&p->sources, cmp_source);
    if (sources == NULL)
        return hm_error_set(err, "out of memory");
    uint64_t h = HM_FNV_SEED;
    for (size_t i = 0; i < p->sources.count; i++)
        h = hm_fnv1a(sources[i]->key, sources[i]->len + 1, h); /* with its NUL: a separator */
    free(sources);
    int n = snprintf(out, cap, "%s:%s:%" PRId64 ":%zu:%016" PRIx64, prefix, p->job, p->time_ns,
                     p->sources.count, h);
    if (n < 0 || (size_t)n >= cap)
        return hm_error_set(err, "message id longer than %zu bytes", cap);
    return 0;
}
