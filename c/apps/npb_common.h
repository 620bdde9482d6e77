/* What the NPB-like kernels (ep, cg, mg, ft, is, lu) share: the size class
 * option (--class S|W|A, checked the same way by every kernel) and NPB's
 * linear congruential generator (x <- a x mod 2^46), so the kernels draw the
 * same numbers as the NAS Parallel Benchmarks and EP can be verified
 * against NPB's published sums. */
#ifndef NPB_COMMON_H
#define NPB_COMMON_H

#include <stdint.h>

#include "hm_error.h"

enum { NPB_CLASS_S, NPB_CLASS_W, NPB_CLASS_A, NPB_N_CLASSES };

/* The index of "S", "W" or "A"; -1 with err set otherwise. */
int npb_class_index(const char *name, hm_error *err);

/* NPB's multiplier 5^13 and default seed. */
#define NPB_A 1220703125ULL
#define NPB_SEED 314159265ULL

/* One step x <- a x mod 2^46; returns the new x scaled to (0, 1). */
double npb_randlc(uint64_t *x, uint64_t a);

/* n steps of npb_randlc into y[0 .. n). */
void npb_vranlc(int64_t n, uint64_t *x, uint64_t a, double *y);

/* a^k mod 2^46 applied to x: the state k steps ahead of x (skip-ahead, so
 * every rank starts its share of the stream without drawing the rest). */
uint64_t npb_skip(uint64_t x, uint64_t a, uint64_t k);

#endif
