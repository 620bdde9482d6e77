/* MPI_Gatherv and MPI_Igatherv:
 * gather with per-rank counts (all m). */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    if (hm_op_ctx_counts(c, err) != 0)
        return -1;
    size_t recv = c->rank == c->root ? c->size_bytes * (size_t)c->nprocs : 0;
    return hm_op_ctx_buffers(c, c->size_bytes, recv, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    int rc = MPI_Gatherv(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), c->counts, c->displs,
                         MPI_BYTE, c->root, c->comm);
    return hm_op_mpi_check(rc, "MPI_Gatherv", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    int m = hm_op_count_of(c);
    MPI_Request req;
    int rc = MPI_Igatherv(hm_op_sendbuf(c), m, MPI_BYTE, hm_op_recvbuf(c), c->counts, c->displs,
                          MPI_BYTE, c->root, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Igatherv", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Igatherv", err);
}

const hm_op hm_op_gatherv = {
    .name = "gatherv",
    .description = "MPI_Gatherv: gather with per-rank counts (all m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_igatherv = {
    .name = "igatherv",
    .description = "MPI_Igatherv + MPI_Wait: gather with per-rank counts (all m)",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
