#include "hm_array.h"

#include <stdint.h>
#include <stdlib.h>

void *hm_array_grow(void *items, size_t *cap, size_t item_bytes, size_t initial,
                    size_t max_items, const char *what, hm_error *err)
{
    size_t next = *cap ? 2 * *cap : initial;
    if (next > max_items || next > SIZE_MAX / item_bytes) {
        hm_error_set(err, "more than %zu %s", *cap, what);
        return NULL;
    }
    void *grown = realloc(items, next * item_bytes);
    if (grown == NULL) {
        hm_error_set(err, "out of memory for %zu %s", next, what);
        return NULL;
    }
    *cap = next;
    return grown;
}
