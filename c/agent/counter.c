#include "counter.h"

#include <math.h>

bool hm_counter_delta(uint64_t prev, uint64_t cur, unsigned width_bits, uint64_t *delta)
{
    if (cur >= prev) {
        *delta = cur - prev;
        return true;
    }
    if (width_bits < 64) {
        uint64_t top = ((uint64_t)1 << width_bits) - 1;
        /* A wrap: prev was in the upper half of the range and the counter
         * went round. A drop from the lower half is a reset. */
        if (prev <= top && prev > top / 2) {
            *delta = (top - prev) + cur + 1;
            return true;
        }
    }
    return false;
}

double hm_counter_rate(uint64_t prev, uint64_t cur, unsigned width_bits, double dt_s)
{
    uint64_t d;
    if (!(dt_s > 0) || !hm_counter_delta(prev, cur, width_bits, &d))
        return NAN;
    return (double)d / dt_s;
}
