/* load: load averages from /proc/loadavg, with the running and blocked
 * task counts that `cpu` found in /proc/stat this period (absent when the
 * cpu source is off; /proc/loadavg has no blocked count). */
#include <stdlib.h>

#include "procfile.h"
#include "sampler.h"

#define LOAD_METRICS(X, P)                                                                    \
    X(P, load1, "", "run queue length, 1-minute average")                                     \
    X(P, load5, "", "5-minute average")                                                       \
    X(P, load15, "", "15-minute average")                                                     \
    X(P, procs_running, "tasks", "runnable now (from cpu's /proc/stat read)")                 \
    X(P, procs_blocked, "tasks", "waiting for I/O (idem)")
HM_METRIC_ENUM(LOAD, LOAD_METRICS);

typedef struct loadavg_state {
    hm_procfile file;
} loadavg_state;

static void loadavg_close(void *state)
{
    loadavg_state *s = state;
    if (s == NULL)
        return;
    hm_procfile_close(&s->file);
    free(s);
}

static int loadavg_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    loadavg_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    if (hm_procfile_open(&s->file, env->cfg->root, "proc/loadavg", err) < 0) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int loadavg_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    loadavg_state *s = state;
    if (hm_procfile_read(&s->file, err) < 0)
        return -1;
    hm_scan c = hm_scan_of(s->file.buf, s->file.len);
    double l1, l5, l15;
    if (!hm_scan_udouble(&c, &l1) || !hm_scan_udouble(&c, &l5) || !hm_scan_udouble(&c, &l15))
        return hm_error_set(err, "%s: malformed contents", s->file.path);
    hm_lp_begin(out, "load");
    hm_lp_field_f64(out, HM_M(LOAD, load1), l1);
    hm_lp_field_f64(out, HM_M(LOAD, load5), l5);
    hm_lp_field_f64(out, HM_M(LOAD, load15), l15);
    if (ctx->node->stamp_ns == ctx->ts_ns) {
        hm_lp_field_i64(out, HM_M(LOAD, procs_running), (int64_t)ctx->node->procs_running);
        hm_lp_field_i64(out, HM_M(LOAD, procs_blocked), (int64_t)ctx->node->procs_blocked);
    }
    hm_lp_end(out);
    return 0;
}

const hm_sampler_ops hm_sampler_proc_loadavg = {
    .name = "load",
    .reads = "/proc/loadavg (+ procs from /proc/stat via cpu)",
    .measurement = "load",
    .fields = HM_FIELDS(LOAD_METRICS),
    .default_on = true,
    .open = loadavg_open,
    .sample = loadavg_sample,
    .close = loadavg_close,
};
