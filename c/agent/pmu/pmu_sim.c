#include "pmu_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmu_counters.h"

#define SIM_NAMED_MAX 64

typedef struct sim_group {
    int cpu;
    size_t n;
    hm_pmu_event event[HM_PMU_GROUP_EVENTS_MAX];  /* which counters they may use */
    hm_pmu_sim_trace trace[HM_PMU_GROUP_EVENTS_MAX];
    bool enabled;
    bool on_counters;
    double value[HM_PMU_GROUP_EVENTS_MAX];
    double truth[HM_PMU_GROUP_EVENTS_MAX];
    int64_t enabled_ns, running_ns;
} sim_group;

typedef struct named_trace {
    char name[48];
    hm_pmu_sim_trace trace;
} named_trace;

struct hm_pmu_sim {
    int gp_counters;
    int64_t slice_ns;
    int64_t (*now_ns)(void);
    bool started;
    int64_t t_ns;
    uint64_t rotation;
    named_trace named[SIM_NAMED_MAX];
    size_t nnamed;
    sim_group *group;
    size_t n, cap;
};

hm_pmu_sim *hm_pmu_sim_create(int gp_counters, int64_t slice_ns, int64_t (*now_ns)(void))
{
    hm_pmu_sim *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->gp_counters = gp_counters;
    s->slice_ns = slice_ns > 0 ? slice_ns : 4000000;
    s->now_ns = now_ns;
    return s;
}

int hm_pmu_sim_set_trace(hm_pmu_sim *sim, const char *event, const hm_pmu_sim_trace *t,
                         hm_error *err)
{
    if (!(t->period_ns > 0) || t->duty < 0 || t->duty > 1 || t->base_per_s < 0 ||
        t->high_factor < 0)
        return hm_error_set(err, "bad trace for %s", event);
    for (size_t i = 0; i < sim->nnamed; i++) {
        if (strcmp(sim->named[i].name, event) == 0) {
            sim->named[i].trace = *t;
            return 0;
        }
    }
    if (sim->nnamed == SIM_NAMED_MAX)
        return hm_error_set(err, "too many traces");
    snprintf(sim->named[sim->nnamed].name, sizeof sim->named[0].name, "%s", event);
    sim->named[sim->nnamed++].trace = *t;
    return 0;
}

/* A fixed, plausible trace for an event nobody described: derived from
 * the name so runs are reproducible. */
static hm_pmu_sim_trace default_trace(const char *name)
{
    uint64_t h = 1469598103934665603u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211u;
    hm_pmu_sim_trace t;
    t.base_per_s = 2e8 + (double)(h % 1800) * 1e6;
    t.high_factor = 0.25 + (double)((h >> 12) % 276) / 100.0;
    t.period_ns = (int64_t)(200 + (h >> 24) % 1801) * 1000000;
    t.duty = 0.5;
    return t;
}

static hm_pmu_sim_trace trace_for(const hm_pmu_sim *sim, const char *name)
{
    for (size_t i = 0; i < sim->nnamed; i++)
        if (strcmp(sim->named[i].name, name) == 0)
            return sim->named[i].trace;
    return default_trace(name);
}

/* Traces for a weighted sum of events whose total is memory_per_s in the
 * memory phase and compute_per_s in the compute phase (the first half). */
static void model_terms(hm_pmu_sim *sim, const hm_pmu_profile *p, const int *event,
                        const double *weight, size_t n, double memory_per_s,
                        double compute_per_s, int64_t period_ns, bool *taken)
{
    for (size_t i = 0; i < n; i++) {
        if (taken[event[i]])
            continue; /* an event already modelled keeps its role's trace */
        taken[event[i]] = true;
        hm_pmu_sim_trace t = {memory_per_s / (double)n / weight[i],
                              compute_per_s / memory_per_s, period_ns, 0.5};
        hm_pmu_sim_set_trace(sim, p->event[event[i]].name, &t, NULL);
    }
}

void hm_pmu_sim_model_workload(hm_pmu_sim *sim, const hm_pmu_profile *p)
{
    const double cycles = 2.5e9;
    const int64_t phase_period = INT64_C(4000000000); /* 2 s compute, 2 s memory */
    struct {
        hm_pmu_role role;
        hm_pmu_sim_trace t;
    } model[] = {
        {HM_ROLE_CYCLES, {cycles, 1.0, phase_period, 0.5}},
        /* IPC 0.5 in the memory phase, x4 = 2.0 in the compute phase */
        {HM_ROLE_INSTRUCTIONS, {0.5 * cycles, 4.0, phase_period, 0.5}},
        {HM_ROLE_RETIRED_SLOTS, {0.55 * cycles, 4.0, phase_period, 0.5}},
        /* 4 issue slots per cycle */
        {HM_ROLE_TOTAL_SLOTS, {4.0 * cycles / p->total_slots_scale, 1.0, phase_period, 0.5}},
        /* stalled 60 % of cycles on loads in the memory phase, 5 % else */
        {HM_ROLE_MEM_STALL_CYCLES, {0.6 * cycles, 0.05 / 0.6, phase_period, 0.5}},
        {HM_ROLE_STORE_STALL_CYCLES, {0.02 * cycles, 1.0, phase_period, 0.5}},
    };
    /* One event may play two roles (zen4 counts its slots as 6 x cycles):
     * the first role keeps it, so cycles stay cycles and the slots follow
     * the profile's width. */
    bool taken[HM_PMU_EVENTS_MAX] = {false};
    for (size_t i = 0; i < sizeof model / sizeof model[0]; i++) {
        int ev = p->role[model[i].role];
        if (ev >= 0 && !taken[ev]) {
            taken[ev] = true;
            hm_pmu_sim_set_trace(sim, p->event[ev].name, &model[i].t, NULL);
        }
    }
    /* The roofline's two quantities, per CPU: the compute phase does
     * 30 GFLOP/s and moves 0.1 GB/s (300 FLOP/byte: a blocked matrix
     * multiply at most of an AVX2 or AVX-512 core's double-precision peak,
     * 32-70 GFLOP/s at 2-2.5 GHz), the memory phase 0.25 GFLOP/s on 4 GB/s
     * (0.06 FLOP/byte: a stream beyond the caches at a core's share of a
     * node's bandwidth). Each total is split evenly over the profile's terms
     * (a mix of scalar and vector instructions), so every event counts and
     * the weighted sums come out exact. */
    model_terms(sim, p, p->flops_event, p->flops_weight, p->nflops, 0.25e9, 30e9,
                phase_period, taken);
    model_terms(sim, p, p->mem_bytes_event, p->mem_bytes_weight, p->nmem_bytes, 4e9, 0.1e9,
                phase_period, taken);
}

/* Time spent in the high phase of t over [0, x). */
static double high_time_before(const hm_pmu_sim_trace *t, int64_t x)
{
    int64_t P = t->period_ns;
    int64_t k = x >= 0 ? x / P : -((-x + P - 1) / P);
    double within = (double)(x - k * P);
    double high = t->duty * (double)P;
    return (double)k * high + (within < high ? within : high);
}

double hm_pmu_sim_trace_integral(const hm_pmu_sim_trace *t, int64_t a_ns, int64_t b_ns)
{
    if (b_ns <= a_ns)
        return 0.0;
    double high = high_time_before(t, b_ns) - high_time_before(t, a_ns);
    return t->base_per_s * ((double)(b_ns - a_ns) + (t->high_factor - 1.0) * high) / 1e9;
}

/* Whether g fits on the counters beside those in *use; if so, takes them. */
static bool place(hm_pmu_counter_use *use, const sim_group *g, int gp_counters)
{
    hm_pmu_counter_use with = *use;
    for (size_t k = 0; k < g->n; k++)
        if (hm_pmu_counter_use_add(&with, &g->event[k]) < 0)
            return false;
    if (hm_pmu_counter_use_gp(&with) > gp_counters)
        return false;
    *use = with;
    return true;
}

/* Places enabled groups of each CPU on its counters, starting at the
 * rotation point, in order, until one does not fit (as the kernel does
 * for flexible groups). */
static void schedule(hm_pmu_sim *s)
{
    for (size_t i = 0; i < s->n; i++)
        s->group[i].on_counters = false;
    for (size_t i = 0; i < s->n; i++) {
        int cpu = s->group[i].cpu;
        bool first_of_cpu = true;
        for (size_t k = 0; k < i && first_of_cpu; k++)
            first_of_cpu = s->group[k].cpu != cpu;
        if (!first_of_cpu)
            continue;
        size_t enabled = 0;
        for (size_t k = 0; k < s->n; k++)
            enabled += s->group[k].cpu == cpu && s->group[k].enabled;
        if (enabled == 0)
            continue;
        size_t start = (size_t)(s->rotation % enabled);
        hm_pmu_counter_use use = {0};
        for (size_t step = 0; step < enabled; step++) {
            /* the (start + step)-th enabled group of this cpu */
            size_t want = (start + step) % enabled, seen = 0;
            sim_group *g = NULL;
            for (size_t k = 0; k < s->n && g == NULL; k++) {
                if (s->group[k].cpu == cpu && s->group[k].enabled) {
                    if (seen == want)
                        g = &s->group[k];
                    seen++;
                }
            }
            if (!place(&use, g, s->gp_counters))
                break;
            g->on_counters = true;
        }
    }
}

static void run_segment(hm_pmu_sim *s, int64_t a, int64_t b)
{
    for (size_t i = 0; i < s->n; i++) {
        sim_group *g = &s->group[i];
        if (!g->enabled)
            continue;
        g->enabled_ns += b - a;
        if (g->on_counters)
            g->running_ns += b - a;
        for (size_t k = 0; k < g->n; k++) {
            double c = hm_pmu_sim_trace_integral(&g->trace[k], a, b);
            g->truth[k] += c;
            if (g->on_counters)
                g->value[k] += c;
        }
    }
}

void hm_pmu_sim_advance_to(hm_pmu_sim *s, int64_t t_ns)
{
    if (!s->started) {
        s->started = true;
        s->t_ns = t_ns;
        schedule(s);
        return;
    }
    while (s->t_ns < t_ns) {
        int64_t boundary = (s->t_ns / s->slice_ns + 1) * s->slice_ns;
        int64_t end = boundary < t_ns ? boundary : t_ns;
        run_segment(s, s->t_ns, end);
        s->t_ns = end;
        if (end == boundary) {
            s->rotation++;
            schedule(s);
        }
    }
}

static void sync_clock(hm_pmu_sim *s)
{
    if (s->now_ns != NULL)
        hm_pmu_sim_advance_to(s, s->now_ns());
    else if (!s->started)
        hm_pmu_sim_advance_to(s, 0);
}

double hm_pmu_sim_truth(const hm_pmu_sim *sim, int handle, size_t k)
{
    return sim->group[handle].truth[k];
}

static int sim_open_group(void *state, int cpu, const hm_pmu_event *const *events, size_t n,
                          bool enabled, int *handle, hm_error *err)
{
    hm_pmu_sim *s = state;
    if (n == 0 || n > HM_PMU_GROUP_EVENTS_MAX)
        return hm_error_set(err, "a group has 1..%d events, not %zu", HM_PMU_GROUP_EVENTS_MAX, n);
    /* A group that could never fit, even alone, is refused at open, as
     * perf_event_open refuses it (validate_group). */
    hm_pmu_counter_use alone = {0};
    for (size_t k = 0; k < n; k++)
        if (hm_pmu_counter_use_add(&alone, events[k]) < 0)
            return hm_error_set(err, "group of %zu events puts two on one fixed-only counter", n);
    int gp = hm_pmu_counter_use_gp(&alone);
    if (gp > s->gp_counters)
        return hm_error_set(err, "group of %zu events needs %d general-purpose counters; the "
                            "simulated PMU has %d", n, gp, s->gp_counters);
    sync_clock(s);
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        sim_group *g = realloc(s->group, cap * sizeof *g);
        if (g == NULL)
            return hm_error_set(err, "out of memory");
        s->group = g;
        s->cap = cap;
    }
    sim_group *g = &s->group[s->n];
    memset(g, 0, sizeof *g);
    g->cpu = cpu;
    g->n = n;
    g->enabled = enabled;
    for (size_t k = 0; k < n; k++) {
        g->event[k] = *events[k];
        g->trace[k] = trace_for(s, events[k]->name);
    }
    *handle = (int)s->n++;
    schedule(s);
    return 0;
}

static int sim_set_enabled(void *state, int handle, bool enabled, hm_error *err)
{
    (void)err;
    hm_pmu_sim *s = state;
    sync_clock(s);
    s->group[handle].enabled = enabled;
    schedule(s);
    return 0;
}

static int sim_read_group(void *state, int handle, hm_pmu_reading *r, hm_error *err)
{
    (void)err;
    hm_pmu_sim *s = state;
    sync_clock(s);
    const sim_group *g = &s->group[handle];
    for (size_t k = 0; k < g->n; k++)
        r->value[k] = (uint64_t)llround(g->value[k]);
    r->enabled_ns = (uint64_t)g->enabled_ns;
    r->running_ns = (uint64_t)g->running_ns;
    return 0;
}

static void sim_destroy(void *state)
{
    hm_pmu_sim *s = state;
    if (s == NULL)
        return;
    free(s->group);
    free(s);
}

static const hm_pmu_backend_ops sim_ops = {
    .name = "sim",
    .open_group = sim_open_group,
    .set_enabled = sim_set_enabled,
    .read_group = sim_read_group,
    .destroy = sim_destroy,
};

void hm_pmu_sim_backend(hm_pmu_backend *be, hm_pmu_sim *sim)
{
    be->ops = &sim_ops;
    be->state = sim;
}
