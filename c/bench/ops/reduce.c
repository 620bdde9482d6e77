/* MPI_Reduce and MPI_Ireduce:
 * sum of m bytes (unsigned char) to the root. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    return hm_op_ctx_buffers(c, c->size_bytes, c->rank == c->root ? c->size_bytes : 0, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Reduce(hm_op_sendbuf(c), hm_op_recvbuf(c), m, MPI_UNSIGNED_CHAR, MPI_SUM, c->root,
                        c->comm);
    return hm_op_mpi_check(rc, "MPI_Reduce", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Ireduce(hm_op_sendbuf(c), hm_op_recvbuf(c), m, MPI_UNSIGNED_CHAR, MPI_SUM,
                         c->root, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Ireduce", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Ireduce", err);
}

const hm_op hm_op_reduce = {
    .name = "reduce",
    .description = "MPI_Reduce: sum of m bytes (unsigned char) to the root",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_ireduce = {
    .name = "ireduce",
    .description = "MPI_Ireduce + MPI_Wait: sum of m bytes (unsigned char) to the root",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
