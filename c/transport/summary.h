/* Mergeable summaries of one sensor's values (docs/transport.md "Summaries").
 *
 * count, min, max and the sum merge exactly: the sum is kept as Shewchuk's
 * non-overlapping partials (what Python's math.fsum does), so merging
 * partials in any order and grouping gives the correctly rounded sum of the
 * raw values, bit for bit. mean and M2 merge by Chan et al.'s pairwise
 * formula (exact up to floating-point rounding). The quantile sketch is a
 * DDSketch with relative accuracy alpha: merging adds bucket counts; exact
 * zeros are counted apart, every other value has its bucket (the dense
 * stores span the keys in use: a few hundred for a sensor's values).
 *
 * No libnats here: the math is tested on its own (tests/c/test_summary.c). */
#ifndef HM_SUMMARY_H
#define HM_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "hm_error.h"

#define HM_SKETCH_ALPHA 0.01
/* Non-overlapping partials of an exact sum. Sensor values spanning less
 * than ~2^700 never need more than a handful; past the limit the two
 * smallest are added (rounded), which no real data reaches. */
#define HM_SUM_PARTS_MAX 16

/* Bucket counts for keys offset .. offset+len-1 (dense: sensors' values
 * span a few hundred buckets at most). */
typedef struct hm_sketch_store {
    int32_t offset;
    uint32_t len;
    uint64_t *counts;
} hm_sketch_store;

typedef struct hm_sketch {
    uint64_t zero;
    hm_sketch_store pos, neg;
    double last_x;      /* the last value added and its key: sensors often */
    int32_t last_key;   /* repeat a value, and log() is the costly part */
} hm_sketch;

typedef struct hm_exact_sum {
    int n;
    double part[HM_SUM_PARTS_MAX];
} hm_exact_sum;

typedef struct hm_summary {
    uint64_t count;
    double mean, m2, min, max;
    hm_exact_sum sum;
    hm_sketch sketch;
} hm_summary;

/* The bucket a positive magnitude falls in: ceil(log(x) / log(gamma)). */
int32_t hm_sketch_key(double magnitude);
/* The value a bucket stands for: 2 gamma^k / (gamma + 1), within alpha of
 * every value in it. */
double hm_sketch_bucket_value(int32_t key);
double hm_sketch_gamma(void);

void hm_summary_init(hm_summary *s);
void hm_summary_free(hm_summary *s);
/* x must be finite. -1 (err set) only when memory runs out. */
int hm_summary_add(hm_summary *s, double x, hm_error *err);
int hm_summary_merge(hm_summary *into, const hm_summary *from, hm_error *err);
/* Adds n to bucket key of the positive (sign > 0), negative (sign < 0) or
 * zero (sign == 0) store: how a sketch read from JSON is rebuilt. */
int hm_sketch_add_count(hm_sketch *k, int sign, int32_t key, uint64_t n, hm_error *err);

/* The correctly rounded sum of every value added or merged. */
double hm_summary_sum(const hm_summary *s);
/* Adds a value to an exact sum (also used to rebuild one from its parts). */
void hm_exact_sum_add(hm_exact_sum *e, double x);
double hm_exact_sum_value(const hm_exact_sum *e);
/* Quantile q in [0, 1] of the values the sketch holds: the estimate of the
 * value of rank floor(q (n - 1)) (0-based, "lower"), within alpha relative
 * error of it. NaN for an empty sketch. */
double hm_sketch_quantile(const hm_sketch *k, double q);
uint64_t hm_sketch_count(const hm_sketch *k);

#endif
