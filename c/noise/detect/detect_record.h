/* Per-iteration recording of hushmon-detect, MPI-free so it is unit-tested.
 *
 * Storing every iteration of a microsecond collective would cost megabytes a
 * second, so the recorder keeps what the analysis needs, compactly:
 *   - every detour: an iteration longer than a threshold, with its start on
 *     the synchronized clock (to fold over the injector's period);
 *   - per-block durations: blocks of a fixed number of iterations;
 *   - a log-linear histogram of all iteration durations (upper quantiles).
 * The hot path (hm_detect_record) does no allocation and no system call. */
#ifndef HM_DETECT_RECORD_H
#define HM_DETECT_RECORD_H

#include <stdint.h>
#include <stdio.h>

#include "hm_error.h"

/* 8 sub-buckets per power of two, up to 2^63 ns: relative bucket width
 * 12.5 %, enough for p99 / p99.9 of iteration times. */
#define HM_DETECT_HIST_SUB 8
#define HM_DETECT_HIST_BUCKETS (64 * HM_DETECT_HIST_SUB)

typedef enum hm_detect_event_kind {
    HM_DETECT_DETOUR = 0,
    HM_DETECT_BLOCK = 1,
} hm_detect_event_kind;

/* One record of the binary file, 24 bytes, little-endian on x86. */
typedef struct hm_detect_event {
    int32_t kind;        /* hm_detect_event_kind */
    int32_t rank;
    int64_t start_ns;    /* synchronized clock */
    int64_t duration_ns;
} hm_detect_event;

typedef struct hm_detect_recorder {
    int32_t rank;
    int64_t threshold_ns;   /* an iteration longer than this is a detour */
    int64_t block_iters;    /* iterations per block */
    int64_t clock_offset_ns; /* local timer + offset = synchronized clock */
    hm_detect_event *detours;
    size_t detour_count, detour_cap;
    uint64_t detours_dropped; /* beyond detour_cap (counted, not stored) */
    int64_t detour_excess_ns; /* sum of (duration - threshold) over all detours */
    hm_detect_event *blocks;
    size_t block_count, block_cap;
    int64_t block_start_ns, block_done;
    uint64_t iterations;
    uint64_t hist[HM_DETECT_HIST_BUCKETS];
} hm_detect_recorder;

/* Prepares a recorder for `iterations` iterations (blocks are preallocated
 * for them) keeping at most max_detours detours. Returns 0 or -1. */
int hm_detect_recorder_init(hm_detect_recorder *r, int32_t rank, int64_t threshold_ns,
                            int64_t block_iters, uint64_t iterations, size_t max_detours,
                            int64_t clock_offset_ns, hm_error *err);
void hm_detect_recorder_free(hm_detect_recorder *r);

/* Bucket of a duration; the lower edge of a bucket. */
int hm_detect_hist_bucket(int64_t ns);
int64_t hm_detect_hist_lower_ns(int bucket);
/* Quantile q of the histogram: the geometric middle of the bucket that
 * holds it (relative error <= 6 %); NaN when empty. */
double hm_detect_hist_quantile(const uint64_t *hist, double q);

/* Marks the start of the first block (local timer reading). */
static inline void hm_detect_record_begin(hm_detect_recorder *r, int64_t local_ns)
{
    r->block_start_ns = local_ns;
    r->block_done = 0;
}

/* Records one iteration that ran from start to end (local timer). */
static inline void hm_detect_record(hm_detect_recorder *r, int64_t start_ns, int64_t end_ns)
{
    int64_t d = end_ns - start_ns;
    r->hist[hm_detect_hist_bucket(d)]++;
    r->iterations++;
    if (d > r->threshold_ns) {
        r->detour_excess_ns += d - r->threshold_ns;
        if (r->detour_count < r->detour_cap)
            r->detours[r->detour_count++] = (hm_detect_event){
                HM_DETECT_DETOUR, r->rank, start_ns + r->clock_offset_ns, d};
        else
            r->detours_dropped++;
    }
    if (++r->block_done == r->block_iters) {
        if (r->block_count < r->block_cap)
            r->blocks[r->block_count++] = (hm_detect_event){
                HM_DETECT_BLOCK, r->rank, r->block_start_ns + r->clock_offset_ns,
                end_ns - r->block_start_ns};
        r->block_start_ns = end_ns;
        r->block_done = 0;
    }
}

/* The binary event file: a 64-byte header, then hm_detect_event records.
 *   char magic[8] "HMDETV1\0"; int64 realtime_minus_clock_ns;
 *   int64 threshold_ns; int64 block_iters; int32 nranks; int32 record_bytes;
 *   int64 record_count; int64 reserved[2]. */
typedef struct hm_detect_file_header {
    char magic[8];
    int64_t realtime_minus_clock_ns;
    int64_t threshold_ns;
    int64_t block_iters;
    int32_t nranks;
    int32_t record_bytes;
    int64_t record_count;
    int64_t reserved[2];
} hm_detect_file_header;

#define HM_DETECT_MAGIC "HMDETV1"

int hm_detect_write_file(const char *path, const hm_detect_file_header *header,
                         const hm_detect_event *events, size_t count, hm_error *err);

#endif
