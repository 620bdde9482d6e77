#include "pmu_mux.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int hm_pmu_mode_parse(const char *s, hm_pmu_mode *mode, hm_error *err)
{
    if (strcmp(s, "none") == 0)
        *mode = HM_PMU_MODE_NONE;
    else if (strcmp(s, "kernel") == 0)
        *mode = HM_PMU_MODE_KERNEL;
    else if (strcmp(s, "rotate") == 0)
        *mode = HM_PMU_MODE_ROTATE;
    else
        return hm_error_set(err, "unknown PMU mode '%s' (none, kernel, rotate)", s);
    return 0;
}

void hm_pmu_mux_close(hm_pmu_mux *m)
{
    if (m->backend.ops != NULL)
        m->backend.ops->destroy(m->backend.state);
    m->backend.ops = NULL;
    free(m->cpu);
    free(m->handle);
    free(m->prev);
    free(m->rate);
    free(m->mux_ratio);
    m->cpu = NULL;
    m->handle = NULL;
    m->prev = NULL;
    m->rate = NULL;
    m->mux_ratio = NULL;
}

int hm_pmu_mux_open(hm_pmu_mux *m, const hm_pmu_profile *profile, hm_pmu_backend backend,
                    hm_pmu_mode mode, const int *cpus, size_t ncpu, hm_error *err)
{
    memset(m, 0, sizeof *m);
    m->profile = *profile;
    m->backend = backend;
    m->mode = mode;
    m->ncpu = ncpu;
    size_t ng = profile->ngroups, ne = profile->nevents;
    m->cpu = calloc(ncpu, sizeof *m->cpu);
    m->handle = calloc(ncpu * ng, sizeof *m->handle);
    m->prev = calloc(ncpu * ng, sizeof *m->prev);
    m->rate = calloc(ncpu * ne, sizeof *m->rate);
    m->mux_ratio = calloc(ncpu, sizeof *m->mux_ratio);
    if (m->cpu == NULL || m->handle == NULL || m->prev == NULL || m->rate == NULL || m->mux_ratio == NULL) {
        hm_pmu_mux_close(m);
        return hm_error_set(err, "out of memory");
    }
    for (size_t i = 0; i < ncpu * ne; i++)
        m->rate[i] = NAN;
    for (size_t c = 0; c < ncpu; c++) {
        m->cpu[c] = cpus != NULL ? cpus[c] : (int)c;
        m->mux_ratio[c] = NAN;
        for (size_t g = 0; g < ng; g++) {
            const hm_pmu_group *grp = &profile->group[g];
            const hm_pmu_event *ev[HM_PMU_GROUP_EVENTS_MAX];
            for (size_t k = 0; k < grp->n; k++)
                ev[k] = &m->profile.event[grp->event[k]];
            bool enabled = mode == HM_PMU_MODE_KERNEL || g == 0;
            if (backend.ops->open_group(backend.state, m->cpu[c], ev, grp->n, enabled,
                                        &m->handle[c * ng + g], err) < 0) {
                int cpu = m->cpu[c];
                hm_pmu_mux_close(m);
                return hm_error_wrap(err, "group '%s' on cpu %d", grp->name, cpu);
            }
        }
    }
    return 0;
}

int hm_pmu_mux_sample(hm_pmu_mux *m, hm_error *err)
{
    const hm_pmu_profile *p = &m->profile;
    size_t ng = p->ngroups, ne = p->nevents;
    for (size_t c = 0; c < m->ncpu; c++) {
        double ratio_sum = 0;
        size_t ratio_n = 0;
        for (size_t g = 0; g < ng; g++) {
            if (m->mode == HM_PMU_MODE_ROTATE && g != m->active_group)
                continue; /* not counting: its rates stay as last measured */
            size_t h = c * ng + g;
            hm_pmu_reading now;
            if (m->backend.ops->read_group(m->backend.state, m->handle[h], &now, err) < 0)
                return hm_error_wrap(err, "cpu %d group '%s'", m->cpu[c], p->group[g].name);
            hm_pmu_reading *prev = &m->prev[h];
            uint64_t d_en = now.enabled_ns - prev->enabled_ns;
            uint64_t d_run = now.running_ns - prev->running_ns;
            const hm_pmu_group *grp = &p->group[g];
            for (size_t k = 0; k < grp->n; k++) {
                double *r = &m->rate[c * ne + (size_t)grp->event[k]];
                /* Scaled count / enabled time = count / running time. A
                 * group that never got onto the counters gives no rate. */
                *r = d_run > 0 ? (double)(now.value[k] - prev->value[k]) * 1e9 / (double)d_run
                               : NAN;
            }
            if (d_en > 0) {
                ratio_sum += (double)d_run / (double)d_en;
                ratio_n++;
            }
            *prev = now;
        }
        if (m->mode == HM_PMU_MODE_KERNEL)
            m->mux_ratio[c] = ratio_n ? ratio_sum / (double)ratio_n : NAN;
        else
            m->mux_ratio[c] = 1.0 / (double)ng;
    }
    m->samples++;
    if (m->mode == HM_PMU_MODE_ROTATE && ng > 1) {
        size_t next = (m->active_group + 1) % ng;
        for (size_t c = 0; c < m->ncpu; c++) {
            if (m->backend.ops->set_enabled(m->backend.state, m->handle[c * ng + m->active_group],
                                            false, err) < 0 ||
                m->backend.ops->set_enabled(m->backend.state, m->handle[c * ng + next], true,
                                            err) < 0)
                return hm_error_wrap(err, "rotating to group '%s' on cpu %d", p->group[next].name,
                                     m->cpu[c]);
        }
        m->active_group = next;
    }
    return 0;
}

double hm_pmu_mux_total_rate(const hm_pmu_mux *m, size_t e)
{
    double sum = 0;
    for (size_t c = 0; c < m->ncpu; c++)
        sum += m->rate[c * m->profile.nevents + e];
    return sum; /* NaN propagates */
}

static double role_rate(const hm_pmu_profile *p, const double *rate, hm_pmu_role r)
{
    return p->role[r] >= 0 ? rate[p->role[r]] : NAN;
}

/* sum weight[i] * rate[event[i]]; NaN when the profile has no terms. */
static double weighted_sum(const double *rate, const int *event, const double *weight, size_t n)
{
    if (n == 0)
        return NAN;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += weight[i] * rate[event[i]];
    return sum;
}

void hm_pmu_derive(const hm_pmu_profile *p, const double *rate, hm_pmu_derived *out)
{
    double inst = role_rate(p, rate, HM_ROLE_INSTRUCTIONS);
    double cyc = role_rate(p, rate, HM_ROLE_CYCLES);
    double retired = role_rate(p, rate, HM_ROLE_RETIRED_SLOTS);
    double slots = role_rate(p, rate, HM_ROLE_TOTAL_SLOTS) * p->total_slots_scale;
    double mem = role_rate(p, rate, HM_ROLE_MEM_STALL_CYCLES);
    double sb = role_rate(p, rate, HM_ROLE_STORE_STALL_CYCLES);
    out->ipc = cyc > 0 ? inst / cyc : NAN;
    /* score_cpu = 100 - Retiring, Retiring = 100 * retired slots / all slots */
    out->score_cpu = slots > 0 ? 100.0 - 100.0 * retired / slots : NAN;
    /* Memory bound = 100 * (min(cycles, load-stall cycles) + store-buffer
     * stalls) / cycles; without a store-buffer event, loads alone. */
    if (cyc > 0) {
        double stalls = fmin(cyc, mem) + (p->role[HM_ROLE_STORE_STALL_CYCLES] >= 0 ? sb : 0.0);
        out->mem_stall_pct = isnan(mem) ? NAN : 100.0 * stalls / cyc;
    } else {
        out->mem_stall_pct = NAN;
    }
    out->flops_per_s = weighted_sum(rate, p->flops_event, p->flops_weight, p->nflops);
    out->mem_bytes_per_s =
        weighted_sum(rate, p->mem_bytes_event, p->mem_bytes_weight, p->nmem_bytes);
}
