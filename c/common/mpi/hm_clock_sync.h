/* A global clock for MPI programs: every rank learns the offset of its
 * local timer to rank 0's (MPIPerf section 5), so schedules such as "start
 * launch l at tau + l*delta" mean the same instant on every rank.
 *
 * Offsets come from ping-pongs: the exchange with the minimum round-trip
 * time wins, and a pair stops after d exchanges that did not improve it
 * (default 100). Ranks on one node that read a system-wide clock
 * (hm_timer.system_wide) need no ping-pong between them: only one leader
 * per node takes part, the others copy its offset.
 *
 * All functions here are collective over `comm` and return 0, or -1 with
 * err set when an MPI call failed (the caller should then abort: the other
 * ranks may be inside a collective). */
#ifndef HM_CLOCK_SYNC_H
#define HM_CLOCK_SYNC_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "hm_clock_estimate.h"
#include "hm_error.h"
#include "hm_timer.h"

typedef struct hm_clock {
    const hm_timer *timer;
    int64_t skew_ns;   /* simulated error of this rank's clock (tests); 0 normally */
    double drift;      /* simulated rate error (tests), fraction; 0 normally */
    int64_t drift_origin_ns; /* timer reading from which the simulated drift counts */
    int64_t offset_ns; /* global = local + offset_ns */
} hm_clock;

/* This rank's local clock in ns: the timer (plus a simulated skew, drift). */
static inline int64_t hm_clock_local_ns(const hm_clock *c)
{
    int64_t t = hm_timer_now_ns(c->timer);
    if (c->drift != 0.0)
        t += (int64_t)((double)(t - c->drift_origin_ns) * c->drift);
    return t + c->skew_ns;
}

/* The global clock now, in ns. */
static inline int64_t hm_clock_now_ns(const hm_clock *c)
{
    return hm_clock_local_ns(c) + c->offset_ns;
}

/* Spins (no sleep: waking up takes tens of microseconds) until the global
 * clock reaches deadline_ns; returns the reading that passed it. */
int64_t hm_clock_spin_until_ns(const hm_clock *c, int64_t deadline_ns);

/* Like hm_clock_spin_until_ns, but sleeps through all but the last spin_ns
 * of a long wait, so ranks sharing a core (oversubscribed runs) can run
 * meanwhile; the spin at the end hides the wake-up latency. */
int64_t hm_clock_wait_until_ns(const hm_clock *c, int64_t deadline_ns, int64_t spin_ns);

typedef struct hm_clock_sync_opts {
    hm_sync_algo algo;             /* default HM_SYNC_RING */
    int rounds_without_improvement; /* d, default 100 */
    int max_rounds;                /* cap per pair, default 10000 */
    bool ping_shared_clock;        /* ping even ranks that share a system-wide clock */
    /* Testing on one machine, where all clocks agree: rank r's local clock
     * is made to read r * simulated_skew_ns ahead, so the algorithms have
     * a real offset to find (and every rank is pinged). Default 0. */
    int64_t simulated_skew_ns;
    /* Testing the checks that catch clocks which disagree although the
     * sync believes them right: rank r's clock runs r * simulated_drift_ppm
     * parts per million fast from the sync on, as clocks calibrated by each
     * rank on its own do. Unlike the skew it changes nothing in how the
     * sync runs (ranks sharing a node clock still skip the ping-pong).
     * Default 0. */
    double simulated_drift_ppm;
} hm_clock_sync_opts;

void hm_clock_sync_opts_default(hm_clock_sync_opts *o);

typedef struct hm_clock_sync_info {
    int nodes;            /* distinct shared-memory nodes in comm */
    int synced_ranks;     /* ranks that took part in ping-pongs */
    double elapsed_s;     /* wall time of the synchronization */
} hm_clock_sync_info;

/* Sets up clock on every rank of comm: timer, simulated skew, and the
 * offset to rank 0 (rank 0's is 0). info may be NULL. */
int hm_clock_sync(MPI_Comm comm, const hm_timer *timer, const hm_clock_sync_opts *opts,
                  hm_clock *clock, hm_clock_sync_info *info, hm_error *err);

/* How far the synchronized clocks still disagree. */
typedef struct hm_clock_residual_info {
    int64_t own_ns;     /* this rank's fresh offset to rank 0's global clock */
    int64_t max_abs_ns; /* largest |own_ns| over the ranks */
    int64_t spread_ns;  /* largest own_ns minus smallest, rank 0's 0 included: how
                         * far apart two ranks' clocks put the same instant */
    int64_t proven_spread_ns; /* the part of spread_ns the exchanges prove: each
                               * residual is known within half its round trip */
} hm_clock_residual_info;

/* Measures the residual: rank 0 pings every rank in turn, node leaders or
 * not (same min-RTT rule), using the global clocks, whose offset should be
 * 0. Every rank gets the same max_abs_ns and spread_ns. Cost O(n): meant
 * for once after sync and once at the end of a run (drift). */
int hm_clock_residual(MPI_Comm comm, const hm_clock *clock, int rounds_without_improvement,
                      hm_clock_residual_info *out, hm_error *err);

/* An upper bound of the time to broadcast one clock reading from rank 0 to
 * every rank of comm (MPIPerf's t_bcast): the largest delay seen over
 * `repeats` broadcasts, on the same value on every rank. */
int hm_clock_bcast_bound_ns(MPI_Comm comm, const hm_clock *clock, int repeats, int64_t *bound_ns,
                            hm_error *err);

#endif
