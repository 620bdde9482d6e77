/* MPI_Scatterv and MPI_Iscatterv:
 * scatter with per-rank counts (all m). */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    if (hm_op_ctx_counts(c, err) != 0)
        return -1;
    size_t send = c->rank == c->root ? c->size_bytes * (size_t)c->nprocs : 0;
    return hm_op_ctx_buffers(c, send, c->size_bytes, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Scatterv(hm_op_sendbuf(c), c->counts, c->displs, MPI_BYTE, hm_op_recvbuf(c), m,
                          MPI_BYTE, c->root, c->comm);
    return hm_op_mpi_check(rc, "MPI_Scatterv", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Iscatterv(hm_op_sendbuf(c), c->counts, c->displs, MPI_BYTE, hm_op_recvbuf(c), m,
                           MPI_BYTE, c->root, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Iscatterv", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Iscatterv", err);
}

const hm_op hm_op_scatterv = {
    .name = "scatterv",
    .description = "MPI_Scatterv: scatter with per-rank counts (all m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_iscatterv = {
    .name = "iscatterv",
    .description = "MPI_Iscatterv + MPI_Wait: scatter with per-rank counts (all m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
