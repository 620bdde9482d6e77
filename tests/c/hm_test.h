/* A minimal unit-test harness: CHECK records a failure and carries on, so
 * one run reports every broken check. Each test program ends by printing
 * "N passed, N failed" and exits non-zero if anything failed. */
#ifndef HM_TEST_H
#define HM_TEST_H

#include <math.h>
#include <stdio.h>

typedef struct hm_test_counts {
    int passed, failed;
} hm_test_counts;

#define CHECK(counts, cond)                                                       \
    do {                                                                          \
        if (cond) {                                                               \
            (counts)->passed++;                                                   \
        } else {                                                                  \
            (counts)->failed++;                                                   \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                         \
    } while (0)

/* |a - b| <= tol, with the values printed when it fails. */
#define CHECK_NEAR(counts, a, b, tol)                                              \
    do {                                                                           \
        double hm_a_ = (a), hm_b_ = (b);                                           \
        if (fabs(hm_a_ - hm_b_) <= (tol)) {                                        \
            (counts)->passed++;                                                    \
        } else {                                                                   \
            (counts)->failed++;                                                    \
            fprintf(stderr, "%s:%d: %s = %.17g, expected %.17g (tol %g)\n",        \
                    __FILE__, __LINE__, #a, hm_a_, hm_b_, (double)(tol));          \
        }                                                                          \
    } while (0)

static inline int hm_test_finish(const char *name, const hm_test_counts *c)
{
    printf("%s: %d passed, %d failed\n", name, c->passed, c->failed);
    return c->failed == 0 ? 0 : 1;
}

#endif
