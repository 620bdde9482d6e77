/* Which MPI a program runs under, and whether its launcher matches it.
 *
 * A program built against one MPI and started by another MPI's launcher
 * (an Open MPI build under MPICH's hydra, or the reverse) does not join the
 * launcher's job: each of the N processes initializes alone, as rank 0 of 1,
 * and N independent copies run. Launchers announce how many processes they
 * started in the environment of each:
 *   PMI_SIZE              MPICH's and Intel MPI's hydra, Slurm srun --mpi=pmi2
 *   OMPI_COMM_WORLD_SIZE  Open MPI's mpirun
 * hm_mpi_launch_check() compares that with MPI_COMM_WORLD's size. */
#ifndef HM_MPI_LAUNCH_H
#define HM_MPI_LAUNCH_H

#include <stddef.h>

#include "hm_error.h"

/* The first line of MPI_Get_library_version into dst (cap bytes), runs of
 * blanks as one space ("MPICH Version:\t4.0.2" -> "MPICH Version: 4.0.2"),
 * cut at cap - 1 bytes; "unknown" if the library does not say. */
void hm_mpi_library(char *dst, size_t cap);

/* The process count the launcher announced (the variables above), 0 when
 * none did; *var (if var is not NULL) names the variable. */
long hm_mpi_launcher_size(const char **var);

/* 0, or -1 with one line in err when MPI_COMM_WORLD has one process
 * (world_size) but the launcher started more. Call after MPI_Init. */
int hm_mpi_launch_check(int world_size, hm_error *err);

#endif
