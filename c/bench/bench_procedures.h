/* The procedures of the loop-based tools users compare against, as pure
 * rules so each is unit-tested without MPI (tests/c/test_bench_procedures.c).
 * Read from their sources (docs/bench.md, "OSU and IMB procedures"):
 *
 * OSU Micro-Benchmarks 7.x, blocking collectives (osu_util.h, osu_bcast.c):
 *   1000 timed iterations after 100 skipped up to LARGE_MESSAGE_SIZE (8192 B
 *   included: the switch is `size > 8192`), 100 after 10 above; each call
 *   timed alone, an untimed MPI_Barrier after it; one buffer; each rank's
 *   mean over the timed iterations; reported: the average of the ranks'
 *   means ("Avg Latency"), their min and max (-f).
 *
 * IMB-MPI1 (IMB_settings.h, IMB_mem_manager.c, IMB_bcast.c): n_sample =
 *   MSGSPERSAMPLE (1000) at size 0, else max(1, min(OVERALL_VOL / size,
 *   1000)) with OVERALL_VOL = 40 MiB; the default dynamic policy first runs
 *   1 iteration, then min(n_sample, ~1 s worth) iterations, and cuts
 *   n_sample to 1 + SECS_PER_SAMPLE (10) / time per call, never above the
 *   previous size's count; N_BARR (2) barriers before the loop, each call
 *   timed alone, one barrier after it (-sync 1, the default), fixed root
 *   (-root_shift 0); -off_cache rotates through copies spaced
 *   ((len + line - 1) / line + 1) * line bytes apart, min(n_sample,
 *   ceil(2 * cache / spacing)) of them; reported per rank time / n_sample,
 *   t_min, t_max, t_avg over ranks. */
#ifndef HM_BENCH_PROCEDURES_H
#define HM_BENCH_PROCEDURES_H

#include <stddef.h>
#include <stdint.h>

#define HM_OSU_LARGE_MESSAGE_BYTES 8192
#define HM_OSU_ITERATIONS_SMALL 1000
#define HM_OSU_SKIP_SMALL 100
#define HM_OSU_ITERATIONS_LARGE 100
#define HM_OSU_SKIP_LARGE 10

#define HM_IMB_MSGS_PER_SAMPLE 1000
#define HM_IMB_OVERALL_VOL_BYTES (40 * 1048576)
#define HM_IMB_SECS_PER_SAMPLE 10.0
#define HM_IMB_N_BARR 2
#define HM_IMB_SYNC_BARRIERS 1
#define HM_IMB_CACHE_LINE_BYTES 64

/* OSU: timed iterations and skipped (warm-up) iterations at a size. */
void hm_osu_iterations(int64_t size_bytes, int *iterations, int *skip);

/* IMB: the repetition count before the dynamic adaptation. */
int hm_imb_n_sample(int64_t size_bytes);

/* IMB dynamic policy, step 1: the repetitions of the second pre-run from
 * the time of one call (max over ranks, seconds): ~1 s worth, at most
 * MSGSPERSAMPLE. */
int hm_imb_rep_test(double one_call_s);

/* IMB dynamic policy, step 2: the final count from the selected count, the
 * previous size's final count (MSGSPERSAMPLE at the first size) and the
 * time per call of the second pre-run (max over ranks, seconds). */
int hm_imb_dynamic_n_sample(int selected, int previous, double per_call_s, double secs);

/* IMB -off_cache: spacing of the copies of a buffer of len bytes and how
 * many copies cycle through 2 x cache_bytes (at most n_sample). */
size_t hm_imb_cache_spacing(size_t len_bytes, size_t line_bytes);
int hm_imb_cache_iters(size_t len_bytes, size_t line_bytes, size_t cache_bytes, int n_sample);

/* What both tools report from the ranks' own means: the average, min and
 * max over ranks (OSU: Avg/Min/Max Latency; IMB: t_avg/t_min/t_max). NaN
 * for n == 0. */
typedef struct hm_rank_reduction {
    double avg, min, max;
} hm_rank_reduction;
hm_rank_reduction hm_reduce_over_ranks(const double *per_rank, size_t n);

#endif
