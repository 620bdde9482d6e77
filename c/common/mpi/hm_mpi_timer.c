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

/* What the node leader sends: whether it calibrated, and the calibration. */
typedef struct tsc_calibration {
    double ticks_per_ns;
    uint64_t origin;
    int ok;
} tsc_calibration;

/* One calibration per node, the leader's, used by every rank of the node.
 *
 * Calibrating on each rank gave every rank its own clock out of the node's
 * one counter: the frequencies differ in the sixth digit (a 50 ms window
 * read with clock_gettime), which over the ticks since boot put ranks of one
 * node 1.6-16 ms apart, while clock sync, taking the TSC as system-wide,
 * synchronized only the node leader. Pinging every rank instead would fix
 * the offsets at sync time but not the different rates: ~1 us of drift per
 * second, more than a short collective takes. Sharing the calibration makes
 * the readings identical on the node by construction (the cores of an
 * invariant-TSC machine read one counter in step; the kernel checks that at
 * boot before it makes the TSC its clocksource), and the residual check,
 * which pings every rank, verifies it. */
static int tsc_node_shared(hm_timer *t, hm_error *err)
{
    MPI_Comm node;
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
        return hm_error_set(err, "timer 'tsc': MPI_Comm_split_type(SHARED) failed (MPI error %d)",
                            rc);
    int node_rank = 0;
    rc = MPI_Comm_rank(node, &node_rank);
    tsc_calibration cal = {0.0, 0, 0};
    hm_error leader_err = {{0}};
    if (rc == MPI_SUCCESS && node_rank == 0 && hm_timer_init(t, "tsc", &leader_err) == 0)
        cal = (tsc_calibration){t->tsc_ticks_per_ns, t->tsc_origin, 1};
    /* The leader sends even when it failed, so no rank waits for it. */
    if (rc == MPI_SUCCESS)
        rc = MPI_Bcast(&cal, (int)sizeof cal, MPI_BYTE, 0, node);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS)
        return hm_error_set(err, "timer 'tsc': sharing the node's calibration failed (MPI error %d)",
                            rc);
    if (node_rank == 0 && !cal.ok) {
        *err = leader_err;
        return -1;
    }
    if (!cal.ok)
        return hm_error_set(err, "timer 'tsc': calibration failed on this node's leader rank");
    if (node_rank == 0)
        return 0; /* calibrated above */
    return hm_timer_init_tsc_shared(t, cal.ticks_per_ns, cal.origin, err);
}

int hm_mpi_timer_init(hm_timer *t, const char *name, hm_error *err)
{
    if (strcmp(name, "tsc") == 0)
        return tsc_node_shared(t, err);
    if (strcmp(name, "mpi_wtime") != 0) {
        if (hm_timer_init(t, name, err) != 0)
            return -1;
        return 0;
    }
    /* MPI_Wtime may count from each process's own origin, or with a cycle
     * counter at each process's own calibrated rate (the TSC's problem
     * above): unless the library promises a global clock, and Open MPI does
     * not, every rank is pinged, and drift from different rates shows in
     * the residual check at the end of a run. */
    int flag = 0;
    int *is_global = NULL;
    int rc = MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &is_global, &flag);
    if (rc != MPI_SUCCESS)
        return hm_error_set(err, "MPI_Comm_get_attr(MPI_WTIME_IS_GLOBAL) failed (code %d)", rc);
    bool global = flag && is_global != NULL && *is_global != 0;
    hm_timer_init_external(t, "mpi_wtime", mpi_wtime_s, global, MPI_Wtick() * 1e9);
    return 0;
}
