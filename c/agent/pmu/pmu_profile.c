#include "pmu_profile.h"

#include <dirent.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmu_counters.h"
#include "procfile.h"
#include "toml.h"

const char *const hm_pmu_role_names[HM_ROLE_COUNT] = {
    "instructions", "cycles", "retired_slots", "total_slots", "mem_stall_cycles",
    "store_stall_cycles",
};

typedef struct hw_name {
    const char *name;
    uint64_t config;
} hw_name;

static const hw_name hw_names[] = {
    {"cycles", PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_COUNT_HW_INSTRUCTIONS},
    {"cache_references", PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache_misses", PERF_COUNT_HW_CACHE_MISSES},
    {"branch_instructions", PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch_misses", PERF_COUNT_HW_BRANCH_MISSES},
    {"stalled_cycles_frontend", PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    {"stalled_cycles_backend", PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    {"ref_cycles", PERF_COUNT_HW_REF_CPU_CYCLES},
};

int hm_pmu_parse_encoding(const char *text, uint32_t *type, uint64_t *config, hm_error *err)
{
    if (strncmp(text, "hw:", 3) == 0) {
        for (size_t i = 0; i < sizeof hw_names / sizeof hw_names[0]; i++) {
            if (strcmp(text + 3, hw_names[i].name) == 0) {
                *type = PERF_TYPE_HARDWARE;
                *config = hw_names[i].config;
                return 0;
            }
        }
        return hm_error_set(err, "unknown generic event '%s'", text);
    }
    if (strncmp(text, "raw:0x", 6) == 0 && text[6] != '\0') {
        char *end;
        unsigned long long v = strtoull(text + 6, &end, 16);
        if (*end == '\0') {
            *type = PERF_TYPE_RAW;
            *config = v;
            return 0;
        }
    }
    return hm_error_set(err, "bad event encoding '%s' (want hw:<name> or raw:0x<hex>)", text);
}

static int find_event(const hm_pmu_profile *p, const char *name)
{
    for (size_t i = 0; i < p->nevents; i++)
        if (strcmp(p->event[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* One encoding a fixed counter counts. */
typedef struct fixed_encoding {
    uint32_t type;
    uint64_t config;
    int counter;
    bool only;
} fixed_encoding;

#define FIXED_ENCODINGS_MAX 64

/* [fixed_counters] and [fixed_only_counters]: counter name = the
 * encodings it counts. Counters are numbered in file order across both
 * tables. */
static int load_fixed(hm_pmu_profile *p, hm_toml_doc *doc, const char *path,
                      fixed_encoding *enc, size_t *nenc, hm_error *err)
{
    *nenc = 0;
    for (size_t i = 0; i < doc->count; i++) {
        hm_toml_entry *e = &doc->entries[i];
        bool only = strncmp(e->key, "fixed_only_counters.", 20) == 0;
        if (!only && strncmp(e->key, "fixed_counters.", 15) != 0)
            continue;
        e->used = true;
        const char *name = strchr(e->key, '.') + 1;
        if (p->nfixed == HM_PMU_FIXED_MAX)
            return hm_error_set(err, "%s:%d: more than %d fixed counters", path, e->line,
                                HM_PMU_FIXED_MAX);
        if (e->value.type != HM_TOML_ARRAY || e->value.item_type != HM_TOML_STRING || e->value.n == 0)
            return hm_error_set(err, "%s:%d: a fixed counter is a non-empty array of event encodings",
                                path, e->line);
        if (strlen(name) >= sizeof p->fixed_name[0])
            return hm_error_set(err, "%s:%d: fixed counter name '%s' too long", path, e->line, name);
        snprintf(p->fixed_name[p->nfixed], sizeof p->fixed_name[0], "%s", name);
        for (size_t k = 0; k < e->value.n; k++) {
            if (*nenc == FIXED_ENCODINGS_MAX)
                return hm_error_set(err, "%s:%d: more than %d fixed-counter encodings", path,
                                    e->line, FIXED_ENCODINGS_MAX);
            fixed_encoding *f = &enc[*nenc];
            if (hm_pmu_parse_encoding(e->value.items[k], &f->type, &f->config, err) < 0)
                return hm_error_wrap(err, "%s:%d", path, e->line);
            for (size_t j = 0; j < *nenc; j++)
                if (enc[j].type == f->type && enc[j].config == f->config)
                    return hm_error_set(err, "%s:%d: '%s' is already counted by fixed counter '%s'",
                                        path, e->line, e->value.items[k],
                                        p->fixed_name[enc[j].counter]);
            f->counter = (int)p->nfixed;
            f->only = only;
            (*nenc)++;
        }
        p->nfixed++;
    }
    return 0;
}

/* roles.<key> = ["event:weight", ...]: a quantity that is a weighted sum of
 * events (FLOPs: operations per instruction; memory bytes: bytes per line). */
static int parse_terms(hm_toml_doc *doc, const hm_pmu_profile *p, const char *path,
                       const char *key, int *event, double *weight, size_t *n, hm_error *err)
{
    char full[64];
    snprintf(full, sizeof full, "roles.%s", key);
    hm_toml_entry *terms = hm_toml_get(doc, full);
    if (terms == NULL)
        return 0;
    if (terms->value.type != HM_TOML_ARRAY || terms->value.item_type != HM_TOML_STRING ||
        terms->value.n > HM_PMU_FLOPS_TERMS_MAX)
        return hm_error_set(err, "%s:%d: %s is an array of \"event:weight\"", path, terms->line,
                            full);
    for (size_t k = 0; k < terms->value.n; k++) {
        char term[HM_TOML_STR_MAX];
        snprintf(term, sizeof term, "%s", terms->value.items[k]);
        char *colon = strchr(term, ':');
        char *end = NULL;
        double w = colon ? strtod(colon + 1, &end) : 0;
        if (colon == NULL || end == colon + 1 || *end != '\0' || !(w > 0))
            return hm_error_set(err, "%s:%d: %s term '%s' is not event:weight", path, terms->line,
                                key, term);
        *colon = '\0';
        int idx = find_event(p, term);
        if (idx < 0)
            return hm_error_set(err, "%s:%d: %s names unknown event '%s'", path, terms->line, key,
                                term);
        event[*n] = idx;
        weight[*n] = w;
        (*n)++;
    }
    return 0;
}

static int load_doc(hm_pmu_profile *p, hm_toml_doc *doc, const char *path, hm_error *err)
{
    memset(p, 0, sizeof *p);
    p->family = -1;
    p->gp_counters_smt_off = -1;
    p->total_slots_scale = 1.0;
    for (int r = 0; r < HM_ROLE_COUNT; r++)
        p->role[r] = -1;
    if (hm_toml_get_string(doc, "name", p->name, sizeof p->name, err) < 0 ||
        hm_toml_get_string(doc, "description", p->description, sizeof p->description, err) < 0 ||
        hm_toml_get_string(doc, "vendor", p->vendor, sizeof p->vendor, err) < 0 ||
        hm_toml_get_int(doc, "family", &p->family, err) < 0 ||
        hm_toml_get_int(doc, "gp_counters", &p->gp_counters, err) < 0 ||
        hm_toml_get_int(doc, "gp_counters_smt_off", &p->gp_counters_smt_off, err) < 0 ||
        hm_toml_get_double(doc, "roles.total_slots_scale", &p->total_slots_scale, err) < 0)
        return -1;
    if (p->name[0] == '\0')
        return hm_error_set(err, "%s: no 'name'", path);
    if (p->gp_counters < 1 || p->gp_counters > HM_PMU_COUNTERS_MAX)
        return hm_error_set(err, "%s: 'gp_counters' must be 1..%d", path, HM_PMU_COUNTERS_MAX);
    if (p->gp_counters_smt_off == -1)
        p->gp_counters_smt_off = p->gp_counters; /* no SMT, or SMT leaves the counters alone */
    if (p->gp_counters_smt_off < p->gp_counters || p->gp_counters_smt_off > HM_PMU_COUNTERS_MAX)
        return hm_error_set(err, "%s: 'gp_counters_smt_off' must be gp_counters..%d", path,
                            HM_PMU_COUNTERS_MAX);
    fixed_encoding enc[FIXED_ENCODINGS_MAX];
    size_t nenc;
    if (load_fixed(p, doc, path, enc, &nenc, err) < 0)
        return -1;
    hm_toml_entry *models = hm_toml_get(doc, "models");
    if (models != NULL) {
        if (models->value.type != HM_TOML_ARRAY ||
            (models->value.n > 0 && models->value.item_type != HM_TOML_INT) ||
            models->value.n > 64)
            return hm_error_set(err, "%s:%d: 'models' must be an array of integers", path, models->line);
        for (size_t i = 0; i < models->value.n; i++)
            p->models[i] = models->value.ints[i];
        p->nmodels = models->value.n;
    }
    /* [events] and [groups] keep the file's order. */
    for (size_t i = 0; i < doc->count; i++) {
        hm_toml_entry *e = &doc->entries[i];
        if (strncmp(e->key, "events.", 7) == 0) {
            e->used = true;
            if (p->nevents == HM_PMU_EVENTS_MAX)
                return hm_error_set(err, "%s:%d: more than %d events", path, e->line, HM_PMU_EVENTS_MAX);
            if (e->value.type != HM_TOML_STRING)
                return hm_error_set(err, "%s:%d: event encoding must be a string", path, e->line);
            hm_pmu_event *ev = &p->event[p->nevents];
            snprintf(ev->name, sizeof ev->name, "%s", e->key + 7);
            if (hm_pmu_parse_encoding(e->value.str, &ev->type, &ev->config, err) < 0)
                return hm_error_wrap(err, "%s:%d", path, e->line);
            ev->fixed = -1;
            for (size_t k = 0; k < nenc; k++) {
                if (enc[k].type == ev->type && enc[k].config == ev->config) {
                    ev->fixed = enc[k].counter;
                    ev->fixed_only = enc[k].only;
                }
            }
            p->nevents++;
        }
    }
    for (size_t i = 0; i < doc->count; i++) {
        hm_toml_entry *e = &doc->entries[i];
        if (strncmp(e->key, "groups.", 7) != 0)
            continue;
        e->used = true;
        if (p->ngroups == HM_PMU_GROUPS_MAX)
            return hm_error_set(err, "%s:%d: more than %d groups", path, e->line, HM_PMU_GROUPS_MAX);
        if (e->value.type != HM_TOML_ARRAY || e->value.item_type != HM_TOML_STRING || e->value.n == 0)
            return hm_error_set(err, "%s:%d: a group is a non-empty array of event names", path, e->line);
        if (e->value.n > HM_PMU_GROUP_EVENTS_MAX)
            return hm_error_set(err, "%s:%d: group '%s' has more than %d events", path, e->line,
                                e->key + 7, HM_PMU_GROUP_EVENTS_MAX);
        hm_pmu_group *g = &p->group[p->ngroups];
        snprintf(g->name, sizeof g->name, "%s", e->key + 7);
        hm_pmu_counter_use use = {0};
        for (size_t k = 0; k < e->value.n; k++) {
            int idx = find_event(p, e->value.items[k]);
            if (idx < 0)
                return hm_error_set(err, "%s:%d: group '%s' names unknown event '%s'", path,
                                    e->line, g->name, e->value.items[k]);
            if (hm_pmu_counter_use_add(&use, &p->event[idx]) < 0)
                return hm_error_set(err, "%s:%d: group '%s': '%s' needs fixed counter '%s', which "
                                    "another of its events holds", path, e->line, g->name,
                                    e->value.items[k], p->fixed_name[p->event[idx].fixed]);
            g->event[g->n++] = idx;
        }
        /* With SMT on: a group that fits then fits on every node. */
        int gp = hm_pmu_counter_use_gp(&use);
        if (gp > p->gp_counters)
            return hm_error_set(err, "%s:%d: group '%s' needs %d general-purpose counters but the "
                                "PMU has %lld", path, e->line, g->name, gp,
                                (long long)p->gp_counters);
        p->ngroups++;
    }
    if (p->ngroups == 0)
        return hm_error_set(err, "%s: no [groups]", path);
    for (int r = 0; r < HM_ROLE_COUNT; r++) {
        char key[64], name[48] = "";
        snprintf(key, sizeof key, "roles.%s", hm_pmu_role_names[r]);
        if (hm_toml_get_string(doc, key, name, sizeof name, err) < 0)
            return -1;
        if (name[0] == '\0')
            continue;
        p->role[r] = find_event(p, name);
        if (p->role[r] < 0)
            return hm_error_set(err, "%s: role %s names unknown event '%s'", path, hm_pmu_role_names[r], name);
    }
    if (parse_terms(doc, p, path, "flops", p->flops_event, p->flops_weight, &p->nflops, err) < 0 ||
        parse_terms(doc, p, path, "mem_bytes", p->mem_bytes_event, p->mem_bytes_weight,
                    &p->nmem_bytes, err) < 0)
        return -1;
    /* Every event must be counted by some group. */
    for (size_t i = 0; i < p->nevents; i++) {
        bool in_group = false;
        for (size_t g = 0; g < p->ngroups && !in_group; g++)
            for (size_t k = 0; k < p->group[g].n; k++)
                in_group |= p->group[g].event[k] == (int)i;
        if (!in_group)
            return hm_error_set(err, "%s: event '%s' is in no group", path, p->event[i].name);
    }
    const hm_toml_entry *unknown = hm_toml_first_unused(doc, NULL);
    if (unknown != NULL)
        return hm_error_set(err, "%s:%d: unknown key '%s'", path, unknown->line, unknown->key);
    return 0;
}

int hm_pmu_profile_load(hm_pmu_profile *p, const char *path, hm_error *err)
{
    hm_toml_doc doc;
    if (hm_toml_load(&doc, path, err) < 0)
        return -1;
    int rc = load_doc(p, &doc, path, err);
    hm_toml_free(&doc);
    return rc;
}

int hm_cpu_id_read(hm_cpu_id *id, const char *root, hm_error *err)
{
    memset(id, 0, sizeof *id);
    id->family = id->model = -1;
    hm_procfile f;
    if (hm_procfile_open(&f, root, "proc/cpuinfo", err) < 0)
        return -1;
    hm_scan c = hm_scan_of(f.buf, f.len);
    do {
        /* "key<TAB>: value"; only the first processor's block is needed. */
        const char *line = c.p;
        const char *colon = memchr(line, ':', (size_t)(c.end - line));
        const char *nl = memchr(line, '\n', (size_t)(c.end - line));
        if (nl == line)
            break; /* end of the first CPU's block */
        if (colon == NULL || (nl != NULL && colon > nl))
            continue;
        hm_scan v = hm_scan_of(colon + 1, (size_t)((nl ? nl : c.end) - colon - 1));
        uint64_t num;
        if (strncmp(line, "vendor_id", 9) == 0) {
            const char *w;
            size_t wl;
            if (hm_scan_word(&v, &w, &wl, false))
                snprintf(id->vendor, sizeof id->vendor, "%.*s", (int)wl, w);
        } else if (strncmp(line, "cpu family", 10) == 0 && hm_scan_u64(&v, &num)) {
            id->family = (int64_t)num;
        } else if (strncmp(line, "model", 5) == 0 && (line[5] == '\t' || line[5] == ' ') &&
                   hm_scan_u64(&v, &num)) {
            id->model = (int64_t)num;
        }
    } while (hm_scan_next_line(&c));
    hm_procfile_close(&f);
    return 0;
}

bool hm_pmu_profile_matches(const hm_pmu_profile *p, const hm_cpu_id *id)
{
    if (p->vendor[0] == '\0')
        return true;
    if (strcmp(p->vendor, id->vendor) != 0 || (p->family >= 0 && p->family != id->family))
        return false;
    if (p->nmodels == 0)
        return true;
    for (size_t i = 0; i < p->nmodels; i++)
        if (p->models[i] == id->model)
            return true;
    return false;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

int hm_pmu_profile_select(hm_pmu_profile *p, const char *dir, const char *name,
                          const hm_cpu_id *id, hm_error *err)
{
    char path[PATH_MAX];
    if (strcmp(name, "auto") != 0) {
        if (strchr(name, '/') != NULL)
            return hm_error_set(err, "profile name '%s' must not contain '/'", name);
        int len = snprintf(path, sizeof path, "%s/%s.toml", dir, name);
        if (len < 0 || (size_t)len >= sizeof path)
            return hm_error_set(err, "profile path too long");
        return hm_pmu_profile_load(p, path, err);
    }
    DIR *d = opendir(dir);
    if (d == NULL)
        return hm_error_errno(err, "opening profile directory %s", dir);
    char names[64][256];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 64) {
        size_t len = strlen(de->d_name);
        if (len > 5 && len < 256 && strcmp(de->d_name + len - 5, ".toml") == 0)
            strcpy(names[n++], de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_names);
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (len < 0 || (size_t)len >= sizeof path)
            return hm_error_set(err, "profile path too long in %s", dir);
        hm_pmu_profile cand;
        if (hm_pmu_profile_load(&cand, path, err) < 0)
            return -1; /* a broken profile file is an error, not a skip */
        if (cand.vendor[0] != '\0' && hm_pmu_profile_matches(&cand, id)) {
            *p = cand;
            return 0;
        }
    }
    int len = snprintf(path, sizeof path, "%s/generic.toml", dir);
    if (len < 0 || (size_t)len >= sizeof path)
        return hm_error_set(err, "profile path too long");
    return hm_pmu_profile_load(p, path, err);
}
