/* MPI_Gather and MPI_Igather:
 * every rank sends m bytes to the root. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    size_t recv = c->rank == c->root ? c->size_bytes * (size_t)c->nprocs : 0;
    return hm_op_ctx_buffers(c, c->size_bytes, recv, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Gather(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), m, MPI_BYTE, c->root,
                        c->comm);
    return hm_op_mpi_check(rc, "MPI_Gather", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Igather(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), m, MPI_BYTE, c->root,
                         c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Igather", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Igather", err);
}

const hm_op hm_op_gather = {
    .name = "gather",
    .description = "MPI_Gather: every rank sends m bytes to the root",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_igather = {
    .name = "igather",
    .description = "MPI_Igather + MPI_Wait: every rank sends m bytes to the root",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
