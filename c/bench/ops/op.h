/* The operation contract of hushmon-bench (and hushmon-detect).
 *
 * An operation is one collective, measured one launch at a time: init
 * prepares buffers for (comm, size, root), run performs ONE launch and
 * returns its status, free releases what init took. Every operation is a
 * `const hm_op hm_op_<name>` defined in its own file in this folder and
 * listed once in ops.def; the declarations below and the table in
 * registry.c are both expanded from that list, so they cannot drift apart.
 * The function pointers have exactly these types (no casts): the compiler
 * checks every operation against the contract. */
#ifndef HM_BENCH_OP_H
#define HM_BENCH_OP_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"
#include "hm_timer.h"

typedef enum hm_buffer_mode {
    HM_BUFFERS_REUSE,  /* the same addresses every launch (data stays in cache) */
    HM_BUFFERS_ROTATE, /* each launch uses the next slot of a pool larger than the cache */
} hm_buffer_mode;

/* Memory the driver keeps across operations so each (op, size) does not
 * pay for allocating and first-touching a cache-sized pool again. */
typedef struct hm_buffer_pool {
    unsigned char *send, *recv;
    size_t send_cap, recv_cap;
} hm_buffer_pool;

/* Grows the pool to at least these capacities (new memory is touched, so
 * page faults do not land in a measurement). Returns 0 or -1 with err. */
int hm_buffer_pool_reserve(hm_buffer_pool *pool, size_t send_bytes, size_t recv_bytes,
                           hm_error *err);
void hm_buffer_pool_free(hm_buffer_pool *pool);

/* Default pool for HM_BUFFERS_ROTATE: twice the last-level cache of CPU 0
 * (from sysfs), 64 MiB when it cannot be read. */
size_t hm_buffer_rotate_default_bytes(void);

/* What the driver asks for. */
typedef struct hm_op_params {
    MPI_Comm comm;
    int64_t size_bytes;       /* message size m; ignored by ops without uses_size */
    int root;                 /* fixed root of rooted operations */
    hm_buffer_mode buffers;
    size_t rotate_bytes;      /* bytes per pool when rotating */
    hm_buffer_pool *pool;     /* driver-owned memory */
    const hm_timer *timer;    /* the wait patterns spin on it */
} hm_op_params;

/* The state of one operation at one size; ops read it, init fills it. */
typedef struct hm_op_ctx {
    MPI_Comm comm;
    int rank, nprocs, root;
    size_t size_bytes;
    const hm_timer *timer;
    hm_buffer_pool *pool;
    size_t send_bytes, recv_bytes;   /* per launch */
    size_t send_stride, recv_stride; /* distance between rotated copies */
    size_t rotate_bytes;             /* pool bytes to rotate through; 0 = reuse */
    size_t slots, slot;              /* slot in use; slots == 1 when reusing */
    int *counts, *displs;            /* v-variants: per-rank counts/displacements (bytes) */
    MPI_Datatype *types;             /* alltoallw: per-rank datatypes */
} hm_op_ctx;

typedef struct hm_op {
    const char *name;        /* command-line name, e.g. "allreduce" */
    const char *description; /* one line for --list */
    int min_ranks;           /* fewer ranks than this is a usage error */
    bool uses_size;          /* false: measured once, size reported as 0 */
    bool nonblocking;        /* an MPI-3 I-form completed by MPI_Wait */
    /* Sets ctx buffers (hm_op_ctx_buffers) and any per-rank arrays. */
    int (*init)(hm_op_ctx *ctx, hm_error *err);
    /* One launch on the current buffer slot. 0, or -1 with err. */
    int (*run)(hm_op_ctx *ctx, hm_error *err);
} hm_op;

/* Declarations of every operation, expanded from ops.def. */
#define HM_OP(name) extern const hm_op hm_op_##name;
#include "ops.def"
#undef HM_OP

/* Registry (registry.c): lookup by name, iteration for --help / --list. */
const hm_op *hm_op_find(const char *name);
size_t hm_op_count(void);
const hm_op *hm_op_at(size_t i);

/* Prepares ctx for op with params and calls op->init. Local (no
 * communication): the caller agrees on the outcome with the other ranks. */
int hm_op_ctx_init(hm_op_ctx *ctx, const hm_op *op, const hm_op_params *params, hm_error *err);
void hm_op_ctx_free(hm_op_ctx *ctx);

/* For init: per-launch send/recv bytes; sets up the rotation over the pool. */
int hm_op_ctx_buffers(hm_op_ctx *ctx, size_t send_bytes, size_t recv_bytes, hm_error *err);
/* For init of v-variants: counts[i] = size, displs[i] = i * size. */
int hm_op_ctx_counts(hm_op_ctx *ctx, hm_error *err);
/* Moves to the next buffer slot; the driver calls it before each launch. */
void hm_op_ctx_next(hm_op_ctx *ctx);
unsigned char *hm_op_sendbuf(const hm_op_ctx *ctx);
unsigned char *hm_op_recvbuf(const hm_op_ctx *ctx);
/* Message size as an MPI count; init has checked that it fits in an int. */
int hm_op_count_of(const hm_op_ctx *ctx);

/* MPI return code -> 0, or -1 with "<what>: <MPI error string>". */
int hm_op_mpi_check(int rc, const char *what, hm_error *err);
/* Waits for a nonblocking collective; same error convention. */
int hm_op_wait(MPI_Request *req, const char *what, hm_error *err);

#endif
