/* Growable columns the collector fills for one group and hands to Python
 * as Arrow buffers (python/hushmon/transport/fastcollect.py): fixed-width
 * values, and strings as int32 offsets (n + 1) over one byte buffer,
 * Arrow's layout, so each column crosses with one copy. Reset, not
 * freed, between groups: a steady collector allocates nothing. */
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

void hm_col_init(hm_col *c, size_t item);
void hm_col_free(hm_col *c);
void hm_strcol_init(hm_strcol *s);
void hm_strcol_reset(hm_strcol *s);
void hm_strcol_free(hm_strcol *s);
/* Appends one string; -1 when memory runs out or the column passes 2 GiB
 * (int32 offsets). */
int hm_strcol_add(hm_strcol *s, const char *text, size_t len);
/* Rows of the column. */
static inline size_t hm_strcol_rows(const hm_strcol *s) { return s->offsets.n ? s->offsets.n - 1 : 0; }
/* Drops rows from row on (a batch taken back). */
void hm_strcol_truncate(hm_strcol *s, size_t rows);

#endif
