#include "detect_record.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(hm_detect_event) == 24, "event records are 24 bytes on disk");
_Static_assert(sizeof(hm_detect_file_header) == 64, "the file header is 64 bytes");

int hm_detect_recorder_init(hm_detect_recorder *r, int32_t rank, int64_t threshold_ns,
                            int64_t block_iters, uint64_t iterations, size_t max_detours,
                            int64_t clock_offset_ns, hm_error *err)
{
    memset(r, 0, sizeof *r);
    if (block_iters < 1)
        return hm_error_set(err, "block size must be at least one iteration");
    r->rank = rank;
    r->threshold_ns = threshold_ns;
    r->block_iters = block_iters;
    r->clock_offset_ns = clock_offset_ns;
    r->block_cap = (size_t)(iterations / (uint64_t)block_iters) + 1;
    r->detour_cap = max_detours;
    r->blocks = calloc(r->block_cap, sizeof *r->blocks);
    r->detours = calloc(max_detours > 0 ? max_detours : 1, sizeof *r->detours);
    if (r->blocks == NULL || r->detours == NULL) {
        hm_detect_recorder_free(r);
        return hm_error_errno(err, "allocating %zu block and %zu detour records", r->block_cap,
                              max_detours);
    }
    /* Touch the memory now so page faults do not show up as detours. */
    memset(r->blocks, 0, r->block_cap * sizeof *r->blocks);
    memset(r->detours, 0, (max_detours > 0 ? max_detours : 1) * sizeof *r->detours);
    return 0;
}

void hm_detect_recorder_free(hm_detect_recorder *r)
{
    free(r->blocks);
    free(r->detours);
    r->blocks = r->detours = NULL;
    r->block_count = r->detour_count = 0;
}

int hm_detect_hist_bucket(int64_t ns)
{
    if (ns < HM_DETECT_HIST_SUB)
        return ns < 0 ? 0 : (int)ns;
    uint64_t v = (uint64_t)ns;
    int exp = 63 - __builtin_clzll(v); /* v in [2^exp, 2^(exp+1)) */
    /* the 3 bits below the leading one pick the sub-bucket */
    int sub = (int)((v >> (exp - 3)) & (HM_DETECT_HIST_SUB - 1));
    return exp * HM_DETECT_HIST_SUB + sub;
}

int64_t hm_detect_hist_lower_ns(int bucket)
{
    int exp = bucket / HM_DETECT_HIST_SUB, sub = bucket % HM_DETECT_HIST_SUB;
    if (exp < 3)
        return bucket; /* values below 8 have buckets of their own */
    return (int64_t)((uint64_t)(HM_DETECT_HIST_SUB + sub) << (exp - 3));
}

double hm_detect_hist_quantile(const uint64_t *hist, double q)
{
    uint64_t total = 0;
    for (int i = 0; i < HM_DETECT_HIST_BUCKETS; i++)
        total += hist[i];
    if (total == 0)
        return NAN;
    /* the smallest bucket whose cumulative count reaches ceil(q * total) */
    uint64_t target = (uint64_t)ceil(q * (double)total);
    if (target < 1)
        target = 1;
    uint64_t seen = 0;
    for (int i = 0; i < HM_DETECT_HIST_BUCKETS; i++) {
        seen += hist[i];
        if (seen >= target) {
            double lo = (double)hm_detect_hist_lower_ns(i);
            double hi = i + 1 < HM_DETECT_HIST_BUCKETS ? (double)hm_detect_hist_lower_ns(i + 1)
                                                       : lo * 1.125;
            return lo < 8 ? lo : sqrt(lo * hi);
        }
    }
    return NAN;
}

int hm_detect_write_file(const char *path, const hm_detect_file_header *header,
                         const hm_detect_event *events, size_t count, hm_error *err)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return hm_error_errno(err, "opening %s", path);
    hm_detect_file_header h = *header;
    memcpy(h.magic, HM_DETECT_MAGIC, sizeof h.magic);
    h.record_bytes = (int32_t)sizeof(hm_detect_event);
    h.record_count = (int64_t)count;
    int ok = fwrite(&h, sizeof h, 1, f) == 1 &&
             (count == 0 || fwrite(events, sizeof *events, count, f) == count);
    if (fclose(f) != 0 || !ok)
        return hm_error_errno(err, "writing %s", path);
    return 0;
}
