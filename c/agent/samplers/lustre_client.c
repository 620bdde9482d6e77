/* lustre: Lustre client statistics, per file system (llite) and per
 * object storage target (osc), where a Lustre client is mounted.
 *
 * The stats files are under /proc/fs/lustre/{llite,osc}/<name>/stats on
 * older clients and /sys/kernel/debug/lustre/{llite,osc}/<name>/stats on
 * newer ones (both are looked at). An llite directory is
 * "<fsname>-<instance>", an osc one "<fsname>-OSTnnnn-osc-<instance>".
 * Each stats line is
 *   <name> <count> samples [<unit>] [<min> <max> <sum> [<sumsq>]]
 * with counters since mount (or the last clear): bytes come from the sum
 * of read_bytes/write_bytes, calls from their counts, and the mean RPC
 * wait of a period is the delta of req_waittime's sum (µs) over the delta
 * of its count. Targets are found when the source opens (and again on
 * `reload`); a node without Lustre has no lustre lines and no notice. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define LUSTRE_TARGETS_MAX 256

#define LLITE_METRICS(X, P)                                                                   \
    X(P, read_bytes_per_s, "B/s", "bytes read by applications (read_bytes sum)")             \
    X(P, write_bytes_per_s, "B/s", "bytes written by applications (write_bytes sum)")        \
    X(P, reads_per_s, "1/s", "read calls (read_bytes count)")                                 \
    X(P, writes_per_s, "1/s", "write calls (write_bytes count)")                              \
    X(P, metadata_ops_per_s, "1/s", "open close getattr setattr statfs create mkdir unlink "  \
                                    "rmdir rename")                                           \
    X(P, fsync_per_s, "1/s", "fsync calls")
HM_METRIC_ENUM(LL, LLITE_METRICS);

#define OSC_METRICS(X, P)                                                                     \
    X(P, read_bytes_per_s, "B/s", "bytes read from this OST")                                \
    X(P, write_bytes_per_s, "B/s", "bytes written to this OST")                              \
    X(P, rpcs_per_s, "1/s", "RPCs (req_waittime count)")                                      \
    X(P, rpc_wait_us, "us", "mean wait of the period's RPCs (req_waittime)")                 \
    X(P, rpcs_active, "", "mean RPCs in flight when one was sent (req_active)")
HM_METRIC_ENUM(OSC, OSC_METRICS);

/* Counters kept per target: the count or the sum of a stats line. */
enum {
    V_READ_N, V_READ_SUM, V_WRITE_N, V_WRITE_SUM, V_META_N, V_FSYNC_N,
    V_WAIT_N, V_WAIT_SUM, V_ACTIVE_N, V_ACTIVE_SUM,
    NVALUES
};

typedef struct stat_row {
    const char *name;
    int count_at, sum_at; /* -1: not kept */
} stat_row;

static const stat_row rows[] = {
    {"read_bytes", V_READ_N, V_READ_SUM},   {"write_bytes", V_WRITE_N, V_WRITE_SUM},
    {"open", V_META_N, -1},                 {"close", V_META_N, -1},
    {"getattr", V_META_N, -1},              {"setattr", V_META_N, -1},
    {"statfs", V_META_N, -1},               {"create", V_META_N, -1},
    {"mkdir", V_META_N, -1},                {"unlink", V_META_N, -1},
    {"rmdir", V_META_N, -1},                {"rename", V_META_N, -1},
    {"fsync", V_FSYNC_N, -1},               {"req_waittime", V_WAIT_N, V_WAIT_SUM},
    {"req_active", V_ACTIVE_N, V_ACTIVE_SUM},
};

typedef struct lustre_target {
    bool osc;
    char fs[64];
    char name[64];   /* llite: the instance directory; osc: "OSTnnnn" */
    hm_procfile file;
    bool have_prev;
    uint64_t prev[NVALUES];
    int64_t prev_mono_ns;
} lustre_target;

typedef struct lustre_state {
    lustre_target t[LUSTRE_TARGETS_MAX];
    size_t n;
} lustre_state;

static void lustre_close(void *state)
{
    lustre_state *s = state;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        hm_procfile_close(&s->t[i].file);
    free(s);
}

/* fs and target names from a directory name; false if it is not one. */
static bool names_of(const char *dir, bool osc, char *fs, size_t fs_size, char *name,
                     size_t name_size)
{
    const char *cut = osc ? strstr(dir, "-OST") : strrchr(dir, '-');
    if (cut == NULL || cut == dir || (size_t)(cut - dir) >= fs_size)
        return false;
    memcpy(fs, dir, (size_t)(cut - dir));
    fs[cut - dir] = '\0';
    if (osc) {
        size_t len = strcspn(cut + 1, "-");
        if (len >= name_size)
            return false;
        memcpy(name, cut + 1, len);
        name[len] = '\0';
    } else if (snprintf(name, name_size, "%s", dir) >= (int)name_size) {
        return false;
    }
    return true;
}

static void add_targets(lustre_state *s, const char *base, bool osc)
{
    DIR *d = opendir(base);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (s->n == LUSTRE_TARGETS_MAX) {
            hm_log_warn("lustre: more than %d targets; %s not sampled", LUSTRE_TARGETS_MAX,
                        de->d_name);
            continue;
        }
        lustre_target *t = &s->t[s->n];
        memset(t, 0, sizeof *t);
        t->file.fd = -1;
        t->osc = osc;
        if (!names_of(de->d_name, osc, t->fs, sizeof t->fs, t->name, sizeof t->name))
            continue;
        char path[PATH_MAX];
        hm_error e;
        if (snprintf(path, sizeof path, "%s/%s/stats", base, de->d_name) >= (int)sizeof path ||
            hm_procfile_open_path(&t->file, path, &e) < 0)
            continue;
        s->n++;
    }
    closedir(d);
}

static int lustre_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    lustre_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    static const char *const roots[] = {"proc/fs/lustre", "sys/kernel/debug/lustre"};
    for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++) {
        char base[PATH_MAX], dir[PATH_MAX + 8];
        if (hm_path_join(base, sizeof base, env->cfg->root, roots[r], err) < 0) {
            lustre_close(s);
            return -1;
        }
        snprintf(dir, sizeof dir, "%s/llite", base);
        add_targets(s, dir, false);
        snprintf(dir, sizeof dir, "%s/osc", base);
        add_targets(s, dir, true);
    }
    if (s->n == 0) {
        lustre_close(s); /* no Lustre client here */
        return 0;
    }
    *state = s;
    return 0;
}

static void parse_stats(const hm_procfile *f, uint64_t v[NVALUES])
{
    memset(v, 0, sizeof(uint64_t) * NVALUES);
    hm_scan c = hm_scan_of(f->buf, f->len);
    do {
        hm_scan line = c;
        const char *w, *unit;
        size_t wl, ul;
        uint64_t count, min, max, sum;
        if (!hm_scan_word(&line, &w, &wl, false) || !hm_scan_u64(&line, &count))
            continue; /* snapshot_time and the like */
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            if (!hm_word_eq(w, wl, rows[r].name))
                continue;
            v[rows[r].count_at] += count;
            if (rows[r].sum_at >= 0 && hm_scan_word(&line, &unit, &ul, false) /* samples */ &&
                hm_scan_word(&line, &unit, &ul, false) /* [unit] */ &&
                hm_scan_u64(&line, &min) && hm_scan_u64(&line, &max) && hm_scan_u64(&line, &sum))
                v[rows[r].sum_at] += sum;
            break;
        }
    } while (hm_scan_next_line(&c));
}

static int lustre_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    lustre_state *s = state;
    int rc = 0;
    for (size_t i = 0; i < s->n; i++) {
        lustre_target *t = &s->t[i];
        if (hm_procfile_read(&t->file, err) < 0) {
            t->have_prev = false;
            rc = -1; /* reported after the other targets are sampled */
            continue;
        }
        uint64_t now[NVALUES], d[NVALUES];
        parse_stats(&t->file, now);
        double dt = hm_dt_s(t->prev_mono_ns, ctx->mono_ns);
        bool ok = t->have_prev && dt > 0;
        for (int k = 0; k < NVALUES && ok; k++)
            ok = hm_counter_delta(t->prev[k], now[k], 64, &d[k]); /* cleared: a reset */
        memcpy(t->prev, now, sizeof t->prev);
        t->have_prev = true;
        t->prev_mono_ns = ctx->mono_ns;
        if (!ok)
            continue;
        if (t->osc) {
            hm_lp_begin(out, "lustre_osc");
            hm_lp_tag(out, "fs", t->fs);
            hm_lp_tag(out, "ost", t->name);
            hm_lp_field_f64(out, HM_M(OSC, read_bytes_per_s), (double)d[V_READ_SUM] / dt);
            hm_lp_field_f64(out, HM_M(OSC, write_bytes_per_s), (double)d[V_WRITE_SUM] / dt);
            hm_lp_field_f64(out, HM_M(OSC, rpcs_per_s), (double)d[V_WAIT_N] / dt);
            if (d[V_WAIT_N] > 0)
                hm_lp_field_f64(out, HM_M(OSC, rpc_wait_us),
                                (double)d[V_WAIT_SUM] / (double)d[V_WAIT_N]);
            if (d[V_ACTIVE_N] > 0)
                hm_lp_field_f64(out, HM_M(OSC, rpcs_active),
                                (double)d[V_ACTIVE_SUM] / (double)d[V_ACTIVE_N]);
        } else {
            hm_lp_begin(out, "lustre");
            hm_lp_tag(out, "fs", t->fs);
            hm_lp_tag(out, "client", t->name);
            hm_lp_field_f64(out, HM_M(LL, read_bytes_per_s), (double)d[V_READ_SUM] / dt);
            hm_lp_field_f64(out, HM_M(LL, write_bytes_per_s), (double)d[V_WRITE_SUM] / dt);
            hm_lp_field_f64(out, HM_M(LL, reads_per_s), (double)d[V_READ_N] / dt);
            hm_lp_field_f64(out, HM_M(LL, writes_per_s), (double)d[V_WRITE_N] / dt);
            hm_lp_field_f64(out, HM_M(LL, metadata_ops_per_s), (double)d[V_META_N] / dt);
            hm_lp_field_f64(out, HM_M(LL, fsync_per_s), (double)d[V_FSYNC_N] / dt);
        }
        hm_lp_end(out);
    }
    return rc;
}

const hm_sampler_ops hm_sampler_lustre_client = {
    .name = "lustre",
    .reads = "Lustre client llite/*/stats and osc/*/stats under /proc/fs/lustre or "
             "/sys/kernel/debug/lustre",
    .measurement = "lustre (tags fs, client), lustre_osc (tags fs, ost)",
    .fields = "lustre:" HM_METRIC_NAMES(LLITE_METRICS) "; lustre_osc:" HM_METRIC_NAMES(OSC_METRICS),
    .default_on = true,
    .open = lustre_open,
    .sample = lustre_sample,
    .close = lustre_close,
};
