/* MPI_Alltoallv and MPI_Ialltoallv:
 * alltoall with per-rank counts (all m). */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    if (hm_op_ctx_counts(c, err) != 0)
        return -1;
    size_t all = c->size_bytes * (size_t)c->nprocs;
    return hm_op_ctx_buffers(c, all, all, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int rc = MPI_Alltoallv(hm_op_sendbuf(c), c->counts, c->displs, MPI_BYTE, hm_op_recvbuf(c),
                           c->counts, c->displs, MPI_BYTE, c->comm);
    return hm_op_mpi_check(rc, "MPI_Alltoallv", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    MPI_Request req;
    int rc = MPI_Ialltoallv(hm_op_sendbuf(c), c->counts, c->displs, MPI_BYTE, hm_op_recvbuf(c),
                            c->counts, c->displs, MPI_BYTE, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Ialltoallv", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Ialltoallv", err);
}

const hm_op hm_op_alltoallv = {
    .name = "alltoallv",
    .description = "MPI_Alltoallv: alltoall with per-rank counts (all m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_ialltoallv = {
    .name = "ialltoallv",
    .description = "MPI_Ialltoallv + MPI_Wait: alltoall with per-rank counts (all m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
