#include "hm_mpi_timer.h"

#include <mpi.h>
#include <string.h>

const char *const hm_mpi_timer_names[] = {"monotonic", "monotonic_raw", "gettimeofday", "tsc",
                                          "mpi_wtime", NULL};

static double mpi_wtime_s(void) { return MPI_Wtime(); }

int hm_mpi_timer_name_valid(const char *name)
{
    for (size_t i = 0; hm_mpi_timer_names[i] != NULL; i++)
        if (strcmp(hm_mpi_timer_names[i], name) == 0)
            return 1;
    return 0;
}

int hm_mpi_timer_init(hm_timer *t, const char *name, hm_error *err)
{
    if (strcmp(name, "mpi_wtime") != 0) {
        if (hm_timer_init(t, name, err) != 0)
            return -1;
        return 0;
    }
    int flag = 0;
    int *is_global = NULL;
    int rc = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &is_global, &flag);
    if (rc != MPI_SUCCESS)
        return hm_error_set(err, "MPI_Comm_get_attr(MPI_WTIME_IS_GLOBAL) failed (code %d)", rc);
    bool global = flag && is_global != NULL && *is_global != 0;
    hm_timer_init_external(t, "mpi_wtime", mpi_wtime_s, global, MPI_Wtick() * 1e9);
    return 0;
}
