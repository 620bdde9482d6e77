#include "hm_mpi_launch.h"

#include <errno.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hm_mpi_library(char *dst, size_t cap)
{
    if (cap == 0)
        return;
    /* Sized by the library: 256 bytes in Open MPI, 8192 in MPICH (whose
     * later lines list its configure options). Only the first line is kept,
     * and what does not fit in dst is cut here, deliberately. */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS || len <= 0)
        lib[0] = '\0';
    lib[sizeof lib - 1] = '\0';
    size_t n = 0;
    bool blank = false;
    for (const char *c = lib; *c != '\0' && *c != '\n' && *c != '\r'; c++) {
        if (*c == ' ' || *c == '\t') {
            blank = n > 0;
            continue;
        }
        if (n + (blank ? 2 : 1) >= cap)
            break;
        if (blank)
            dst[n++] = ' ';
        blank = false;
        dst[n++] = *c;
    }
    dst[n] = '\0';
    if (n == 0)
        snprintf(dst, cap, "unknown");
}

long hm_mpi_launcher_size(const char **var)
{
    /* Both set (one launcher started inside the other's job): the smaller,
     * so a nested `mpirun -np 1` is not mistaken for a mismatch. */
    static const char *const names[] = {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE"};
    long size = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *text = getenv(names[i]);
        if (text == NULL || *text == '\0')
            continue;
        char *end = NULL;
        errno = 0;
        long n = strtol(text, &end, 10);
        if (errno != 0 || *end != '\0' || n < 1 || (size != 0 && n >= size))
            continue;
        size = n;
        if (var != NULL)
            *var = names[i];
    }
    return size;
}

int hm_mpi_launch_check(int world_size, hm_error *err)
{
    const char *var = NULL;
    long started = hm_mpi_launcher_size(&var);
    if (world_size != 1 || started <= 1)
        return 0;
    char lib[96];
    hm_mpi_library(lib, sizeof lib);
    lib[strcspn(lib, ",")] = '\0'; /* "Open MPI v4.1.4, package: ..." */
    return hm_error_set(err,
                        "the launcher started %ld processes (%s) but each runs alone as rank 0 "
                        "of 1: built with %s, started by another MPI's launcher; use the "
                        "mpirun of the MPI it was built with",
                        started, var, lib);
}
