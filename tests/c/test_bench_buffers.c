/* Buffer policy of the operations: reuse keeps one address; rotate walks
 * a pool of the requested size in cache-line-aligned slots and wraps.
 * No MPI calls: the context is filled by hand as hm_op_ctx_init would. */
#include <stdint.h>
#include <string.h>

#include "hm_test.h"
#include "op.h"

static void setup(hm_op_ctx *ctx, hm_buffer_pool *pool, size_t size, size_t rotate)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->nprocs = 4;
    ctx->size_bytes = size;
    ctx->pool = pool;
    ctx->rotate_bytes = rotate;
}

static void test_reuse(hm_test_counts *c)
{
    hm_buffer_pool pool = {0};
    hm_op_ctx ctx;
    hm_error err;
    setup(&ctx, &pool, 1000, 0);
    CHECK(c, hm_op_ctx_buffers(&ctx, 1000, 4000, &err) == 0);
    CHECK(c, ctx.slots == 1);
    unsigned char *s0 = hm_op_sendbuf(&ctx), *r0 = hm_op_recvbuf(&ctx);
    hm_op_ctx_next(&ctx);
    CHECK(c, hm_op_sendbuf(&ctx) == s0 && hm_op_recvbuf(&ctx) == r0);
    CHECK(c, pool.send_cap >= 1000 && pool.recv_cap >= 4000);
    hm_buffer_pool_free(&pool);
}

static void test_rotate(hm_test_counts *c)
{
    hm_buffer_pool pool = {0};
    hm_op_ctx ctx;
    hm_error err;
    /* 1000-byte sends, 4000-byte receives in a 64 KiB pool: the larger
     * stride (4000 -> 4032 + 64 = 4096) sets 16 slots for both. */
    setup(&ctx, &pool, 1000, 65536);
    CHECK(c, hm_op_ctx_buffers(&ctx, 1000, 4000, &err) == 0);
    CHECK(c, ctx.slots == 16);
    CHECK(c, ctx.send_stride % 64 == 0 && ctx.recv_stride % 64 == 0);
    CHECK(c, ctx.send_stride >= 1000 + 64 && ctx.recv_stride >= 4000 + 64);
    unsigned char *first = hm_op_sendbuf(&ctx);
    unsigned char *prev = first;
    bool distinct = true, inside = true;
    for (size_t i = 1; i < ctx.slots; i++) {
        hm_op_ctx_next(&ctx);
        unsigned char *s = hm_op_sendbuf(&ctx), *r = hm_op_recvbuf(&ctx);
        distinct = distinct && s != prev && s - prev == (ptrdiff_t)ctx.send_stride;
        inside = inside && s + 1000 <= pool.send + pool.send_cap &&
                 r + 4000 <= pool.recv + pool.recv_cap;
        prev = s;
    }
    CHECK(c, distinct && inside);
    hm_op_ctx_next(&ctx); /* wraps to the first slot */
    CHECK(c, hm_op_sendbuf(&ctx) == first);
    hm_buffer_pool_free(&pool);
}

static void test_rotate_large_and_empty(hm_test_counts *c)
{
    hm_buffer_pool pool = {0};
    hm_op_ctx ctx;
    hm_error err;
    /* A message larger than the pool still alternates between two copies. */
    setup(&ctx, &pool, 100000, 65536);
    CHECK(c, hm_op_ctx_buffers(&ctx, 100000, 0, &err) == 0);
    CHECK(c, ctx.slots == 2);
    unsigned char *a = hm_op_sendbuf(&ctx);
    hm_op_ctx_next(&ctx);
    CHECK(c, hm_op_sendbuf(&ctx) != a);
    /* Zero-byte operations get valid (non-NULL) addresses. */
    setup(&ctx, &pool, 0, 65536);
    CHECK(c, hm_op_ctx_buffers(&ctx, 0, 0, &err) == 0);
    CHECK(c, hm_op_sendbuf(&ctx) != NULL && hm_op_recvbuf(&ctx) != NULL);
    hm_buffer_pool_free(&pool);
    CHECK(c, hm_buffer_rotate_default_bytes() >= 4096);
}

static void test_counts(hm_test_counts *c)
{
    hm_op_ctx ctx;
    hm_error err;
    setup(&ctx, NULL, 48, 0);
    CHECK(c, hm_op_ctx_counts(&ctx, &err) == 0);
    CHECK(c, ctx.counts[3] == 48 && ctx.displs[0] == 0 && ctx.displs[3] == 144);
    hm_op_ctx_free(&ctx);
    CHECK(c, ctx.counts == NULL && ctx.displs == NULL);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_reuse(&c);
    test_rotate(&c);
    test_rotate_large_and_empty(&c);
    test_counts(&c);
    return hm_test_finish("test_bench_buffers", &c);
}
