/* Judging synchronized results by the clocks they were measured on.
 *
 * The ranks' clocks are checked twice, every rank pinged by rank 0
 * (hm_clock_residual): right after the sync and at the end of the run. The
 * clock error is the disagreement the check proves (residuals known within
 * half a round trip), so a clock that is exactly shared never fails on a
 * busy node's noisy estimate. An offset between clocks whose rates differ
 * grows linearly, so the larger of the two checks bounds it at every moment
 * between; each result is judged against that (hm_clock_error_acceptable). A table row, printed as soon as its
 * result is measured, carries the verdict by the first check; the end check
 * can only take verdicts back, and says so loudly. */
#ifndef HM_BENCH_CLOCK_CHECK_H
#define HM_BENCH_CLOCK_CHECK_H

#include <stdio.h>

#include "bench_report.h"

/* Sets r's verdict against clocks clock_error_s apart (synchronized
 * results only; the others stay unjudged). */
void hm_bench_clock_judge(hm_bench_result *r, double clock_error_s, double share,
                          double late_tolerance_s);

/* After the end check: judges every result again by the larger clock error,
 * counts the failures into m->results_clock_invalid and, when there are any,
 * writes one line to `table` (may be NULL) and one warning to stderr. */
void hm_bench_clock_final(FILE *table, hm_bench_meta *m, hm_bench_result *results, size_t n);

#endif
