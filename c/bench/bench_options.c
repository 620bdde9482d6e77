#include "bench_options.h"

#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hm_parse.h"
#include "hm_mpi_timer.h"

const char *const hm_bench_method_names[HM_BENCH_METHODS] = {"sync", "loop", "loop_barrier",
                                                             "osu", "imb"};

enum {
    OPT_SYNC = 256, OPT_SYNC_ROUNDS, OPT_SYNC_PING_SHARED, OPT_BCAST_PROBES, OPT_STAGE,
    OPT_WARMUP, OPT_INVALID, OPT_GAMMA, OPT_SHRINK, OPT_WIDE, OPT_RSE, OPT_MIN_VALID, OPT_MAX_TOTAL,
    OPT_MAX_VALID, OPT_TRIM, OPT_CI, OPT_LOOP_ITERS, OPT_BUFFERS, OPT_ROTATE, OPT_JSON,
    OPT_PER_RANK, OPT_RAW, OPT_SPIN, OPT_SKEW, OPT_DRIFT_PPM, OPT_CLOCK_SHARE, OPT_LATE_TOL, OPT_QUIET, OPT_LIST, OPT_TIMER, OPT_ROOT, OPT_METHOD, OPT_NPROCS,
    OPT_PASSES, OPT_SEED, OPT_IN_ORDER, OPT_BUDGET, OPT_MAX_LAUNCHES, OPT_DISAGREE,
};

static const struct option long_opts[] = {
    {"op", required_argument, NULL, 'o'},
    {"sizes", required_argument, NULL, 's'},
    {"nprocs", required_argument, NULL, OPT_NPROCS},
    {"method", required_argument, NULL, OPT_METHOD},
    {"root", required_argument, NULL, OPT_ROOT},
    {"timer", required_argument, NULL, OPT_TIMER},
    {"sync", required_argument, NULL, OPT_SYNC},
    {"sync-rounds", required_argument, NULL, OPT_SYNC_ROUNDS},
    {"sync-ping-shared", no_argument, NULL, OPT_SYNC_PING_SHARED},
    {"bcast-probes", required_argument, NULL, OPT_BCAST_PROBES},
    {"spin-us", required_argument, NULL, OPT_SPIN},
    {"simulate-skew-us", required_argument, NULL, OPT_SKEW},
    {"simulate-drift-ppm", required_argument, NULL, OPT_DRIFT_PPM},
    {"clock-error-share", required_argument, NULL, OPT_CLOCK_SHARE},
    {"late-tolerance-us", required_argument, NULL, OPT_LATE_TOL},
    {"stage-launches", required_argument, NULL, OPT_STAGE},
    {"warmup-launches", required_argument, NULL, OPT_WARMUP},
    {"invalid-fraction", required_argument, NULL, OPT_INVALID},
    {"gamma", required_argument, NULL, OPT_GAMMA},
    {"shrink-after", required_argument, NULL, OPT_SHRINK},
    {"wide-factor", required_argument, NULL, OPT_WIDE},
    {"rse", required_argument, NULL, OPT_RSE},
    {"min-valid", required_argument, NULL, OPT_MIN_VALID},
    {"max-total", required_argument, NULL, OPT_MAX_TOTAL},
    {"max-valid", required_argument, NULL, OPT_MAX_VALID},
    {"trim", required_argument, NULL, OPT_TRIM},
    {"ci-level", required_argument, NULL, OPT_CI},
    {"loop-iters", required_argument, NULL, OPT_LOOP_ITERS},
    {"buffers", required_argument, NULL, OPT_BUFFERS},
    {"rotate-bytes", required_argument, NULL, OPT_ROTATE},
    {"passes", required_argument, NULL, OPT_PASSES},
    {"seed", required_argument, NULL, OPT_SEED},
    {"in-order", no_argument, NULL, OPT_IN_ORDER},
    {"budget-ms", required_argument, NULL, OPT_BUDGET},
    {"max-launches", required_argument, NULL, OPT_MAX_LAUNCHES},
    {"disagree-share", required_argument, NULL, OPT_DISAGREE},
    {"json", required_argument, NULL, OPT_JSON},
    {"per-rank", no_argument, NULL, OPT_PER_RANK},
    {"raw", no_argument, NULL, OPT_RAW},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"list", no_argument, NULL, OPT_LIST},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void hm_bench_print_help(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np N hushmon-bench [options]\n"
            "Times MPI collectives with synchronized launches (MPIPerf method).\n\n"
            "what to measure:\n"
            "  --op LIST              operations, comma-separated, or 'all' (default bcast)\n"
            "  --sizes LIST           message sizes in bytes: 0,8,1K  1:1M:x2  0:4K:+512\n"
            "                         (default 1:1M:x4)\n"
            "  --nprocs LIST          process counts to sweep (sub-communicators of the first\n"
            "                         ranks; default all ranks)\n"
            "  --method LIST          sync, loop, loop_barrier, osu, imb (default sync);\n"
            "                         osu and imb follow OSU Micro-Benchmarks 7.x and\n"
            "                         IMB-MPI1 (docs/bench.md)\n"
            "  --root R               root of rooted operations (default 0)\n"
            "  --buffers MODE         reuse | rotate (default rotate: a pool of\n"
            "                         --rotate-bytes, default 2x last-level cache; osu and\n"
            "                         imb reuse unless --buffers is given; rotate is\n"
            "                         IMB's -off_cache)\n"
            "  --rotate-bytes SIZE    pool size when rotating\n\n"
            "clocks:\n"
            "  --timer NAME           monotonic, monotonic_raw, gettimeofday, tsc, mpi_wtime\n"
            "                         (default monotonic)\n"
            "  --sync ALGO            linear, ring, tree (default ring)\n"
            "  --sync-rounds D        stop a ping-pong after D rounds without a smaller\n"
            "                         RTT (default 100)\n"
            "  --sync-ping-shared     ping-pong even ranks that share a node's clock\n"
            "  --bcast-probes N       broadcasts behind the t_bcast bound (default 10)\n"
            "  --spin-us US           wait for a launch by spinning its last US microseconds,\n"
            "                         sleeping before (default 200)\n"
            "  --simulate-skew-us US  make rank r's clock read r*US ahead, to check the clock\n"
            "                         sync on one machine (default 0)\n"
            "  --simulate-drift-ppm PPM  make rank r's clock run r*PPM ppm fast, as clocks\n"
            "                         calibrated by each rank do; the sync is not told, so\n"
            "                         the clock check must catch it (default 0)\n"
            "  --clock-error-share X  a synchronized result is not valid when the ranks'\n"
            "                         clocks disagreed by more than X of its mean time and\n"
            "                         more than the late tolerance (default 0.1)\n\n"
            "schedule and stop rules (sync method):\n"
            "  --stage-launches K     launches per stage (default 8)\n"
            "  --warmup-launches K'   launches of warm-up stage 0, discarded (default 4)\n"
            "  --late-tolerance-us US a launch is late when a rank leaves its wait more than\n"
            "                         US after the start (default 10 timer steps, >= 0.1)\n"
            "  --invalid-fraction G   grow the window when more of a stage is invalid\n"
            "                         (default 0.25)\n"
            "  --gamma X              window growth factor (default 1.1)\n"
            "  --shrink-after N       shrink the window after N calm stages, 0 = never\n"
            "                         (default 1)\n"
            "  --wide-factor F        set aside valid launches timed under a window more than\n"
            "                         F times the point's narrowest, 0 = never (default 4)\n"
            "  --rse X                stop at relative standard error <= X ... (default 0.05)\n"
            "  --min-valid N          ... with at least N valid launches (default 10)\n"
            "  --max-total N          or stop beyond N launches (default 100)\n"
            "  --max-valid N          or beyond N valid launches (default 30)\n"
            "  --trim X               fraction dropped at each end (default 0.25)\n"
            "  --ci-level P           confidence level of ci_low/ci_high (default 0.95)\n"
            "  --loop-iters N         launches per sample of the loop methods (default 100)\n\n"
            "repeatability:\n"
            "  --passes N             independent passes over every point, each with a fresh\n"
            "                         clock sync; a point's figure is the median (default 1)\n"
            "  --seed S               order of the points in each pass (default 1)\n"
            "  --in-order             measure the points in the order given, not shuffled\n"
            "  --budget-ms MS         sync: keep launching a point for MS per pass before the\n"
            "                         stop rule may end it; 0 = count-based only (default 0)\n"
            "  --max-launches N       launches of a point at most, with a budget (default\n"
            "                         100000)\n"
            "  --disagree-share X     flag a point whose passes fall into groups more than\n"
            "                         X of the median apart (default 0.25)\n\n"
            "output:\n"
            "  --json FILE|-          results as JSON (table goes to stderr with -)\n"
            "  --per-rank             per-rank mean/min/max in the JSON\n"
            "  --raw                  every launch's times in the JSON\n"
            "  --quiet                no table\n"
            "  --list                 list the operations and exit\n"
            "  --help                 this text\n\n"
            "operations:\n");
    hm_bench_print_list(out);
}

void hm_bench_print_list(FILE *out)
{
    for (size_t i = 0; i < hm_op_count(); i++) {
        const hm_op *op = hm_op_at(i);
        fprintf(out, "  %-22s %s\n", op->name, op->description);
    }
}

static void set_defaults(hm_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->methods[0] = HM_METHOD_SYNC;
    o->n_methods = 1;
    o->timer = "monotonic";
    o->sync = HM_SYNC_RING;
    o->sync_rounds = 100;
    o->bcast_probes = 10;
    o->spin_ns = 200000;
    o->late_tolerance_ns = -1;
    o->clock_error_share = 0.1;
    hm_schedule_params_default(&o->schedule);
    hm_stop_rule_default(&o->stop);
    o->trim = 0.25;
    o->ci_level = 0.95;
    o->loop_iters = 100;
    o->buffers = HM_BUFFERS_ROTATE;
    o->passes = 1;
    o->seed = 1;
    o->shuffle = true;
    o->budget_ns = 0;
    o->max_launches = 100000;
    o->disagree_share = 0.25;
    o->ops_text = "bcast";
    o->sizes_text = "1:1M:x4";
    o->methods_text = "sync";
}

/* Calls item() on each element of a comma-separated list. */
static int for_each_item(const char *list, const char *what, hm_bench_opts *o,
                         int (*item)(hm_bench_opts *, const char *, hm_error *), hm_error *err)
{
    if (list[0] == '\0')
        return hm_error_set(err, "empty %s list", what);
    char *copy = strdup(list);
    if (copy == NULL)
        return hm_error_set(err, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL && rc == 0;
         tok = strtok_r(NULL, ",", &save))
        rc = item(o, tok, err);
    free(copy);
    return rc;
}

static int add_op(hm_bench_opts *o, const char *name, hm_error *err)
{
    if (strcmp(name, "all") == 0) {
        for (size_t i = 0; i < hm_op_count(); i++)
            if (add_op(o, hm_op_at(i)->name, err) != 0)
                return -1;
        return 0;
    }
    const hm_op *op = hm_op_find(name);
    if (op == NULL)
        return hm_error_set(err, "unknown operation '%s' (see --list)", name);
    for (size_t i = 0; i < o->n_ops; i++)
        if (o->ops[i] == op)
            return 0;
    const hm_op **grown = realloc(o->ops, (o->n_ops + 1) * sizeof *grown);
    if (grown == NULL)
        return hm_error_set(err, "out of memory");
    o->ops = grown;
    o->ops[o->n_ops++] = op;
    return 0;
}

static int add_method(hm_bench_opts *o, const char *name, hm_error *err)
{
    for (int m = 0; m < HM_BENCH_METHODS; m++) {
        if (strcmp(name, hm_bench_method_names[m]) != 0)
            continue;
        for (size_t i = 0; i < o->n_methods; i++)
            if (o->methods[i] == (hm_bench_method)m)
                return 0;
        o->methods[o->n_methods++] = (hm_bench_method)m;
        return 0;
    }
    return hm_error_set(err, "unknown method '%s' (expected sync, loop, loop_barrier, osu, imb)",
                        name);
}

static int parse_int(const char *s, const char *opt, int64_t min, int64_t max, int *out,
                     hm_error *err)
{
    int64_t v;
    if (hm_parse_int64(s, min, max, 0, &v, err) != 0)
        return hm_error_wrap(err, "%s", opt);
    *out = (int)v;
    return 0;
}

static int parse_dbl(const char *s, const char *opt, double min, double max, double *out,
                     hm_error *err)
{
    if (hm_parse_double(s, min, max, out, err) != 0)
        return hm_error_wrap(err, "%s", opt);
    return 0;
}

static int apply(hm_bench_opts *o, int c, const char *arg, hm_error *err)
{
    hm_schedule_params *sp = &o->schedule;
    hm_stop_rule *st = &o->stop;
    switch (c) {
    case 'o':
        o->ops_text = arg;
        return 0;
    case 's':
        o->sizes_text = arg;
        return 0;
    case OPT_NPROCS:
        o->nprocs_text = arg;
        return 0;
    case OPT_METHOD:
        o->methods_text = arg;
        return 0;
    case OPT_ROOT:
        return parse_int(arg, "--root", 0, 1 << 30, &o->root, err);
    case OPT_TIMER:
        if (!hm_mpi_timer_name_valid(arg))
            return hm_error_set(err, "--timer: unknown timer '%s' (expected monotonic, "
                                     "monotonic_raw, gettimeofday, tsc, mpi_wtime)", arg);
        o->timer = arg;
        return 0;
    case OPT_SYNC:
        return hm_sync_algo_parse(arg, &o->sync, err) == 0 ? 0 : hm_error_wrap(err, "--sync");
    case OPT_SYNC_ROUNDS:
        return parse_int(arg, "--sync-rounds", 1, 1000000, &o->sync_rounds, err);
    case OPT_SYNC_PING_SHARED:
        o->sync_ping_shared = true;
        return 0;
    case OPT_BCAST_PROBES:
        return parse_int(arg, "--bcast-probes", 1, 100000, &o->bcast_probes, err);
    case OPT_SPIN: {
        double us;
        if (parse_dbl(arg, "--spin-us", 0.0, 1e7, &us, err) != 0)
            return -1;
        o->spin_ns = (int64_t)(us * 1000.0);
        return 0;
    }
    case OPT_LATE_TOL: {
        double us;
        if (parse_dbl(arg, "--late-tolerance-us", 0.0, 1e9, &us, err) != 0)
            return -1;
        o->late_tolerance_ns = (int64_t)(us * 1000.0);
        return 0;
    }
    case OPT_SKEW: {
        double us;
        if (parse_dbl(arg, "--simulate-skew-us", -1e9, 1e9, &us, err) != 0)
            return -1;
        o->simulated_skew_ns = (int64_t)(us * 1000.0);
        return 0;
    }
    case OPT_DRIFT_PPM:
        return parse_dbl(arg, "--simulate-drift-ppm", -1e4, 1e4, &o->simulated_drift_ppm, err);
    case OPT_CLOCK_SHARE:
        return parse_dbl(arg, "--clock-error-share", 0.0, 1e6, &o->clock_error_share, err);
    case OPT_STAGE:
        return parse_int(arg, "--stage-launches", 1, 100000, &sp->launches_per_stage, err);
    case OPT_WARMUP:
        return parse_int(arg, "--warmup-launches", 1, 100000, &sp->warmup_launches, err);
    case OPT_INVALID:
        return parse_dbl(arg, "--invalid-fraction", 0.0, 1.0, &sp->invalid_fraction, err);
    case OPT_GAMMA:
        return parse_dbl(arg, "--gamma", 1.0001, 10.0, &sp->gamma, err);
    case OPT_SHRINK:
        return parse_int(arg, "--shrink-after", 0, 100000, &sp->shrink_after_calm, err);
    case OPT_WIDE:
        return parse_dbl(arg, "--wide-factor", 0.0, 1e9, &sp->wide_factor, err);
    case OPT_RSE:
        return parse_dbl(arg, "--rse", 0.0, 1e6, &st->rse_max, err);
    case OPT_MIN_VALID:
        return parse_int(arg, "--min-valid", 1, 100000000, &st->min_valid, err);
    case OPT_MAX_TOTAL:
        return parse_int(arg, "--max-total", 1, 100000000, &st->max_total, err);
    case OPT_MAX_VALID:
        return parse_int(arg, "--max-valid", 1, 100000000, &st->max_valid, err);
    case OPT_TRIM:
        return parse_dbl(arg, "--trim", 0.0, 0.49, &o->trim, err);
    case OPT_CI:
        return parse_dbl(arg, "--ci-level", 0.5, 0.9999, &o->ci_level, err);
    case OPT_LOOP_ITERS:
        return parse_int(arg, "--loop-iters", 1, 100000000, &o->loop_iters, err);
    case OPT_PASSES:
        return parse_int(arg, "--passes", 1, 10000, &o->passes, err);
    case OPT_SEED: {
        int64_t v;
        if (hm_parse_int64(arg, 0, INT64_MAX, 0, &v, err) != 0)
            return hm_error_wrap(err, "--seed");
        o->seed = (uint64_t)v;
        return 0;
    }
    case OPT_IN_ORDER:
        o->shuffle = false;
        return 0;
    case OPT_BUDGET: {
        double ms;
        if (parse_dbl(arg, "--budget-ms", 0.0, 1e7, &ms, err) != 0)
            return -1;
        o->budget_ns = ms * 1e6;
        return 0;
    }
    case OPT_MAX_LAUNCHES:
        return parse_int(arg, "--max-launches", 1, 100000000, &o->max_launches, err);
    case OPT_DISAGREE:
        return parse_dbl(arg, "--disagree-share", 0.0, 1e6, &o->disagree_share, err);
    case OPT_BUFFERS:
        o->buffers_given = true;
        if (strcmp(arg, "reuse") == 0)
            o->buffers = HM_BUFFERS_REUSE;
        else if (strcmp(arg, "rotate") == 0)
            o->buffers = HM_BUFFERS_ROTATE;
        else
            return hm_error_set(err, "--buffers: expected reuse or rotate, got '%s'", arg);
        return 0;
    case OPT_ROTATE:
        if (hm_parse_int64(arg, 4096, INT64_C(1) << 40, 1, &o->rotate_bytes, err) != 0)
            return hm_error_wrap(err, "--rotate-bytes");
        return 0;
    case OPT_JSON:
        o->json_path = arg;
        return 0;
    case OPT_PER_RANK:
        o->per_rank = true;
        return 0;
    case OPT_RAW:
        o->raw = true;
        return 0;
    case OPT_QUIET:
        o->quiet = true;
        return 0;
    case OPT_LIST:
        o->list = true;
        return 0;
    case 'h':
        o->help = true;
        return 0;
    }
    return hm_error_set(err, "internal: option %d not handled", c);
}

int hm_bench_parse(int argc, char **argv, hm_bench_opts *o, hm_error *err)
{
    set_defaults(o);
    optind = 0; /* GNU: full re-initialisation, so tests can parse twice */
    opterr = 0; /* our own one-line messages instead of getopt's */
    int c;
    while ((c = getopt_long(argc, argv, ":o:s:h", long_opts, NULL)) != -1) {
        if (c == '?') {
            if (optopt != 0)
                return hm_error_set(err, "unknown option '-%c' (see --help)", optopt);
            return hm_error_set(err, "unknown option '%s' (see --help)", argv[optind - 1]);
        }
        if (c == ':')
            return hm_error_set(err, "missing value for '%s'", argv[optind - 1]);
        if (apply(o, c, optarg, err) != 0)
            return -1;
    }
    if (optind < argc)
        return hm_error_set(err, "unexpected argument '%s' (see --help)", argv[optind]);
    if (o->help || o->list)
        return 0;
    if (for_each_item(o->ops_text, "--op", o, add_op, err) != 0)
        return -1;
    if (hm_parse_size_list(o->sizes_text, &o->sizes, &o->n_sizes, err) != 0)
        return hm_error_wrap(err, "--sizes");
    if (o->nprocs_text != NULL) {
        if (hm_parse_size_list(o->nprocs_text, &o->nprocs, &o->n_nprocs, err) != 0)
            return hm_error_wrap(err, "--nprocs");
        for (size_t i = 0; i < o->n_nprocs; i++)
            if (o->nprocs[i] < 1)
                return hm_error_set(err, "--nprocs: process count must be at least 1");
    }
    o->n_methods = 0;
    if (for_each_item(o->methods_text, "--method", o, add_method, err) != 0)
        return -1;
    return 0;
}

int hm_bench_check_ranks(const hm_bench_opts *o, int world_size, hm_error *err)
{
    int64_t smallest = world_size;
    for (size_t i = 0; i < o->n_nprocs; i++) {
        if (o->nprocs[i] > world_size)
            return hm_error_set(err, "--nprocs: %lld processes requested but only %d running",
                                (long long)o->nprocs[i], world_size);
        if (o->nprocs[i] < smallest)
            smallest = o->nprocs[i];
    }
    for (size_t i = 0; i < o->n_ops; i++)
        if (o->ops[i]->min_ranks > smallest)
            return hm_error_set(err, "%s needs at least %d processes, got %lld", o->ops[i]->name,
                                o->ops[i]->min_ranks, (long long)smallest);
    /* Counts and displacements of an n-rank exchange are MPI ints. */
    int64_t largest = world_size;
    if (o->n_nprocs > 0) {
        largest = 0;
        for (size_t i = 0; i < o->n_nprocs; i++)
            largest = o->nprocs[i] > largest ? o->nprocs[i] : largest;
    }
    for (size_t i = 0; i < o->n_ops; i++) {
        if (!o->ops[i]->uses_size)
            continue;
        for (size_t k = 0; k < o->n_sizes; k++)
            if (o->sizes[k] > INT_MAX / largest)
                return hm_error_set(err,
                                    "--sizes: %lld bytes x %lld processes does not fit an MPI "
                                    "count (%s)",
                                    (long long)o->sizes[k], (long long)largest, o->ops[i]->name);
    }
    if (o->root >= smallest)
        return hm_error_set(err, "--root %d is not a rank of a %lld-process run", o->root,
                            (long long)smallest);
    return 0;
}

void hm_bench_opts_free(hm_bench_opts *o)
{
    free(o->ops);
    free(o->sizes);
    free(o->nprocs);
    o->ops = NULL;
    o->sizes = NULL;
    o->nprocs = NULL;
}
