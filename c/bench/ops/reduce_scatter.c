/* MPI_Reduce_scatter and MPI_Ireduce_scatter:
 * n*m-byte sum, rank i keeps block i (counts m). */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    if (hm_op_ctx_counts(c, err) != 0)
        return -1;
    size_t all = c->size_bytes * (size_t)c->nprocs;
    return hm_op_ctx_buffers(c, all, c->size_bytes, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int rc = MPI_Reduce_scatter(hm_op_sendbuf(c), hm_op_recvbuf(c), c->counts, MPI_UNSIGNED_CHAR,
                                MPI_SUM, c->comm);
    return hm_op_mpi_check(rc, "MPI_Reduce_scatter", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    MPI_Request req;
    int rc = MPI_Ireduce_scatter(hm_op_sendbuf(c), hm_op_recvbuf(c), c->counts, MPI_UNSIGNED_CHAR,
                                 MPI_SUM, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Ireduce_scatter", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Ireduce_scatter", err);
}

const hm_op hm_op_reduce_scatter = {
    .name = "reduce_scatter",
    .description = "MPI_Reduce_scatter: n*m-byte sum, rank i keeps block i (counts m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_ireduce_scatter = {
    .name = "ireduce_scatter",
    .description = "MPI_Ireduce_scatter + MPI_Wait: n*m-byte sum, rank i keeps block i (counts m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
