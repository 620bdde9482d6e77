/* The seed's agent model: sum an array of 250,000 long long. A chunk is
 * 4096 elements (about a microsecond), walking the array cyclically, so the
 * work can stop close to the requested time instead of after a whole pass. */
#include <stdlib.h>

#include "inject_shape.h"

enum { SUM_ELEMENTS = 250000, SUM_CHUNK = 4096 };

typedef struct sum_state {
    long long *a;
    size_t pos;
    long long sum;
} sum_state;

static int sum_init(void **state, hm_error *err)
{
    sum_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_errno(err, "allocating the sum kernel");
    s->a = malloc(SUM_ELEMENTS * sizeof *s->a);
    if (s->a == NULL) {
        free(s);
        return hm_error_errno(err, "allocating %d long long", SUM_ELEMENTS);
    }
    for (size_t i = 0; i < SUM_ELEMENTS; i++)
        s->a[i] = (long long)i;
    *state = s;
    return 0;
}

static uint64_t sum_chunk(void *state)
{
    sum_state *s = state;
    size_t end = s->pos + SUM_CHUNK;
    if (end > SUM_ELEMENTS)
        end = SUM_ELEMENTS;
    long long sum = s->sum;
    for (size_t i = s->pos; i < end; i++)
        sum += s->a[i];
    s->sum = sum;
    s->pos = end == SUM_ELEMENTS ? 0 : end;
    return (uint64_t)sum;
}

static void sum_fini(void *state)
{
    sum_state *s = state;
    if (s != NULL)
        free(s->a);
    free(s);
}

const hm_inject_kernel hm_inject_kernel_sum = {
    .name = "sum",
    .init = sum_init,
    .chunk = sum_chunk,
    .fini = sum_fini,
};
