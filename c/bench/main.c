/* hushmon-bench: times MPI collectives by the MPIPerf method (seed 002).
 *
 * Every rank parses the same command line, so bad input ends every rank
 * with the same verdict and no communication; later failures are agreed
 * on with a reduction before the next collective, so no rank is left
 * waiting. See docs/bench.md for the method and the JSON schema. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock_check.h"
#include "bench_measure.h"
#include "bench_options.h"
#include "bench_passes.h"
#include "bench_report.h"
#include "bench_summary.h"
#include "hm_array.h"
#include "hm_clock_sync.h"
#include "hm_mpi_launch.h"
#include "hm_mpi_timer.h"

#define PROGRAM "hushmon-bench"

/* Failure statuses besides 0:
 *   -1 failed here, the other ranks do not know (may be inside a
 *      collective this rank will never join): print and MPI_Abort;
 *   FAILED_ELSEWHERE: another rank failed, every rank knows: exit quietly;
 *   FAILED_HERE_AGREED: failed here, every rank knows: print and exit. */
#define FAILED_ELSEWHERE (-2)
#define FAILED_HERE_AGREED (-3)

typedef struct run_state {
    const hm_bench_opts *o;
    int rank, world;
    hm_timer timer;
    hm_clock clock;
    hm_buffer_pool pool;
    size_t rotate_bytes;
    hm_bench_meta meta;
    hm_bench_result *results; /* rank 0 */
    size_t n_results, cap_results;
    FILE *table;              /* NULL with --quiet */
    FILE *json;               /* rank 0 with --json, open during the run */
} run_state;

/* All ranks of comm learn whether every rank succeeded; of the ranks that
 * failed here, the lowest reports (one message, not one per rank). */
static int agree(MPI_Comm comm, int status, hm_error *err)
{
    int rank = 0;
    int rc = MPI_Comm_rank(comm, &rank);
    /* INT_MAX: fine; INT_MAX - 1: knows of a failure elsewhere; a rank
     * number: failed here. The minimum says it all. */
    int mine = status == 0 ? INT_MAX : status == FAILED_ELSEWHERE ? INT_MAX - 1 : rank;
    int first = INT_MAX;
    if (rc == MPI_SUCCESS)
        rc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS)
        return hm_op_mpi_check(rc, "agreeing on status", err);
    if (first == INT_MAX)
        return 0;
    return first == rank ? FAILED_HERE_AGREED : FAILED_ELSEWHERE;
}

static int push_result(run_state *s, const hm_bench_result *r, hm_error *err)
{
    if (s->n_results == s->cap_results) {
        hm_bench_result *grown =
            hm_array_grow(s->results, &s->cap_results, sizeof *grown, 32, SIZE_MAX, "results", err);
        if (grown == NULL)
            return -1;
        s->results = grown;
    }
    s->results[s->n_results++] = *r;
    return 0;
}

/* Mean, min, max of this rank's own valid times, gathered on rank 0. */
static int gather_rank_stats(const hm_bench_env *env, const hm_bench_samples *smp,
                             double **out, hm_error *err)
{
    double mine[3] = {NAN, NAN, NAN};
    size_t used = 0;
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < smp->n_own; i++) {
        if (smp->own_per_launch && (i >= smp->n || !smp->valid[i]))
            continue;
        sum += smp->own_s[i];
        lo = smp->own_s[i] < lo ? smp->own_s[i] : lo;
        hi = smp->own_s[i] > hi ? smp->own_s[i] : hi;
        used++;
    }
    if (used > 0) {
        mine[0] = sum / (double)used;
        mine[1] = lo;
        mine[2] = hi;
    }
    double *all = NULL;
    if (env->rank == 0) {
        all = malloc((size_t)env->nprocs * 3 * sizeof *all);
        if (all == NULL)
            return hm_error_set(err, "out of memory for per-rank statistics");
    }
    int rc = MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, env->comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return hm_op_mpi_check(rc, "gathering per-rank statistics", err);
    }
    *out = all;
    return 0;
}

static int summarize_valid(const double *v, const bool *valid, size_t n, double trim,
                           double ci_level, hm_bench_summary *out, hm_error *err)
{
    size_t count = 0;
    double *vals = hm_bench_valid_values(v, valid, n, &count);
    if (vals == NULL)
        return hm_error_set(err, "out of memory for %zu samples", n);
    int rc = hm_bench_summarize(vals, count, trim, ci_level, out, err);
    free(vals);
    return rc;
}

/* Measures one (op, size, method) on env->comm; rank 0 keeps the result.
 * Returns 0, -1 (failed here, err set) or FAILED_ELSEWHERE. */
static int measure_case(run_state *s, hm_bench_env *env, const hm_op *op, int64_t size,
                        hm_bench_method method, int pass, hm_error *err)
{
    const hm_bench_opts *o = s->o;
    const hm_bench_method_def *def = hm_bench_method_get(method);
    hm_buffer_mode buffers = o->buffers_given ? o->buffers : def->buffers;
    hm_op_params params = {
        .comm = env->comm,
        .size_bytes = size,
        .root = o->root,
        .buffers = buffers,
        .rotate_bytes = s->rotate_bytes,
        .pool = &s->pool,
        .timer = &s->timer,
    };
    hm_op_ctx ctx;
    int st = agree(env->comm, hm_op_ctx_init(&ctx, op, &params, err), err);
    if (st != 0)
        return st;
    hm_bench_samples smp;
    memset(&smp, 0, sizeof smp);
    /* IMB carries n_sample over from the previous (smaller) size; points
     * here come in any order, so each starts from MSGSPERSAMPLE (the carry
     * binds only when one call takes more than 10 ms). */
    env->imb_n_sample_prev = 0;
    int rc = def->measure(env, op, &ctx, &smp, err);
    hm_op_ctx_free(&ctx);
    hm_bench_result r;
    memset(&r, 0, sizeof r);
    r.op = op;
    r.size = op->uses_size ? size : 0;
    r.nprocs = env->nprocs;
    r.method = method;
    r.root = o->root;
    r.n_total = smp.n;
    r.pass = pass;
    r.buffers = buffers;
    r.late = smp.late;
    r.overrun = smp.overrun;
    r.late_stage_start = smp.late_stage_start;
    r.late_previous = smp.late_previous;
    r.late_woke = smp.late_woke;
    r.wide_window = smp.wide_window;
    r.iterations = smp.iterations;
    r.warmup = smp.warmup;
    r.rank_samples = def->rank_samples;
    r.has_global = def->synchronized;
    r.delta_final_s = smp.delta_final_s;
    /* The ranks' means are summarized whole: OSU and IMB average every rank. */
    double trim = def->rank_samples ? 0.0 : o->trim;
    if (rc == 0)
        rc = summarize_valid(smp.local_s, smp.valid, smp.n, trim, o->ci_level, &r.local, err);
    if (rc == 0 && r.has_global)
        rc = summarize_valid(smp.global_s, smp.valid, smp.n, trim, o->ci_level, &r.global, err);
    if (rc == 0 && o->per_rank)
        rc = gather_rank_stats(env, &smp, &r.rank_stats, err);
    if (rc != 0 || env->rank != 0) {
        free(r.rank_stats);
        hm_bench_samples_free(&smp);
        return rc;
    }
    if (o->raw)
        r.samples = smp;
    else
        hm_bench_samples_free(&smp);
    /* By the clocks as checked after the sync; the end check may take it back. */
    hm_bench_clock_judge(&r, s->meta.clock_error_start_s, o->clock_error_share,
                         s->meta.late_tolerance_us * 1e-6);
    if (s->table != NULL)
        hm_bench_table_row(s->table, &r);
    if (push_result(s, &r, err) != 0) {
        hm_bench_result_free(&r);
        return -1;
    }
    return 0;
}

/* More ranks on a node than online CPUs? Then a waiting rank keeps
 * another off its CPU, or wakes up tens of microseconds late: most
 * synchronized launches come out invalid. The output says so. */
static int detect_oversubscription(run_state *s, hm_error *err)
{
    MPI_Comm node;
    int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, s->rank, MPI_INFO_NULL,
                                 &node);
    if (rc != MPI_SUCCESS)
        return hm_op_mpi_check(rc, "MPI_Comm_split_type(SHARED)", err);
    int on_node = 1;
    rc = MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS)
        return hm_op_mpi_check(rc, "MPI_Comm_size", err);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int mine = cpus > 0 && on_node > cpus, any = 0;
    rc = MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        return hm_op_mpi_check(rc, "reducing oversubscription", err);
    s->meta.oversubscribed = any != 0;
    return 0;
}

/* How long after the scheduled start a rank may leave its wait: by
 * default ten timer steps (a spin exits within one), at least 100 ns. */
static int64_t late_tolerance_ns(const run_state *s)
{
    if (s->o->late_tolerance_ns >= 0)
        return s->o->late_tolerance_ns;
    double ns = 10.0 * s->timer.resolution_ns;
    return ns > 100.0 ? (int64_t)ns : 100;
}

static int64_t spin_ns(const run_state *s) { return s->o->spin_ns; }

/* Ranks outside a process count wait here while the others measure; a
 * blocking collective would busy-poll and take CPU from the ranks being
 * measured when they share cores, so poll a nonblocking barrier and
 * sleep in between. */
static int idle_barrier(hm_error *err)
{
    MPI_Request req;
    if (hm_op_mpi_check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier", err) != 0)
        return -1;
    for (;;) {
        int done = 0;
        if (hm_op_mpi_check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test", err) != 0)
            return -1;
        if (done)
            return 0;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = 200000};
        (void)nanosleep(&nap, NULL);
    }
}

/* One point of the sweep. */
typedef struct point {
    const hm_op *op;
    int64_t size;
    hm_bench_method method;
} point;

/* The points of one process count, in the order given. *n_out points. */
static point *list_points(const hm_bench_opts *o, size_t *n_out, hm_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < o->n_ops; i++)
        n += (o->ops[i]->uses_size ? o->n_sizes : 1) * o->n_methods;
    point *pts = malloc((n > 0 ? n : 1) * sizeof *pts);
    if (pts == NULL) {
        hm_error_set(err, "out of memory for %zu points", n);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < o->n_ops; i++) {
        const hm_op *op = o->ops[i];
        size_t n_sizes = op->uses_size ? o->n_sizes : 1;
        for (size_t j = 0; j < n_sizes; j++)
            for (size_t m = 0; m < o->n_methods; m++)
                pts[k++] = (point){op, op->uses_size ? o->sizes[j] : 0, o->methods[m]};
    }
    *n_out = n;
    return pts;
}

/* Every point on the sub-communicator of the first p ranks, in the pass's
 * shuffled order (the same on every rank: the seed is on the command line). */
static int measure_on(run_state *s, int p, int pass, hm_error *err)
{
    const hm_bench_opts *o = s->o;
    MPI_Comm comm;
    int rc = MPI_Comm_split(MPI_COMM_WORLD, s->rank < p ? 0 : MPI_UNDEFINED, s->rank, &comm);
    if (rc != MPI_SUCCESS)
        return hm_op_mpi_check(rc, "creating the sub-communicator", err);
    if (comm == MPI_COMM_NULL)
        return 0; /* not part of this process count */
    int status = hm_op_mpi_check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN),
                                 "MPI_Comm_set_errhandler", err);
    hm_bench_env env = {.opts = o, .clock = &s->clock, .comm = comm, .rank = 0, .nprocs = p};
    if (status == 0)
        status = hm_op_mpi_check(MPI_Comm_rank(comm, &env.rank), "MPI_Comm_rank", err);
    if (status == 0)
        status = hm_clock_bcast_bound_ns(comm, &s->clock, o->bcast_probes, &env.t_bcast_ns, err);
    env.t_bcast_probed_ns = env.t_bcast_ns;
    env.late_tolerance_ns = late_tolerance_ns(s);
    env.spin_ns = spin_ns(s);
    env.oversubscribed = s->meta.oversubscribed;
    size_t n = 0;
    point *pts = status == 0 ? list_points(o, &n, err) : NULL;
    size_t *order = pts != NULL ? malloc((n > 0 ? n : 1) * sizeof *order) : NULL;
    if (status == 0 && order == NULL)
        status = pts == NULL ? -1 : hm_error_set(err, "out of memory for %zu points", n);
    for (size_t i = 0; status == 0 && i < n; i++)
        order[i] = i;
    if (status == 0 && o->shuffle)
        hm_shuffle(order, n, o->seed * UINT64_C(1000003) + (uint64_t)pass * 7919u + (uint64_t)p);
    for (size_t i = 0; i < n && status == 0; i++) {
        const point *pt = &pts[order[i]];
        status = measure_case(s, &env, pt->op, pt->size, pt->method, pass, err);
    }
    free(order);
    free(pts);
    MPI_Comm_free(&comm);
    return status;
}

static void fill_library_meta(run_state *s)
{
    hm_bench_meta *m = &s->meta;
    hm_mpi_library(m->mpi_library, sizeof m->mpi_library);
    if (MPI_Get_version(&m->mpi_version, &m->mpi_subversion) != MPI_SUCCESS)
        m->mpi_version = m->mpi_subversion = 0;
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(m->started_at, sizeof m->started_at, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

/* Host names of all ranks, distinct, in rank order (rank 0). */
static int gather_hosts(run_state *s, hm_error *err)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    if (hm_op_mpi_check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name", err) != 0)
        return -1;
    char *all = NULL;
    if (s->rank == 0) {
        all = calloc((size_t)s->world, MPI_MAX_PROCESSOR_NAME);
        s->meta.hosts = calloc((size_t)s->world, sizeof *s->meta.hosts);
        if (all == NULL || s->meta.hosts == NULL) {
            free(all);
            return hm_error_set(err, "out of memory for host names");
        }
    }
    int rc = MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME,
                        MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        free(all);
        return hm_op_mpi_check(rc, "gathering host names", err);
    }
    for (int r = 0; s->rank == 0 && r < s->world; r++) {
        char *h = all + (size_t)r * MPI_MAX_PROCESSOR_NAME;
        h[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
        bool seen = false;
        for (size_t i = 0; i < s->meta.n_hosts && !seen; i++)
            seen = strcmp(s->meta.hosts[i], h) == 0;
        if (!seen && (s->meta.hosts[s->meta.n_hosts] = strdup(h)) != NULL)
            s->meta.n_hosts++;
    }
    free(all);
    return 0;
}

/* Clock sync and its residual; at the end of the run, drift. */
static int sync_clocks(run_state *s, int64_t *residual_own_ns, hm_error *err)
{
    const hm_bench_opts *o = s->o;
    hm_clock_sync_opts so;
    hm_clock_sync_opts_default(&so);
    so.algo = o->sync;
    so.rounds_without_improvement = o->sync_rounds;
    so.ping_shared_clock = o->sync_ping_shared;
    so.simulated_skew_ns = o->simulated_skew_ns;
    so.simulated_drift_ppm = o->simulated_drift_ppm;
    hm_clock_sync_info info;
    if (hm_clock_sync(MPI_COMM_WORLD, &s->timer, &so, &s->clock, &info, err) != 0)
        return -1;
    hm_clock_residual_info res;
    if (hm_clock_residual(MPI_COMM_WORLD, &s->clock, o->sync_rounds, &res, err) != 0)
        return -1;
    *residual_own_ns = res.own_ns;
    s->meta.clock_error_start_s = (double)res.proven_spread_ns * 1e-9;
    s->meta.sync_nodes = info.nodes;
    s->meta.sync_ranks = info.synced_ranks;
    s->meta.sync_elapsed_s = info.elapsed_s;
    s->meta.residual_max_s = (double)res.max_abs_ns * 1e-9;
    s->meta.simulated_skew_s = (double)o->simulated_skew_ns * 1e-9;
    double mine = (double)s->clock.offset_ns * 1e-9;
    if (s->rank == 0 && s->meta.offsets_s == NULL) {
        s->meta.offsets_s = malloc((size_t)s->world * sizeof *s->meta.offsets_s);
        if (s->meta.offsets_s == NULL)
            return hm_error_set(err, "out of memory for %d clock offsets", s->world);
    }
    int rc = MPI_Gather(&mine, 1, MPI_DOUBLE, s->meta.offsets_s, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        return hm_op_mpi_check(rc, "gathering clock offsets", err);
    return 0;
}

static int measure_drift(run_state *s, int64_t residual_start_ns, hm_error *err)
{
    hm_clock_residual_info res;
    if (hm_clock_residual(MPI_COMM_WORLD, &s->clock, s->o->sync_rounds, &res, err) != 0)
        return -1;
    int64_t change = res.own_ns - residual_start_ns;
    if (change < 0)
        change = -change;
    int64_t drift = 0;
    int rc = MPI_Allreduce(&change, &drift, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
        return hm_op_mpi_check(rc, "reducing clock drift", err);
    /* With several passes (a sync each) the worst end of a pass counts. */
    s->meta.residual_end_max_s = fmax(s->meta.residual_end_max_s, (double)res.max_abs_ns * 1e-9);
    s->meta.clock_error_end_s =
        fmax(s->meta.clock_error_end_s, (double)res.proven_spread_ns * 1e-9);
    s->meta.drift_max_s = fmax(s->meta.drift_max_s, (double)drift * 1e-9);
    return 0;
}

/* Rank 0 opens the JSON file before measuring, so a bad path fails in
 * seconds rather than after the whole run. */
static int open_json(run_state *s, hm_error *err)
{
    const char *path = s->o->json_path;
    if (s->rank != 0 || path == NULL)
        return 0;
    s->json = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (s->json == NULL)
        return hm_error_errno(err, "--json: cannot write %s", path);
    return 0;
}

static int write_json(run_state *s, hm_error *err)
{
    const char *path = s->o->json_path;
    int rc = hm_bench_write_json(s->json, s->o, &s->meta, s->results, s->n_results);
    if (s->json == stdout)
        rc |= fflush(s->json);
    else
        rc |= fclose(s->json);
    s->json = NULL;
    if (rc != 0)
        return hm_error_errno(err, "writing %s", path);
    return 0;
}

static int run(run_state *s, hm_error *err)
{
    const hm_bench_opts *o = s->o;
    int st = agree(MPI_COMM_WORLD, open_json(s, err), err);
    if (st == 0)
        st = agree(MPI_COMM_WORLD, hm_mpi_timer_init(&s->timer, o->timer, err), err);
    if (st != 0)
        return st;
    int64_t residual_own = 0;
    if (sync_clocks(s, &residual_own, err) != 0 || gather_hosts(s, err) != 0 ||
        detect_oversubscription(s, err) != 0)
        return -1;
    s->rotate_bytes = o->rotate_bytes > 0 ? (size_t)o->rotate_bytes
                                          : hm_buffer_rotate_default_bytes();
    hm_bench_meta *m = &s->meta;
    m->timer = s->timer.name;
    m->timer_resolution_ns = s->timer.resolution_ns;
    m->sync = hm_sync_algo_names[o->sync];
    m->sync_rounds = o->sync_rounds;
    m->sync_ping_shared = o->sync_ping_shared;
    m->nprocs = s->world;
    m->spin_us = (double)spin_ns(s) / 1000.0;
    m->late_tolerance_us = (double)late_tolerance_ns(s) / 1000.0;
    m->clock_error_share = o->clock_error_share;
    m->rotate_bytes = o->buffers == HM_BUFFERS_ROTATE ? (double)s->rotate_bytes : 0.0;
    fill_library_meta(s);
    if (s->rank == 0 && s->table != NULL) {
        if (m->oversubscribed)
            fprintf(s->table, "# oversubscribed (more ranks than CPUs): synchronized launches "
                              "cannot start on time, most will be invalid\n");
        size_t per_pass = 0;
        point *pts = list_points(o, &per_pass, err);
        free(pts);
        size_t n_counts = o->n_nprocs > 0 ? o->n_nprocs : 1;
        /* `hushmon bench` reads this line for its progress total. */
        fprintf(s->table, "# planned %zu results (%zu points x %d passes)\n",
                per_pass * n_counts * (size_t)o->passes, per_pass * n_counts, o->passes);
        hm_bench_table_header(s->table);
    }
    size_t n_counts = o->n_nprocs > 0 ? o->n_nprocs : 1;
    for (int pass = 0; pass < o->passes; pass++) {
        /* Each pass on a fresh clock sync: between-pass variation then
         * includes the sync's own error, as between runs. */
        if (pass > 0 && (measure_drift(s, residual_own, err) != 0 ||
                         sync_clocks(s, &residual_own, err) != 0))
            return -1;
        for (size_t i = 0; i < n_counts; i++) {
            int p = o->n_nprocs > 0 ? (int)o->nprocs[i] : s->world;
            st = measure_on(s, p, pass, err);
            if (st == -1)
                return -1;
            if (idle_barrier(err) != 0)
                return -1;
            /* Ranks outside this count wait here for the others. */
            st = agree(MPI_COMM_WORLD, st, err);
            if (st != 0)
                return st;
        }
    }
    if (measure_drift(s, residual_own, err) != 0)
        return -1;
    if (s->rank == 0 && s->table != NULL)
        fprintf(s->table,
                "# timer %s, sync %s: residual offset %.3f us after sync, %.3f us at the end "
                "(drift %.3f us)\n",
                m->timer, m->sync, m->residual_max_s * 1e6, m->residual_end_max_s * 1e6,
                m->drift_max_s * 1e6);
    hm_bench_clock_final(s->rank == 0 ? s->table : NULL, m, s->results, s->n_results);
    if (s->rank == 0)
        hm_bench_table_points(s->table, o, m, s->results, s->n_results);
    if (s->json != NULL && write_json(s, err) != 0)
        return -1;
    return 0;
}

static void free_state(run_state *s)
{
    for (size_t i = 0; i < s->n_results; i++)
        hm_bench_result_free(&s->results[i]);
    free(s->results);
    for (size_t i = 0; i < s->meta.n_hosts; i++)
        free(s->meta.hosts[i]);
    free(s->meta.hosts);
    free(s->meta.offsets_s);
    hm_buffer_pool_free(&s->pool);
    if (s->json != NULL && s->json != stdout)
        fclose(s->json);
}

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, PROGRAM ": MPI_Init failed\n");
        return 1;
    }
    run_state s;
    memset(&s, 0, sizeof s);
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.world);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    hm_bench_opts o;
    hm_error err = {{0}};
    int code = 0;
    /* Same argv on every rank: same verdict, no communication needed. A
     * launcher of another MPI before the process count: it is why there is
     * one rank. */
    int rc = hm_bench_parse(argc, argv, &o, &err);
    if (rc == 0)
        rc = hm_mpi_launch_check(s.world, &err);
    if (rc == 0 && !o.help && !o.list)
        rc = hm_bench_check_ranks(&o, s.world, &err);
    if (rc != 0) {
        if (s.rank == 0)
            hm_error_print(PROGRAM, &err);
        code = 2;
    } else if (o.help || o.list) {
        if (s.rank == 0) {
            if (o.help)
                hm_bench_print_help(stdout);
            else
                hm_bench_print_list(stdout);
        }
    } else {
        s.o = &o;
        bool json_stdout = o.json_path != NULL && strcmp(o.json_path, "-") == 0;
        s.table = o.quiet ? NULL : (json_stdout ? stderr : stdout);
        rc = run(&s, &err);
        if (rc == FAILED_HERE_AGREED)
            hm_error_print(PROGRAM, &err);
        if (rc == -1) {
            hm_error_print(PROGRAM, &err);
            /* Failed inside a collective's neighbourhood: the other ranks
             * may be blocked in a call this rank will never make. */
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        code = rc == 0 ? 0 : 1;
        free_state(&s);
    }
    hm_bench_opts_free(&o);
    MPI_Finalize();
    return code;
}
