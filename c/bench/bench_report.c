#include "bench_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_passes.h"
#include "bench_procedures.h"
#include "hm_json.h"

void hm_bench_result_free(hm_bench_result *r)
{
    free(r->rank_stats);
    r->rank_stats = NULL;
    hm_bench_samples_free(&r->samples);
}

void hm_bench_table_header(FILE *out)
{
    fprintf(out, "%-22s %9s %6s %-12s %4s %5s %5s %5s %11s %11s %11s %11s %11s %-5s\n", "op",
            "size", "procs", "method", "pass", "n_t", "n_c", "n_s", "mean_us", "ci95_us",
            "min_us", "max_us", "global_us", "clock");
}

void hm_bench_table_row(FILE *out, const hm_bench_result *r)
{
    const hm_bench_summary *s = &r->local;
    double half = (s->ci_high_at[1] - s->ci_low_at[1]) / 2;
    fprintf(out, "%-22s %9lld %6d %-12s %4d %5zu %5zu %5zu %11.3f %11.3f %11.3f %11.3f ",
            r->op->name, (long long)r->size, r->nprocs, hm_bench_method_names[r->method],
            r->pass, r->n_total, s->n_valid, s->n_used, s->mean * 1e6, half * 1e6, s->min * 1e6,
            s->max * 1e6);
    if (r->has_global)
        fprintf(out, "%11.3f ", r->global.mean * 1e6);
    else
        fprintf(out, "%11s ", "-");
    /* BAD: the clocks disagreed by more than this result tolerates. */
    fprintf(out, "%s\n", !r->clock_judged ? "-" : r->clock_valid ? "ok" : "BAD");
    fflush(out);
}

static void write_double_array(hm_json *j, const char *key, const double *v, size_t n)
{
    hm_json_key(j, key);
    hm_json_array_begin(j);
    for (size_t i = 0; i < n; i++)
        hm_json_double(j, v[i]);
    hm_json_array_end(j);
}

static void write_params(hm_json *j, const hm_bench_opts *o)
{
    hm_json_key(j, "params");
    hm_json_object_begin(j);
    hm_json_kv_string(j, "ops", o->ops_text);
    hm_json_kv_string(j, "sizes", o->sizes_text);
    if (o->nprocs_text != NULL)
        hm_json_kv_string(j, "nprocs", o->nprocs_text);
    else
        hm_json_kv_string(j, "nprocs", "all");
    hm_json_kv_int(j, "root", o->root);
    hm_json_kv_string(j, "buffers", o->buffers == HM_BUFFERS_ROTATE ? "rotate" : "reuse");
    hm_json_kv_int(j, "bcast_probes", o->bcast_probes);
    if (o->late_tolerance_ns >= 0)
        hm_json_kv_double(j, "late_tolerance_us", (double)o->late_tolerance_ns / 1000.0);
    else
        hm_json_kv_string(j, "late_tolerance_us", "auto");
    hm_json_kv_int(j, "stage_launches", o->schedule.launches_per_stage);
    hm_json_kv_int(j, "warmup_launches", o->schedule.warmup_launches);
    hm_json_kv_double(j, "invalid_fraction", o->schedule.invalid_fraction);
    hm_json_kv_double(j, "gamma", o->schedule.gamma);
    hm_json_kv_int(j, "shrink_after", o->schedule.shrink_after_calm);
    hm_json_kv_double(j, "wide_factor", o->schedule.wide_factor);
    hm_json_kv_double(j, "rse", o->stop.rse_max);
    hm_json_kv_int(j, "min_valid", o->stop.min_valid);
    hm_json_kv_int(j, "max_total", o->stop.max_total);
    hm_json_kv_int(j, "max_valid", o->stop.max_valid);
    hm_json_kv_double(j, "trim", o->trim);
    hm_json_kv_double(j, "ci_level", o->ci_level);
    hm_json_kv_int(j, "loop_iters", o->loop_iters);
    hm_json_kv_int(j, "passes", o->passes);
    hm_json_kv_uint(j, "seed", o->seed);
    hm_json_kv_bool(j, "shuffle", o->shuffle);
    hm_json_kv_double(j, "budget_ms", o->budget_ns / 1e6);
    hm_json_kv_int(j, "max_launches", o->max_launches);
    hm_json_kv_double(j, "disagree_share", o->disagree_share);
    hm_json_object_end(j);
}

static void write_meta(hm_json *j, const hm_bench_opts *o, const hm_bench_meta *m)
{
    char version[32];
    snprintf(version, sizeof version, "%d.%d", m->mpi_version, m->mpi_subversion);
    hm_json_key(j, "meta");
    hm_json_object_begin(j);
    hm_json_kv_string(j, "program", "hushmon-bench");
    hm_json_kv_string(j, "version", "0.1.0");
    hm_json_kv_string(j, "mpi_library", m->mpi_library);
    hm_json_kv_string(j, "mpi_version", version);
    hm_json_kv_string(j, "timer", m->timer);
    hm_json_kv_double(j, "timer_resolution_ns", m->timer_resolution_ns);
    hm_json_kv_string(j, "sync", m->sync);
    hm_json_kv_int(j, "sync_rounds_without_improvement", m->sync_rounds);
    hm_json_kv_bool(j, "sync_ping_shared", m->sync_ping_shared);
    hm_json_kv_int(j, "sync_nodes", m->sync_nodes);
    hm_json_kv_int(j, "sync_ranks_pinged", m->sync_ranks);
    hm_json_kv_double(j, "sync_elapsed_s", m->sync_elapsed_s);
    hm_json_kv_double(j, "clock_offset_residual_max_s", m->residual_max_s);
    hm_json_kv_double(j, "clock_offset_residual_end_max_s", m->residual_end_max_s);
    hm_json_kv_double(j, "clock_drift_max_s", m->drift_max_s);
    hm_json_kv_double(j, "clock_error_start_s", m->clock_error_start_s);
    hm_json_kv_double(j, "clock_error_end_s", m->clock_error_end_s);
    hm_json_kv_double(j, "clock_error_max_s", fmax(m->clock_error_start_s, m->clock_error_end_s));
    hm_json_kv_double(j, "clock_error_share", m->clock_error_share);
    hm_json_kv_uint(j, "results_clock_invalid", m->results_clock_invalid);
    hm_json_kv_double(j, "simulated_skew_s", m->simulated_skew_s);
    hm_json_kv_double(j, "simulated_drift_ppm", o->simulated_drift_ppm);
    if (m->offsets_s != NULL)
        write_double_array(j, "clock_offsets_s", m->offsets_s, (size_t)m->nprocs);
    hm_json_key(j, "hosts");
    hm_json_array_begin(j);
    for (size_t i = 0; i < m->n_hosts; i++)
        hm_json_string(j, m->hosts[i]);
    hm_json_array_end(j);
    hm_json_kv_int(j, "nprocs", m->nprocs);
    hm_json_key(j, "methods");
    hm_json_array_begin(j);
    for (size_t i = 0; i < o->n_methods; i++)
        hm_json_string(j, hm_bench_method_names[o->methods[i]]);
    hm_json_array_end(j);
    hm_json_kv_double(j, "rotate_bytes", m->rotate_bytes);
    hm_json_kv_double(j, "spin_us", m->spin_us);
    hm_json_kv_double(j, "late_tolerance_us", m->late_tolerance_us);
    hm_json_kv_bool(j, "oversubscribed", m->oversubscribed);
    write_params(j, o);
    hm_json_kv_string(j, "started_at", m->started_at);
    hm_json_object_end(j);
}

static void write_result(hm_json *j, const hm_bench_opts *o, const hm_bench_result *r)
{
    const hm_bench_summary *s = &r->local;
    hm_json_object_begin(j);
    hm_json_kv_string(j, "op", r->op->name);
    hm_json_kv_int(j, "size", r->size);
    hm_json_kv_int(j, "nprocs", r->nprocs);
    hm_json_kv_string(j, "method", hm_bench_method_names[r->method]);
    hm_json_kv_int(j, "root", r->root);
    hm_json_kv_int(j, "pass", r->pass);
    hm_json_kv_string(j, "buffers", r->buffers == HM_BUFFERS_ROTATE ? "rotate" : "reuse");
    hm_json_kv_uint(j, "n_total", r->n_total);
    hm_json_kv_uint(j, "n_valid", s->n_valid);
    hm_json_kv_uint(j, "n_used", s->n_used);
    hm_json_kv_int(j, "invalid_late_start", r->late);
    hm_json_kv_int(j, "invalid_overrun", r->overrun);
    hm_json_kv_int(j, "invalid_wide_window", r->wide_window);
    hm_json_key(j, "invalid_causes");
    hm_json_object_begin(j);
    hm_json_kv_int(j, "stage_start_late", r->late_stage_start);
    hm_json_kv_int(j, "previous_launch_late", r->late_previous);
    hm_json_kv_int(j, "woke_late", r->late_woke);
    hm_json_kv_int(j, "overrun", r->overrun);
    hm_json_kv_int(j, "wide_window", r->wide_window);
    hm_json_object_end(j);
    hm_json_kv_double(j, "mean", s->mean);
    hm_json_kv_double(j, "median", s->median);
    hm_json_kv_double(j, "se", s->se);
    hm_json_kv_double(j, "rse", s->rse);
    hm_json_kv_double(j, "min", s->min);
    hm_json_kv_double(j, "max", s->max);
    hm_json_kv_double(j, "ci_level", s->ci_level);
    hm_json_kv_double(j, "ci_low", s->ci_low);
    hm_json_kv_double(j, "ci_high", s->ci_high);
    hm_json_kv_double(j, "t_error", (s->ci_high - s->ci_low) / 2);
    hm_json_key(j, "ci");
    hm_json_object_begin(j);
    for (int i = 0; i < HM_BENCH_CI_LEVELS; i++) {
        char key[16];
        snprintf(key, sizeof key, "%.2f", hm_bench_ci_levels[i]);
        hm_json_key(j, key);
        hm_json_array_begin(j);
        hm_json_double(j, s->ci_low_at[i]);
        hm_json_double(j, s->ci_high_at[i]);
        hm_json_array_end(j);
    }
    hm_json_object_end(j);
    if (r->has_global) {
        hm_json_kv_double(j, "global_mean", r->global.mean);
        hm_json_kv_double(j, "global_median", r->global.median);
    } else {
        hm_json_key(j, "global_mean");
        hm_json_null(j);
        hm_json_key(j, "global_median");
        hm_json_null(j);
    }
    hm_json_kv_double(j, "delta_final_s", r->delta_final_s);
    hm_json_key(j, "clock_valid");
    if (r->clock_judged)
        hm_json_bool(j, r->clock_valid);
    else
        hm_json_null(j);
    hm_json_kv_double(j, "clock_error_allowed_s", r->clock_judged ? r->clock_allowed_s : NAN);
    /* The tools' own columns, under their own names. */
    if (r->method == HM_METHOD_OSU) {
        hm_json_key(j, "osu");
        hm_json_object_begin(j);
        hm_json_kv_int(j, "size", r->size);
        hm_json_kv_double(j, "avg_latency_us", s->mean * 1e6);
        hm_json_kv_double(j, "min_latency_us", s->min * 1e6);
        hm_json_kv_double(j, "max_latency_us", s->max * 1e6);
        hm_json_kv_int(j, "iterations", r->iterations);
        hm_json_kv_int(j, "skip", r->warmup);
        hm_json_object_end(j);
    } else if (r->method == HM_METHOD_IMB) {
        hm_json_key(j, "imb");
        hm_json_object_begin(j);
        hm_json_kv_int(j, "bytes", r->size);
        hm_json_kv_int(j, "repetitions", r->iterations);
        hm_json_kv_double(j, "t_min_usec", s->min * 1e6);
        hm_json_kv_double(j, "t_max_usec", s->max * 1e6);
        hm_json_kv_double(j, "t_avg_usec", s->mean * 1e6);
        hm_json_kv_int(j, "pre_run_calls", r->warmup);
        hm_json_kv_bool(j, "off_cache", r->buffers == HM_BUFFERS_ROTATE);
        hm_json_object_end(j);
    }
    if (o->per_rank && r->rank_stats != NULL) {
        hm_json_key(j, "per_rank");
        hm_json_array_begin(j);
        for (int rank = 0; rank < r->nprocs; rank++) {
            hm_json_object_begin(j);
            hm_json_kv_int(j, "rank", rank);
            hm_json_kv_double(j, "mean", r->rank_stats[3 * rank]);
            hm_json_kv_double(j, "min", r->rank_stats[3 * rank + 1]);
            hm_json_kv_double(j, "max", r->rank_stats[3 * rank + 2]);
            hm_json_object_end(j);
        }
        hm_json_array_end(j);
    }
    if (o->raw) {
        hm_json_key(j, "raw");
        hm_json_object_begin(j);
        write_double_array(j, "local_s", r->samples.local_s, r->samples.n);
        write_double_array(j, "global_s", r->samples.global_s, r->samples.n);
        if (r->samples.n_window == r->samples.n)
            write_double_array(j, "window_s", r->samples.window_s, r->samples.n_window);
        hm_json_key(j, "valid");
        hm_json_array_begin(j);
        for (size_t i = 0; i < r->samples.n; i++)
            hm_json_bool(j, r->samples.valid[i]);
        hm_json_array_end(j);
        hm_json_object_end(j);
    }
    hm_json_object_end(j);
}

/* One point over its passes. */
typedef struct point_summary {
    const hm_op *op;
    int64_t size;
    int nprocs;
    hm_bench_method method;
    size_t n_results;
    double values[64];  /* per-pass figure (NaN: none, or refused by the clock check) */
    size_t n_values;
    hm_pass_summary passes;
    size_t n_total, n_valid;
    int late, overrun, late_stage_start, late_previous, late_woke, wide_window;
} point_summary;

/* The figure of a pass: its mean (for osu / imb the tools' average), NaN
 * when the clock check refused it. */
static double pass_value(const hm_bench_result *r)
{
    if (r->clock_judged && !r->clock_valid)
        return NAN;
    return r->local.mean;
}

/* Collects every result of (op, size, nprocs, method); false if none. */
static bool summarize_point(const hm_bench_opts *o, const hm_bench_result *results, size_t n,
                            point_summary *p)
{
    for (size_t i = 0; i < n; i++) {
        const hm_bench_result *r = &results[i];
        if (r->op != p->op || r->size != p->size || r->nprocs != p->nprocs ||
            r->method != p->method)
            continue;
        p->n_results++;
        if (p->n_values < sizeof p->values / sizeof p->values[0])
            p->values[p->n_values++] = pass_value(r);
        p->n_total += r->n_total;
        p->n_valid += r->local.n_valid;
        p->late += r->late;
        p->overrun += r->overrun;
        p->late_stage_start += r->late_stage_start;
        p->late_previous += r->late_previous;
        p->late_woke += r->late_woke;
        p->wide_window += r->wide_window;
    }
    if (p->n_results == 0)
        return false;
    if (hm_passes_summarize(p->values, p->n_values, o->disagree_share, &p->passes) != 0)
        p->passes.n = 0;
    return true;
}

/* Calls fn on every point in the order of the command line. */
static void for_each_point(const hm_bench_opts *o, const hm_bench_meta *m,
                           const hm_bench_result *results, size_t n,
                           void (*fn)(void *ctx, const point_summary *p), void *ctx)
{
    size_t n_counts = o->n_nprocs > 0 ? o->n_nprocs : 1;
    for (size_t c = 0; c < n_counts; c++) {
        int procs = o->n_nprocs > 0 ? (int)o->nprocs[c] : m->nprocs;
        for (size_t i = 0; i < o->n_ops; i++) {
            const hm_op *op = o->ops[i];
            size_t n_sizes = op->uses_size ? o->n_sizes : 1;
            for (size_t k = 0; k < n_sizes; k++)
                for (size_t mi = 0; mi < o->n_methods; mi++) {
                    point_summary p;
                    memset(&p, 0, sizeof p);
                    p.op = op;
                    p.size = op->uses_size ? o->sizes[k] : 0;
                    p.nprocs = procs;
                    p.method = o->methods[mi];
                    if (summarize_point(o, results, n, &p))
                        fn(ctx, &p);
                }
        }
    }
}

static void point_row(void *ctx, const point_summary *p)
{
    FILE *out = ctx;
    const hm_pass_summary *s = &p->passes;
    double invalid = p->n_total > 0 ? 100.0 * (double)(p->n_total - p->n_valid) / (double)p->n_total
                                    : 0.0;
    fprintf(out, "# %-20s %9lld %6d %-12s %3zu %11.3f %11.3f %11.3f %7.1f %7.1f %s\n",
            p->op->name, (long long)p->size, p->nprocs, hm_bench_method_names[p->method], s->n,
            s->median * 1e6, s->ci_low * 1e6, s->ci_high * 1e6, s->spread * 100, invalid,
            s->disagree ? "DISAGREE" : "");
}

void hm_bench_table_points(FILE *out, const hm_bench_opts *o, const hm_bench_meta *m,
                           const hm_bench_result *results, size_t n)
{
    if (out == NULL || o->passes < 2)
        return;
    fprintf(out, "# over %d passes: median and its interval (us), spread = (max - min) / median, "
                 "invalid launches (%%)\n", o->passes);
    fprintf(out, "# %-20s %9s %6s %-12s %3s %11s %11s %11s %7s %7s\n", "op", "size", "procs",
            "method", "n", "median_us", "ci_low_us", "ci_high_us", "spread%", "inval%");
    for_each_point(o, m, results, n, point_row, out);
}

static void point_json(void *ctx, const point_summary *p)
{
    hm_json *j = ctx;
    const hm_pass_summary *s = &p->passes;
    hm_json_object_begin(j);
    hm_json_kv_string(j, "op", p->op->name);
    hm_json_kv_int(j, "size", p->size);
    hm_json_kv_int(j, "nprocs", p->nprocs);
    hm_json_kv_string(j, "method", hm_bench_method_names[p->method]);
    hm_json_kv_uint(j, "passes", s->n);
    write_double_array(j, "pass_values", p->values, p->n_values);
    hm_json_kv_double(j, "median", s->median);
    hm_json_kv_double(j, "ci_low", s->ci_low);
    hm_json_kv_double(j, "ci_high", s->ci_high);
    hm_json_kv_double(j, "ci_level", s->ci_level);
    hm_json_kv_double(j, "min", s->min);
    hm_json_kv_double(j, "max", s->max);
    hm_json_kv_double(j, "spread", s->spread);
    hm_json_kv_double(j, "largest_gap", s->largest_gap);
    hm_json_kv_bool(j, "disagree", s->disagree);
    hm_json_kv_uint(j, "n_total", p->n_total);
    hm_json_kv_uint(j, "n_valid", p->n_valid);
    hm_json_kv_double(j, "invalid_rate",
                      p->n_total > 0 ? (double)(p->n_total - p->n_valid) / (double)p->n_total
                                     : 0.0);
    hm_json_key(j, "invalid_causes");
    hm_json_object_begin(j);
    hm_json_kv_int(j, "stage_start_late", p->late_stage_start);
    hm_json_kv_int(j, "previous_launch_late", p->late_previous);
    hm_json_kv_int(j, "woke_late", p->late_woke);
    hm_json_kv_int(j, "overrun", p->overrun);
    hm_json_kv_int(j, "wide_window", p->wide_window);
    hm_json_object_end(j);
    hm_json_object_end(j);
}

int hm_bench_write_json(FILE *out, const hm_bench_opts *o, const hm_bench_meta *m,
                        const hm_bench_result *results, size_t n)
{
    hm_json j;
    hm_json_init(&j, out, false);
    hm_json_object_begin(&j);
    write_meta(&j, o, m);
    hm_json_key(&j, "results");
    hm_json_array_begin(&j);
    for (size_t i = 0; i < n; i++)
        write_result(&j, o, &results[i]);
    hm_json_array_end(&j);
    hm_json_key(&j, "points");
    hm_json_array_begin(&j);
    for_each_point(o, m, results, n, point_json, &j);
    hm_json_array_end(&j);
    hm_json_object_end(&j);
    return hm_json_finish(&j);
}
