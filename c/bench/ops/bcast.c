/* MPI_Bcast and MPI_Ibcast:
 * broadcast of m bytes from the root. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    return hm_op_ctx_buffers(c, c->size_bytes, 0, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Bcast(hm_op_sendbuf(c), m, MPI_BYTE, c->root, c->comm);
    return hm_op_mpi_check(rc, "MPI_Bcast", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Ibcast(hm_op_sendbuf(c), m, MPI_BYTE, c->root, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Ibcast", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Ibcast", err);
}

const hm_op hm_op_bcast = {
    .name = "bcast",
    .description = "MPI_Bcast: broadcast of m bytes from the root",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_ibcast = {
    .name = "ibcast",
    .description = "MPI_Ibcast + MPI_Wait: broadcast of m bytes from the root",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
