/* The synchronized launch schedule of MPIPerf (section 4, step 3), as pure
 * functions so every rule is unit-tested without MPI:
 *   stage j starts at tau_j = T0 + t_bcast; launch l at tau_j + l*delta_j
 *   and must end before tau_j + (l+1)*delta_j;
 *   a launch is invalid if some rank arrived after its start (late) or
 *   ended after its window (overrun);
 *   more than g of a stage invalid -> delta_{j+1} = gamma*(tau'_j - tau_j)/k;
 *   (hushmon addition) and at least to gamma times the stage's typical
 *   launch (hm_stage_typical: all but g of its launches) plus the
 *   turnaround, for stages whose launches mostly did not fit;
 *   (hushmon addition) invalid here counts overruns and launches that
 *   started late because the rank was still busy with the previous one,
 *   not ranks that woke late from a wait or got the stage start late (a
 *   wider window does not prevent those; t_bcast handles the second):
 *   counting them let a busy machine blow a Bcast window up to 61 ms,
 *   where every spin was preempted again; `lateness_grows` restores the
 *   seed's count (oversubscribed nodes);
 *   stage 0 (k' launches, delta_0 = 0) only warms up and sets delta_1;
 *   (hushmon addition) after `shrink_after_calm` consecutive stages that
 *   did not need a larger window (at most g invalid), delta shrinks to
 *   gamma times the longest valid launch of the stage, or its typical
 *   launch if longer or if none was valid, plus the turnaround
 *   (never grows that way), so one disturbed stage does not slow the rest
 *   of the run;
 *   (hushmon addition) the window grows to at most `wide_factor` times the
 *   narrowest window of the point (unless lateness_grows). The span of a
 *   failed stage holds any long launch whole, and one launch descheduled
 *   for milliseconds made the window milliseconds wide for a
 *   sub-microsecond operation; launches after such a wait ran 20-60x
 *   slower yet fit the window and counted as valid (Bcast 64 B: 24 us
 *   instead of 0.7 us; points at 20-40x their median in 1 run of 5), and
 *   disturbed sync runs took 6-9 s against 1.5-2.9 s for the osu
 *   procedure. Launches in a wider window would be set aside anyway
 *   (hm_schedule_set_aside_wide); a disturbed stretch now overruns and
 *   costs only its own time;
 *   (hushmon addition) the turnaround: a rank that ends launch l at the
 *   very end of its window still has to record it and read the clock
 *   before it is ready for launch l+1; a window without that gap makes
 *   launch l+1 late whenever l used its window (~0.1-0.2 us here, a third
 *   of a small Bcast), so windows carry the largest gap measured;
 *   stop when RSE <= rse_max with >= min_valid valid launches, or more
 *   than max_total launches, or more than max_valid valid ones. */
#ifndef HM_BENCH_SCHEDULE_H
#define HM_BENCH_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hm_schedule_params {
    int launches_per_stage;  /* k, default 8 */
    int warmup_launches;     /* k', default 4 */
    double invalid_fraction; /* g, default 0.25 */
    double gamma;            /* default 1.1 */
    int shrink_after_calm;   /* calm stages before delta shrinks; 0 = never; default 1 */
    double wide_factor;      /* a valid launch timed under a window more than this times the
                              * narrowest window of its point is set aside
                              * (hm_schedule_set_aside_wide); 0 = never; default 4 */
    bool lateness_grows;     /* count late starts a wider window cannot prevent (woke late,
                              * stage start late) towards growth too; default false, true
                              * on oversubscribed nodes, where wider windows are what lets
                              * sleeping ranks start on time */
} hm_schedule_params;

typedef struct hm_stop_rule {
    double rse_max;   /* default 0.05 */
    int min_valid;    /* default 10 */
    int max_total;    /* stop when n_total exceeds it, default 100 */
    int max_valid;    /* stop when n_valid exceeds it, default 30 */
} hm_stop_rule;

void hm_schedule_params_default(hm_schedule_params *p);
void hm_stop_rule_default(hm_stop_rule *r);

/* Why a launch is invalid. A late start takes precedence: a launch that
 * started late and also overran counts once, as late. */
typedef enum hm_launch_status {
    HM_LAUNCH_VALID = 0,
    HM_LAUNCH_LATE = 1,
    HM_LAUNCH_OVERRUN = 2,
} hm_launch_status;

/* One rank's view of a launch, on the global clock. */
typedef struct hm_launch_times {
    int64_t arrive_ns;     /* ready to wait for the launch */
    int64_t sched_ns;      /* scheduled start, tau_j + l*delta_j */
    int64_t start_ns;      /* left the wait (arrive_ns if it was already late) */
    int64_t end_ns;        /* the operation returned */
    int64_t window_end_ns; /* sched_ns + delta_j */
} hm_launch_times;

/* Late: ready after the scheduled start, or left the wait more than
 * late_tolerance_ns after it (descheduled while spinning: the launch did
 * not start when planned even though the rank was ready). Overrun: ended
 * after the window. */
hm_launch_status hm_launch_classify(const hm_launch_times *t, int64_t late_tolerance_ns);

/* A launch over all ranks, from the ranks' flags combined with MAX. */
hm_launch_status hm_launch_combine(bool any_late, bool any_overrun);

typedef struct hm_stage_outcome {
    int launches;
    int invalid;          /* late + overrun */
    int not_window;       /* of those, late starts a wider window does not prevent: a rank
                           * woke late from its wait, or the stage start reached it late */
    double span_ns;       /* tau'_j - tau_j: last end of the stage minus its start */
    double longest_ns;    /* largest (end - scheduled start) of a valid launch; 0 if none */
    double turnaround_ns; /* largest gap a rank needed between the end of one launch and
                           * being ready for the next (recording, moving the buffer slot,
                           * reading the clock); 0 if not measured */
    double typical_ns;    /* the launch time (max over ranks of end - start) that a share
                           * 1 - g of the stage's launches did not exceed, valid or not
                           * (hm_stage_typical); 0 if not measured */
} hm_stage_outcome;

/* The stage's typical launch time: the ceil((1 - g) k)-th smallest of its
 * k launch times (max over ranks of end - start; in the unit given). The
 * seed tolerates g of a stage invalid, so this is the window (before
 * gamma) that would have held all launches but those g. Launches started late still count: a
 * rank that waited inside the operation for a late partner shows it in
 * its time. 0 for k <= 0 or on allocation failure. */
double hm_stage_typical(const double *launch_times, int k, double invalid_fraction);

typedef struct hm_delta_state {
    double delta_ns;      /* window of the next stage */
    int calm_stages;      /* consecutive stages with at most g invalid */
    double turnaround_ns; /* the launch-to-launch gap a rank needs, as last measured */
    double narrowest_ns;  /* narrowest window a measured stage used (0: none yet) */
} hm_delta_state;

/* delta_1 from the warm-up stage: gamma * (tau'_0 - tau_0) / k' plus the
 * turnaround a rank needs between two launches (hushmon addition, see
 * hm_schedule_next_delta). (hushmon addition) With typical_ns > 0 (the
 * warm-up launches' hm_stage_typical) gamma * typical_ns replaces the
 * mean span: one rank descheduled for 17 ms among 4 warm-up launches set
 * windows of 4.4 ms for a 0.7 us Allgather, and launches after such a
 * wait ran ~24 us and counted as valid. */
void hm_schedule_after_warmup(const hm_schedule_params *p, double warmup_span_ns,
                              double typical_ns, double turnaround_ns, hm_delta_state *st);

/* Updates the window after a measured stage (the rules above). Returns
 * +1 if delta grew, -1 if it shrank, 0 if unchanged. */
int hm_schedule_next_delta(const hm_schedule_params *p, const hm_stage_outcome *o,
                           hm_delta_state *st);

/* (hushmon addition) Launches set aside for the window they were timed
 * under. On this VM a launch's time grows with the idle gap before it:
 * Bcast/Allreduce/Allgather 8 B took 0.4-0.8 us back to back, 3-5 us in
 * windows forced to 150 us (spun) and 15-24 us in windows of 2 ms (slept)
 * — the caches and the partner's state go cold. A window that a disturbed
 * stage widened (by the rules above, gamma times a typical launch of
 * milliseconds) thus times launches that fit it, count as valid, and read
 * 20-40x the point's value. The seed's window is meant to just hold a
 * launch; so a valid launch timed under a window more than `factor` times
 * the narrowest window its point used is set aside as `wide_window`
 * (valid[i] cleared). Returns how many were newly set aside; windows[i]
 * is launch i's window. factor <= 0 sets none aside. The narrowest window
 * only falls as a point goes on, so a launch once set aside stays so.
 * Not applied on oversubscribed nodes (measure_sync passes 0), where wide
 * windows are what lets sleeping ranks start on time. */
size_t hm_schedule_set_aside_wide(const double *windows, bool *valid, size_t n, double factor);

/* Whether a synchronized result survives the clocks it was measured on.
 * Clocks that put the same instant clock_error_ns apart start the ranks'
 * launches that far apart in real time and shift the global time by as
 * much, so the error may be at most `share` of the result's mean time, or
 * the late tolerance, the precision the schedule already allows a start,
 * whichever is larger (the tolerance keeps near-zero times, WaitPatternNull,
 * from failing on a clock error of nanoseconds). A NaN mean (no valid
 * launch) is judged against the tolerance alone. *allowed_ns (may be NULL)
 * gets the bound. */
bool hm_clock_error_acceptable(double clock_error_ns, double mean_ns, double share,
                               double late_tolerance_ns, double *allowed_ns);

/* The stop rule; rse is se/mean of the sample that would be reported
 * (NaN while undefined, which never satisfies the RSE branch). */
bool hm_stop_reached(const hm_stop_rule *r, int n_total, int n_valid, double rse);

#endif
