/* rapl: CPU package and DRAM energy from the powercap RAPL tree,
 * /sys/class/powercap/intel-rapl:<pkg>[:<sub>]/ (Intel, and AMD Zen
 * through the same driver and the same names).
 *
 * Each zone's `energy_uj` counts microjoules and wraps at the zone's
 * `max_energy_range_uj` (read once at open): the energy of a period is
 * cur - prev, or (range - prev) + cur when the counter went down. Only the
 * `package-N` and `dram` domains are sampled: `core` and `uncore` are
 * parts of a package (summing them would count twice) and `psys` is the
 * whole platform where it exists. Since Linux 5.10 energy_uj is readable
 * by root only (a side channel, CVE-2020-8694): the first refused read
 * is one notice and the source stays off.
 *
 * Power limits: each zone's constraints (constraint_N_name long_term,
 * short_term, peak_power; _power_limit_uw, _time_window_us) and its
 * `enabled` file are read at open and then every RAPL_LIMITS_EVERY_NS
 * (limits change seldom, and on Intel each read is an MSR read on the
 * package's CPU, an interrupt there), and every energy line carries the
 * last values read: the digest's power_cap factor compares the package's
 * power with its enabled limit. A zone without constraint files (AMD
 * packages through this driver often have none: their limits live in
 * firmware, invisible here) has energy lines without limit fields.
 *
 * rapl.sysfs_root names another tree to read (the test bed's energy,
 * simulated per node by python/hushmon/testbed/raplsim.py): that tree is
 * the node's own, so its lines carry no scope=host tag, and a zone whose
 * directory holds a `hushmon_sim` file is simulated: its lines carry
 * backend=sim, as the simulated PMU's and InfiniBand counters' do, so a
 * report can say the energy is not measured. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define RAPL_ZONES_MAX 32
#define RAPL_CONSTRAINTS_MAX 4
#define RAPL_LIMITS_EVERY_NS (60 * 1000000000LL)

#define RAPL_METRICS(X, P)                                                                    \
    X(P, energy_j, "J", "energy used in the period (counter wrap handled)")                  \
    X(P, power_w, "W", "energy_j over the period's length")                                   \
    X(P, long_term_limit_w, "W", "constraint long_term (PL1): power_limit_uw, read every 60 s") \
    X(P, long_term_window_s, "s", "constraint long_term: time_window_us")                     \
    X(P, short_term_limit_w, "W", "constraint short_term (PL2)")                              \
    X(P, short_term_window_s, "s", "constraint short_term: time_window_us")                   \
    X(P, peak_limit_w, "W", "constraint peak_power (PL4, newer Intel parts)")                 \
    X(P, limits_enabled, "", "the zone's enabled file: 1 = its power limit is enforced")
HM_METRIC_ENUM(RAPL, RAPL_METRICS);

/* The constraints the driver names, and the fields each gives. */
enum { LIM_LONG, LIM_SHORT, LIM_PEAK, LIM_KINDS };
static const char *const limit_name[LIM_KINDS] = {"long_term", "short_term", "peak_power"};

typedef struct rapl_limits {
    double limit_w[LIM_KINDS];  /* NaN: the zone has no such constraint */
    double window_s[LIM_KINDS]; /* NaN: none (peak_power has no window) */
    int enabled;                /* -1: no enabled file */
} rapl_limits;

typedef struct rapl_zone {
    char zone[48];     /* "intel-rapl:0" */
    char domain[32];   /* "package-0", "dram" */
    char dir[PATH_MAX];
    hm_procfile energy;
    rapl_limits limits;
    int64_t limits_read_mono_ns;
    uint64_t range_uj; /* where energy_uj wraps; 0 if the driver gives none */
    bool simulated;    /* the zone directory has a hushmon_sim file */
    bool have_prev;
    uint64_t prev_uj;
    int64_t prev_mono_ns;
} rapl_zone;

typedef struct rapl_state {
    rapl_zone zone[RAPL_ZONES_MAX];
    size_t nzones;
    bool own_tree; /* read through rapl.sysfs_root: this node's own, no scope tag */
} rapl_state;

static void rapl_close(void *state)
{
    rapl_state *s = state;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nzones; i++)
        hm_procfile_close(&s->zone[i].energy);
    free(s);
}

/* The first line of a small sysfs file, without its newline. */
static bool read_line(const char *dir, const char *name, char *out, size_t size)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return false;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool ok = fgets(out, (int)size, f) != NULL;
    fclose(f);
    if (ok)
        out[strcspn(out, "\n")] = '\0';
    return ok;
}

static bool wanted_domain(const char *name)
{
    return strncmp(name, "package-", 8) == 0 || strcmp(name, "dram") == 0;
}

/* Energy of one period in microjoules; false when it cannot be known. */
static bool energy_delta(uint64_t prev, uint64_t cur, uint64_t range, uint64_t *delta)
{
    if (cur >= prev) {
        *delta = cur - prev;
        return true;
    }
    if (range == 0 || prev > range)
        return false; /* no known wrap point: a reset, not a wrap */
    *delta = (range - prev) + cur;
    return true;
}

static double read_number(const char *dir, const char *name)
{
    char text[64], *end = NULL;
    if (!read_line(dir, name, text, sizeof text))
        return NAN;
    double v = strtod(text, &end);
    return end != text ? v : NAN;
}

/* The zone's constraints as the driver names them (their order differs
 * between parts: the name file says which is which). */
static void read_limits(rapl_zone *z)
{
    rapl_limits *l = &z->limits;
    for (int k = 0; k < LIM_KINDS; k++)
        l->limit_w[k] = l->window_s[k] = NAN;
    for (int i = 0; i < RAPL_CONSTRAINTS_MAX; i++) {
        char file[64], name[32];
        snprintf(file, sizeof file, "constraint_%d_name", i);
        if (!read_line(z->dir, file, name, sizeof name))
            continue;
        for (int k = 0; k < LIM_KINDS; k++) {
            if (strcmp(name, limit_name[k]) != 0)
                continue;
            snprintf(file, sizeof file, "constraint_%d_power_limit_uw", i);
            l->limit_w[k] = read_number(z->dir, file) / 1e6;
            snprintf(file, sizeof file, "constraint_%d_time_window_us", i);
            l->window_s[k] = read_number(z->dir, file) / 1e6;
        }
    }
    double enabled = read_number(z->dir, "enabled");
    l->enabled = isnan(enabled) ? -1 : enabled != 0;
}

static void put_limits(hm_lp *out, const rapl_limits *l)
{
    const char *const limit_field[LIM_KINDS] = {
        HM_M(RAPL, long_term_limit_w), HM_M(RAPL, short_term_limit_w), HM_M(RAPL, peak_limit_w)};
    const char *const window_field[LIM_KINDS] = {
        HM_M(RAPL, long_term_window_s), HM_M(RAPL, short_term_window_s), NULL};
    for (int k = 0; k < LIM_KINDS; k++) {
        if (!isnan(l->limit_w[k]))
            hm_lp_field_f64(out, limit_field[k], l->limit_w[k]);
        if (window_field[k] != NULL && !isnan(l->window_s[k]))
            hm_lp_field_f64(out, window_field[k], l->window_s[k]);
    }
    if (l->enabled >= 0)
        hm_lp_field_i64(out, HM_M(RAPL, limits_enabled), l->enabled);
}

/* 1: zone added, 0: not a zone we sample, -1: refused (root only). */
static int add_zone(rapl_state *s, const char *base, const char *name)
{
    char dir[PATH_MAX], domain[32], range[32];
    if (snprintf(dir, sizeof dir, "%s/%s", base, name) >= (int)sizeof dir ||
        !read_line(dir, "name", domain, sizeof domain) || !wanted_domain(domain))
        return 0;
    if (s->nzones == RAPL_ZONES_MAX || strlen(name) >= sizeof s->zone[0].zone)
        return 0;
    rapl_zone *z = &s->zone[s->nzones];
    memset(z, 0, sizeof *z);
    z->energy.fd = -1;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/energy_uj", dir);
    if (access(path, R_OK) != 0)
        return errno == EACCES || errno == EPERM ? -1 : 0;
    hm_error e;
    if (hm_procfile_open_path(&z->energy, path, &e) < 0)
        return 0;
    memcpy(z->zone, name, strlen(name) + 1);
    memcpy(z->domain, domain, strlen(domain) + 1);
    memcpy(z->dir, dir, strlen(dir) + 1);
    read_limits(z);
    if (read_line(dir, "max_energy_range_uj", range, sizeof range))
        z->range_uj = strtoull(range, NULL, 10);
    snprintf(path, sizeof path, "%s/hushmon_sim", dir);
    z->simulated = access(path, F_OK) == 0;
    s->nzones++;
    return 1;
}

static int rapl_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    char base[PATH_MAX];
    const char *sysfs = env->cfg->rapl_sysfs_root;
    if ((sysfs[0] != '\0' ? hm_path_join(base, sizeof base, sysfs, "class/powercap", err)
                          : hm_path_join(base, sizeof base, env->cfg->root, "sys/class/powercap",
                                         err)) < 0)
        return -1;
    DIR *d = opendir(base);
    if (d == NULL) {
        hm_log_notice("rapl: no %s (no RAPL driver on this machine, as in most VMs): no energy "
                      "lines",
                      base);
        return 0;
    }
    rapl_state *s = calloc(1, sizeof *s);
    if (s == NULL) {
        closedir(d);
        return hm_error_set(err, "out of memory");
    }
    bool refused = false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        /* intel-rapl-mmio:* repeats the package zone on some Intel parts. */
        if (strncmp(de->d_name, "intel-rapl:", 11) != 0)
            continue;
        refused |= add_zone(s, base, de->d_name) < 0;
    }
    closedir(d);
    if (refused) {
        hm_log_notice("rapl: %s/intel-rapl:*/energy_uj is readable by root only (Linux >= 5.10): "
                      "no energy lines; run the agent as root or make energy_uj readable "
                      "(e.g. a udev rule)",
                      base);
        rapl_close(s);
        return 0;
    }
    if (s->nzones == 0) {
        hm_log_notice("rapl: no package or dram zone under %s: no energy lines", base);
        rapl_close(s);
        return 0;
    }
    s->own_tree = sysfs[0] != '\0';
    *state = s;
    return 0;
}

static int rapl_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    rapl_state *s = state;
    int rc = 0;
    if (s->own_tree)
        hm_lp_set_scope(out, NULL); /* the tree given for this node: its own */
    for (size_t i = 0; i < s->nzones; i++) {
        rapl_zone *z = &s->zone[i];
        uint64_t now;
        if (z->limits_read_mono_ns == 0)
            z->limits_read_mono_ns = ctx->mono_ns; /* read at open */
        else if (ctx->mono_ns - z->limits_read_mono_ns >= RAPL_LIMITS_EVERY_NS) {
            read_limits(z);
            z->limits_read_mono_ns = ctx->mono_ns;
        }
        if (hm_procfile_read(&z->energy, err) < 0) {
            z->have_prev = false;
            rc = -1; /* reported after the other zones are sampled */
            continue;
        }
        hm_scan c = hm_scan_of(z->energy.buf, z->energy.len);
        if (!hm_scan_u64(&c, &now)) {
            z->have_prev = false;
            rc = hm_error_set(err, "%s: not a number", z->energy.path);
            continue;
        }
        double dt = hm_dt_s(z->prev_mono_ns, ctx->mono_ns);
        uint64_t delta_uj = 0;
        bool known = z->have_prev && dt > 0 && energy_delta(z->prev_uj, now, z->range_uj, &delta_uj);
        z->prev_uj = now;
        z->have_prev = true;
        z->prev_mono_ns = ctx->mono_ns;
        if (!known)
            continue;
        double energy_j = (double)delta_uj / 1e6;
        hm_lp_begin(out, "rapl");
        hm_lp_tag(out, "zone", z->zone);
        hm_lp_tag(out, "domain", z->domain);
        if (z->simulated)
            hm_lp_tag(out, "backend", "sim");
        hm_lp_field_f64(out, HM_M(RAPL, energy_j), energy_j);
        hm_lp_field_f64(out, HM_M(RAPL, power_w), energy_j / dt);
        put_limits(out, &z->limits);
        hm_lp_end(out);
    }
    return rc;
}

const hm_sampler_ops hm_sampler_sys_powercap = {
    .name = "rapl",
    .reads = "/sys/class/powercap/intel-rapl:*/energy_uj (package-N and dram zones; Intel and "
             "AMD), constraint_*_{name,power_limit_uw,time_window_us} and enabled every 60 s",
    .measurement = "rapl (tags zone, domain)",
    .fields = HM_FIELDS(RAPL_METRICS),
    .default_on = true,
    .open = rapl_open,
    .sample = rapl_sample,
    .close = rapl_close,
};
