#include "bench_report.h"

#include <math.h>
#include <stdlib.h>

#include "hm_json.h"

void hm_bench_result_free(hm_bench_result *r)
{
    free(r->rank_stats);
    r->rank_stats = NULL;
    hm_bench_samples_free(&r->samples);
}

void hm_bench_table_header(FILE *out)
{
    fprintf(out, "%-22s %9s %6s %-12s %5s %5s %5s %11s %11s %11s %11s %11s %-5s\n", "op",
            "size", "procs", "method", "n_t", "n_c", "n_s", "mean_us", "ci95_us", "min_us",
            "max_us", "global_us", "clock");
}

void hm_bench_table_row(FILE *out, const hm_bench_result *r)
{
    const hm_bench_summary *s = &r->local;
    double half = (s->ci_high_at[1] - s->ci_low_at[1]) / 2;
    fprintf(out, "%-22s %9lld %6d %-12s %5zu %5zu %5zu %11.3f %11.3f %11.3f %11.3f ", r->op->name,
            (long long)r->size, r->nprocs, hm_bench_method_names[r->method], r->n_total,
            s->n_valid, s->n_used, s->mean * 1e6, half * 1e6, s->min * 1e6, s->max * 1e6);
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
    hm_json_kv_double(j, "rse", o->stop.rse_max);
    hm_json_kv_int(j, "min_valid", o->stop.min_valid);
    hm_json_kv_int(j, "max_total", o->stop.max_total);
    hm_json_kv_int(j, "max_valid", o->stop.max_valid);
    hm_json_kv_double(j, "trim", o->trim);
    hm_json_kv_double(j, "ci_level", o->ci_level);
    hm_json_kv_int(j, "loop_iters", o->loop_iters);
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
    hm_json_kv_uint(j, "n_total", r->n_total);
    hm_json_kv_uint(j, "n_valid", s->n_valid);
    hm_json_kv_uint(j, "n_used", s->n_used);
    hm_json_kv_int(j, "invalid_late_start", r->late);
    hm_json_kv_int(j, "invalid_overrun", r->overrun);
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
        hm_json_key(j, "valid");
        hm_json_array_begin(j);
        for (size_t i = 0; i < r->samples.n; i++)
            hm_json_bool(j, r->samples.valid[i]);
        hm_json_array_end(j);
        hm_json_object_end(j);
    }
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
    hm_json_object_end(&j);
    return hm_json_finish(&j);
}
