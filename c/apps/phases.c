/* phases: a program of distinct phases, each with a different limit by
 * construction, that reports its phases through libhushmon
 * (hm_phase_begin/hm_phase_end) so the digest names them (issue 21):
 *
 *   solve          a dense linear solve per rank (LU with partial pivoting
 *                  of an --solve-n system that stays in cache): the CPUs,
 *                  one tiny allreduce per system;
 *   transpose      MPI_Alltoall of --transpose-bytes blocks per rank pair:
 *                  the network, across racks on a tree;
 *   random_access  random XOR updates of a per-rank table of --table-bytes,
 *                  larger than the caches: memory latency, no messages;
 *   alltoall       MPI_Alltoall of --small-bytes per rank pair, back to
 *                  back: the network's latency, not its bandwidth.
 *
 * Each phase repeats its unit of work until --phase-s seconds have passed
 * on rank 0 (rank 0 decides after each unit, every rank learns it in an
 * allreduce, so all run the same number of units in step), so a phase
 * lasts the same time on a loaded machine as on a quiet one; the unit
 * sizes set what limits it. --order chooses the phases and their order (a
 * name may repeat). Each phase ends with hm_flush: its record goes to the
 * agent at once, not with the next call seconds later, in another period.
 *
 * Verification: solve, each solution against the known one (relative
 * error 1e-8); transpose and alltoall, every received block against the
 * pattern its sender wrote; random_access, each unit applies its stream of
 * updates twice (XOR undoes itself), so the table must be back to its
 * initial contents after the phase. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_common.h"
#include "hushmon.h"

enum { PH_SOLVE, PH_TRANSPOSE, PH_RANDOM, PH_ALLTOALL, PH_KINDS };
static const char *const phase_name[PH_KINDS] = {"solve", "transpose", "random_access",
                                                 "alltoall"};
enum { ORDER_MAX = 16, SMALL_ITERS = 64 };

typedef struct phases_params {
    const char *order;
    double phase_s;
    int64_t solve_n;
    int64_t transpose_bytes;
    int64_t table_bytes;
    int64_t updates;
    int64_t small_bytes;
    bool corrupt;
} phases_params;

/* ---- options ------------------------------------------------------------- */

/* --order as phase kinds; -1 with err set on a bad list. */
static int parse_order(const char *text, int kinds[ORDER_MAX], hm_error *err)
{
    int n = 0;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int kind = -1;
        for (int k = 0; k < PH_KINDS; k++)
            if (strlen(phase_name[k]) == len && strncmp(p, phase_name[k], len) == 0)
                kind = k;
        if (kind < 0)
            return hm_error_set(err,
                                "--order: '%.*s' is not a phase (solve, transpose, "
                                "random_access, alltoall)",
                                (int)len, p);
        if (n == ORDER_MAX)
            return hm_error_set(err, "--order: at most %d phases", ORDER_MAX);
        kinds[n++] = kind;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

static int phases_validate(const app_context *ctx, const void *data, hm_error *err)
{
    const phases_params *p = data;
    int kinds[ORDER_MAX];
    if (parse_order(p->order, kinds, err) < 0)
        return -1;
    /* MPI_Alltoall counts are ints, and the whole exchange is one buffer */
    if (p->transpose_bytes * ctx->size > (int64_t)1 << 31)
        return hm_error_set(err, "--transpose-bytes %lld x %d ranks exceeds 2 GiB",
                            (long long)p->transpose_bytes, ctx->size);
    if ((p->transpose_bytes & 7) || (p->small_bytes & 7))
        return hm_error_set(err, "--transpose-bytes and --small-bytes must be multiples of 8");
    return 0;
}

/* ---- shared -------------------------------------------------------------- */

/* Rank 0's verdict on whether the phase goes on: at least one unit, then
 * until --phase-s has passed. Every rank calls it at the same point. An
 * allreduce rather than a broadcast: it waits for every rank, so a rank
 * slower than rank 0 cannot fall behind by whole units and run its phase
 * seconds after rank 0's (the phases' spans would then disagree). */
static bool go_on(const app_context *ctx, int64_t t0_ns, double phase_s, int64_t units)
{
    int go = ctx->rank != 0 || units == 0 || (double)(app_now_ns() - t0_ns) < phase_s * 1e9;
    int all = 0;
    if (MPI_Allreduce(&go, &all, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS)
        MPI_Abort(ctx->comm, APP_EXIT_FAILED);
    return all != 0;
}

/* The 64-bit word w of the block that rank src sends rank dst in unit u. */
static uint64_t block_word(int src, int dst, int64_t u, size_t w)
{
    uint64_t x = ((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^ ((uint64_t)u << 20) ^ w;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static uint64_t xorshift64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

typedef struct phase_buffers {
    double *a, *b, *x;          /* solve: n x n, n, n */
    int64_t *pivot;
    uint64_t *send, *recv;      /* transpose and alltoall: size blocks each */
    uint64_t *table;            /* random access */
    size_t table_words;         /* a power of two */
} phase_buffers;

static void buffers_free(phase_buffers *m)
{
    free(m->a);
    free(m->b);
    free(m->x);
    free(m->pivot);
    free(m->send);
    free(m->recv);
    free(m->table);
}

/* What each kind of phase did on this rank. */
typedef struct phase_tally {
    int64_t units[PH_KINDS];
    int64_t ns[PH_KINDS];
    int64_t wrong[PH_KINDS];    /* verification failures */
    double bytes_sent;          /* to other ranks */
} phase_tally;

/* ---- solve ------------------------------------------------------------- */

/* A diagonally dominant system whose solution is x_i = 1 + i mod 7, a fixed
 * function of (rank, unit) so every system differs. */
static void solve_build(double *a, double *b, int64_t n, int rank, int64_t unit)
{
    uint64_t s = 0x9e3779b97f4a7c15ull ^ ((uint64_t)rank << 40) ^ (uint64_t)unit;
    for (int64_t i = 0; i < n; i++) {
        double row_sum = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double v = (double)(xorshift64(&s) >> 11) * 0x1.0p-53 - 0.5;
            a[i * n + j] = v;
            row_sum += fabs(v);
        }
        a[i * n + i] = row_sum + 1.0;
    }
    for (int64_t i = 0; i < n; i++) {
        double bi = 0.0;
        for (int64_t j = 0; j < n; j++)
            bi += a[i * n + j] * (double)(1 + j % 7);
        b[i] = bi;
    }
}

/* LU with partial pivoting in place, then the two triangular solves into x.
 * Row-major, the update of the trailing rows runs along rows (vectorized). */
static void solve_lu(double *a, double *b, double *x, int64_t *pivot, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        int64_t p = k;
        for (int64_t i = k + 1; i < n; i++)
            if (fabs(a[i * n + k]) > fabs(a[p * n + k]))
                p = i;
        pivot[k] = p;
        if (p != k) {
            for (int64_t j = 0; j < n; j++) {
                double t = a[k * n + j];
                a[k * n + j] = a[p * n + j];
                a[p * n + j] = t;
            }
            double t = b[k];
            b[k] = b[p];
            b[p] = t;
        }
        const double *rowk = a + k * n;
        for (int64_t i = k + 1; i < n; i++) {
            double *rowi = a + i * n;
            const double l = rowi[k] / rowk[k];
            rowi[k] = l;
            for (int64_t j = k + 1; j < n; j++)
                rowi[j] -= l * rowk[j];
            b[i] -= l * b[k];
        }
    }
    for (int64_t i = n - 1; i >= 0; i--) {
        double s = b[i];
        for (int64_t j = i + 1; j < n; j++)
            s -= a[i * n + j] * x[j];
        x[i] = s / a[i * n + i];
    }
}

static int64_t solve_unit(const app_context *ctx, const phases_params *p, phase_buffers *m,
                          int64_t unit, bool corrupt)
{
    const int64_t n = p->solve_n;
    solve_build(m->a, m->b, n, ctx->rank, unit);
    solve_lu(m->a, m->b, m->x, m->pivot, n);
    if (corrupt)
        m->x[n / 2] += 1.0;
    for (int64_t i = 0; i < n; i++) {
        const double want = (double)(1 + i % 7);
        if (!(fabs(m->x[i] - want) <= 1e-8 * want))
            return 1;
    }
    return 0;
}

/* ---- transpose and alltoall -------------------------------------------- */

/* One MPI_Alltoall of `bytes` per rank pair, filled and checked word by
 * word; returns the wrong blocks received. */
static int64_t exchange_unit(const app_context *ctx, phase_buffers *m, int64_t bytes,
                             int64_t unit, bool corrupt)
{
    const size_t words = (size_t)bytes / 8;
    for (int d = 0; d < ctx->size; d++)
        for (size_t w = 0; w < words; w++)
            m->send[(size_t)d * words + w] = block_word(ctx->rank, d, unit, w);
    if (corrupt)
        m->send[(size_t)(ctx->size - 1) * words + words / 2] ^= 1;
    if (MPI_Alltoall(m->send, (int)bytes, MPI_BYTE, m->recv, (int)bytes, MPI_BYTE, ctx->comm) !=
        MPI_SUCCESS) {
        hm_error err;
        hm_error_set(&err, "MPI_Alltoall of %lld bytes per rank failed", (long long)bytes);
        app_abort(ctx, "phases", &err);
    }
    int64_t wrong = 0;
    for (int s = 0; s < ctx->size; s++)
        for (size_t w = 0; w < words; w++)
            if (m->recv[(size_t)s * words + w] != block_word(s, ctx->rank, unit, w)) {
                wrong++;
                break;
            }
    return wrong;
}

/* ---- random access ----------------------------------------------------- */

/* --updates random XORs into the table, then the same stream again: the
 * table ends as it began, and the second pass misses the caches as the
 * first did (the table is larger than them). */
static void random_unit(const app_context *ctx, const phases_params *p, phase_buffers *m,
                        int64_t unit)
{
    const uint64_t mask = (uint64_t)m->table_words - 1;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t s = 0x2545f4914f6cdd1dull ^ ((uint64_t)ctx->rank << 32) ^ (uint64_t)(unit + 1);
        for (int64_t i = 0; i < p->updates; i++) {
            const uint64_t v = xorshift64(&s);
            m->table[v & mask] ^= v;
        }
    }
}

static int64_t random_check(phase_buffers *m, bool corrupt)
{
    if (corrupt)
        m->table[m->table_words / 3] ^= 1;
    int64_t wrong = 0;
    for (size_t i = 0; i < m->table_words; i++)
        wrong += m->table[i] != (uint64_t)i;
    return wrong;
}

/* ---- the run ----------------------------------------------------------- */

static int allocate(const app_context *ctx, const phases_params *p, const int kinds[],
                    int n_kinds, phase_buffers *m, hm_error *err)
{
    bool need[PH_KINDS] = {false};
    for (int i = 0; i < n_kinds; i++)
        need[kinds[i]] = true;
    const size_t n = (size_t)p->solve_n;
    if (need[PH_SOLVE]) {
        m->a = malloc(n * n * sizeof(double));
        m->b = malloc(n * sizeof(double));
        m->x = malloc(n * sizeof(double));
        m->pivot = malloc(n * sizeof(int64_t));
        if (!m->a || !m->b || !m->x || !m->pivot)
            return hm_error_set(err, "cannot allocate a %lld x %lld system",
                                (long long)p->solve_n, (long long)p->solve_n);
    }
    int64_t block = 0;
    if (need[PH_TRANSPOSE])
        block = p->transpose_bytes;
    if (need[PH_ALLTOALL] && p->small_bytes > block)
        block = p->small_bytes;
    if (block > 0) {
        m->send = malloc((size_t)block * (size_t)ctx->size);
        m->recv = malloc((size_t)block * (size_t)ctx->size);
        if (!m->send || !m->recv)
            return hm_error_set(err, "cannot allocate 2 x %d blocks of %lld bytes", ctx->size,
                                (long long)block);
    }
    if (need[PH_RANDOM]) {
        m->table_words = 1;
        while (m->table_words * 2 * sizeof(uint64_t) <= (size_t)p->table_bytes)
            m->table_words *= 2;
        m->table = malloc(m->table_words * sizeof(uint64_t));
        if (!m->table)
            return hm_error_set(err, "cannot allocate a %zu-byte table",
                                m->table_words * sizeof(uint64_t));
        for (size_t i = 0; i < m->table_words; i++)
            m->table[i] = i;
    }
    return 0;
}

/* One phase of the order: its units until --phase-s, inside
 * hm_phase_begin/end. `last` marks the order's last phase of this kind,
 * where --corrupt damages one result. */
static void run_phase(const app_context *ctx, const phases_params *p, phase_buffers *m,
                      int kind, bool last, phase_tally *t)
{
    const bool corrupt = p->corrupt && last && ctx->rank == 0;
    hm_phase_begin(phase_name[kind]);
    const int64_t t0 = app_now_ns();
    int64_t units = 0;
    for (; go_on(ctx, t0, p->phase_s, units); units++) {
        const int64_t u = t->units[kind] + units;
        switch (kind) {
        case PH_SOLVE:
            t->wrong[kind] += solve_unit(ctx, p, m, u, false);
            break;
        case PH_TRANSPOSE:
            t->wrong[kind] += exchange_unit(ctx, m, p->transpose_bytes, u, false);
            t->bytes_sent += (double)p->transpose_bytes * (ctx->size - 1);
            break;
        case PH_RANDOM:
            random_unit(ctx, p, m, u);
            break;
        case PH_ALLTOALL:
            for (int i = 0; i < SMALL_ITERS; i++)
                t->wrong[kind] +=
                    exchange_unit(ctx, m, p->small_bytes, u * SMALL_ITERS + i, false);
            t->bytes_sent += (double)p->small_bytes * (ctx->size - 1) * SMALL_ITERS;
            break;
        }
    }
    /* one more unit, checked like the others, carries the damage */
    if (corrupt && kind == PH_SOLVE)
        t->wrong[kind] += solve_unit(ctx, p, m, t->units[kind] + units - 1, true);
    if (p->corrupt && last && (kind == PH_TRANSPOSE || kind == PH_ALLTOALL)) {
        const int64_t bytes = kind == PH_TRANSPOSE ? p->transpose_bytes : p->small_bytes;
        t->wrong[kind] += exchange_unit(ctx, m, bytes, -1, corrupt);
    }
    if (kind == PH_RANDOM)
        t->wrong[kind] += random_check(m, corrupt);
    hm_phase_end(phase_name[kind]);
    hm_flush(); /* phases last seconds: the agent gets this one now, not with the next */
    t->units[kind] += units;
    t->ns[kind] += app_now_ns() - t0;
}

static int phases_run(const app_context *ctx, const void *data, app_result *result,
                      hm_error *err)
{
    const phases_params *p = data;
    int kinds[ORDER_MAX];
    const int n_kinds = parse_order(p->order, kinds, err);
    phase_buffers m = {0};
    int rc = allocate(ctx, p, kinds, n_kinds, &m, err);
    if (!app_all_ok(ctx, rc == 0)) {
        if (rc == 0)
            rc = hm_error_set(err, "another rank could not allocate its buffers");
        buffers_free(&m);
        return rc;
    }
    phase_tally t = {0};
    for (int i = 0; i < n_kinds; i++) {
        bool last = true;
        for (int j = i + 1; j < n_kinds; j++)
            last = last && kinds[j] != kinds[i];
        run_phase(ctx, p, &m, kinds[i], last, &t);
    }
    buffers_free(&m);
    /* The program may exit right after its last phase: the agent reads what
     * it sent when the job ends on the node and keeps the job for that
     * period (docs/agent.md, "Jobs"). */

    int64_t busy_ns = 0, wrong = 0;
    for (int k = 0; k < PH_KINDS; k++) {
        busy_ns += t.ns[k];
        wrong += t.wrong[k];
    }
    result->bytes_moved = t.bytes_sent;
    result->busy_ns = busy_ns;
    result->failures = wrong;
    static const char *const seconds_key[PH_KINDS] = {"solve_s", "transpose_s",
                                                      "random_access_s", "alltoall_s"};
    static const char *const units_key[PH_KINDS] = {"solve_units", "transpose_units",
                                                    "random_access_units", "alltoall_units"};
    static const char *const wrong_key[PH_KINDS] = {"solve_failures", "transpose_failures",
                                                    "random_access_failures",
                                                    "alltoall_failures"};
    for (int k = 0; k < PH_KINDS; k++) {
        app_result_extra(result, seconds_key[k], (double)t.ns[k] * 1e-9, APP_MAX);
        app_result_extra(result, units_key[k], (double)t.units[k], APP_MAX);
        app_result_extra(result, wrong_key[k], (double)t.wrong[k], APP_SUM);
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* Defaults: four phases of 5 s, about 20 s in all on any machine. */
    phases_params params = {
        .order = "solve,transpose,random_access,alltoall",
        .phase_s = 5.0,
        .solve_n = 384,
        .transpose_bytes = 4 << 20,
        .table_bytes = 128 << 20,
        .updates = 1 << 20,
        .small_bytes = 8,
    };
    app_option options[] = {
        APP_STRING("order", &params.order, "LIST",
                   "phases in order, comma-separated: solve, transpose, random_access, "
                   "alltoall (a name may repeat)"),
        APP_DOUBLE("phase-s", &params.phase_s, 0.0, 3600.0, "S",
                   "seconds per phase (units of work repeat until then; at least one)"),
        APP_SIZE("solve-n", &params.solve_n, 8, 8192, "N", "order of each rank's dense system"),
        APP_SIZE("transpose-bytes", &params.transpose_bytes, 8, (int64_t)1 << 30, "B",
                 "bytes per rank pair in each transpose (MPI_Alltoall)"),
        APP_SIZE("table-bytes", &params.table_bytes, 16, (int64_t)1 << 36, "B",
                 "random-access table per rank (rounded down to a power of two)"),
        APP_SIZE("updates", &params.updates, 1, (int64_t)1 << 32, "N",
                 "random updates per unit (applied twice: XOR undoes itself)"),
        APP_SIZE("small-bytes", &params.small_bytes, 8, 65536, "B",
                 "bytes per rank pair in the small all-to-alls (latency-bound)"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 damages one result of each phase's last run, to show the "
                 "checks catch it"),
    };
    app_program program = {
        .name = "phases",
        .summary = "Four phases with different limits, reported through libhushmon.",
        .details = "solve (dense LU per rank: CPU), transpose (MPI_Alltoall of large blocks: "
                   "network bandwidth, across racks), random_access (XOR updates of a table "
                   "larger than the caches: memory latency), alltoall (MPI_Alltoall of a few "
                   "bytes: network latency). Each phase repeats its unit until --phase-s "
                   "seconds have passed on rank 0 and is reported with hm_phase_begin/end. "
                   "Solutions, received blocks and the table are verified.",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = phases_validate,
        .run = phases_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
