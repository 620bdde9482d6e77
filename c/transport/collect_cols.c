#include "collect_cols.h"

#include <stdint.h>

void hm_col_init(hm_col *c, size_t item)
{
    memset(c, 0, sizeof *c);
    c->item = item;
}

void hm_col_free(hm_col *c)
{
    free(c->p);
    size_t item = c->item;
    memset(c, 0, sizeof *c);
    c->item = item;
}

size_t hm_room_settle(void **p, size_t cap, size_t peak, size_t item)
{
    size_t want = 256;
    while (want < peak)
        want *= 2;
    if (cap * item < HM_ROOM_SETTLE_MIN_BYTES || cap / 4 < want)
        return cap;
    void *q = realloc(*p, want * item);
    if (q == NULL)
        return cap;
    *p = q;
    return want;
}

void hm_col_settle(hm_col *c)
{
    hm_col_clear(c);
    c->cap = hm_room_settle(&c->p, c->cap, c->peak, c->item);
    c->peak = 0;
}

void hm_strcol_init(hm_strcol *s)
{
    hm_col_init(&s->offsets, sizeof(int32_t));
    hm_col_init(&s->bytes, 1);
}

void hm_strcol_reset(hm_strcol *s)
{
    hm_col_clear(&s->offsets);
    hm_col_clear(&s->bytes);
}

void hm_strcol_settle(hm_strcol *s)
{
    hm_col_settle(&s->offsets);
    hm_col_settle(&s->bytes);
}

void hm_strcol_free(hm_strcol *s)
{
    hm_col_free(&s->offsets);
    hm_col_free(&s->bytes);
}

int hm_strcol_add(hm_strcol *s, const char *text, size_t len)
{
    if (s->bytes.n + len > INT32_MAX)
        return -1;
    if (s->offsets.n == 0 && hm_col_i32(&s->offsets, 0) != 0)
        return -1;
    if (hm_col_reserve(&s->bytes, len) != 0 || hm_col_reserve(&s->offsets, 1) != 0)
        return -1;
    if (len)
        memcpy((char *)s->bytes.p + s->bytes.n, text, len);
    s->bytes.n += len;
    ((int32_t *)s->offsets.p)[s->offsets.n++] = (int32_t)s->bytes.n;
    return 0;
}

void hm_strcol_truncate(hm_strcol *s, size_t rows)
{
    if (rows >= hm_strcol_rows(s))
        return;
    s->offsets.n = rows + 1;
    s->bytes.n = (size_t)((int32_t *)s->offsets.p)[rows];
}
