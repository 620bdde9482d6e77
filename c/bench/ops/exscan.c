/* MPI_Exscan and MPI_Iexscan:
 * exclusive prefix sum of m bytes. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    return hm_op_ctx_buffers(c, c->size_bytes, c->size_bytes, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Exscan(hm_op_sendbuf(c), hm_op_recvbuf(c), m, MPI_UNSIGNED_CHAR, MPI_SUM, c->comm);
    return hm_op_mpi_check(rc, "MPI_Exscan", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Iexscan(hm_op_sendbuf(c), hm_op_recvbuf(c), m, MPI_UNSIGNED_CHAR, MPI_SUM,
                         c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Iexscan", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Iexscan", err);
}

const hm_op hm_op_exscan = {
    .name = "exscan",
    .description = "MPI_Exscan: exclusive prefix sum of m bytes",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_iexscan = {
    .name = "iexscan",
    .description = "MPI_Iexscan + MPI_Wait: exclusive prefix sum of m bytes",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
