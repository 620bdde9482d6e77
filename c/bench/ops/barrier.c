/* MPI_Barrier and MPI_Ibarrier:
 * barrier synchronization. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    return hm_op_ctx_buffers(c, 0, 0, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int rc = MPI_Barrier(c->comm);
    return hm_op_mpi_check(rc, "MPI_Barrier", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    MPI_Request req;
    int rc = MPI_Ibarrier(c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Ibarrier", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Ibarrier", err);
}

const hm_op hm_op_barrier = {
    .name = "barrier",
    .description = "MPI_Barrier: barrier synchronization",
    .min_ranks = 2,
    .uses_size = false,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_ibarrier = {
    .name = "ibarrier",
    .description = "MPI_Ibarrier + MPI_Wait: barrier synchronization",
    .min_ranks = 2,
    .uses_size = false,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
