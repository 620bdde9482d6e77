/* The PMU layer on the simulated PMU, where the true counts are known:
 * profiles, scaling by time_enabled / time_running, the agent's own
 * rotation, derived metrics, and the error of multiplexed estimates. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hm_test.h"
#include "pmu/pmu_mux.h"
#include "pmu/pmu_profile.h"
#include "pmu/pmu_sim.h"

#define PROFILES "c/agent/pmu/profiles"
#define SEC INT64_C(1000000000)

static void test_profiles(hm_test_counts *c)
{
    hm_error err;
    const char *names[] = {"skylake", "icelake", "zen4", "generic"};
    for (size_t i = 0; i < 4; i++) {
        hm_pmu_profile p;
        int rc = hm_pmu_profile_select(&p, PROFILES, names[i], NULL, &err);
        if (rc != 0)
            fprintf(stderr, "%s: %s\n", names[i], err.msg);
        CHECK(c, rc == 0);
        CHECK(c, rc == 0 && strcmp(p.name, names[i]) == 0);
        CHECK(c, rc == 0 && p.role[HM_ROLE_INSTRUCTIONS] >= 0 && p.role[HM_ROLE_CYCLES] >= 0);
    }
    hm_pmu_profile p;
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "skylake", NULL, &err) == 0);
    /* Seed 003: the 8 events of the two scores, on 4 counters. */
    CHECK(c, p.counters == 4 && p.ngroups == 4 && p.group[0].n == 4 && p.group[1].n == 4);
    CHECK(c, p.total_slots_scale == 2.0);
    CHECK(c, p.event[p.role[HM_ROLE_TOTAL_SLOTS]].config == 0x20003c); /* THREAD_ANY */

    hm_cpu_id skx = {"GenuineIntel", 6, 85}, icx = {"GenuineIntel", 6, 106},
              genoa = {"AuthenticAMD", 25, 17}, other = {"GenuineIntel", 6, 1};
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "auto", &skx, &err) == 0 && !strcmp(p.name, "skylake"));
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "auto", &icx, &err) == 0 && !strcmp(p.name, "icelake"));
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "auto", &genoa, &err) == 0 && !strcmp(p.name, "zen4"));
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "auto", &other, &err) == 0 && !strcmp(p.name, "generic"));

    /* A group larger than the counters is refused with the reason. */
    FILE *f = fopen("/tmp/hm_test_bad_profile.toml", "w");
    fputs("name = \"bad\"\ncounters = 2\n[events]\na = \"hw:cycles\"\nb = \"hw:instructions\"\n"
          "c = \"raw:0x3c\"\n[groups]\ng = [\"a\", \"b\", \"c\"]\n", f);
    fclose(f);
    CHECK(c, hm_pmu_profile_load(&p, "/tmp/hm_test_bad_profile.toml", &err) == -1);
    CHECK(c, strstr(err.msg, "has 3 events but the PMU has 2 counters") != NULL);
    f = fopen("/tmp/hm_test_bad_profile.toml", "w");
    fputs("name = \"bad\"\ncounters = 4\n[events]\na = \"raw:zz\"\n[groups]\ng = [\"a\"]\n", f);
    fclose(f);
    CHECK(c, hm_pmu_profile_load(&p, "/tmp/hm_test_bad_profile.toml", &err) == -1);
    CHECK(c, strstr(err.msg, "bad event encoding 'raw:zz'") != NULL);
    remove("/tmp/hm_test_bad_profile.toml");
}

static void test_trace_integral(hm_test_counts *c)
{
    hm_pmu_sim_trace t = {1e9, 3.0, 100000000, 0.25}; /* high 25 ms of every 100 ms */
    /* One full period: 75 ms at 1e9/s + 25 ms at 3e9/s = 0.075e9 + 0.075e9 */
    CHECK_NEAR(c, hm_pmu_sim_trace_integral(&t, 0, 100000000), 1.5e8, 1e-3);
    /* Numerical check on an odd window. */
    double sum = 0;
    for (int64_t x = 37000000; x < 412000000; x += 1000)
        sum += ((x % 100000000) < 25000000 ? 3e9 : 1e9) * 1e-6;
    CHECK_NEAR(c, hm_pmu_sim_trace_integral(&t, 37000000, 412000000), sum, 1.0);
}

/* A mux over the sim with profile p; the sim's clock is driven by the test. */
static hm_pmu_sim *open_sim(hm_pmu_mux *m, const hm_pmu_profile *p, hm_pmu_mode mode, int counters,
                            bool model, hm_test_counts *c)
{
    hm_pmu_sim *sim = hm_pmu_sim_create(counters, 4000000, NULL);
    if (model)
        hm_pmu_sim_model_workload(sim, p);
    hm_pmu_backend be;
    hm_pmu_sim_backend(&be, sim);
    hm_error err;
    int rc = hm_pmu_mux_open(m, p, be, mode, NULL, 2, &err);
    if (rc != 0)
        fprintf(stderr, "mux open: %s\n", err.msg);
    CHECK(c, rc == 0);
    return sim;
}

/* Fraction error |estimate - truth| / truth over windows, for one mode. */
static double multiplex_error(const hm_pmu_profile *p, hm_pmu_mode mode, double *worst,
                              hm_test_counts *c)
{
    hm_pmu_sim *sim = hm_pmu_sim_create(4, 4000000, NULL);
    hm_error err;
    /* Varying traces: every event alternates between two rates, with
     * periods of 0.3 .. 1.7 s: a real program's phases. */
    for (size_t e = 0; e < p->nevents; e++) {
        hm_pmu_sim_trace t = {2e8 + 1e8 * (double)e, 0.2 + 0.3 * (double)(e % 5),
                              (int64_t)(300 + 100 * (e % 15)) * 1000000, 0.5};
        CHECK(c, hm_pmu_sim_set_trace(sim, p->event[e].name, &t, &err) == 0);
    }
    hm_pmu_backend be;
    hm_pmu_sim_backend(&be, sim);
    hm_pmu_mux m;
    CHECK(c, hm_pmu_mux_open(&m, p, be, mode, NULL, 1, &err) == 0);
    double sum = 0;
    size_t n = 0;
    *worst = 0;
    for (int k = 1; k <= 60; k++) { /* one minute of 1 s samples */
        hm_pmu_sim_advance_to(sim, k * SEC);
        CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
        for (size_t g = 0; g < p->ngroups; g++) {
            for (size_t i = 0; i < p->group[g].n; i++) {
                size_t e = (size_t)p->group[g].event[i];
                /* the truth: the trace over the whole second */
                hm_pmu_sim_trace t = {2e8 + 1e8 * (double)e, 0.2 + 0.3 * (double)(e % 5),
                                      (int64_t)(300 + 100 * (e % 15)) * 1000000, 0.5};
                double truth = hm_pmu_sim_trace_integral(&t, (k - 1) * SEC, k * SEC);
                double est = m.rate[e] * 1.0;
                if (k > (int)p->ngroups && !isnan(est)) {
                    double rel = fabs(est - truth) / truth;
                    sum += rel;
                    n++;
                    if (rel > *worst)
                        *worst = rel;
                }
            }
        }
    }
    hm_pmu_mux_close(&m);
    return n ? sum / (double)n : NAN;
}

static void test_multiplexing_error(hm_test_counts *c)
{
    hm_pmu_profile p;
    hm_error err;
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "skylake", NULL, &err) == 0);
    double worst_k, worst_r;
    double mean_k = multiplex_error(&p, HM_PMU_MODE_KERNEL, &worst_k, c);
    double mean_r = multiplex_error(&p, HM_PMU_MODE_ROTATE, &worst_r, c);
    printf("multiplexed estimate vs truth, 4 groups on 4 counters, 1 s samples, phases 0.3-1.7 s:\n"
           "  kernel (4 ms slices, scaled): mean error %.2f %%, worst %.2f %%\n"
           "  rotate (1 group per period):  mean error %.2f %%, worst %.2f %%\n",
           100 * mean_k, 100 * worst_k, 100 * mean_r, 100 * worst_r);
    /* Fine time slicing samples every phase; whole-period rotation misses
     * the phases a group was off for. */
    CHECK(c, mean_k < 0.05);
    CHECK(c, mean_r > mean_k);
}

static void test_derived_metrics(hm_test_counts *c)
{
    hm_pmu_profile p;
    hm_error err;
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "skylake", NULL, &err) == 0);
    hm_pmu_mux m;
    hm_pmu_sim *sim = open_sim(&m, &p, HM_PMU_MODE_KERNEL, 4, true, c);
    /* Model: 2 s compute phase (IPC 2, Retiring 55 %, 5 % load stalls),
     * then 2 s memory phase (IPC 0.5, Retiring 13.75 %, 60 %), store
     * stalls 2 % throughout. The mux scales; derive() must recover it. */
    hm_pmu_sim_advance_to(sim, 0);
    hm_pmu_mux_sample(&m, &err); /* baseline */
    hm_pmu_sim_advance_to(sim, 2 * SEC);
    CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
    hm_pmu_derived d;
    hm_pmu_derive(&p, &m.rate[0], &d);
    CHECK_NEAR(c, d.ipc, 2.0, 0.01);
    CHECK_NEAR(c, d.score_cpu, 45.0, 0.5);
    CHECK_NEAR(c, d.mem_stall_pct, 7.0, 0.2);
    CHECK_NEAR(c, m.mux_ratio[0], 0.25, 0.01); /* 4 groups share the counters */
    hm_pmu_sim_advance_to(sim, 4 * SEC);
    CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
    hm_pmu_derive(&p, &m.rate[0], &d);
    CHECK_NEAR(c, d.ipc, 0.5, 0.01);
    CHECK_NEAR(c, d.score_cpu, 86.25, 0.5);
    CHECK_NEAR(c, d.mem_stall_pct, 62.0, 0.5);
    CHECK(c, !isnan(hm_pmu_mux_total_rate(&m, 0)));
    hm_pmu_mux_close(&m);

    /* Rotate mode: until the memory group has been on, the memory score
     * is unknown (NaN), never 0. */
    sim = open_sim(&m, &p, HM_PMU_MODE_ROTATE, 4, true, c);
    hm_pmu_sim_advance_to(sim, 0);
    hm_pmu_sim_advance_to(sim, 1 * SEC);
    CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
    hm_pmu_derive(&p, &m.rate[0], &d);
    CHECK_NEAR(c, d.ipc, 2.0, 0.01);      /* retiring group was on */
    CHECK(c, isnan(d.mem_stall_pct));     /* memory group not yet */
    CHECK(c, isnan(d.flops_per_s));
    CHECK_NEAR(c, m.mux_ratio[0], 0.25, 1e-12);
    hm_pmu_sim_advance_to(sim, 1500000000);
    CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
    hm_pmu_derive(&p, &m.rate[0], &d);
    CHECK_NEAR(c, d.mem_stall_pct, 7.0, 0.2); /* memory group measured in [1, 1.5) s */
    hm_pmu_mux_close(&m);

    /* Everything NaN in, everything NaN out. */
    double nan_rates[HM_PMU_EVENTS_MAX];
    for (size_t i = 0; i < HM_PMU_EVENTS_MAX; i++)
        nan_rates[i] = NAN;
    hm_pmu_derive(&p, nan_rates, &d);
    CHECK(c, isnan(d.ipc) && isnan(d.score_cpu) && isnan(d.mem_stall_pct) && isnan(d.flops_per_s));
}

static void test_group_must_fit(hm_test_counts *c)
{
    hm_pmu_profile p;
    hm_error err;
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "skylake", NULL, &err) == 0);
    hm_pmu_sim *sim = hm_pmu_sim_create(2, 4000000, NULL);
    hm_pmu_backend be;
    hm_pmu_sim_backend(&be, sim);
    hm_pmu_mux m;
    CHECK(c, hm_pmu_mux_open(&m, &p, be, HM_PMU_MODE_KERNEL, NULL, 1, &err) == -1);
    CHECK(c, strstr(err.msg, "cannot fit 2 counters") != NULL);
}

static void test_scaling_exact_for_constant_rates(hm_test_counts *c)
{
    hm_pmu_profile p;
    hm_error err;
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "skylake", NULL, &err) == 0);
    hm_pmu_sim *sim = hm_pmu_sim_create(4, 4000000, NULL);
    for (size_t e = 0; e < p.nevents; e++) {
        hm_pmu_sim_trace t = {1e8 * (double)(e + 1), 1.0, SEC, 0.5};
        CHECK(c, hm_pmu_sim_set_trace(sim, p.event[e].name, &t, &err) == 0);
    }
    hm_pmu_backend be;
    hm_pmu_sim_backend(&be, sim);
    hm_pmu_mux m;
    CHECK(c, hm_pmu_mux_open(&m, &p, be, HM_PMU_MODE_KERNEL, NULL, 1, &err) == 0);
    hm_pmu_sim_advance_to(sim, 0);
    hm_pmu_sim_advance_to(sim, 3 * SEC);
    CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
    for (size_t e = 0; e < p.nevents; e++)
        CHECK_NEAR(c, m.rate[e], 1e8 * (double)(e + 1), 1e8 * 1e-6);
    /* Each group was on a quarter of the time, and the raw count shows it. */
    hm_pmu_reading r;
    CHECK(c, be.ops->read_group(be.state, m.handle[0], &r, &err) == 0);
    CHECK_NEAR(c, (double)r.running_ns / (double)r.enabled_ns, 0.25, 1e-3);
    CHECK_NEAR(c, (double)r.value[0], 0.25 * 3 * 1e8, 1e8 * 0.01);
    CHECK_NEAR(c, hm_pmu_sim_truth(sim, m.handle[0], 0), 3e8, 1.0);
    hm_pmu_mux_close(&m);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_profiles(&c);
    test_trace_integral(&c);
    test_scaling_exact_for_constant_rates(&c);
    test_derived_metrics(&c);
    test_multiplexing_error(&c);
    test_group_must_fit(&c);
    return hm_test_finish("test_agent_pmu", &c);
}
