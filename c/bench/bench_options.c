#include "bench_options.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "hm_mpi_timer.h"
#include "hm_options.h"
#include "hm_parse.h"

const char *const hm_bench_method_names[HM_BENCH_METHODS] = {"sync", "loop", "loop_barrier",
                                                             "osu", "imb"};

static int set_timer(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    if (!hm_mpi_timer_name_valid(value))
        return hm_error_set(err, "--%s: unknown timer '%s' (expected monotonic, "
                                 "monotonic_raw, gettimeofday, tsc, mpi_wtime)", opt->name, value);
    ((hm_bench_opts *)base)->timer = value;
    return 0;
}

static int set_sync(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    if (hm_sync_algo_parse(value, &((hm_bench_opts *)base)->sync, err) != 0)
        return hm_error_wrap(err, "--%s", opt->name);
    return 0;
}

static int set_buffers(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    hm_bench_opts *o = base;
    o->buffers_given = true;
    if (strcmp(value, "reuse") == 0)
        o->buffers = HM_BUFFERS_REUSE;
    else if (strcmp(value, "rotate") == 0)
        o->buffers = HM_BUFFERS_ROTATE;
    else
        return hm_error_set(err, "--%s: expected reuse or rotate, got '%s'", opt->name, value);
    return 0;
}

#define AT(field) .offset = offsetof(hm_bench_opts, field)
static const hm_option option_rows[] = {
    {.kind = HM_OPT_HEADING, .help = "what to measure:"},
    {.name = "op", .letter = 'o', .kind = HM_OPT_STRING, AT(ops_text), .arg = "LIST",
     .help = "operations, comma-separated, or 'all' (default bcast)"},
    {.name = "sizes", .letter = 's', .kind = HM_OPT_STRING, AT(sizes_text), .arg = "LIST",
     .help = "message sizes in bytes: 0,8,1K  1:1M:x2  0:4K:+512\n(default 1:1M:x4)"},
    {.name = "nprocs", .kind = HM_OPT_STRING, AT(nprocs_text), .arg = "LIST",
     .help = "process counts to sweep (sub-communicators of the first\n"
             "ranks; default all ranks)"},
    {.name = "method", .kind = HM_OPT_STRING, AT(methods_text), .arg = "LIST",
     .help = "sync, loop, loop_barrier, osu, imb (default sync);\n"
             "osu and imb follow OSU Micro-Benchmarks 7.x and\n"
             "IMB-MPI1 (docs/bench.md)"},
    {.name = "root", .kind = HM_OPT_INT, AT(root), .arg = "R", .min = 0, .max = 1 << 30,
     .help = "root of rooted operations (default 0)"},
    {.name = "buffers", .kind = HM_OPT_CALL, .call = set_buffers, .arg = "MODE",
     .help = "reuse | rotate (default rotate: a pool of\n"
             "--rotate-bytes, default 2x last-level cache; osu and\n"
             "imb reuse unless --buffers is given; rotate is\n"
             "IMB's -off_cache)"},
    {.name = "rotate-bytes", .kind = HM_OPT_INT64, AT(rotate_bytes), .arg = "SIZE", .min = 4096,
     .max = INT64_C(1) << 40, .suffixes = true, .help = "pool size when rotating"},
    {.kind = HM_OPT_HEADING, .help = "clocks:"},
    {.name = "timer", .kind = HM_OPT_CALL, .call = set_timer, .arg = "NAME",
     .help = "monotonic, monotonic_raw, gettimeofday, tsc, mpi_wtime\n(default monotonic)"},
    {.name = "sync", .kind = HM_OPT_CALL, .call = set_sync, .arg = "ALGO",
     .help = "linear, ring, tree (default ring)"},
    {.name = "sync-rounds", .kind = HM_OPT_INT, AT(sync_rounds), .arg = "D", .min = 1,
     .max = 1000000,
     .help = "stop a ping-pong after D rounds without a smaller\nRTT (default 100)"},
    {.name = "sync-ping-shared", .kind = HM_OPT_SET, AT(sync_ping_shared),
     .help = "ping-pong even ranks that share a node's clock"},
    {.name = "bcast-probes", .kind = HM_OPT_INT, AT(bcast_probes), .arg = "N", .min = 1,
     .max = 100000, .help = "broadcasts behind the t_bcast bound (default 10)"},
    {.name = "spin-us", .kind = HM_OPT_SCALED, AT(spin_ns), .arg = "US", .dmin = 0, .dmax = 1e7,
     .scale = 1e3,
     .help = "wait for a launch by spinning its last US microseconds,\n"
             "sleeping before (default 200)"},
    {.name = "simulate-skew-us", .kind = HM_OPT_SCALED, AT(simulated_skew_ns), .arg = "US",
     .dmin = -1e9, .dmax = 1e9, .scale = 1e3,
     .help = "make rank r's clock read r*US ahead, to check the clock\n"
             "sync on one machine (default 0)"},
    {.name = "simulate-drift-ppm", .kind = HM_OPT_DOUBLE, AT(simulated_drift_ppm), .arg = "PPM",
     .dmin = -1e4, .dmax = 1e4,
     .help = "make rank r's clock run r*PPM ppm fast, as clocks\n"
             "calibrated by each rank do; the sync is not told, so\n"
             "the clock check must catch it (default 0)"},
    {.name = "clock-error-share", .kind = HM_OPT_DOUBLE, AT(clock_error_share), .arg = "X",
     .dmin = 0, .dmax = 1e6,
     .help = "a synchronized result is not valid when the ranks'\n"
             "clocks disagreed by more than X of its mean time and\n"
             "more than the late tolerance (default 0.1)"},
    {.kind = HM_OPT_HEADING, .help = "schedule and stop rules (sync method):"},
    {.name = "stage-launches", .kind = HM_OPT_INT, AT(schedule.launches_per_stage), .arg = "K",
     .min = 1, .max = 100000, .help = "launches per stage (default 8)"},
    {.name = "warmup-launches", .kind = HM_OPT_INT, AT(schedule.warmup_launches), .arg = "K'",
     .min = 1, .max = 100000, .help = "launches of warm-up stage 0, discarded (default 4)"},
    {.name = "late-tolerance-us", .kind = HM_OPT_SCALED, AT(late_tolerance_ns), .arg = "US",
     .dmin = 0, .dmax = 1e9, .scale = 1e3,
     .help = "a launch is late when a rank leaves its wait more than\n"
             "US after the start (default 10 timer steps, >= 0.1)"},
    {.name = "invalid-fraction", .kind = HM_OPT_DOUBLE, AT(schedule.invalid_fraction),
     .arg = "G", .dmin = 0, .dmax = 1,
     .help = "grow the window when more of a stage is invalid\n(default 0.25)"},
    {.name = "gamma", .kind = HM_OPT_DOUBLE, AT(schedule.gamma), .arg = "X", .dmin = 1.0001,
     .dmax = 10, .help = "window growth factor (default 1.1)"},
    {.name = "shrink-after", .kind = HM_OPT_INT, AT(schedule.shrink_after_calm), .arg = "N",
     .min = 0, .max = 100000,
     .help = "shrink the window after N calm stages, 0 = never\n(default 1)"},
    {.name = "wide-factor", .kind = HM_OPT_DOUBLE, AT(schedule.wide_factor), .arg = "F",
     .dmin = 0, .dmax = 1e9,
     .help = "set aside valid launches timed under a window more than\n"
             "F times the point's narrowest, 0 = never (default 4)"},
    {.name = "rse", .kind = HM_OPT_DOUBLE, AT(stop.rse_max), .arg = "X", .dmin = 0, .dmax = 1e6,
     .help = "stop at relative standard error <= X ... (default 0.05)"},
    {.name = "min-valid", .kind = HM_OPT_INT, AT(stop.min_valid), .arg = "N", .min = 1,
     .max = 100000000, .help = "... with at least N valid launches (default 10)"},
    {.name = "max-total", .kind = HM_OPT_INT, AT(stop.max_total), .arg = "N", .min = 1,
     .max = 100000000, .help = "or stop beyond N launches (default 100)"},
    {.name = "max-valid", .kind = HM_OPT_INT, AT(stop.max_valid), .arg = "N", .min = 1,
     .max = 100000000, .help = "or beyond N valid launches (default 30)"},
    {.name = "trim", .kind = HM_OPT_DOUBLE, AT(trim), .arg = "X", .dmin = 0, .dmax = 0.49,
     .help = "fraction dropped at each end (default 0.25)"},
    {.name = "ci-level", .kind = HM_OPT_DOUBLE, AT(ci_level), .arg = "P", .dmin = 0.5,
     .dmax = 0.9999, .help = "confidence level of ci_low/ci_high (default 0.95)"},
    {.name = "loop-iters", .kind = HM_OPT_INT, AT(loop_iters), .arg = "N", .min = 1,
     .max = 100000000, .help = "launches per sample of the loop methods (default 100)"},
    {.kind = HM_OPT_HEADING, .help = "repeatability:"},
    {.name = "passes", .kind = HM_OPT_INT, AT(passes), .arg = "N", .min = 1, .max = 10000,
     .help = "independent passes over every point, each with a fresh\n"
             "clock sync; a point's figure is the median (default 1)"},
    {.name = "seed", .kind = HM_OPT_INT64, AT(seed), .arg = "S", .min = 0, .max = INT64_MAX,
     .help = "order of the points in each pass (default 1)"},
    {.name = "in-order", .kind = HM_OPT_CLEAR, AT(shuffle),
     .help = "measure the points in the order given, not shuffled"},
    {.name = "budget-ms", .kind = HM_OPT_DOUBLE, AT(budget_ns), .arg = "MS", .dmin = 0,
     .dmax = 1e7, .scale = 1e6,
     .help = "sync: keep launching a point for MS per pass before the\n"
             "stop rule may end it; 0 = count-based only (default 0)"},
    {.name = "max-launches", .kind = HM_OPT_INT, AT(max_launches), .arg = "N", .min = 1,
     .max = 100000000,
     .help = "launches of a point at most, with a budget (default\n100000)"},
    {.name = "disagree-share", .kind = HM_OPT_DOUBLE, AT(disagree_share), .arg = "X", .dmin = 0,
     .dmax = 1e6,
     .help = "flag a point whose passes fall into groups more than\n"
             "X of the median apart (default 0.25)"},
    {.kind = HM_OPT_HEADING, .help = "output:"},
    {.name = "json", .kind = HM_OPT_STRING, AT(json_path), .arg = "FILE|-",
     .help = "results as JSON (table goes to stderr with -)"},
    {.name = "per-rank", .kind = HM_OPT_SET, AT(per_rank),
     .help = "per-rank mean/min/max in the JSON"},
    {.name = "raw", .kind = HM_OPT_SET, AT(raw), .help = "every launch's times in the JSON"},
    {.name = "quiet", .kind = HM_OPT_SET, AT(quiet), .help = "no table"},
    {.name = "list", .kind = HM_OPT_SET, AT(list), .help = "list the operations and exit"},
    {.name = "help", .letter = 'h', .kind = HM_OPT_HELP, .help = "this text"},
};
#undef AT
static const hm_option_table options = HM_OPTION_TABLE(option_rows);

void hm_bench_print_help(FILE *out)
{
    fprintf(out, "usage: mpirun -np N hushmon-bench [options]\n"
                 "Times MPI collectives with synchronized launches (MPIPerf method).\n");
    hm_options_print_help(&options, out);
    fprintf(out, "\noperations:\n");
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

int hm_bench_parse(int argc, char **argv, hm_bench_opts *o, hm_error *err)
{
    set_defaults(o);
    int rc = hm_options_parse(&options, argc, argv, o, err);
    if (rc < 0)
        return -1;
    o->help = rc == 1;
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
