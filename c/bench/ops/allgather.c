/* MPI_Allgather and MPI_Iallgather:
 * every rank sends m bytes, all receive n*m. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    return hm_op_ctx_buffers(c, c->size_bytes, c->size_bytes * (size_t)c->nprocs, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Allgather(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), m, MPI_BYTE, c->comm);
    return hm_op_mpi_check(rc, "MPI_Allgather", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Iallgather(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), m, MPI_BYTE, c->comm,
                            &req);
    if (hm_op_mpi_check(rc, "MPI_Iallgather", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Iallgather", err);
}

const hm_op hm_op_allgather = {
    .name = "allgather",
    .description = "MPI_Allgather: every rank sends m bytes, all receive n*m",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_iallgather = {
    .name = "iallgather",
    .description = "MPI_Iallgather + MPI_Wait: every rank sends m bytes, all receive n*m",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
