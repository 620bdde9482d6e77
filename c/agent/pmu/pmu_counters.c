#include "pmu_counters.h"

#include "procfile.h"

int hm_pmu_counter_use_add(hm_pmu_counter_use *u, const hm_pmu_event *e)
{
    if (e->fixed < 0 || e->fixed >= HM_PMU_FIXED_MAX) {
        u->gp_only++;
        return 0;
    }
    uint32_t bit = UINT32_C(1) << e->fixed;
    if (!e->fixed_only) {
        u->fixed_or_gp[e->fixed]++;
        return 0;
    }
    if (u->fixed_only & bit)
        return -1;
    u->fixed_only |= bit;
    return 0;
}

int hm_pmu_counter_use_gp(const hm_pmu_counter_use *u)
{
    /* The kernel places fixed-only events first (weight 1), then the
     * general-purpose ones, then those with a choice, each on its fixed
     * counter if still free: so of the events that prefer counter k, one
     * gets it unless a fixed-only event holds it, and the rest need a
     * general-purpose counter each. */
    int gp = u->gp_only;
    for (int k = 0; k < HM_PMU_FIXED_MAX; k++) {
        int n = u->fixed_or_gp[k];
        bool held = (u->fixed_only >> k) & 1u;
        gp += n > 0 && !held ? n - 1 : n;
    }
    return gp;
}

bool hm_cpu_smt_active(const char *root)
{
    hm_procfile f;
    hm_error err;
    if (hm_procfile_open(&f, root, "sys/devices/system/cpu/smt/active", &err) < 0)
        return true; /* see the header: unknown counts as on */
    bool off = f.len > 0 && f.buf[0] == '0';
    hm_procfile_close(&f);
    return !off;
}

int hm_pmu_profile_gp_counters(const hm_pmu_profile *p, bool smt_active)
{
    return (int)(smt_active ? p->gp_counters : p->gp_counters_smt_off);
}
