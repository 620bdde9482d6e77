/* Timers for MPI programs: every timer of hm_timer.h plus MPI_Wtime.
 *
 * MPI_Wtime lives here rather than in hm_timer.c so hm_common stays free of
 * MPI (the agent and the injector link it without an MPI library). */
#ifndef HM_MPI_TIMER_H
#define HM_MPI_TIMER_H

#include "hm_error.h"
#include "hm_timer.h"

/* Names accepted by hm_mpi_timer_init, NULL-terminated, for --help. */
extern const char *const hm_mpi_timer_names[];

/* Sets up the timer called `name`: "mpi_wtime" or any hm_timer_init name.
 * Must be called after MPI_Init, on every rank of MPI_COMM_WORLD: for "tsc"
 * it is collective (the leader of each node calibrates, the node's other
 * ranks take its calibration, so the node reads one clock). MPI_Wtime
 * counts as system-wide only when the library says so (MPI_WTIME_IS_GLOBAL);
 * otherwise clock sync pings every rank. Returns 0, or -1 with err set (on
 * every rank of a node whose leader failed). */
int hm_mpi_timer_init(hm_timer *t, const char *name, hm_error *err);

/* Non-zero if `name` is a timer this module knows (no MPI calls), so
 * option parsing can reject a bad --timer before MPI_Init. */
int hm_mpi_timer_name_valid(const char *name);

#endif
