/* MPI_Alltoall and MPI_Ialltoall:
 * every rank sends m bytes to every rank. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    size_t all = c->size_bytes * (size_t)c->nprocs;
    return hm_op_ctx_buffers(c, all, all, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Alltoall(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), m, MPI_BYTE, c->comm);
    return hm_op_mpi_check(rc, "MPI_Alltoall", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Ialltoall(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), m, MPI_BYTE, c->comm,
                           &req);
    if (hm_op_mpi_check(rc, "MPI_Ialltoall", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Ialltoall", err);
}

const hm_op hm_op_alltoall = {
    .name = "alltoall",
    .description = "MPI_Alltoall: every rank sends m bytes to every rank",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_ialltoall = {
    .name = "ialltoall",
    .description = "MPI_Ialltoall + MPI_Wait: every rank sends m bytes to every rank",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
