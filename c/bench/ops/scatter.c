/* MPI_Scatter and MPI_Iscatter:
 * the root sends m bytes to every rank. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    size_t send = c->rank == c->root ? c->size_bytes * (size_t)c->nprocs : 0;
    return hm_op_ctx_buffers(c, send, c->size_bytes, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Scatter(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), m, MPI_BYTE, c->root,
                         c->comm);
    return hm_op_mpi_check(rc, "MPI_Scatter", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Iscatter(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), m, MPI_BYTE, c->root,
                          c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Iscatter", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Iscatter", err);
}

const hm_op hm_op_scatter = {
    .name = "scatter",
    .description = "MPI_Scatter: the root sends m bytes to every rank",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_iscatter = {
    .name = "iscatter",
    .description = "MPI_Iscatter + MPI_Wait: the root sends m bytes to every rank",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
