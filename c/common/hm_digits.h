/* Decimal digits of integers without printf: the agent's line writer, the
 * reducer's batch keys and the JSON writer each format thousands of numbers
 * per second, and snprintf was the slowest part of each. Header only, so the
 * hot loops keep it inline. */
#ifndef HM_DIGITS_H
#define HM_DIGITS_H

#include <stddef.h>
#include <stdint.h>

/* Longest output of hm_u64_digits: UINT64_MAX has 20 digits. */
#define HM_U64_DIGITS_MAX 20

/* Writes the digits of v at out (no sign, no NUL) and returns their count,
 * at most HM_U64_DIGITS_MAX. */
static inline size_t hm_u64_digits(char *out, uint64_t v)
{
    char reversed[HM_U64_DIGITS_MAX];
    size_t n = 0;
    do {
        reversed[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = reversed[n - 1 - i];
    return n;
}

#endif
