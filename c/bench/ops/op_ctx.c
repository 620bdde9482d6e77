/* Buffers and helpers every operation shares (see op.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* Slots start on cache-line boundaries; one extra line between copies keeps
 * the hardware prefetcher from pulling the next slot in early. */
#define SLOT_ALIGN 64

static int grow(unsigned char **buf, size_t *cap, size_t want, hm_error *err)
{
    if (want <= *cap)
        return 0;
    unsigned char *p = realloc(*buf, want);
    if (p == NULL)
        return hm_error_set(err, "out of memory for a %zu-byte buffer pool", want);
    /* Touch the new pages so their faults do not land in a measurement. */
    memset(p + *cap, 1, want - *cap);
    *buf = p;
    *cap = want;
    return 0;
}

int hm_buffer_pool_reserve(hm_buffer_pool *pool, size_t send_bytes, size_t recv_bytes,
                           hm_error *err)
{
    if (grow(&pool->send, &pool->send_cap, send_bytes, err) != 0)
        return -1;
    return grow(&pool->recv, &pool->recv_cap, recv_bytes, err);
}

void hm_buffer_pool_free(hm_buffer_pool *pool)
{
    free(pool->send);
    free(pool->recv);
    memset(pool, 0, sizeof *pool);
}

size_t hm_buffer_rotate_default_bytes(void)
{
    const size_t fallback = (size_t)64 << 20;
    size_t best = 0;
    for (int idx = 0; idx < 8; idx++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        unsigned long v = 0;
        char unit = 0;
        int got = fscanf(f, "%lu%c", &v, &unit);
        fclose(f);
        if (got < 1)
            continue;
        size_t bytes = v;
        if (got == 2 && unit == 'K')
            bytes = v << 10;
        else if (got == 2 && unit == 'M')
            bytes = v << 20;
        if (bytes > best)
            best = bytes;
    }
    return best > 0 ? 2 * best : fallback;
}

int hm_op_ctx_init(hm_op_ctx *ctx, const hm_op *op, const hm_op_params *p, hm_error *err)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->comm = p->comm;
    if (hm_op_mpi_check(MPI_Comm_rank(p->comm, &ctx->rank), "MPI_Comm_rank", err) != 0 ||
        hm_op_mpi_check(MPI_Comm_size(p->comm, &ctx->nprocs), "MPI_Comm_size", err) != 0)
        return -1;
    if (p->size_bytes < 0)
        return hm_error_set(err, "%s: negative message size %lld", op->name,
                            (long long)p->size_bytes);
    if (p->root < 0 || p->root >= ctx->nprocs)
        return hm_error_set(err, "%s: root %d outside 0..%d", op->name, p->root,
                            ctx->nprocs - 1);
    if (ctx->nprocs < op->min_ranks)
        return hm_error_set(err, "%s needs at least %d processes, got %d", op->name,
                            op->min_ranks, ctx->nprocs);
    /* Counts and displacements of an n-rank exchange must fit an int. */
    if (op->uses_size && p->size_bytes > INT_MAX / ctx->nprocs)
        return hm_error_set(err, "%s: size %lld bytes x %d processes does not fit an MPI count",
                            op->name, (long long)p->size_bytes, ctx->nprocs);
    ctx->root = p->root;
    ctx->size_bytes = op->uses_size ? (size_t)p->size_bytes : 0;
    ctx->timer = p->timer;
    ctx->pool = p->pool;
    ctx->slots = 1;
    ctx->slot = 0;
    /* The rotation is set up by hm_op_ctx_buffers once init says how much
     * each launch needs. */
    ctx->rotate_bytes = p->buffers == HM_BUFFERS_ROTATE ? p->rotate_bytes : 0;
    if (op->init(ctx, err) != 0) {
        hm_op_ctx_free(ctx);
        return hm_error_wrap(err, "%s (size %zu)", op->name, ctx->size_bytes);
    }
    return 0;
}

void hm_op_ctx_free(hm_op_ctx *ctx)
{
    free(ctx->counts);
    free(ctx->displs);
    free(ctx->types);
    ctx->counts = ctx->displs = NULL;
    ctx->types = NULL;
}

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

int hm_op_ctx_buffers(hm_op_ctx *ctx, size_t send_bytes, size_t recv_bytes, hm_error *err)
{
    ctx->send_bytes = send_bytes;
    ctx->recv_bytes = recv_bytes;
    ctx->send_stride = round_up(send_bytes, SLOT_ALIGN) + SLOT_ALIGN;
    ctx->recv_stride = round_up(recv_bytes, SLOT_ALIGN) + SLOT_ALIGN;
    ctx->slots = 1;
    if (ctx->rotate_bytes > 0) {
        size_t biggest = ctx->send_stride > ctx->recv_stride ? ctx->send_stride : ctx->recv_stride;
        ctx->slots = ctx->rotate_bytes / biggest;
        /* Even a message larger than the cache alternates between two
         * copies, so a launch never starts on the data the last one left. */
        if (ctx->slots < 2)
            ctx->slots = 2;
    }
    ctx->slot = 0;
    return hm_buffer_pool_reserve(ctx->pool, ctx->slots * ctx->send_stride,
                                  ctx->slots * ctx->recv_stride, err);
}

int hm_op_ctx_counts(hm_op_ctx *ctx, hm_error *err)
{
    size_t n = (size_t)ctx->nprocs;
    ctx->counts = malloc(n * sizeof *ctx->counts);
    ctx->displs = malloc(n * sizeof *ctx->displs);
    if (ctx->counts == NULL || ctx->displs == NULL)
        return hm_error_set(err, "out of memory for %zu counts", n);
    for (size_t i = 0; i < n; i++) {
        ctx->counts[i] = (int)ctx->size_bytes;
        ctx->displs[i] = (int)(i * ctx->size_bytes);
    }
    return 0;
}

void hm_op_ctx_next(hm_op_ctx *ctx)
{
    if (ctx->slots > 1)
        ctx->slot = (ctx->slot + 1) % ctx->slots;
}

unsigned char *hm_op_sendbuf(const hm_op_ctx *ctx)
{
    return ctx->pool->send + ctx->slot * ctx->send_stride;
}

unsigned char *hm_op_recvbuf(const hm_op_ctx *ctx)
{
    return ctx->pool->recv + ctx->slot * ctx->recv_stride;
}

int hm_op_count_of(const hm_op_ctx *ctx) { return (int)ctx->size_bytes; }

int hm_op_mpi_check(int rc, const char *what, hm_error *err)
{
    if (rc == MPI_SUCCESS)
        return 0;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return hm_error_set(err, "%s: %s", what, text);
}

int hm_op_wait(MPI_Request *req, const char *what, hm_error *err)
{
    return hm_op_mpi_check(MPI_Wait(req, MPI_STATUS_IGNORE), what, err);
}
