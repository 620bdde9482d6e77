/* thermal: CPU thermal throttling from the kernel's therm_throt counters,
 * /sys/devices/system/cpu/cpu<N>/thermal_throttle/ (Intel; x86 MCE code):
 *   package_throttle_count, package_throttle_total_time_ms
 *       times the package crossed its thermal threshold (PROCHOT) and the
 *       time it spent throttled (the time file since Linux 5.6)
 *   package_power_limit_count
 *       power-limit notifications: only where the kernel was booted with
 *       int_pln_enable (off by default since it interrupts so often)
 *   core_throttle_count, core_throttle_total_time_ms
 *       the same per core.
 * Every CPU of a package shows the package's counters, and every thread
 * of a core the core's, so one CPU per package and one per core
 * (topology/physical_package_id, core_id) is read. The package counters
 * are read each period; the core counters every THERM_CORES_EVERY_NS
 * (10 s): a 128-core node has 256 such files, which each period would
 * cost more than the rest of the agent's reads. The core figures are
 * then rates over those 10 s, on the period they are read in.
 *
 * One line per package: the events' rates, the share of the period spent
 * throttled, and on the periods the cores are read the sum of their
 * events, the most throttled core's share and how many cores throttled.
 * AMD CPUs have no thermal_throttle directories (the counters are
 * Intel's), nor do most VMs: the source is then off, with one notice. A
 * counter that went down (a CPU taken offline and back) gives no rate. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define THERM_PACKAGES_MAX 16
#define THERM_CORES_MAX 1024
#define THERM_CORES_EVERY_NS (10 * 1000000000LL)

#define THERM_METRICS(X, P)                                                                   \
    X(P, package_throttles_per_s, "1/s", "package thermal throttle events (package_throttle_count)") \
    X(P, package_throttled_pct, "%", "share of the period the package was throttled "         \
                                     "(package_throttle_total_time_ms)")                     \
    X(P, package_power_limits_per_s, "1/s", "package power-limit notifications "               \
                                            "(package_power_limit_count, int_pln_enable)")    \
    X(P, core_throttles_per_s, "1/s", "core throttle events, summed over the package's "      \
                                      "cores (read every 10 s)")                              \
    X(P, core_throttled_pct_max, "%", "the most throttled core's share of the time since "    \
                                      "the cores' last read")                                 \
    X(P, cores_throttled, "", "cores whose throttle count rose since their last read")
HM_METRIC_ENUM(THERM, THERM_METRICS);

enum { PK_COUNT, PK_TIME_MS, PK_PLN, PK_FILES };
static const char *const pkg_file[PK_FILES] = {
    "package_throttle_count", "package_throttle_total_time_ms", "package_power_limit_count"};
enum { CO_COUNT, CO_TIME_MS, CO_FILES };
static const char *const core_file[CO_FILES] = {"core_throttle_count",
                                                "core_throttle_total_time_ms"};

typedef struct therm_counter {
    hm_procfile f; /* fd -1: the kernel has no such file */
    bool have_prev;
    uint64_t prev;
} therm_counter;

typedef struct therm_core {
    int package_id, core_id;
    therm_counter c[CO_FILES];
} therm_core;

typedef struct therm_package {
    int id;
    char tag[16];
    therm_counter c[PK_FILES];
    int64_t prev_mono_ns;
    /* the cores' figures of the read that happened this period */
    double core_events, core_time_pct_max;
    int cores_throttled;
    bool core_time_known, cores_fresh;
} therm_package;

typedef struct therm_state {
    therm_package pkg[THERM_PACKAGES_MAX];
    size_t npkgs;
    therm_core *core;
    size_t ncores;
    int64_t cores_prev_mono_ns;
} therm_state;

static void close_counters(therm_counter *c, int n)
{
    for (int i = 0; i < n; i++)
        if (hm_procfile_is_open(&c[i].f))
            hm_procfile_close(&c[i].f);
}

static void therm_close(void *state)
{
    therm_state *s = state;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->npkgs; i++)
        close_counters(s->pkg[i].c, PK_FILES);
    for (size_t i = 0; i < s->ncores; i++)
        close_counters(s->core[i].c, CO_FILES);
    free(s->core);
    free(s);
}

/* A small integer file (topology ids); -1 if unreadable. */
static int read_id(const char *dir, const char *name)
{
    char path[PATH_MAX], text[32];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return -1;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    bool ok = fgets(text, sizeof text, f) != NULL;
    fclose(f);
    return ok ? atoi(text) : -1;
}

/* Opens the counters of names[] that exist under dir; true if the first does. */
static bool open_counters(therm_counter *c, const char *const *names, int n, const char *dir)
{
    for (int i = 0; i < n; i++) {
        c[i].f.fd = -1;
        char path[PATH_MAX];
        hm_error e;
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path ||
            access(path, R_OK) != 0 || hm_procfile_open_path(&c[i].f, path, &e) < 0)
            c[i].f.fd = -1;
    }
    return hm_procfile_is_open(&c[0].f);
}

static bool is_cpu_dir(const char *name)
{
    if (strncmp(name, "cpu", 3) != 0 || name[3] == '\0')
        return false;
    for (const char *p = name + 3; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

/* One CPU directory: its package and core, if not seen yet. -1: out of memory. */
static int add_cpu(therm_state *s, const char *cpu_dir, size_t *cores_cap)
{
    char topo[PATH_MAX], therm[PATH_MAX];
    if (snprintf(topo, sizeof topo, "%s/topology", cpu_dir) >= (int)sizeof topo ||
        snprintf(therm, sizeof therm, "%s/thermal_throttle", cpu_dir) >= (int)sizeof therm)
        return 0;
    int pkg = read_id(topo, "physical_package_id");
    int core = read_id(topo, "core_id");
    if (pkg < 0 || access(therm, F_OK) != 0)
        return 0;
    size_t p = 0;
    while (p < s->npkgs && s->pkg[p].id != pkg)
        p++;
    if (p == s->npkgs && s->npkgs < THERM_PACKAGES_MAX) {
        therm_package *tp = &s->pkg[s->npkgs];
        memset(tp, 0, sizeof *tp);
        tp->id = pkg;
        snprintf(tp->tag, sizeof tp->tag, "%d", pkg);
        if (open_counters(tp->c, pkg_file, PK_FILES, therm))
            s->npkgs++;
        else
            close_counters(tp->c, PK_FILES);
    }
    for (size_t i = 0; i < s->ncores; i++)
        if (s->core[i].package_id == pkg && s->core[i].core_id == core)
            return 0;
    if (core < 0 || s->ncores == THERM_CORES_MAX)
        return 0;
    if (s->ncores == *cores_cap) {
        size_t cap = *cores_cap ? 2 * *cores_cap : 64;
        therm_core *grown = realloc(s->core, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        s->core = grown;
        *cores_cap = cap;
    }
    therm_core *tc = &s->core[s->ncores];
    memset(tc, 0, sizeof *tc);
    tc->package_id = pkg;
    tc->core_id = core;
    if (open_counters(tc->c, core_file, CO_FILES, therm))
        s->ncores++;
    else
        close_counters(tc->c, CO_FILES);
    return 0;
}

static int therm_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    char base[PATH_MAX];
    if (hm_path_join(base, sizeof base, env->cfg->root, "sys/devices/system/cpu", err) < 0)
        return -1;
    DIR *d = opendir(base);
    if (d == NULL) {
        hm_log_notice("thermal: no %s: no thermal lines", base);
        return 0;
    }
    therm_state *s = calloc(1, sizeof *s);
    if (s == NULL) {
        closedir(d);
        return hm_error_set(err, "out of memory");
    }
    size_t cores_cap = 0;
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!is_cpu_dir(de->d_name))
            continue;
        char cpu_dir[PATH_MAX];
        if (snprintf(cpu_dir, sizeof cpu_dir, "%s/%s", base, de->d_name) >= (int)sizeof cpu_dir)
            continue;
        rc = add_cpu(s, cpu_dir, &cores_cap);
    }
    closedir(d);
    if (rc < 0) {
        therm_close(s);
        return hm_error_set(err, "out of memory");
    }
    if (s->npkgs == 0) {
        hm_log_notice("thermal: no %s/cpu*/thermal_throttle (AMD CPUs and most VMs have none): "
                      "no thermal lines",
                      base);
        therm_close(s);
        return 0;
    }
    *state = s;
    return 0;
}

/* Reads one counter; its growth since the last reading in *delta (false:
 * no file, no earlier reading, or it went down). -1 on a failed read. */
static int step(therm_counter *c, uint64_t *delta, bool *known, hm_error *err)
{
    *known = false;
    if (!hm_procfile_is_open(&c->f))
        return 0;
    uint64_t now;
    if (hm_procfile_read(&c->f, err) < 0) {
        c->have_prev = false;
        return -1;
    }
    hm_scan sc = hm_scan_of(c->f.buf, c->f.len);
    if (!hm_scan_u64(&sc, &now)) {
        c->have_prev = false;
        return hm_error_set(err, "%s: not a number", c->f.path);
    }
    if (c->have_prev && now >= c->prev) {
        *delta = now - c->prev;
        *known = true;
    }
    c->prev = now;
    c->have_prev = true;
    return 0;
}

/* Reads every core; each package's sums over its cores. */
static int read_cores(therm_state *s, double dt, hm_error *err)
{
    int rc = 0;
    for (size_t p = 0; p < s->npkgs; p++) {
        therm_package *tp = &s->pkg[p];
        tp->core_events = tp->core_time_pct_max = 0;
        tp->cores_throttled = 0;
        tp->cores_fresh = tp->core_time_known = false;
    }
    for (size_t i = 0; i < s->ncores; i++) {
        therm_core *tc = &s->core[i];
        uint64_t events = 0, time_ms = 0;
        bool have_events, have_time;
        if (step(&tc->c[CO_COUNT], &events, &have_events, err) < 0 ||
            step(&tc->c[CO_TIME_MS], &time_ms, &have_time, err) < 0)
            rc = -1;
        therm_package *tp = NULL;
        for (size_t p = 0; p < s->npkgs && tp == NULL; p++)
            if (s->pkg[p].id == tc->package_id)
                tp = &s->pkg[p];
        if (tp == NULL || !have_events || dt <= 0)
            continue;
        tp->cores_fresh = true;
        tp->core_events += (double)events;
        tp->cores_throttled += events > 0;
        if (have_time) {
            double pct = 100.0 * (double)time_ms / (dt * 1000.0);
            tp->core_time_known = true;
            if (pct > tp->core_time_pct_max)
                tp->core_time_pct_max = pct > 100.0 ? 100.0 : pct;
        }
    }
    for (size_t p = 0; p < s->npkgs; p++)
        s->pkg[p].core_events /= dt > 0 ? dt : 1.0;
    return rc;
}

static int therm_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    therm_state *s = state;
    int rc = 0;
    bool cores_now = s->cores_prev_mono_ns == 0 ||
                     ctx->mono_ns - s->cores_prev_mono_ns >= THERM_CORES_EVERY_NS;
    if (cores_now) {
        rc = read_cores(s, hm_dt_s(s->cores_prev_mono_ns, ctx->mono_ns), err);
        s->cores_prev_mono_ns = ctx->mono_ns;
    }
    for (size_t p = 0; p < s->npkgs; p++) {
        therm_package *tp = &s->pkg[p];
        double dt = hm_dt_s(tp->prev_mono_ns, ctx->mono_ns);
        tp->prev_mono_ns = ctx->mono_ns;
        uint64_t delta[PK_FILES] = {0};
        bool known[PK_FILES];
        for (int k = 0; k < PK_FILES; k++)
            if (step(&tp->c[k], &delta[k], &known[k], err) < 0)
                rc = -1;
        bool pkg_rates = known[PK_COUNT] && dt > 0;
        bool cores = cores_now && tp->cores_fresh;
        if (!pkg_rates && !cores)
            continue;
        hm_lp_begin(out, "thermal");
        hm_lp_tag(out, "package", tp->tag);
        if (pkg_rates) {
            hm_lp_field_f64(out, HM_M(THERM, package_throttles_per_s), (double)delta[PK_COUNT] / dt);
            if (known[PK_TIME_MS]) {
                double pct = 100.0 * (double)delta[PK_TIME_MS] / (dt * 1000.0);
                hm_lp_field_f64(out, HM_M(THERM, package_throttled_pct), pct > 100.0 ? 100.0 : pct);
            }
            if (known[PK_PLN])
                hm_lp_field_f64(out, HM_M(THERM, package_power_limits_per_s), (double)delta[PK_PLN] / dt);
        }
        if (cores) {
            hm_lp_field_f64(out, HM_M(THERM, core_throttles_per_s), tp->core_events);
            if (tp->core_time_known)
                hm_lp_field_f64(out, HM_M(THERM, core_throttled_pct_max), tp->core_time_pct_max);
            hm_lp_field_i64(out, HM_M(THERM, cores_throttled), tp->cores_throttled);
        }
        hm_lp_end(out);
    }
    return rc;
}

const hm_sampler_ops hm_sampler_sys_thermal_throttle = {
    .name = "thermal",
    .reads = "/sys/devices/system/cpu/cpu*/thermal_throttle/{package,core}_throttle_count and "
             "*_total_time_ms, package_power_limit_count (one CPU per package, per core; cores "
             "every 10 s)",
    .measurement = "thermal (tag package)",
    .fields = HM_FIELDS(THERM_METRICS),
    .default_on = true,
    .open = therm_open,
    .sample = therm_sample,
    .close = therm_close,
};
