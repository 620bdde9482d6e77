/* MPI_Alltoallw and MPI_Ialltoallw:
 * alltoall with per-rank counts, displacements, types. */
#include <stdlib.h>

#include "op.h"

static int init(hm_op_ctx *c, hm_error *err)
{
    if (hm_op_ctx_counts(c, err) != 0)
        return -1;
    c->types = malloc((size_t)c->nprocs * sizeof *c->types);
    if (c->types == NULL)
        return hm_error_set(err, "out of memory for %d datatypes", c->nprocs);
    for (int i = 0; i < c->nprocs; i++)
        c->types[i] = MPI_BYTE;
    size_t all = c->size_bytes * (size_t)c->nprocs;
    return hm_op_ctx_buffers(c, all, all, err);
}

static int run(hm_op_ctx *c, hm_error *err)
{
    int rc = MPI_Alltoallw(hm_op_sendbuf(c), c->counts, c->displs, c->types, hm_op_recvbuf(c),
                           c->counts, c->displs, c->types, c->comm);
    return hm_op_mpi_check(rc, "MPI_Alltoallw", err);
}

static int run_nonblocking(hm_op_ctx *c, hm_error *err)
{
    MPI_Request req;
    int rc = MPI_Ialltoallw(hm_op_sendbuf(c), c->counts, c->displs, c->types, hm_op_recvbuf(c),
                            c->counts, c->displs, c->types, c->comm, &req);
    if (hm_op_mpi_check(rc, "MPI_Ialltoallw", err) != 0)
        return -1;
    return hm_op_wait(&req, "MPI_Ialltoallw", err);
}

const hm_op hm_op_alltoallw = {
    .name = "alltoallw",
    .description = "MPI_Alltoallw: alltoall with per-rank counts, displacements, types",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = false,
    .init = init,
    .run = run,
};

const hm_op hm_op_ialltoallw = {
    .name = "ialltoallw",
    .description = "MPI_Ialltoallw + MPI_Wait: alltoall with per-rank counts, displacements, types",
    .min_ranks = 2,
    .uses_size = true,
    .nonblocking = true,
    .init = init,
    .run = run_nonblocking,
};
