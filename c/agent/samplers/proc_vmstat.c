/* vm: paging and swap activity from /proc/vmstat, as rates.
 *
 * pgpgin/pgpgout count KiB moved between memory and block devices;
 * pswpin/pswpout count pages swapped; the rates show a job that has
 * outgrown memory (seed 001: swap activity next to falling FLOPS). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "procfile.h"
#include "sampler.h"

typedef struct vmstat_field {
    const char *kernel_name;
    const char *field;
} vmstat_field;

/* X(P, field, unit, help, the /proc/vmstat counter it is the rate of). */
#define VM_METRICS(X, P)                                                                      \
    X(P, pgpgin_per_s, "KiB/s", "read from block devices", "pgpgin")                          \
    X(P, pgpgout_per_s, "KiB/s", "written to block devices", "pgpgout")                       \
    X(P, pswpin_per_s, "pages/s", "swapped in", "pswpin")                                     \
    X(P, pswpout_per_s, "pages/s", "swapped out", "pswpout")                                  \
    X(P, pgfault_per_s, "1/s", "page faults", "pgfault")                                      \
    X(P, pgmajfault_per_s, "1/s", "page faults that read from disk", "pgmajfault")            \
    X(P, oom_kill_per_s, "1/s", "processes the OOM killer ended", "oom_kill")
HM_METRIC_ENUM(VM, VM_METRICS);

#define VM_ROW_(P, name, unit, help, kernel) {kernel, #name},
static const vmstat_field fields[] = {VM_METRICS(VM_ROW_, _)};
#undef VM_ROW_

#define NFIELDS ((size_t)VM_COUNT)

typedef struct vmstat_state {
    hm_procfile file;
    int64_t prev_mono_ns;
    hm_key_hint hint[NFIELDS];
    bool have_prev[NFIELDS];
    uint64_t prev[NFIELDS];
} vmstat_state;

static void vmstat_close(void *state)
{
    vmstat_state *s = state;
    if (s == NULL)
        return;
    hm_procfile_close(&s->file);
    free(s);
}

static int vmstat_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    vmstat_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    if (hm_procfile_open(&s->file, env->cfg->root, "proc/vmstat", err) < 0) {
        free(s);
        return -1;
    }
    for (size_t i = 0; i < NFIELDS; i++)
        s->hint[i].key = fields[i].kernel_name;
    *state = s;
    return 0;
}

static int vmstat_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    vmstat_state *s = state;
    if (hm_procfile_read(&s->file, err) < 0)
        return -1;
    double dt = hm_dt_s(s->prev_mono_ns, ctx->mono_ns);
    s->prev_mono_ns = ctx->mono_ns;
    double rate[NFIELDS];
    for (size_t i = 0; i < NFIELDS; i++) {
        rate[i] = NAN;
        hm_scan line = hm_find_key(s->file.buf, s->file.len, &s->hint[i]);
        if (line.p == line.end)
            continue; /* not in this kernel: absent */
        uint64_t v;
        if (!hm_scan_u64(&line, &v))
            return hm_error_set(err, "%s: no number after %s", s->file.path, fields[i].kernel_name);
        if (strcmp(fields[i].kernel_name, "pgfault") == 0) {
            ctx->node->pgfault = v; /* for perf_sw, sampled later */
            ctx->node->pgfault_stamp_ns = ctx->ts_ns;
        }
        if (s->have_prev[i])
            rate[i] = hm_counter_rate(s->prev[i], v, 64, dt);
        s->prev[i] = v;
        s->have_prev[i] = true;
    }
    hm_lp_begin(out, "vm");
    for (size_t i = 0; i < NFIELDS; i++)
        hm_lp_field_f64(out, fields[i].field, rate[i]);
    hm_lp_end(out); /* no line at all on the first reading */
    return 0;
}

const hm_sampler_ops hm_sampler_proc_vmstat = {
    .name = "vm",
    .reads = "/proc/vmstat",
    .measurement = "vm",
    .fields = HM_FIELDS(VM_METRICS),
    .default_on = true,
    .open = vmstat_open,
    .sample = vmstat_sample,
    .close = vmstat_close,
};
