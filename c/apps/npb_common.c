/* Size classes and NPB's generator for the NPB-like kernels. */
#include "npb_common.h"

#include <string.h>

#define MASK46 ((1ULL << 46) - 1)
#define MASK23 ((1ULL << 23) - 1)

int npb_class_index(const char *name, hm_error *err)
{
    static const char *const names[NPB_N_CLASSES] = {"S", "W", "A"};
    for (int i = 0; i < NPB_N_CLASSES; i++)
        if (name && strcmp(name, names[i]) == 0)
            return i;
    hm_error_set(err, "--class %s: expected S, W or A", name ? name : "(none)");
    return -1;
}

/* a x mod 2^46 in 64-bit integers: both factors are below 2^46, so split
 * them at 2^23 and keep only the cross terms that land below 2^46. Exact,
 * as NPB's double-precision version is. */
static uint64_t mulmod46(uint64_t a, uint64_t x)
{
    uint64_t a1 = a >> 23, a2 = a & MASK23, x1 = x >> 23, x2 = x & MASK23;
    uint64_t cross = (a1 * x2 + a2 * x1) & MASK23;
    return ((cross << 23) + a2 * x2) & MASK46;
}

double npb_randlc(uint64_t *x, uint64_t a)
{
    *x = mulmod46(a, *x);
    return (double)*x * 0x1p-46;
}

void npb_vranlc(int64_t n, uint64_t *x, uint64_t a, double *y)
{
    uint64_t v = *x;
    for (int64_t i = 0; i < n; i++) {
        v = mulmod46(a, v);
        y[i] = (double)v * 0x1p-46;
    }
    *x = v;
}

uint64_t npb_skip(uint64_t x, uint64_t a, uint64_t k)
{
    uint64_t power = a;
    while (k) {
        if (k & 1)
            x = mulmod46(power, x);
        power = mulmod46(power, power);
        k >>= 1;
    }
    return x;
}
