/* hushmon-detect: the seed's noise detector (seed 000, Fig. 1).
 *
 * Times a loop of `count` collectives of any hushmon-bench operation; the
 * value is the loop time of the slowest process. Every iteration is also
 * timed on the synchronized clock of hushmon-bench (hm_clock_sync), and the
 * detours, block durations and a histogram are kept (detect_record.h) so
 * detours can be counted and folded over an injector's period. Rank 0
 * writes the JSON summary and the binary event file, with the mapping from
 * the synchronized clock to CLOCK_REALTIME (the injector's log clock). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hushmon.h"
#include "detect_record.h"
#include "hm_clock_sync.h"
#include "hm_error.h"
#include "hm_json_doc.h"
#include "hm_mpi_launch.h"
#include "hm_mpi_timer.h"
#include "hm_options.h"
#include "hm_parse.h"
#include "hm_stats.h"
#include "hm_timer.h"
#include "op.h"

#define PROGRAM "hushmon-detect"

typedef struct detect_options {
    const hm_op *op;
    int64_t size_bytes;
    int64_t count;
    double seconds;         /* > 0: run for this long instead of `count` */
    int64_t warmup;
    int64_t block_iters;
    int64_t threshold_ns;   /* 0: automatic */
    int64_t max_detours;
    const char *timer_name;
    const char *events_path;
    const char *json_path;
    bool list;
} detect_options;

static int set_op(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    detect_options *o = base;
    o->op = hm_op_find(value);
    if (o->op == NULL)
        return hm_error_set(err, "--%s: unknown operation '%s' (see --list)", opt->name, value);
    return 0;
}

static int set_timer(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    if (!hm_mpi_timer_name_valid(value))
        return hm_error_set(err, "--%s: unknown timer '%s'", opt->name, value);
    ((detect_options *)base)->timer_name = value;
    return 0;
}

#define AT(field) .offset = offsetof(detect_options, field)
static const hm_option option_rows[] = {
    {.name = "op", .kind = HM_OPT_CALL, .call = set_op, .arg = "NAME",
     .help = "operation of hushmon-bench [barrier] (--list shows them)"},
    {.name = "size", .kind = HM_OPT_INT64, AT(size_bytes), .arg = "BYTES", .min = 0,
     .max = INT32_MAX, .suffixes = true, .help = "message size, K/M/G suffixes [2K]"},
    {.name = "count", .kind = HM_OPT_INT64, AT(count), .arg = "N", .min = 1,
     .max = INT64_C(1) << 40, .suffixes = true, .help = "collectives in the timed loop [100000]"},
    {.name = "seconds", .kind = HM_OPT_DOUBLE, AT(seconds), .arg = "S", .dmin = 0.001,
     .dmax = 86400,
     .help = "instead of --count: loop for S seconds (the ranks agree\n"
             "to stop at the first block boundary past S)"},
    {.name = "warmup", .kind = HM_OPT_INT64, AT(warmup), .arg = "N", .min = 0,
     .max = INT64_C(1) << 40, .suffixes = true, .help = "untimed collectives before the loop [1000]"},
    {.name = "block", .kind = HM_OPT_INT64, AT(block_iters), .arg = "N", .min = 1,
     .max = INT64_C(1) << 40, .suffixes = true, .help = "iterations per recorded block [1000]"},
    {.name = "threshold-ns", .kind = HM_OPT_INT64, AT(threshold_ns), .arg = "NS", .min = 1,
     .max = INT64_C(1) << 40,
     .help = "an iteration longer than this is a detour\n"
             "[10 x the warm-up median of the slowest rank, >= 2000]"},
    {.name = "max-detours", .kind = HM_OPT_INT64, AT(max_detours), .arg = "N", .min = 0,
     .max = 100000000, .suffixes = true,
     .help = "detours kept per rank (more are counted) [200000]"},
    {.name = "timer", .kind = HM_OPT_CALL, .call = set_timer, .arg = "NAME",
     .help = "monotonic, monotonic_raw, gettimeofday, tsc, mpi_wtime\n[monotonic]"},
    {.name = "events", .kind = HM_OPT_STRING, AT(events_path), .arg = "FILE",
     .help = "binary detours and blocks (format in docs/noise.md)"},
    {.name = "json", .kind = HM_OPT_STRING, AT(json_path), .arg = "FILE|-",
     .help = "summary as JSON"},
    {.name = "list", .kind = HM_OPT_SET, AT(list), .help = "list the operations"},
    {.name = "help", .kind = HM_OPT_HELP, .help = "this text"},
};
#undef AT
static const hm_option_table options = HM_OPTION_TABLE(option_rows);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np N " PROGRAM " [options]\n"
            "Times a loop of COUNT collectives; the value is the loop time of the slowest rank.\n\n");
    hm_options_print_help(&options, out);
}

static void list_ops(FILE *out)
{
    for (size_t i = 0; i < hm_op_count(); i++) {
        const hm_op *op = hm_op_at(i);
        fprintf(out, "  %-24s %s\n", op->name, op->description);
    }
}

/* Parsed identically on every rank, so every rank reaches the same verdict
 * on bad input and all exit together (no rank is left in a collective).
 * 1 after --help (printed). */
static int parse_options(int argc, char **argv, detect_options *o, hm_error *err)
{
    *o = (detect_options){.op = hm_op_find("barrier"), .size_bytes = 2048, .count = 100000,
                          .warmup = 1000, .block_iters = 1000, .max_detours = 200000,
                          .timer_name = "monotonic"};
    int rc = hm_options_parse(&options, argc, argv, o, err);
    if (rc == 1) {
        o->list = false;
        usage(stdout);
        return 1;
    }
    if (rc != 0)
        return -1;
    if (o->op == NULL)
        return hm_error_set(err, "the operation table has no 'barrier'");
    return 0;
}

/* Every rank reports whether it failed; all return the same answer, so a
 * failure on one rank ends every rank instead of leaving some in a
 * collective. The failing ranks' messages are printed by rank 0 only when
 * rank 0 itself failed; otherwise the failing rank prints its own. */
static int all_ok(int local_ok, MPI_Comm comm)
{
    int global_ok = 0;
    if (MPI_Allreduce(&local_ok, &global_ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        MPI_Abort(comm, 1);
    return global_ok;
}

static void fail_all(int rank, const hm_error *err)
{
    hm_error_print(PROGRAM, err);
    (void)rank;
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* CLOCK_REALTIME minus the synchronized clock, from the tightest of a few
 * back-to-back reading pairs (the mapping to the injector's log). */
static int64_t realtime_minus_clock(const hm_clock *clock)
{
    int64_t best_gap = INT64_MAX, best = 0;
    for (int i = 0; i < 16; i++) {
        int64_t a = hm_clock_now_ns(clock);
        int64_t rt = hm_realtime_ns();
        int64_t b = hm_clock_now_ns(clock);
        if (b - a < best_gap) {
            best_gap = b - a;
            best = rt - (a + (b - a) / 2);
        }
    }
    return best;
}

typedef struct detect_result {
    int64_t loop_ns;          /* this rank */
    int64_t iterations;       /* the same on every rank */
    int64_t threshold_ns;
    int64_t warmup_median_ns; /* largest over ranks */
    int64_t rt_minus_clock_begin, rt_minus_clock_end;
    hm_clock_sync_info sync;
} detect_result;

static int run_op(const hm_op *op, hm_op_ctx *ctx, hm_error *err)
{
    hm_op_ctx_next(ctx);
    if (op->run(ctx, err) != 0)
        return hm_error_wrap(err, "operation %s", op->name);
    return 0;
}

/* Warm-up: untimed launches, then the median of timed ones decides the
 * automatic detour threshold (the same on every rank). */
static int warm_up(const detect_options *o, hm_op_ctx *ctx, const hm_timer *timer,
                   detect_result *res, hm_error *err)
{
    int64_t samples = o->warmup < 101 ? 101 : o->warmup;
    double *d = malloc((size_t)samples * sizeof *d);
    if (d == NULL)
        return hm_error_errno(err, "allocating warm-up samples");
    int64_t prev = hm_timer_now_ns(timer);
    for (int64_t i = 0; i < samples; i++) {
        if (run_op(o->op, ctx, err) != 0) {
            free(d);
            return -1;
        }
        int64_t now = hm_timer_now_ns(timer);
        d[i] = (double)(now - prev);
        prev = now;
    }
    hm_stats_sort(d, (size_t)samples);
    int64_t median = (int64_t)hm_stats_median_sorted(d, (size_t)samples);
    free(d);
    int64_t max_median = 0;
    if (MPI_Allreduce(&median, &max_median, 1, MPI_INT64_T, MPI_MAX, ctx->comm) != MPI_SUCCESS)
        return hm_error_set(err, "MPI_Allreduce of the warm-up median failed");
    res->warmup_median_ns = max_median;
    res->threshold_ns = o->threshold_ns > 0 ? o->threshold_ns
                                            : (10 * max_median > 2000 ? 10 * max_median : 2000);
    return 0;
}

static int measure(const detect_options *o, hm_op_ctx *ctx, const hm_clock *clock,
                   hm_detect_recorder *rec, detect_result *res, hm_error *err)
{
    const hm_timer *timer = clock->timer;
    /* HUSHMON_DETECT_METRIC=NAME: every iteration also reports its time
     * through libhushmon (inside the timed loop, on purpose), so the
     * noise study measures an application that calls the library every
     * iteration (docs/libhushmon.md). Unset: no call at all. */
    const char *app_metric = getenv("HUSHMON_DETECT_METRIC");
    if (app_metric != NULL && *app_metric == '\0')
        app_metric = NULL;
    /* All ranks start the loop at one instant of the synchronized clock. */
    int64_t start_at = hm_clock_now_ns(clock) + 2000000;
    if (MPI_Bcast(&start_at, 1, MPI_INT64_T, 0, ctx->comm) != MPI_SUCCESS)
        return hm_error_set(err, "MPI_Bcast of the start time failed");
    hm_clock_spin_until_ns(clock, start_at);
    int64_t t0 = hm_timer_now_ns(timer);
    int64_t prev = t0;
    hm_detect_record_begin(rec, t0);
    if (o->seconds <= 0) {
        for (int64_t i = 0; i < o->count; i++) {
            if (run_op(o->op, ctx, err) != 0)
                return -1;
            int64_t now = hm_timer_now_ns(timer);
            hm_detect_record(rec, prev, now);
            if (app_metric != NULL)
                hm_metric(app_metric, (double)(now - prev) * 1e-9);
            prev = now;
        }
        res->loop_ns = prev - t0;
        res->iterations = o->count;
        return 0;
    }
    /* Timed mode: ranks may disagree on when the deadline passed, so they
     * agree at block boundaries (one small allreduce per block, in every
     * run alike); its cost stays out of the per-iteration records. */
    int64_t deadline = t0 + (int64_t)(o->seconds * 1e9);
    int64_t i = 0;
    for (;;) {
        if (run_op(o->op, ctx, err) != 0)
            return -1;
        int64_t now = hm_timer_now_ns(timer);
        hm_detect_record(rec, prev, now);
        if (app_metric != NULL)
            hm_metric(app_metric, (double)(now - prev) * 1e-9);
        prev = now;
        if (++i % o->block_iters == 0) {
            int late = now >= deadline, any_late = 0;
            if (MPI_Allreduce(&late, &any_late, 1, MPI_INT, MPI_MAX, ctx->comm) != MPI_SUCCESS)
                return hm_error_set(err, "MPI_Allreduce of the stop flag failed");
            if (any_late)
                break;
            prev = hm_timer_now_ns(timer);
            hm_detect_record_begin(rec, prev);
        }
    }
    res->loop_ns = prev - t0;
    res->iterations = i;
    return 0;
}

/* Gathers every rank's events to rank 0 (NULL elsewhere). */
static int gather_events(const hm_detect_recorder *rec, MPI_Comm comm, int rank, int nprocs,
                         hm_detect_event **all, size_t *all_count, hm_error *err)
{
    size_t mine = rec->detour_count + rec->block_count;
    hm_detect_event *buf = malloc((mine > 0 ? mine : 1) * sizeof *buf);
    if (buf == NULL)
        return hm_error_errno(err, "allocating %zu events", mine);
    memcpy(buf, rec->detours, rec->detour_count * sizeof *buf);
    memcpy(buf + rec->detour_count, rec->blocks, rec->block_count * sizeof *buf);
    int bytes = (int)(mine * sizeof *buf);
    int *counts = NULL, *displs = NULL;
    unsigned char *recv = NULL;
    int rc = 0;
    if (rank == 0) {
        counts = calloc((size_t)nprocs, sizeof *counts);
        displs = calloc((size_t)nprocs, sizeof *displs);
        if (counts == NULL || displs == NULL)
            rc = hm_error_errno(err, "allocating gather counts");
    }
    if (MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, comm) != MPI_SUCCESS)
        rc = hm_error_set(err, "MPI_Gather of event counts failed");
    long long total = 0;
    if (rank == 0 && rc == 0) {
        for (int i = 0; i < nprocs; i++) {
            displs[i] = (int)total;
            total += counts[i];
        }
        if (total > INT32_MAX)
            rc = hm_error_set(err, "too many events to gather (%lld bytes)", total);
        else if ((recv = malloc(total > 0 ? (size_t)total : 1)) == NULL)
            rc = hm_error_errno(err, "allocating %lld bytes of events", total);
    }
    if (rc == 0 && MPI_Gatherv(buf, bytes, MPI_BYTE, recv, counts, displs, MPI_BYTE, 0, comm) !=
                       MPI_SUCCESS)
        rc = hm_error_set(err, "MPI_Gatherv of events failed");
    free(buf);
    free(counts);
    free(displs);
    if (rc != 0) {
        free(recv);
        return -1;
    }
    *all = (hm_detect_event *)recv;
    *all_count = rank == 0 ? (size_t)total / sizeof(hm_detect_event) : 0;
    return 0;
}

static int write_json(const char *path, const detect_options *o, const detect_result *res,
                      const hm_timer *timer, int nprocs, const int64_t *loops,
                      const double *quantiles, const uint64_t *detour_counts,
                      const int64_t *excess, hm_error *err)
{
    hm_json j;
    if (hm_json_doc_open(&j, path, PROGRAM, err) != 0)
        return -1;
    int64_t slowest = 0;
    for (int i = 0; i < nprocs; i++)
        slowest = loops[i] > slowest ? loops[i] : slowest;
    hm_json_kv_string(&j, "op", o->op->name);
    hm_json_kv_int(&j, "size_bytes", o->op->uses_size ? o->size_bytes : 0);
    hm_json_kv_int(&j, "count", res->iterations);
    hm_json_kv_double(&j, "seconds_requested", o->seconds);
    hm_json_kv_int(&j, "nprocs", nprocs);
    hm_json_kv_string(&j, "timer", timer->name);
    hm_json_kv_double(&j, "loop_time_s", (double)slowest / 1e9);
    hm_json_kv_double(&j, "per_op_us", (double)slowest / 1e3 / (double)res->iterations);
    hm_json_kv_int(&j, "threshold_ns", res->threshold_ns);
    hm_json_kv_int(&j, "warmup_median_ns", res->warmup_median_ns);
    hm_json_kv_int(&j, "block_iters", o->block_iters);
    hm_json_kv_int(&j, "realtime_minus_clock_ns", res->rt_minus_clock_begin);
    hm_json_kv_int(&j, "realtime_mapping_drift_ns",
                   res->rt_minus_clock_end - res->rt_minus_clock_begin);
    hm_json_key(&j, "clock_sync");
    hm_json_object_begin(&j);
    hm_json_kv_int(&j, "nodes", res->sync.nodes);
    hm_json_kv_int(&j, "synced_ranks", res->sync.synced_ranks);
    hm_json_kv_double(&j, "elapsed_s", res->sync.elapsed_s);
    hm_json_object_end(&j);
    if (o->events_path != NULL)
        hm_json_kv_string(&j, "events", o->events_path);
    hm_json_key(&j, "ranks");
    hm_json_array_begin(&j);
    static const char *const qnames[] = {"p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"};
    for (int i = 0; i < nprocs; i++) {
        hm_json_object_begin(&j);
        hm_json_kv_int(&j, "rank", i);
        hm_json_kv_double(&j, "loop_time_s", (double)loops[i] / 1e9);
        hm_json_kv_uint(&j, "detours", detour_counts[i]);
        hm_json_kv_double(&j, "detour_excess_s", (double)excess[i] / 1e9);
        for (int q = 0; q < 5; q++)
            hm_json_kv_double(&j, qnames[q], quantiles[i * 5 + q]);
        hm_json_object_end(&j);
    }
    hm_json_array_end(&j);
    return hm_json_doc_close(&j, path, err);
}

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, PROGRAM ": MPI_Init failed\n");
        return 1;
    }
    int rank = 0, nprocs = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    hm_error err = {{0}};
    detect_options o;
    int prc = parse_options(argc, argv, &o, &err);
    if (prc == 0)
        prc = hm_mpi_launch_check(nprocs, &err);
    if (prc == 0 && !o.list && nprocs < o.op->min_ranks)
        prc = hm_error_set(&err, "operation %s needs at least %d ranks, got %d", o.op->name,
                           o.op->min_ranks, nprocs);
    if (prc != 0 || o.list) {
        /* The same on every rank: rank 0 speaks, all leave together. */
        if (rank == 0 && prc < 0)
            hm_error_print(PROGRAM, &err);
        if (rank == 0 && o.list && prc == 0)
            list_ops(stdout);
        MPI_Finalize();
        return prc < 0 ? 2 : 0;
    }
    /* Setup can fail on one rank only (memory, a bad timer): agree first. */
    hm_timer timer;
    hm_buffer_pool pool = {0};
    hm_op_ctx ctx;
    hm_op_params params = {.comm = MPI_COMM_WORLD, .size_bytes = o.size_bytes, .root = 0,
                           .buffers = HM_BUFFERS_REUSE, .pool = &pool, .timer = &timer};
    int ok = hm_mpi_timer_init(&timer, o.timer_name, &err) == 0 &&
             hm_op_ctx_init(&ctx, o.op, &params, &err) == 0;
    if (!all_ok(ok, MPI_COMM_WORLD)) {
        if (!ok)
            hm_error_print(PROGRAM, &err);
        MPI_Finalize();
        return 2;
    }
    detect_result res = {0};
    hm_clock clock;
    hm_clock_sync_opts sync_opts;
    hm_clock_sync_opts_default(&sync_opts);
    if (hm_clock_sync(MPI_COMM_WORLD, &timer, &sync_opts, &clock, &res.sync, &err) != 0)
        fail_all(rank, &err);
    for (int64_t i = 0; i < o.warmup; i++)
        if (run_op(o.op, &ctx, &err) != 0)
            fail_all(rank, &err);
    if (warm_up(&o, &ctx, &timer, &res, &err) != 0)
        fail_all(rank, &err);
    hm_detect_recorder rec;
    /* Timed mode: room for the blocks of S seconds at 20 ns an iteration. */
    uint64_t capacity = o.seconds > 0 ? (uint64_t)(o.seconds * 1e9 / 20.0) : (uint64_t)o.count;
    ok = hm_detect_recorder_init(&rec, rank, res.threshold_ns, o.block_iters, capacity,
                                 (size_t)o.max_detours, clock.offset_ns, &err) == 0;
    if (!all_ok(ok, MPI_COMM_WORLD)) {
        if (!ok)
            hm_error_print(PROGRAM, &err);
        hm_op_ctx_free(&ctx);
        hm_buffer_pool_free(&pool);
        MPI_Finalize();
        return 1;
    }
    if (rank == 0)
        res.rt_minus_clock_begin = realtime_minus_clock(&clock);
    if (measure(&o, &ctx, &clock, &rec, &res, &err) != 0)
        fail_all(rank, &err);
    if (rank == 0)
        res.rt_minus_clock_end = realtime_minus_clock(&clock);

    /* Per-rank figures to rank 0. */
    double q[5] = {hm_detect_hist_quantile(rec.hist, 0.5), hm_detect_hist_quantile(rec.hist, 0.9),
                   hm_detect_hist_quantile(rec.hist, 0.99),
                   hm_detect_hist_quantile(rec.hist, 0.999),
                   hm_detect_hist_quantile(rec.hist, 1.0)};
    uint64_t ndet = rec.detour_count + rec.detours_dropped;
    int64_t *loops = rank == 0 ? calloc((size_t)nprocs, sizeof *loops) : NULL;
    int64_t *excess = rank == 0 ? calloc((size_t)nprocs, sizeof *excess) : NULL;
    uint64_t *dets = rank == 0 ? calloc((size_t)nprocs, sizeof *dets) : NULL;
    double *qs = rank == 0 ? calloc((size_t)nprocs * 5, sizeof *qs) : NULL;
    if (rank == 0 && (loops == NULL || excess == NULL || dets == NULL || qs == NULL)) {
        hm_error_errno(&err, "allocating per-rank results");
        fail_all(rank, &err);
    }
    if (MPI_Gather(&res.loop_ns, 1, MPI_INT64_T, loops, 1, MPI_INT64_T, 0, MPI_COMM_WORLD) !=
            MPI_SUCCESS ||
        MPI_Gather(&rec.detour_excess_ns, 1, MPI_INT64_T, excess, 1, MPI_INT64_T, 0,
                   MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Gather(&ndet, 1, MPI_UINT64_T, dets, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) !=
            MPI_SUCCESS ||
        MPI_Gather(q, 5, MPI_DOUBLE, qs, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        hm_error_set(&err, "gathering per-rank results failed");
        fail_all(rank, &err);
    }
    hm_detect_event *events = NULL;
    size_t nevents = 0;
    if (gather_events(&rec, MPI_COMM_WORLD, rank, nprocs, &events, &nevents, &err) != 0)
        fail_all(rank, &err);
    int rc = 0;
    if (rank == 0) {
        hm_detect_file_header h = {.realtime_minus_clock_ns = res.rt_minus_clock_begin,
                                   .threshold_ns = res.threshold_ns,
                                   .block_iters = o.block_iters,
                                   .nranks = nprocs};
        if (o.events_path != NULL &&
            hm_detect_write_file(o.events_path, &h, events, nevents, &err) != 0)
            rc = 1;
        if (rc == 0 && o.json_path != NULL &&
            write_json(o.json_path, &o, &res, &timer, nprocs, loops, qs, dets, excess, &err) != 0)
            rc = 1;
        if (rc == 0) {
            /* With --json - stdout holds the JSON alone: people read stderr. */
            bool json_stdout = o.json_path != NULL && strcmp(o.json_path, "-") == 0;
            int64_t slowest = 0;
            for (int i = 0; i < nprocs; i++)
                slowest = loops[i] > slowest ? loops[i] : slowest;
            fprintf(json_stdout ? stderr : stdout,
                    "%s: %s size %lld, %lld iterations on %d ranks: loop time %.6f s "
                    "(slowest rank), %llu detours > %lld ns on rank 0\n",
                    PROGRAM, o.op->name, (long long)(o.op->uses_size ? o.size_bytes : 0),
                    (long long)res.iterations, nprocs, (double)slowest / 1e9,
                    (unsigned long long)dets[0], (long long)res.threshold_ns);
        }
        if (rc != 0)
            hm_error_print(PROGRAM, &err);
    }
    free(events);
    free(loops);
    free(excess);
    free(dets);
    free(qs);
    hm_detect_recorder_free(&rec);
    hm_op_ctx_free(&ctx);
    hm_buffer_pool_free(&pool);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}
