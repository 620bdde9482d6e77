#include "collect_lines.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Past this many line keys the cache starts over at a group's start (a
 * stream of ever new keys must not grow memory without end); series met
 * again after that are put in a group's series table again, which the
 * lake writer drops as known. */
#define KEY_CACHE_MAX 262144
#define FNV_PRIME 0x100000001b3ull
#define SERIES_ID_MASK 0x7fffffffffffffffull

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
    return h;
}

int hm_line_reader_init(hm_line_reader *r)
{
    memset(r, 0, sizeof *r);
    r->gen = 1;
    return 0;
}

static void clear_keys(hm_line_reader *r)
{
    for (size_t i = 0; i < r->keys.cap; i++) {
        hm_key_info *k = r->keys.slots[i].key ? r->keys.slots[i].value : NULL;
        if (k == NULL)
            continue;
        for (uint32_t f = 0; f < k->nfields; f++)
            free(k->fields[f].name);
        free(k->fields);
    }
    hm_strmap_free(&r->keys);
    hm_arena_free(&r->arena);
    memset(&r->keys, 0, sizeof r->keys);
    r->series_made = 0;
}

void hm_line_reader_free(hm_line_reader *r)
{
    clear_keys(r);
    free(r->scratch);
    memset(r, 0, sizeof *r);
}

void hm_line_reader_new_group(hm_line_reader *r)
{
    r->gen++;
    if (r->gen == 0) /* wrapped: 0 means "in no group" */
        r->gen = 1;
    if (r->keys.count > KEY_CACHE_MAX)
        clear_keys(r);
}

void hm_line_reader_committed(hm_line_reader *r, hm_group_cols *cols)
{
    (void)r;
    hm_series_ref *ref = cols->pending.p;
    for (size_t i = 0; i < cols->pending.n; i++)
        ref[i].key->fields[ref[i].field].known = 1;
    hm_col_clear(&cols->pending);
}

static char *arena_str(hm_arena *a, const char *s, size_t n)
{
    char *out = hm_arena_alloc(a, n + 1);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

static int str_cmp(hm_lp_str a, hm_lp_str b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = memcmp(a.s, b.s, n);
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

/* The meaning of a parsed key, as ingest.canonical_key: the host tag
 * (the last one wins, as in a dict) taken out, the rest sorted by key
 * (bytes of UTF-8 sort as Python's code points), "k=v" joined by ','. */
static hm_key_info *make_key(hm_line_reader *r, const hm_lp_line *ln, const char *bad, bool bad_parse)
{
    hm_key_info *k = hm_arena_alloc(&r->arena, sizeof *k);
    if (k == NULL)
        return NULL;
    memset(k, 0, sizeof *k);
    if (bad != NULL) {
        k->bad = arena_str(&r->arena, bad, strlen(bad));
        k->bad_parse = bad_parse;
        return k->bad ? k : NULL;
    }
    uint32_t order[HM_LP_MAX_TAGS], n = 0;
    hm_lp_str host = {"", 0}, job = {"", 0};
    for (uint32_t i = 0; i < ln->ntags; i++) {
        if (hm_lp_str_eq(ln->tag_key[i], "host")) {
            host = ln->tag_value[i];
            continue;
        }
        /* insertion sort, stable: a repeated key keeps its last value */
        uint32_t at = n++;
        while (at > 0 && str_cmp(ln->tag_key[order[at - 1]], ln->tag_key[i]) > 0) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = i;
    }
    char tags[16384];
    hm_text t = {tags, 0, sizeof tags};
    tags[0] = '\0';
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = order[j];
        if (j + 1 < n && str_cmp(ln->tag_key[i], ln->tag_key[order[j + 1]]) == 0)
            continue; /* a later value of the same key wins */
        if (t.len)
            hm_text_add(&t, ",", 1);
        hm_text_add(&t, ln->tag_key[i].s, ln->tag_key[i].len);
        hm_text_add(&t, "=", 1);
        hm_text_add(&t, ln->tag_value[i].s, ln->tag_value[i].len);
        if (hm_lp_str_eq(ln->tag_key[i], "job"))
            job = ln->tag_value[i];
    }
    k->is_job = hm_lp_str_eq(ln->measurement, "job");
    k->host = arena_str(&r->arena, host.s, host.len);
    k->measurement = arena_str(&r->arena, ln->measurement.s, ln->measurement.len);
    k->tags = arena_str(&r->arena, tags, t.len);
    k->job = arena_str(&r->arena, job.s, job.len);
    if (!k->host || !k->measurement || !k->tags || !k->job)
        return NULL;
    k->host_len = host.len, k->measurement_len = ln->measurement.len;
    k->tags_len = (uint32_t)t.len, k->job_len = job.len;
    if (host.len == 0)
        k->bad = "no host tag";
    else if (k->is_job && job.len == 0)
        k->bad = "job line without a job tag";
    uint64_t h = fnv(HM_FNV_SEED, k->host, k->host_len);
    h = fnv(h, "\x1f", 1);
    h = fnv(h, k->measurement, k->measurement_len);
    h = fnv(h, "\x1f", 1);
    h = fnv(h, k->tags, k->tags_len);
    k->prefix_hash = fnv(h, "\x1f", 1);
    return k;
}

/* The key of a line whose sections are cut: from the cache, or parsed. */
static hm_key_info *key_of(hm_line_reader *r, const char *line, const hm_lp_cut *cut)
{
    int added = 0;
    hm_strmap_slot *slot = hm_strmap_upsert_in(&r->keys, &r->arena, line, cut->key_end, &added);
    if (slot == NULL)
        return NULL;
    if (!added)
        return slot->value;
    int rc = hm_lp_parse_key(line, cut, &r->line, r->scratch, r->reason, sizeof r->reason);
    hm_key_info *k = make_key(r, &r->line, rc == 0 ? NULL : r->reason, rc != 0);
    if (k == NULL) {
        hm_strmap_remove(&r->keys, slot);
        return NULL;
    }
    slot->value = k;
    return k;
}

/* The field's series id, its entry made on first sight. */
static hm_field_info *field_of(hm_line_reader *r, hm_key_info *k, uint32_t pos, hm_lp_str name)
{
    if (pos < k->nfields && k->fields[pos].len == name.len &&
        hm_same_bytes(k->fields[pos].name, name.s, name.len))
        return &k->fields[pos];
    for (uint32_t i = 0; i < k->nfields; i++)
        if (k->fields[i].len == name.len && hm_same_bytes(k->fields[i].name, name.s, name.len))
            return &k->fields[i];
    if (k->nfields == k->cap_fields) {
        uint32_t cap = k->cap_fields ? k->cap_fields * 2 : 8;
        hm_field_info *f = realloc(k->fields, cap * sizeof *f);
        if (f == NULL)
            return NULL;
        k->fields = f;
        k->cap_fields = cap;
    }
    hm_field_info *f = &k->fields[k->nfields];
    f->name = malloc(name.len + 1);
    if (f->name == NULL)
        return NULL;
    memcpy(f->name, name.s, name.len);
    f->name[name.len] = '\0';
    f->len = name.len;
    f->known = 0;
    f->gen = 0;
    uint64_t h = fnv(k->prefix_hash, name.s, name.len);
    f->series_id = (int64_t)(h & SERIES_ID_MASK);
    k->nfields++;
    r->series_made++;
    return f;
}

/* Whether fastparse.py would read the line itself (not hand it to the
 * exact parser): no backslash or quote, two spaces, no '\r' left, and
 * every value ending in a digit, '.' or 'i'. Decides only the order of
 * reasons and the batch's period, as in Python. */
static bool fast_line(const char *line, const hm_lp_cut *cut, bool had_cr)
{
    if (!cut->simple || had_cr)
        return false;
    const char *f = line + cut->key_end + 1, *end = line + cut->fields_end;
    for (const char *p = f; p <= end; p++) {
        if (p == end || *p == ',') {
            char c = p[-1];
            if (!((c >= '0' && c <= '9') || c == '.' || c == 'i'))
                return false;
        }
    }
    return true;
}

typedef struct first_reason {
    char *buf;
    size_t cap;
    bool set;
} first_reason;

static void first_set(first_reason *f, long line_no, const char *why)
{
    if (f->set)
        return;
    hm_text t = {f->buf, 0, f->cap};
    f->buf[0] = '\0';
    hm_text_addf(&t, "line %ld: ", line_no);
    hm_text_add(&t, why, strlen(why));
    f->set = true;
}

static int add_series(hm_group_cols *c, hm_key_info *k, hm_field_info *f, uint32_t gen)
{
    hm_series_ref ref = {k, (uint32_t)(f - k->fields)};
    f->gen = gen;
    if (hm_col_i64(&c->se_id, f->series_id) != 0 ||
        hm_strcol_add(&c->se_host, k->host, k->host_len) != 0 ||
        hm_strcol_add(&c->se_measurement, k->measurement, k->measurement_len) != 0 ||
        hm_strcol_add(&c->se_tags, k->tags, k->tags_len) != 0 ||
        hm_strcol_add(&c->se_field, f->name, f->len) != 0 || hm_col_push(&c->pending, &ref) != 0)
        return -1;
    return 0;
}

/* Does num to each number column and str to each string column. */
static void each_col(hm_group_cols *c, void (*num)(hm_col *), void (*str)(hm_strcol *))
{
    hm_col *cols[] = {&c->s_series_id, &c->s_time_ns, &c->s_value, &c->s_batch, &c->se_id,
                      &c->a_time_ns, &c->a_batch, &c->pending};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        num(cols[i]);
    hm_strcol *strs[] = {&c->se_host, &c->se_measurement, &c->se_tags, &c->se_field, &c->a_job,
                         &c->a_host};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        str(strs[i]);
}

void hm_group_cols_reset(hm_group_cols *c)
{
    each_col(c, hm_col_clear, hm_strcol_reset);
    if (c->line_set_count)
        memset(c->line_set, 0, c->line_set_cap * sizeof *c->line_set);
    if (c->line_set_count > c->line_set_peak)
        c->line_set_peak = c->line_set_count;
    c->line_set_count = 0;
    c->maybe_repeats = false;
    hm_strmap_free(&c->activity_seen);
    memset(&c->activity_seen, 0, sizeof c->activity_seen);
}

void hm_group_cols_free(hm_group_cols *c)
{
    each_col(c, hm_col_free, hm_strcol_free);
    free(c->line_set);
    c->line_set = NULL;
    c->line_set_cap = c->line_set_count = 0;
    hm_strmap_free(&c->activity_seen);
    free(c->sort_rows);
    free(c->sort_count);
    c->sort_rows = NULL, c->sort_count = NULL;
    c->sort_rows_cap = c->sort_count_cap = 0;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Notes a line's (key, time); a second one sets maybe_repeats (a hash
 * match only: the exact dedupe then decides). Keys are the prefix hash,
 * so two spellings of one key (tags in another order) match too. */
static int line_seen(hm_group_cols *c, uint64_t key_hash, int64_t t)
{
    uint64_t h = mix(key_hash ^ mix((uint64_t)t)) | 1; /* 0 marks an empty slot */
    if (2 * (c->line_set_count + 1) > c->line_set_cap) {
        size_t cap = c->line_set_cap ? c->line_set_cap * 2 : 4096;
        uint64_t *set = calloc(cap, sizeof *set);
        if (set == NULL)
            return -1;
        for (size_t i = 0; i < c->line_set_cap; i++) {
            uint64_t x = c->line_set[i];
            if (x == 0)
                continue;
            size_t j = (size_t)x & (cap - 1);
            while (set[j] != 0)
                j = (j + 1) & (cap - 1);
            set[j] = x;
        }
        free(c->line_set);
        c->line_set = set;
        c->line_set_cap = cap;
    }
    size_t j = (size_t)h & (c->line_set_cap - 1);
    while (c->line_set[j] != 0) {
        if (c->line_set[j] == h) {
            c->maybe_repeats = true;
            return 0;
        }
        j = (j + 1) & (c->line_set_cap - 1);
    }
    c->line_set[j] = h;
    c->line_set_count++;
    return 0;
}

/* 1 when (job, host, time) is new in the group (collect_raw._activity
 * keeps the first batch that named it), 0 when not, -1: no memory. */
static int activity_fresh(hm_group_cols *c, const hm_key_info *k, int64_t t)
{
    char key[600];
    int n = snprintf(key, sizeof key, "%.*s\x1f%.*s\x1f%lld", (int)k->job_len, k->job,
                     (int)k->host_len, k->host, (long long)t);
    if (n < 0 || (size_t)n >= sizeof key)
        return 1; /* names are bounded well below this; never merge on a cut key */
    int added = 0;
    if (hm_strmap_upsert(&c->activity_seen, key, (size_t)n, &added) == NULL)
        return -1;
    return added;
}

typedef struct sample_ref {
    int64_t sid, t;
    size_t at;
} sample_ref;

static int by_series_time(const void *a, const void *b)
{
    const sample_ref *x = a, *y = b;
    if (x->sid != y->sid)
        return x->sid < y->sid ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

int hm_group_cols_dedupe(hm_group_cols *c)
{
    size_t n = c->s_series_id.n;
    if (!c->maybe_repeats || n < 2)
        return 0;
    sample_ref *refs = malloc(n * sizeof *refs);
    unsigned char *drop = calloc(n, 1);
    if (refs == NULL || drop == NULL) {
        free(refs);
        free(drop);
        return -1;
    }
    int64_t *sid = c->s_series_id.p, *t = c->s_time_ns.p;
    double *val = c->s_value.p;
    int32_t *bat = c->s_batch.p;
    for (size_t i = 0; i < n; i++)
        refs[i] = (sample_ref){sid[i], t[i], i};
    qsort(refs, n, sizeof *refs, by_series_time);
    for (size_t i = 1; i < n; i++)
        if (refs[i].sid == refs[i - 1].sid && refs[i].t == refs[i - 1].t)
            drop[refs[i].at] = 1;
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (drop[i])
            continue;
        sid[out] = sid[i], t[out] = t[i], val[out] = val[i], bat[out] = bat[i];
        out++;
    }
    c->s_series_id.n = c->s_time_ns.n = c->s_value.n = c->s_batch.n = out;
    free(refs);
    free(drop);
    return 0;
}

/* Orders the samples by (series_id, time_ns), the lake's layout of a data
 * file (store/lake.py): the lake writer encodes them as they come
 * (store/lake_add_files.py), and numpy's lexsort of a group's 200,000 rows
 * cost it 11 us per batch. Series ids are 63-bit hashes, so their top bits
 * spread evenly: a stable counting sort on them puts each series in a
 * bucket of its own or a few, and an insertion sort finishes each bucket (a
 * series' values arrive in time order, so this is a check unless two
 * series share the bucket). Rows move as one 32-byte record (one scattered
 * write each, not one scattered read per column), in scratch kept between
 * groups. Buckets: about 4 per distinct series, not per row: a group of
 * 2048 batches holds 200,000 values of 12,700 series, and a count per row
 * (262,144 buckets, 1 MiB of counts) missed the cache on each of them
 * (the sort was a quarter of hm_group_build's time). */
typedef struct sample_row {
    int64_t sid, t;
    double value;
    int32_t batch;
} sample_row;

static bool row_before(const sample_row *a, const sample_row *b)
{
    return a->sid != b->sid ? a->sid < b->sid : a->t < b->t;
}

/* The sign bit flipped: signed order as unsigned. */
static size_t bucket_of(int64_t sid, unsigned shift) { return (size_t)(((uint64_t)sid ^ (1ull << 63)) >> shift); }

static int sort_scratch(hm_group_cols *c, size_t n, size_t buckets)
{
    if (n > c->sort_rows_peak)
        c->sort_rows_peak = n;
    if (buckets + 1 > c->sort_count_peak)
        c->sort_count_peak = buckets + 1;
    if (c->sort_rows_cap < n) {
        sample_row *p = realloc(c->sort_rows, n * sizeof *p);
        if (p == NULL)
            return -1;
        c->sort_rows = p, c->sort_rows_cap = n;
    }
    if (c->sort_count_cap < buckets + 1) {
        uint32_t *p = realloc(c->sort_count, (buckets + 1) * sizeof *p);
        if (p == NULL)
            return -1;
        c->sort_count = p, c->sort_count_cap = buckets + 1;
    }
    memset(c->sort_count, 0, (buckets + 1) * sizeof *c->sort_count);
    return 0;
}

void hm_group_cols_settle(hm_group_cols *c)
{
    each_col(c, hm_col_settle, hm_strcol_settle);
    /* the set is all zeros after the reset, and so is any prefix of it;
     * twice its most entries keep its lookups short (line_seen) */
    void *p = c->line_set;
    c->line_set_cap = hm_room_settle(&p, c->line_set_cap, 2 * c->line_set_peak, sizeof *c->line_set);
    c->line_set = p;
    p = c->sort_rows;
    c->sort_rows_cap = hm_room_settle(&p, c->sort_rows_cap, c->sort_rows_peak, sizeof *c->sort_rows);
    c->sort_rows = p;
    p = c->sort_count;
    c->sort_count_cap =
        hm_room_settle(&p, c->sort_count_cap, c->sort_count_peak, sizeof *c->sort_count);
    c->sort_count = p;
    c->line_set_peak = c->sort_rows_peak = c->sort_count_peak = 0;
}

int hm_group_cols_sort(hm_group_cols *c, size_t series_max)
{
    size_t n = c->s_series_id.n;
    int64_t *sid = c->s_series_id.p, *t = c->s_time_ns.p;
    double *val = c->s_value.p;
    int32_t *bat = c->s_batch.p;
    size_t i = 1;
    while (i < n && !(sid[i] < sid[i - 1] || (sid[i] == sid[i - 1] && t[i] < t[i - 1])))
        i++;
    if (i >= n)
        return 0; /* in order already */
    size_t want = series_max > 0 && series_max < n ? 4 * series_max : n;
    unsigned bits = 8;
    while (bits < 20 && ((size_t)1 << bits) < want)
        bits++;
    size_t buckets = (size_t)1 << bits;
    unsigned shift = 64 - bits;
    if (sort_scratch(c, n, buckets) != 0)
        return -1;
    uint32_t *count = c->sort_count;
    sample_row *rows = c->sort_rows;
    for (i = 0; i < n; i++)
        count[bucket_of(sid[i], shift) + 1]++;
    for (size_t b = 0; b < buckets; b++)
        count[b + 1] += count[b];
    for (i = 0; i < n; i++)
        rows[count[bucket_of(sid[i], shift)]++] = (sample_row){sid[i], t[i], val[i], bat[i]};
    /* count[b] is now the end of bucket b */
    size_t start = 0;
    for (size_t b = 0; b < buckets; b++) {
        size_t end = count[b];
        for (size_t k = start + 1; k < end; k++) {
            if (!row_before(&rows[k], &rows[k - 1]))
                continue;
            sample_row x = rows[k];
            size_t j = k;
            while (j > start && row_before(&x, &rows[j - 1])) {
                rows[j] = rows[j - 1];
                j--;
            }
            rows[j] = x;
        }
        start = end;
    }
    for (i = 0; i < n; i++)
        sid[i] = rows[i].sid, t[i] = rows[i].t, val[i] = rows[i].value, bat[i] = rows[i].batch;
    return 0;
}

/* Takes back what a batch appended (a liar's rows). */
static void take_back(hm_group_cols *c, size_t samples, size_t activity, size_t series)
{
    c->s_series_id.n = c->s_time_ns.n = c->s_value.n = c->s_batch.n = samples;
    /* its activity is no longer in the group: a later batch may name it */
    const int32_t *jo = c->a_job.offsets.p, *ho = c->a_host.offsets.p;
    const int64_t *at = c->a_time_ns.p;
    for (size_t i = activity; i < c->a_time_ns.n; i++) {
        char key[600];
        int n = snprintf(key, sizeof key, "%.*s\x1f%.*s\x1f%lld", (int)(jo[i + 1] - jo[i]),
                         (const char *)c->a_job.bytes.p + jo[i], (int)(ho[i + 1] - ho[i]),
                         (const char *)c->a_host.bytes.p + ho[i], (long long)at[i]);
        hm_strmap_slot *slot = n > 0 && (size_t)n < sizeof key
                                   ? hm_strmap_find(&c->activity_seen, key, (size_t)n)
                                   : NULL;
        if (slot != NULL)
            hm_strmap_remove(&c->activity_seen, slot);
    }
    hm_strcol_truncate(&c->a_job, activity);
    hm_strcol_truncate(&c->a_host, activity);
    c->a_time_ns.n = c->a_batch.n = activity;
    hm_series_ref *ref = c->pending.p;
    for (size_t i = series; i < c->pending.n; i++)
        ref[i].key->fields[ref[i].field].gen = 0;
    c->pending.n = c->se_id.n = series;
    hm_strcol_truncate(&c->se_host, series);
    hm_strcol_truncate(&c->se_measurement, series);
    hm_strcol_truncate(&c->se_tags, series);
    hm_strcol_truncate(&c->se_field, series);
}

int hm_read_batch(hm_line_reader *r, hm_group_cols *c, int32_t batch_row, const char *host,
                  size_t host_len, const char *data, size_t len, bool exact_mode,
                  hm_batch_verdict *v)
{
    memset(v, 0, sizeof *v);
    first_reason exact = {r->text_exact, sizeof r->text_exact, false};
    first_reason fastkey = {r->text_fastkey, sizeof r->text_fastkey, false};
    first_reason any = {r->text_fast, sizeof r->text_fast, false};
    /* the first lie of a fast line wins over an earlier one of an exact
     * line (collect_store._liars checks the fast values first) */
    bool lie_fast = false, lie_exact = false;
    size_t samples0 = c->s_series_id.n, activity0 = c->a_time_ns.n, series0 = c->pending.n;
    const char *end = data + len;
    long no = 0;
    for (const char *line = data; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);
        const char *next = nl ? nl + 1 : end;
        no++;
        if (n + 1 > r->scratch_cap) {
            size_t cap = r->scratch_cap ? r->scratch_cap : 4096;
            while (cap < n + 1)
                cap *= 2;
            char *s = realloc(r->scratch, cap);
            if (s == NULL)
                return -1;
            r->scratch = s;
            r->scratch_cap = cap;
        }
        size_t m = n;
        while (m > 0 && line[m - 1] == '\r') /* Python's rstrip("\r") */
            m--;
        bool had_cr = m != n;
        if (m == 0 || line[0] == '#') {
            line = next;
            continue;
        }
        if (exact_mode && !hm_utf8_valid(line, n)) {
            /* the host check reads such a line with replacement
             * characters (collect_store._lie_exact); the ingest rejects it */
            hm_lp_cut cut;
            hm_key_info *k = NULL;
            if (hm_lp_sections(line, m, &cut, r->reason, sizeof r->reason) == 0 &&
                (k = key_of(r, line, &cut)) != NULL && !k->bad_parse && k->host_len != 0 &&
                hm_lp_parse_rest(line, &cut, &r->line, r->scratch, r->reason, sizeof r->reason) == 0 &&
                (k->host_len != host_len || memcmp(k->host, host, host_len) != 0)) {
                hm_text t = {r->text_lie2, 0, sizeof r->text_lie2};
                r->text_lie2[0] = '\0';
                hm_text_addf(&t, "line %ld tagged host=", no);
                hm_utf8_replace(&t, k->host, k->host_len);
                hm_text_addf(&t, ", headers say Hm-Host=%.*s", (int)host_len, host);
                lie_exact = true;
                break;
            }
            v->malformed++;
            first_set(&exact, no, "invalid UTF-8");
            first_set(&any, no, "invalid UTF-8");
            line = next;
            continue;
        }
        hm_lp_cut cut;
        hm_key_info *k = NULL;
        int rc = hm_lp_sections(line, m, &cut, r->reason, sizeof r->reason);
        if (rc == 0) {
            k = key_of(r, line, &cut);
            if (k == NULL)
                return -1;
        }
        if (rc != 0 || (k->bad != NULL && k->bad_parse)) {
            const char *why = rc != 0 ? r->reason : k->bad;
            /* a key error of a line fastparse reads itself comes after
             * the exact parser's reasons (canonical_key, later) */
            bool fast = rc == 0 && hm_lp_parse_rest(line, &cut, &r->line, r->scratch, r->reason,
                                                    sizeof r->reason) == 0 &&
                        fast_line(line, &cut, had_cr);
            v->malformed++;
            first_set(fast && !exact_mode ? &fastkey : &exact, no, why);
            first_set(&any, no, why);
            line = next;
            continue;
        }
        if (hm_lp_parse_rest(line, &cut, &r->line, r->scratch, r->reason, sizeof r->reason) != 0) {
            v->malformed++;
            first_set(&exact, no, r->reason);
            first_set(&any, no, r->reason);
            line = next;
            continue;
        }
        int64_t t = r->line.time_ns;
        bool fast = false, fast_known = false;
        const char *ts = line + cut.fields_end + 1;
        bool neg_fast = ts[0] == '-' && !exact_mode && fast_line(line, &cut, had_cr);
        if (ts[0] == '+' || (ts[0] == '-' && !neg_fast)) {
            /* a sign: only fastparse takes "-5" (Arrow's cast), never "+5"
             * (its pattern passes, then the cast fails for the group) */
            hm_text why = {r->reason, 0, sizeof r->reason};
            r->reason[0] = '\0';
            hm_text_add(&why, "bad timestamp ", 14);
            hm_py_repr(&why, ts, cut.len - cut.fields_end - 1, 40);
            hm_text_add(&why, " (ns since 1970, below 2^63)", 28);
            v->malformed++;
            first_set(&exact, no, r->reason);
            first_set(&any, no, r->reason);
            line = next;
            continue;
        }
        fast = fast_known = neg_fast;
        if (k->host_len != 0 && (k->host_len != host_len || memcmp(k->host, host, host_len) != 0)) {
            fast = fast_line(line, &cut, had_cr);
            fast_known = true;
            /* the fast path skips keys canonical_key refuses; the exact
             * parser's check does not */
            bool counts = exact_mode || !fast || k->bad == NULL;
            if (counts && fast && !exact_mode) {
                snprintf(r->text_lie, sizeof r->text_lie,
                         "line %ld tagged host=%s, headers say Hm-Host=%.*s", no, k->host,
                         (int)host_len, host);
                lie_fast = true;
                break;
            }
            if (counts && !lie_exact) {
                snprintf(r->text_lie2, sizeof r->text_lie2,
                         "line %ld tagged host=%s, headers say Hm-Host=%.*s", no, k->host,
                         (int)host_len, host);
                lie_exact = true;
                if (exact_mode)
                    break;
            }
            if (counts) {
                line = next;
                continue;
            }
        }
        if (!v->has_fast_time || t > v->newest_fast_time_ns) {
            if (!fast_known)
                fast = fast_line(line, &cut, had_cr);
            if (fast) {
                v->has_fast_time = true;
                v->newest_fast_time_ns = t;
            }
        }
        if (k->bad != NULL) {
            if (!fast_known)
                fast = fast_line(line, &cut, had_cr);
            v->malformed++;
            first_set(fast && !exact_mode ? &fastkey : &exact, no, k->bad);
            first_set(&any, no, k->bad);
            line = next;
            continue;
        }
        const hm_lp_line *ln = &r->line;
        if (!c->maybe_repeats && line_seen(c, k->prefix_hash, t) != 0)
            return -1;
        if (k->is_job) {
            bool active = false;
            for (uint32_t i = 0; i < ln->nfields; i++)
                if (!ln->field_is_string[i] && ln->field_value[i] != 0.0 &&
                    hm_lp_str_eq(ln->field_name[i], "active"))
                    active = true;
            int fresh = active ? activity_fresh(c, k, t) : 0;
            if (fresh < 0)
                return -1;
            if (fresh && (hm_strcol_add(&c->a_job, k->job, k->job_len) != 0 ||
                           hm_strcol_add(&c->a_host, k->host, k->host_len) != 0 ||
                           hm_col_i64(&c->a_time_ns, t) != 0 || hm_col_i32(&c->a_batch, batch_row) != 0))
                return -1;
            line = next;
            continue;
        }
        uint32_t nf = ln->nfields;
        if (hm_col_reserve(&c->s_series_id, nf) != 0 || hm_col_reserve(&c->s_time_ns, nf) != 0 ||
            hm_col_reserve(&c->s_value, nf) != 0 || hm_col_reserve(&c->s_batch, nf) != 0)
            return -1;
        int64_t *sid = (int64_t *)c->s_series_id.p + c->s_series_id.n;
        int64_t *tim = (int64_t *)c->s_time_ns.p + c->s_time_ns.n;
        double *val = (double *)c->s_value.p + c->s_value.n;
        int32_t *bat = (int32_t *)c->s_batch.p + c->s_batch.n;
        size_t out = 0;
        for (uint32_t i = 0; i < nf; i++) {
            if (ln->field_is_string[i])
                continue; /* strings are not stored (string_fields_skipped) */
            hm_field_info *f = field_of(r, k, i, ln->field_name[i]);
            if (f == NULL)
                return -1;
            if (!f->known && f->gen != r->gen && add_series(c, k, f, r->gen) != 0)
                return -1;
            sid[out] = f->series_id;
            tim[out] = t;
            val[out] = ln->field_value[i];
            bat[out] = batch_row;
            out++;
        }
        c->s_series_id.n += out, c->s_time_ns.n += out, c->s_value.n += out, c->s_batch.n += out;
        line = next;
    }
    v->lines = no; /* a liar's count stops at its lie: a liar has no batch row */
    if (lie_fast || lie_exact) {
        v->liar = true;
        v->lie = lie_fast ? r->text_lie : r->text_lie2;
        take_back(c, samples0, activity0, series0);
        return 0;
    }
    v->reason_fast_mode = fastkey.set ? fastkey.buf : exact.set ? exact.buf : NULL;
    v->reason_exact_mode = any.set ? any.buf : NULL;
    return 0;
}
