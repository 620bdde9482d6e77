/* Event profiles: which hardware events to count on a CPU family, how to
 * group them so each group fits the PMU's counters, and which events play
 * which role in the derived metrics. Profiles are data files
 * (pmu/profiles/<name>.toml) so a new CPU needs no code. */
#ifndef HM_PMU_PROFILE_H
#define HM_PMU_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

#define HM_PMU_EVENTS_MAX 32
#define HM_PMU_GROUPS_MAX 16
#define HM_PMU_GROUP_EVENTS_MAX 8
#define HM_PMU_FLOPS_TERMS_MAX 8
#define HM_PMU_FIXED_MAX 16
#define HM_PMU_COUNTERS_MAX 64

typedef struct hm_pmu_event {
    char name[48];
    uint32_t type;     /* PERF_TYPE_HARDWARE or PERF_TYPE_RAW */
    uint64_t config;
    int fixed;         /* the fixed counter that can count it (index), -1: none */
    bool fixed_only;   /* no general-purpose counter can count it instead */
} hm_pmu_event;

typedef struct hm_pmu_group {
    char name[32];
    size_t n;
    int event[HM_PMU_GROUP_EVENTS_MAX];   /* indexes into profile.event */
} hm_pmu_group;

/* Events the derived metrics are computed from; -1 when a profile has none. */
typedef enum hm_pmu_role {
    HM_ROLE_INSTRUCTIONS,
    HM_ROLE_CYCLES,
    HM_ROLE_RETIRED_SLOTS,      /* issue slots that retired useful work */
    HM_ROLE_TOTAL_SLOTS,        /* x total_slots_scale = all issue slots */
    HM_ROLE_MEM_STALL_CYCLES,   /* cycles stalled on outstanding loads */
    HM_ROLE_STORE_STALL_CYCLES, /* cycles stalled on a full store buffer */
    HM_ROLE_COUNT
} hm_pmu_role;

extern const char *const hm_pmu_role_names[HM_ROLE_COUNT];

typedef struct hm_pmu_profile {
    char name[32];
    char description[200];
    char vendor[16];            /* "" = any (generic) */
    int64_t family;             /* -1 = any */
    int64_t models[64];
    size_t nmodels;             /* 0 = any model of the family */
    int64_t gp_counters;        /* general-purpose counters per CPU with SMT on:
                                   every group must fit them */
    int64_t gp_counters_smt_off;  /* per CPU with SMT off (= gp_counters if unsaid) */
    char fixed_name[HM_PMU_FIXED_MAX][32]; /* fixed counters, besides those */
    size_t nfixed;
    hm_pmu_event event[HM_PMU_EVENTS_MAX];
    size_t nevents;
    hm_pmu_group group[HM_PMU_GROUPS_MAX];
    size_t ngroups;
    int role[HM_ROLE_COUNT];
    double total_slots_scale;
    size_t nflops;              /* floating-point operations = sum weight * event */
    int flops_event[HM_PMU_FLOPS_TERMS_MAX];
    double flops_weight[HM_PMU_FLOPS_TERMS_MAX];
    size_t nmem_bytes;          /* bytes to and from memory = sum weight * event */
    int mem_bytes_event[HM_PMU_FLOPS_TERMS_MAX];
    double mem_bytes_weight[HM_PMU_FLOPS_TERMS_MAX];
} hm_pmu_profile;

int hm_pmu_profile_load(hm_pmu_profile *p, const char *path, hm_error *err);
/* Event encoding: "hw:instructions", "hw:cycles", ... or "raw:0x<hex>". */
int hm_pmu_parse_encoding(const char *text, uint32_t *type, uint64_t *config, hm_error *err);

typedef struct hm_cpu_id {
    char vendor[16];
    int64_t family, model;
} hm_cpu_id;

/* vendor_id / cpu family / model of the first CPU in <root>/proc/cpuinfo. */
int hm_cpu_id_read(hm_cpu_id *id, const char *root, hm_error *err);
bool hm_pmu_profile_matches(const hm_pmu_profile *p, const hm_cpu_id *id);
/* name = "auto": the first profile in dir (by file name) matching id that
 * is not generic, else "generic". Otherwise loads <dir>/<name>.toml. */
int hm_pmu_profile_select(hm_pmu_profile *p, const char *dir, const char *name,
                          const hm_cpu_id *id, hm_error *err);

#endif
