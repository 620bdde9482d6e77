/* is: the integer sort kernel of the NAS Parallel Benchmarks.
 *
 * Keys in [0, max_key) from NPB's generator (each the sum of four uniforms,
 * so they pile up in the middle of the range) are sorted across the ranks,
 * --iterations times: a global histogram (MPI_Allreduce) picks the key range
 * of each rank so the ranks get about the same number of keys, MPI_Alltoallv
 * sends every key to its rank, and a counting sort orders them there. Mostly
 * integer work and all-to-all traffic of the whole data set each iteration.
 *
 * Verification (after the last iteration): every rank's keys are in order,
 * each rank's largest key is at most the next rank's smallest, the number of
 * keys is unchanged and so is a hash of the multiset of keys (a lost,
 * duplicated or changed key changes it). */
#include <stdlib.h>
#include <string.h>

#include "app_common.h"
#include "npb_common.h"

static const struct {
    int keys_log2, max_key_log2, iterations;
} is_classes[NPB_N_CLASSES] = {
    [NPB_CLASS_S] = {22, 18, 16},
    [NPB_CLASS_W] = {24, 20, 20},
    [NPB_CLASS_A] = {25, 21, 60},
};

/* Buckets of the histogram that splits the key range among ranks. */
#define IS_BUCKETS 4096

typedef struct is_params {
    const char *class_name;
    bool corrupt;
} is_params;

static int is_validate(const app_context *ctx, const void *data, hm_error *err)
{
    (void)ctx;
    const is_params *p = data;
    return npb_class_index(p->class_name, err) < 0 ? -1 : 0;
}

/* A hash of one key; summed (mod 2^64) over all keys it fingerprints the
 * multiset, whatever the order. */
static uint64_t key_hash(uint32_t key)
{
    uint64_t z = (uint64_t)key + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef struct is_buffers {
    uint32_t *keys, *send, *recv, *sorted;
    int64_t *hist, *global_hist;
    int64_t *counts;   /* of the counting sort: max_key entries */
    int *scount, *sdispl, *rcount, *rdispl, *bucket_rank;
} is_buffers;

static void is_free(is_buffers *b)
{
    free(b->keys);
    free(b->send);
    free(b->recv);
    free(b->sorted);
    free(b->hist);
    free(b->global_hist);
    free(b->counts);
    free(b->scount);
    free(b->sdispl);
    free(b->rcount);
    free(b->rdispl);
    free(b->bucket_rank);
}

static void mpi_check(const app_context *ctx, int rc, const char *what, hm_error *err)
{
    if (rc != MPI_SUCCESS) {
        hm_error_set(err, "%s failed", what);
        app_abort(ctx, "is", err);
    }
}

/* One ranking of the keys: histogram, split, exchange, counting sort.
 * Returns how many keys this rank holds afterwards (sorted in b->sorted). */
static int64_t is_iteration(const app_context *ctx, is_buffers *b, int64_t n_local,
                            int64_t n_total, uint32_t max_key, int64_t *bytes_sent,
                            hm_error *err)
{
    const int shift = __builtin_ctz(max_key / IS_BUCKETS);
    memset(b->hist, 0, IS_BUCKETS * sizeof(int64_t));
    for (int64_t i = 0; i < n_local; i++)
        b->hist[b->keys[i] >> shift]++;
    mpi_check(ctx, MPI_Allreduce(b->hist, b->global_hist, IS_BUCKETS, MPI_INT64_T, MPI_SUM,
                                 ctx->comm), "MPI_Allreduce of the histogram", err);
    /* Whole buckets to ranks, in order, each rank up to its share. */
    int64_t seen = 0;
    for (int k = 0; k < IS_BUCKETS; k++) {
        int r = (int)((seen * ctx->size) / n_total);
        b->bucket_rank[k] = r < ctx->size ? r : ctx->size - 1;
        seen += b->global_hist[k];
    }
    memset(b->scount, 0, (size_t)ctx->size * sizeof(int));
    for (int k = 0; k < IS_BUCKETS; k++)
        b->scount[b->bucket_rank[k]] += (int)b->hist[k];
    b->sdispl[0] = 0;
    for (int r = 1; r < ctx->size; r++)
        b->sdispl[r] = b->sdispl[r - 1] + b->scount[r - 1];
    for (int64_t i = 0; i < n_local; i++) {
        int r = b->bucket_rank[b->keys[i] >> shift];
        b->send[b->sdispl[r]++] = b->keys[i];
    }
    for (int r = 0; r < ctx->size; r++)
        b->sdispl[r] -= b->scount[r];
    mpi_check(ctx, MPI_Alltoall(b->scount, 1, MPI_INT, b->rcount, 1, MPI_INT, ctx->comm),
              "MPI_Alltoall of the counts", err);
    int64_t n_recv = 0;
    for (int r = 0; r < ctx->size; r++) {
        b->rdispl[r] = (int)n_recv;
        n_recv += b->rcount[r];
        if (r != ctx->rank)
            *bytes_sent += (int64_t)b->scount[r] * (int64_t)sizeof(uint32_t);
    }
    mpi_check(ctx, MPI_Alltoallv(b->send, b->scount, b->sdispl, MPI_UINT32_T, b->recv,
                                 b->rcount, b->rdispl, MPI_UINT32_T, ctx->comm),
              "MPI_Alltoallv of the keys", err);
    /* Counting sort of this rank's keys. */
    memset(b->counts, 0, (size_t)max_key * sizeof(int64_t));
    for (int64_t i = 0; i < n_recv; i++)
        b->counts[b->recv[i]]++;
    int64_t pos = 0;
    for (uint32_t k = 0; k < max_key; k++)
        for (int64_t c = b->counts[k]; c > 0; c--)
            b->sorted[pos++] = k;
    return n_recv;
}

static int is_run(const app_context *ctx, const void *data, app_result *result, hm_error *err)
{
    const is_params *p = data;
    const int cls = npb_class_index(p->class_name, err);
    const int64_t n_total = 1LL << is_classes[cls].keys_log2;
    const uint32_t max_key = 1U << is_classes[cls].max_key_log2;
    const int64_t first = n_total * ctx->rank / ctx->size;
    const int64_t n_local = n_total * (ctx->rank + 1) / ctx->size - first;

    /* Room for every key on one rank: the split is by whole buckets and
     * the keys are not uniform, so a rank may get more than its share. */
    is_buffers b = {0};
    b.keys = malloc((size_t)n_local * sizeof(uint32_t));
    b.send = malloc((size_t)n_local * sizeof(uint32_t));
    b.recv = malloc((size_t)n_total * sizeof(uint32_t));
    b.sorted = malloc((size_t)n_total * sizeof(uint32_t));
    b.hist = malloc(IS_BUCKETS * sizeof(int64_t));
    b.global_hist = malloc(IS_BUCKETS * sizeof(int64_t));
    b.counts = malloc((size_t)max_key * sizeof(int64_t));
    b.scount = malloc((size_t)ctx->size * sizeof(int));
    b.sdispl = malloc((size_t)ctx->size * sizeof(int));
    b.rcount = malloc((size_t)ctx->size * sizeof(int));
    b.rdispl = malloc((size_t)ctx->size * sizeof(int));
    b.bucket_rank = malloc(IS_BUCKETS * sizeof(int));
    bool ok = b.keys && b.send && b.recv && b.sorted && b.hist && b.global_hist && b.counts &&
              b.scount && b.sdispl && b.rcount && b.rdispl && b.bucket_rank;
    if (!app_all_ok(ctx, ok)) {
        is_free(&b);
        return hm_error_set(err, "cannot allocate the key arrays (%lld keys)",
                            (long long)n_total);
    }

    /* NPB's keys: the sum of four uniforms times max_key / 4. */
    uint64_t seed = npb_skip(NPB_SEED, NPB_A, (uint64_t)(4 * first));
    uint64_t hash = 0;
    const double quarter = (double)(max_key / 4);
    for (int64_t i = 0; i < n_local; i++) {
        double x = npb_randlc(&seed, NPB_A);
        x += npb_randlc(&seed, NPB_A);
        x += npb_randlc(&seed, NPB_A);
        x += npb_randlc(&seed, NPB_A);
        b.keys[i] = (uint32_t)(quarter * x);
        hash += key_hash(b.keys[i]);
    }

    int64_t bytes_sent = 0, n_sorted = 0, t0 = app_now_ns();
    for (int it = 0; it < is_classes[cls].iterations; it++)
        n_sorted = is_iteration(ctx, &b, n_local, n_total, max_key, &bytes_sent, err);
    int64_t sort_ns = app_now_ns() - t0;
    if (p->corrupt && ctx->rank == 0 && n_sorted > 1)
        b.sorted[n_sorted / 2] ^= 1;   /* one changed key the check must find */

    /* Verification: local order, order across ranks, count and multiset. */
    int64_t wrong = 0;
    uint64_t sorted_hash = 0;
    for (int64_t i = 0; i < n_sorted; i++) {
        sorted_hash += key_hash(b.sorted[i]);
        if (i > 0 && b.sorted[i] < b.sorted[i - 1])
            wrong++;
    }
    /* The largest key so far is passed along the ranks (an empty rank
     * passes on what it got), and each rank checks its smallest against it. */
    int64_t prev_max = -1, my_max = -1;
    if (ctx->rank > 0)
        mpi_check(ctx, MPI_Recv(&prev_max, 1, MPI_INT64_T, ctx->rank - 1, 7, ctx->comm,
                                MPI_STATUS_IGNORE), "MPI_Recv of the boundary key", err);
    if (n_sorted > 0 && (int64_t)b.sorted[0] < prev_max)
        wrong++;
    my_max = n_sorted > 0 ? (int64_t)b.sorted[n_sorted - 1] : prev_max;
    if (ctx->rank + 1 < ctx->size)
        mpi_check(ctx, MPI_Send(&my_max, 1, MPI_INT64_T, ctx->rank + 1, 7, ctx->comm),
                  "MPI_Send of the boundary key", err);
    uint64_t sums[3] = {hash, sorted_hash, (uint64_t)n_sorted}, totals[3];
    mpi_check(ctx, MPI_Allreduce(sums, totals, 3, MPI_UINT64_T, MPI_SUM, ctx->comm),
              "MPI_Allreduce of the fingerprints", err);
    if (ctx->rank == 0 && (totals[0] != totals[1] || totals[2] != (uint64_t)n_total))
        wrong++;
    is_free(&b);

    result->failures = wrong;
    result->busy_ns = sort_ns;
    result->bytes_moved = (double)bytes_sent;
    app_result_extra(result, "keys", (double)n_local, APP_SUM);
    app_result_extra(result, "iterations", is_classes[cls].iterations, APP_MAX);
    app_result_extra(result, "keys_max_rank", (double)n_sorted, APP_MAX);
    app_result_extra(result, "mkeys_per_s",
                     sort_ns > 0 ? (double)n_total * is_classes[cls].iterations /
                                       (double)sort_ns * 1e3 : 0.0,
                     APP_MAX);
    return 0;
}

int main(int argc, char **argv)
{
    is_params params = {.class_name = "S"};
    app_option options[] = {
        APP_STRING("class", &params.class_name, "S|W|A",
                   "size class: 2^22, 2^24, 2^25 keys sorted 16, 20, 60 times"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 changes one sorted key, to show the check catches it"),
    };
    app_program program = {
        .name = "is",
        .summary = "NPB-like IS: integer keys sorted across ranks (histogram + alltoallv).",
        .details = "Keys from NPB's generator (sum of four uniforms) are split among ranks by "
                   "a global histogram, exchanged with MPI_Alltoallv and counting-sorted, "
                   "once per iteration. Verified after the last iteration: keys in order on "
                   "each rank and across ranks, the count and a hash of the multiset of keys "
                   "unchanged.",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = is_validate,
        .run = is_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
