/* Growable columns the collector fills for one group and hands to Python
 * as Arrow buffers (python/hushmon/transport/fastcollect.py): fixed-width
 * values, and strings as int32 offsets (n + 1) over one byte buffer,
 * Arrow's layout, so each column crosses with one copy. Cleared, not
 * freed, between groups: a steady collector allocates nothing. Room a
 * backlog's groups grew and later groups do not use is given back by
 * hm_col_settle. */
#ifndef HM_COLLECT_COLS_H
#define HM_COLLECT_COLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct hm_col {
    void *p;
    size_t n, cap; /* in items */
    size_t item;   /* bytes per item */
    size_t peak;   /* the most items held since the last hm_col_settle */
} hm_col;

typedef struct hm_strcol {
    hm_col offsets; /* int32, n + 1 once anything was added */
    hm_col bytes;   /* char */
} hm_strcol;

/* Room for extra more items; -1 when memory runs out. */
static inline int hm_col_reserve(hm_col *c, size_t extra)
{
    if (c->n + extra <= c->cap)
        return 0;
    size_t cap = c->cap ? c->cap : 256;
    while (cap < c->n + extra)
        cap *= 2;
    void *p = realloc(c->p, cap * c->item);
    if (p == NULL)
        return -1;
    c->p = p;
    c->cap = cap;
    return 0;
}

static inline int hm_col_push(hm_col *c, const void *x)
{
    if (c->n == c->cap && hm_col_reserve(c, 1) != 0)
        return -1;
    memcpy((char *)c->p + c->n * c->item, x, c->item);
    c->n++;
    return 0;
}

static inline int hm_col_i64(hm_col *c, int64_t v) { return hm_col_push(c, &v); }
static inline int hm_col_i32(hm_col *c, int32_t v) { return hm_col_push(c, &v); }
static inline int hm_col_u8(hm_col *c, uint8_t v) { return hm_col_push(c, &v); }
static inline int hm_col_f64(hm_col *c, double v) { return hm_col_push(c, &v); }

/* Empties the column, its room kept (and how much it held noted). */
static inline void hm_col_clear(hm_col *c)
{
    if (c->n > c->peak)
        c->peak = c->n;
    c->n = 0;
}

void hm_col_init(hm_col *c, size_t item);
void hm_col_free(hm_col *c);
/* The room to keep for a buffer of cap items of item bytes whose fills
 * since the last look held at most peak: cap, or less where cap is over
 * 4 times what peak needs and at least HM_ROOM_SETTLE_MIN_BYTES, shrunk
 * with realloc (*p moved) to the power of two at or above peak (at least
 * 256). A realloc that fails keeps the buffer as it was. */
size_t hm_room_settle(void **p, size_t cap, size_t peak, size_t item);
#define HM_ROOM_SETTLE_MIN_BYTES ((size_t)1 << 20)
/* hm_room_settle of an empty column; peak starts over. */
void hm_col_settle(hm_col *c);
void hm_strcol_init(hm_strcol *s);
void hm_strcol_reset(hm_strcol *s);
void hm_strcol_settle(hm_strcol *s);
void hm_strcol_free(hm_strcol *s);
/* Appends one string; -1 when memory runs out or the column passes 2 GiB
 * (int32 offsets). */
int hm_strcol_add(hm_strcol *s, const char *text, size_t len);
/* Rows of the column. */
static inline size_t hm_strcol_rows(const hm_strcol *s) { return s->offsets.n ? s->offsets.n - 1 : 0; }
/* Drops rows from row on (a batch taken back). */
void hm_strcol_truncate(hm_strcol *s, size_t rows);

#endif
