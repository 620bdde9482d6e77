/* Growth of heap arrays that are appended to one item at a time. */
#ifndef HM_ARRAY_H
#define HM_ARRAY_H

#include <stddef.h>

#include "hm_error.h"

/* Returns items reallocated to the next capacity (initial when *cap is 0,
 * else double) and stores that capacity in *cap; NULL with err set when the
 * capacity would pass max_items or memory runs out, leaving items and *cap
 * as they were. what names the items in the error ("samples"). */
void *hm_array_grow(void *items, size_t *cap, size_t item_bytes, size_t initial,
                    size_t max_items, const char *what, hm_error *err);

#endif
