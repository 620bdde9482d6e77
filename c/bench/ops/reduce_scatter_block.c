/* MPI_Reduce_scatter_block and MPI_Ireduce_scatter_block:
 * n*m-byte sum, rank i keeps block i. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    size_t all = c->size_bytes * (size_t)c->nprocs;
    return hm_op_ctx_buffers(c, all, c->size_bytes, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Reduce_scatter_block(hm_op_sendbuf(c), hm_op_recvbuf(c), m, MPI_UNSIGNED_CHAR,
                                      MPI_SUM, c->comm);
    return hm_op_mpi_check(rc, "MPI_Reduce_scatter_block", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Ireduce_scatter_block(hm_op_sendbuf(c), hm_op_recvbuf(c), m, MPI_UNSIGNED_CHAR,
                                       MPI_SUM, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Ireduce_scatter_block", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Ireduce_scatter_block", err);
}

const hm_op hm_op_reduce_scatter_block = {
    .name = "reduce_scatter_block",
    .description = "MPI_Reduce_scatter_block: n*m-byte sum, rank i keeps block i",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_ireduce_scatter_block = {
    .name = "ireduce_scatter_block",
    .description = "MPI_Ireduce_scatter_block + MPI_Wait: n*m-byte sum, rank i keeps block i",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
