/* The PMU layer on the simulated PMU, where the true counts are known:
 * profiles, scaling by time_enabled / time_running, the agent's own
 * rotation, derived metrics, and the error of multiplexed estimates. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hm_test.h"
#include "pmu/pmu_counters.h"
#include "pmu/pmu_mux.h"
#include "pmu/pmu_profile.h"
#include "pmu/pmu_sim.h"

#define PROFILES "c/agent/pmu/profiles"
#define SEC INT64_C(1000000000)

/* Loads a profile from text through a temporary file. */
static int load_text(hm_pmu_profile *p, const char *text, hm_error *err)
{
    char path[64]; /* per process: the plain and sanitizer builds may run at once */
    snprintf(path, sizeof path, "/tmp/hm_test_profile_%d.toml", (int)getpid());
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
        return hm_error_set(err, "writing %s", path);
    int rc = hm_pmu_profile_load(p, path, err);
    remove(path);
    return rc;
}

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
    CHECK(c, p.gp_counters == 4 && p.ngroups == 4 && p.group[0].n == 4 && p.group[1].n == 4);
    CHECK(c, p.gp_counters_smt_off == 8 && p.nfixed == 3);
    CHECK(c, p.total_slots_scale == 2.0);
    CHECK(c, p.event[p.role[HM_ROLE_TOTAL_SLOTS]].config == 0x20003c); /* THREAD_ANY */

    hm_cpu_id skx = {"GenuineIntel", 6, 85}, icx = {"GenuineIntel", 6, 106},
              genoa = {"AuthenticAMD", 25, 17}, other = {"GenuineIntel", 6, 1};
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "auto", &skx, &err) == 0 && !strcmp(p.name, "skylake"));
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "auto", &icx, &err) == 0 && !strcmp(p.name, "icelake"));
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "auto", &genoa, &err) == 0 && !strcmp(p.name, "zen4"));
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "auto", &other, &err) == 0 && !strcmp(p.name, "generic"));

    /* A group needing more general-purpose counters than there are is
     * refused with the reason. */
    CHECK(c, load_text(&p, "name = \"bad\"\ngp_counters = 2\n[events]\na = \"hw:cycles\"\n"
                          "b = \"hw:instructions\"\nc = \"raw:0x3c\"\n[groups]\n"
                          "g = [\"a\", \"b\", \"c\"]\n", &err) == -1);
    CHECK(c, strstr(err.msg, "group 'g' needs 3 general-purpose counters but the PMU has 2") != NULL);
    CHECK(c, load_text(&p, "name = \"bad\"\ngp_counters = 4\n[events]\na = \"raw:zz\"\n"
                          "[groups]\ng = [\"a\"]\n", &err) == -1);
    CHECK(c, strstr(err.msg, "bad event encoding 'raw:zz'") != NULL);
    /* The key every profile must have. */
    CHECK(c, load_text(&p, "name = \"old\"\ncounters = 4\n[events]\na = \"hw:cycles\"\n"
                          "[groups]\ng = [\"a\"]\n", &err) == -1);
    CHECK(c, strstr(err.msg, "'gp_counters' must be 1..64") != NULL);
}

/* Fixed counters, from the profile: the same group fits 2 general-purpose
 * counters when two of its events have fixed counters, as on Intel. */
static void test_fixed_counters(hm_test_counts *c)
{
    hm_error err;
    hm_pmu_profile p;
    const char *two_gp = "name = \"t\"\ngp_counters = 2\n"
                         "[fixed_counters]\ninstructions = [\"hw:instructions\", \"raw:0x00c0\"]\n"
                         "cycles = [\"hw:cycles\", \"raw:0x003c\"]\n"
                         "[fixed_only_counters]\nref_cycles = [\"hw:ref_cycles\"]\n"
                         "[events]\ni = \"raw:0x00c0\"\ncy = \"hw:cycles\"\nr = \"hw:ref_cycles\"\n"
                         "a = \"raw:0x0151\"\nb = \"raw:0x412e\"\n"
                         "[groups]\ng = [\"i\", \"cy\", \"r\", \"a\", \"b\"]\n";
    int rc = load_text(&p, two_gp, &err);
    if (rc != 0)
        fprintf(stderr, "fixed profile: %s\n", err.msg);
    CHECK(c, rc == 0 && p.nfixed == 3 && p.gp_counters_smt_off == 2);
    CHECK(c, rc == 0 && p.event[0].fixed == 0 && !p.event[0].fixed_only); /* raw 0xc0 */
    CHECK(c, rc == 0 && p.event[1].fixed == 1 && !p.event[1].fixed_only); /* hw:cycles */
    CHECK(c, rc == 0 && p.event[2].fixed == 2 && p.event[2].fixed_only);
    CHECK(c, rc == 0 && p.event[3].fixed == -1 && p.event[4].fixed == -1);

    /* The shipped profiles say what their PMUs have. */
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "zen4", NULL, &err) == 0);
    CHECK(c, p.gp_counters == 6 && p.gp_counters_smt_off == 6 && p.nfixed == 0);
    for (size_t e = 0; e < p.nevents; e++)
        CHECK(c, p.event[e].fixed == -1);
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "generic", NULL, &err) == 0);
    CHECK(c, p.gp_counters == 4 && p.nfixed == 0);
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "icelake", NULL, &err) == 0);
    CHECK(c, p.gp_counters == 4 && p.gp_counters_smt_off == 8);
    for (size_t g = 0; g < p.ngroups; g++) {
        hm_pmu_counter_use use = {0};
        for (size_t k = 0; k < p.group[g].n; k++)
            CHECK(c, hm_pmu_counter_use_add(&use, &p.event[p.group[g].event[k]]) == 0);
        /* topdown: slots and the PERF_METRICS fields; core: 4 raw events */
        CHECK(c, hm_pmu_counter_use_gp(&use) == (strcmp(p.group[g].name, "topdown") == 0 ? 0 : 4));
    }
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "skylake", NULL, &err) == 0);
    int any = -1;
    for (size_t e = 0; e < p.nevents; e++)
        if (strcmp(p.event[e].name, "cpu_clk_unhalted_thread_any") == 0)
            any = (int)e;
    CHECK(c, any >= 0 && p.event[any].fixed >= 0 && !strcmp(p.fixed_name[p.event[any].fixed], "cycles"));

    /* Mistakes a profile can make about fixed counters. */
    CHECK(c, load_text(&p, "name = \"t\"\ngp_counters = 2\n[fixed_counters]\n"
                          "x = [\"hw:cycles\"]\ny = [\"hw:cycles\"]\n[events]\na = \"hw:cycles\"\n"
                          "[groups]\ng = [\"a\"]\n", &err) == -1);
    CHECK(c, strstr(err.msg, "'hw:cycles' is already counted by fixed counter 'x'") != NULL);
    CHECK(c, load_text(&p, "name = \"t\"\ngp_counters = 2\n[fixed_only_counters]\n"
                          "s = [\"raw:0x0400\"]\n[events]\na = \"raw:0x0400\"\nb = \"raw:0x0400\"\n"
                          "[groups]\ng = [\"a\", \"b\"]\n", &err) == -1);
    CHECK(c, strstr(err.msg, "'b' needs fixed counter 's', which another of its events holds") != NULL);
    CHECK(c, load_text(&p, "name = \"t\"\ngp_counters = 4\ngp_counters_smt_off = 2\n[events]\n"
                          "a = \"hw:cycles\"\n[groups]\ng = [\"a\"]\n", &err) == -1);
    CHECK(c, strstr(err.msg, "'gp_counters_smt_off' must be gp_counters..64") != NULL);
}

/* The kernel's placement rule (arch/x86/events/core.c), on the cases that
 * decide whether groups share the counters. */
static void test_counter_use(hm_test_counts *c)
{
    hm_pmu_event gp = {.fixed = -1}, cycles = {.fixed = 1}, slots = {.fixed = 3, .fixed_only = true};
    hm_pmu_counter_use u = {0};
    CHECK(c, hm_pmu_counter_use_add(&u, &cycles) == 0 && hm_pmu_counter_use_gp(&u) == 0);
    /* a second cycles event: the fixed counter is held, a gp one it is */
    CHECK(c, hm_pmu_counter_use_add(&u, &cycles) == 0 && hm_pmu_counter_use_gp(&u) == 1);
    CHECK(c, hm_pmu_counter_use_add(&u, &gp) == 0 && hm_pmu_counter_use_gp(&u) == 2);
    CHECK(c, hm_pmu_counter_use_add(&u, &slots) == 0 && hm_pmu_counter_use_gp(&u) == 2);
    /* two fixed-only events on one counter never go on together */
    CHECK(c, hm_pmu_counter_use_add(&u, &slots) == -1);
    /* a fixed-only event takes its counter from one that could move */
    hm_pmu_event prec_dist = {.fixed = 1, .fixed_only = true};
    hm_pmu_counter_use v = {0};
    CHECK(c, hm_pmu_counter_use_add(&v, &cycles) == 0 && hm_pmu_counter_use_add(&v, &prec_dist) == 0);
    CHECK(c, hm_pmu_counter_use_gp(&v) == 1);
}

/* The SMT state picks the general-purpose count; unknown means on. */
static void test_smt(hm_test_counts *c)
{
    hm_error err;
    hm_pmu_profile p;
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "skylake", NULL, &err) == 0);
    char root[] = "/tmp/hm_test_smt_XXXXXX";
    CHECK(c, mkdtemp(root) != NULL);
    CHECK(c, hm_cpu_smt_active(root)); /* no file */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/sys/devices/system/cpu/smt && echo 0 > %s/sys/devices/system/cpu/smt/active",
             root, root);
    CHECK(c, system(cmd) == 0);
    CHECK(c, !hm_cpu_smt_active(root));
    CHECK(c, hm_pmu_profile_gp_counters(&p, hm_cpu_smt_active(root)) == 8);
    snprintf(cmd, sizeof cmd, "echo 1 > %s/sys/devices/system/cpu/smt/active", root);
    CHECK(c, system(cmd) == 0);
    CHECK(c, hm_cpu_smt_active(root));
    CHECK(c, hm_pmu_profile_gp_counters(&p, hm_cpu_smt_active(root)) == 4);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(c, system(cmd) == 0);
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
    /* retiring fits 2 (its instructions and cycles go on fixed counters),
     * memory needs 4 */
    hm_pmu_sim *sim = hm_pmu_sim_create(2, 4000000, NULL);
    hm_pmu_backend be;
    hm_pmu_sim_backend(&be, sim);
    hm_pmu_mux m;
    CHECK(c, hm_pmu_mux_open(&m, &p, be, HM_PMU_MODE_KERNEL, NULL, 1, &err) == -1);
    CHECK(c, strstr(err.msg, "group 'memory'") != NULL);
    CHECK(c, strstr(err.msg, "needs 4 general-purpose counters; the simulated PMU has 2") != NULL);

    /* Zen 4's core group of 6 on the 4 counters the simulation used to
     * have whatever the profile (the bug of issue 8) */
    CHECK(c, hm_pmu_profile_select(&p, PROFILES, "zen4", NULL, &err) == 0);
    sim = hm_pmu_sim_create(4, 4000000, NULL);
    hm_pmu_sim_backend(&be, sim);
    CHECK(c, hm_pmu_mux_open(&m, &p, be, HM_PMU_MODE_KERNEL, NULL, 1, &err) == -1);
    CHECK(c, strstr(err.msg, "needs 6 general-purpose counters; the simulated PMU has 4") != NULL);
}

/* Every shipped profile on the simulated PMU with the profile's own
 * counters: everything counted, the model workload's IPC recovered, and
 * the groups that fit together (fixed counters help) never multiplexed. */
static void test_sim_models_each_profile(hm_test_counts *c)
{
    const struct {
        const char *name;
        double mux_smt_on, mux_smt_off;
    } cases[] = {
        {"generic", 0.5, 0.5},   /* 4 + 2 events, no fixed counters: 4 or 8 gp */
        {"skylake", 0.25, 0.5},  /* retiring 2 + memory 4 + flops 3 + 4 gp */
        /* topdown 0 + core 4 + fp_double 4 gp: with 4 counters the
         * rotation places topdown+core, core, fp_double+topdown: 2/3, 2/3,
         * 1/3 of the time, mean 5/9; with 8 all fit */
        {"icelake", 5.0 / 9.0, 1.0},
        {"zen4", 1.0, 1.0},      /* one group of 6 on 6 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int smt = 1; smt >= 0; smt--) {
            hm_pmu_profile p;
            hm_error err;
            CHECK(c, hm_pmu_profile_select(&p, PROFILES, cases[i].name, NULL, &err) == 0);
            hm_pmu_mux m;
            hm_pmu_sim *sim = open_sim(&m, &p, HM_PMU_MODE_KERNEL,
                                       hm_pmu_profile_gp_counters(&p, smt), true, c);
            hm_pmu_sim_advance_to(sim, 0);
            CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
            hm_pmu_sim_advance_to(sim, 1 * SEC); /* inside the compute phase */
            CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
            size_t unmeasured = 0;
            for (size_t e = 0; e < 2 * p.nevents; e++)
                unmeasured += !(m.rate[e] > 0 && isfinite(m.rate[e]));
            hm_pmu_derived d;
            hm_pmu_derive(&p, &m.rate[0], &d);
            double want = smt ? cases[i].mux_smt_on : cases[i].mux_smt_off;
            if (unmeasured != 0 || fabs(d.ipc - 2.0) > 0.01 || fabs(m.mux_ratio[0] - want) > 0.01)
                fprintf(stderr, "%s smt=%d: %zu rates unmeasured, ipc %g, mux %g (want %g)\n",
                        cases[i].name, smt, unmeasured, d.ipc, m.mux_ratio[0], want);
            CHECK(c, unmeasured == 0);
            CHECK_NEAR(c, d.ipc, 2.0, 0.01);
            CHECK_NEAR(c, m.mux_ratio[0], want, 0.01);
            hm_pmu_mux_close(&m);
        }
    }
}

/* The roofline's FLOPs and memory bytes: the model workload's known rates
 * (per CPU 30 GFLOP/s on 0.1 GB/s in the compute phase, 0.25 GFLOP/s on
 * 4 GB/s in the memory phase) recovered through each profile's weighted
 * events, multiplexed as the kernel would; generic has neither (NaN). */
static void test_sim_roofline_quantities(hm_test_counts *c)
{
    const char *names[] = {"skylake", "icelake", "zen4", "generic"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        hm_pmu_profile p;
        hm_error err;
        CHECK(c, hm_pmu_profile_select(&p, PROFILES, names[i], NULL, &err) == 0);
        bool has = p.nflops > 0 && p.nmem_bytes > 0;
        CHECK(c, has == (strcmp(names[i], "generic") != 0));
        hm_pmu_mux m;
        hm_pmu_sim *sim = open_sim(&m, &p, HM_PMU_MODE_KERNEL,
                                   hm_pmu_profile_gp_counters(&p, true), true, c);
        hm_pmu_sim_advance_to(sim, 0);
        CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
        hm_pmu_derived d;
        hm_pmu_sim_advance_to(sim, 2 * SEC); /* the compute phase */
        CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
        hm_pmu_derive(&p, &m.rate[0], &d);
        if (!has) {
            CHECK(c, isnan(d.flops_per_s) && isnan(d.mem_bytes_per_s));
            hm_pmu_mux_close(&m);
            continue;
        }
        CHECK_NEAR(c, d.flops_per_s / 30e9, 1.0, 0.02);
        CHECK_NEAR(c, d.mem_bytes_per_s / 0.1e9, 1.0, 0.02);
        hm_pmu_sim_advance_to(sim, 4 * SEC); /* the memory phase */
        CHECK(c, hm_pmu_mux_sample(&m, &err) == 0);
        hm_pmu_derive(&p, &m.rate[0], &d);
        CHECK_NEAR(c, d.flops_per_s / 0.25e9, 1.0, 0.02);
        CHECK_NEAR(c, d.mem_bytes_per_s / 4e9, 1.0, 0.02);
        hm_pmu_mux_close(&m);
    }
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
    test_fixed_counters(&c);
    test_counter_use(&c);
    test_smt(&c);
    test_trace_integral(&c);
    test_scaling_exact_for_constant_rates(&c);
    test_derived_metrics(&c);
    test_multiplexing_error(&c);
    test_group_must_fit(&c);
    test_sim_models_each_profile(&c);
    test_sim_roofline_quantities(&c);
    return hm_test_finish("test_agent_pmu", &c);
}
