/* pmu: hardware counters through perf_event_open, multiplexed by the
 * kernel or rotated by the agent (pmu/pmu_mux.c), with derived metrics.
 *
 * On a machine without a hardware PMU (most VMs) the source says so once
 * and publishes nothing: a value that was not measured is never invented.
 * With pmu.backend = "sim" it runs the simulated PMU instead and tags
 * every line backend=sim. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hm_timer.h"
#include "hm_log.h"
#include "procfile.h"
#include "pmu/pmu_counters.h"
#include "pmu/pmu_mux.h"
#include "pmu/pmu_sim.h"
#include "sampler.h"

/* Besides <event>_per_s for each event of the profile (its names). */
#define PMU_METRICS(X, P)                                                                     \
    X(P, ipc, "", "instructions per cycle")                                                   \
    X(P, score_cpu, "%", "100 - Retiring (top-down)")                                         \
    X(P, mem_stall_pct, "%", "cycles stalled on memory")                                      \
    X(P, flops_per_s, "1/s", "floating-point operations")                                     \
    X(P, mem_bytes_per_s, "B/s", "bytes to and from memory (the profile's mem_bytes events)") \
    X(P, mux_ratio, "", "share of the time the events were counted")
HM_METRIC_ENUM(PMU, PMU_METRICS);

typedef struct pmu_state {
    bool active;
    bool simulated;
    hm_pmu_mux mux;
    char field[HM_PMU_EVENTS_MAX][64];  /* "<event>_per_s", built once */
    char (*cpu_tag)[24];                 /* "cpuN" per CPU, built once */
    double *total_rate;
} pmu_state;

static void pmu_close(void *state)
{
    pmu_state *s = state;
    if (s == NULL)
        return;
    if (s->active)
        hm_pmu_mux_close(&s->mux);
    free(s->total_rate);
    free(s->cpu_tag);
    free(s);
}

/* The online CPUs, from a list like "0-3,6,8-9" (sysfs cpu/online):
 * counting an offline CPU would fail. Returns the count (0 on error). */
static size_t online_cpus(int **out)
{
    hm_procfile f;
    hm_error e;
    *out = NULL;
    if (hm_procfile_open_path(&f, "/sys/devices/system/cpu/online", &e) < 0)
        return 0;
    size_t n = 0, cap = 64;
    int *cpus = malloc(cap * sizeof *cpus);
    hm_scan c = hm_scan_of(f.buf, f.len);
    uint64_t lo, hi;
    while (cpus != NULL && hm_scan_u64(&c, &lo)) {
        hi = lo;
        if (hm_scan_char(&c, '-') && !hm_scan_u64(&c, &hi))
            break;
        for (uint64_t k = lo; k <= hi && k < 65536; k++) {
            if (n == cap) {
                int *bigger = realloc(cpus, 2 * cap * sizeof *cpus);
                if (bigger == NULL) {
                    free(cpus);
                    cpus = NULL;
                    n = 0;
                    break;
                }
                cpus = bigger;
                cap *= 2;
            }
            if (cpus != NULL)
                cpus[n++] = (int)k;
        }
        if (!hm_scan_char(&c, ','))
            break;
    }
    hm_procfile_close(&f);
    *out = cpus;
    return n;
}

static int pmu_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    const hm_agent_config *cfg = env->cfg;
    pmu_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    *state = s;
    hm_pmu_mode mode;
    if (hm_pmu_mode_parse(cfg->pmu_mode, &mode, err) < 0)
        goto fail;
    if (mode == HM_PMU_MODE_NONE)
        return 0;
    s->simulated = strcmp(cfg->pmu_backend, "sim") == 0;
    if (!s->simulated) {
        hm_error why;
        if (hm_pmu_perf_probe(&why) < 0) {
            hm_log_notice("hardware counters unavailable on this machine (%s): no pmu lines; "
                          "software events (perf_sw) are still counted", why.msg);
            return 0;
        }
    }
    hm_cpu_id id;
    hm_error e;
    if (hm_cpu_id_read(&id, cfg->root, &e) < 0) {
        hm_log_warn("pmu: %s; using the generic profile", e.msg);
        memset(&id, 0, sizeof id);
    }
    hm_pmu_profile profile;
    if (hm_pmu_profile_select(&profile, cfg->pmu_profile_dir, cfg->pmu_profile, &id, err) < 0)
        goto fail;
    int *cpus = NULL;
    size_t ncpu = online_cpus(&cpus);
    if (ncpu == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        ncpu = online > 0 ? (size_t)online : 1; /* assume 0..n-1 */
    }
    /* The kernel knows the real PMU's counters; the simulated one has the
     * profile's, for this machine's SMT state, unless told otherwise. */
    int gp_counters = hm_pmu_profile_gp_counters(&profile, hm_cpu_smt_active(cfg->root));
    if (s->simulated && cfg->pmu_sim_counters > 0)
        gp_counters = (int)cfg->pmu_sim_counters;
    hm_pmu_backend be;
    if (s->simulated) {
        hm_pmu_sim *sim = hm_pmu_sim_create(gp_counters, 4000000, hm_monotonic_ns);
        if (sim == NULL) {
            free(cpus);
            hm_error_set(err, "out of memory");
            goto fail;
        }
        hm_pmu_sim_model_workload(sim, &profile);
        hm_pmu_sim_backend(&be, sim);
    } else if (hm_pmu_perf_backend(&be, ncpu * profile.ngroups, err) < 0) {
        free(cpus);
        goto fail;
    }
    int rc = hm_pmu_mux_open(&s->mux, &profile, be, mode, cpus, ncpu, err);
    free(cpus);
    if (rc < 0)
        goto fail;
    s->active = true;
    s->total_rate = calloc(profile.nevents, sizeof *s->total_rate);
    s->cpu_tag = calloc(ncpu, sizeof *s->cpu_tag);
    if (s->total_rate == NULL || s->cpu_tag == NULL) {
        hm_error_set(err, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < profile.nevents; i++)
        snprintf(s->field[i], sizeof s->field[i], "%s_per_s", profile.event[i].name);
    for (size_t c = 0; c < ncpu; c++)
        snprintf(s->cpu_tag[c], sizeof s->cpu_tag[c], "cpu%d", s->mux.cpu[c]);
    hm_log_notice("pmu: profile %s, %s multiplexing, %zu groups on %d general-purpose + %zu "
                  "fixed counters%s",
                  profile.name, cfg->pmu_mode, profile.ngroups, gp_counters, profile.nfixed,
                  s->simulated ? " (SIMULATED PMU: synthetic values)" : "");
    return 0;
fail:
    pmu_close(s);
    *state = NULL;
    return hm_error_wrap(err, "pmu");
}

static void emit(pmu_state *s, const char *cpu, const double *rate, double mux_ratio, hm_lp *out)
{
    const hm_pmu_profile *p = &s->mux.profile;
    hm_pmu_derived d;
    hm_pmu_derive(p, rate, &d);
    hm_lp_begin(out, "pmu");
    hm_lp_tag(out, "cpu", cpu);
    if (s->simulated)
        hm_lp_tag(out, "backend", "sim");
    for (size_t i = 0; i < p->nevents; i++)
        hm_lp_field_f64(out, s->field[i], rate[i]);
    hm_lp_field_f64(out, HM_M(PMU, ipc), d.ipc);
    hm_lp_field_f64(out, HM_M(PMU, score_cpu), d.score_cpu);
    hm_lp_field_f64(out, HM_M(PMU, mem_stall_pct), d.mem_stall_pct);
    hm_lp_field_f64(out, HM_M(PMU, flops_per_s), d.flops_per_s);
    hm_lp_field_f64(out, HM_M(PMU, mem_bytes_per_s), d.mem_bytes_per_s);
    hm_lp_field_f64(out, HM_M(PMU, mux_ratio), mux_ratio);
    hm_lp_end(out);
}

static int pmu_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    (void)ctx;
    pmu_state *s = state;
    if (!s->active)
        return 0;
    if (hm_pmu_mux_sample(&s->mux, err) < 0)
        return -1;
    const hm_pmu_profile *p = &s->mux.profile;
    double ratio_sum = 0;
    for (size_t c = 0; c < s->mux.ncpu; c++) {
        emit(s, s->cpu_tag[c], &s->mux.rate[c * p->nevents], s->mux.mux_ratio[c], out);
        ratio_sum += s->mux.mux_ratio[c];
    }
    for (size_t i = 0; i < p->nevents; i++)
        s->total_rate[i] = hm_pmu_mux_total_rate(&s->mux, i);
    emit(s, "total", s->total_rate, ratio_sum / (double)s->mux.ncpu, out);
    return 0;
}

const hm_sampler_ops hm_sampler_pmu = {
    .name = "pmu",
    .reads = "perf_event_open hardware events (profile per CPU family), or the simulated PMU",
    .measurement = "pmu (tags cpu=total|cpuN, backend=sim when simulated)",
    .fields = "<event>_per_s" HM_METRIC_NAMES(PMU_METRICS),
    .default_on = true,
    .open = pmu_open,
    .sample = pmu_sample,
    .close = pmu_close,
};
