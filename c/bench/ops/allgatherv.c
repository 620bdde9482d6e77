/* MPI_Allgatherv and MPI_Iallgatherv:
 * allgather with per-rank counts (all m). */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    if (hm_op_ctx_counts(c, err) != 0)
        return -1;
    return hm_op_ctx_buffers(c, c->size_bytes, c->size_bytes * (size_t)c->nprocs, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Allgatherv(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), c->counts, c->displs,
                            MPI_BYTE, c->comm);
    return hm_op_mpi_check(rc, "MPI_Allgatherv", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Iallgatherv(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), c->counts, c->displs,
                             MPI_BYTE, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Iallgatherv", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Iallgatherv", err);
}

const hm_op hm_op_allgatherv = {
    .name = "allgatherv",
    .description = "MPI_Allgatherv: allgather with per-rank counts (all m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_iallgatherv = {
    .name = "iallgatherv",
    .description = "MPI_Iallgatherv + MPI_Wait: allgather with per-rank counts (all m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
