/* disk: throughput, IOPS and busy share per block device, /proc/diskstats.
 *
 * Whole disks only: partitions would count the same I/O twice, and loop /
 * ram devices carry no device traffic. A whole disk is a name with an entry
 * in /sys/block (under root); if the tree has no /sys/block every device
 * is taken. Sectors are 512 bytes in this file whatever the hardware's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "counter.h"
#include "entity.h"
#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define DISK_METRICS(X, P)                                                                    \
    X(P, read_bytes_per_s, "B/s", "sectors read x 512")                                       \
    X(P, write_bytes_per_s, "B/s", "sectors written x 512")                                   \
    X(P, reads_per_s, "1/s", "reads completed")                                               \
    X(P, writes_per_s, "1/s", "writes completed")                                             \
    X(P, busy_pct, "%", "time with I/O in flight (at most 100)")
HM_METRIC_ENUM(DISK, DISK_METRICS);

enum { C_READS, C_READ_SECTORS, C_WRITES, C_WRITE_SECTORS, C_IO_TICKS_MS, NCOUNTERS };
/* 1-based column of each counter after "major minor name". */
static const int column_of[NCOUNTERS] = {1, 3, 5, 7, 10};

enum { DEV_SAMPLED = 1, DEV_SKIPPED = 2 };

typedef struct diskstats_state {
    hm_procfile file;
    hm_entity_table dev;
    char sys_block[PATH_MAX];
    bool have_sys_block;
    int64_t stamp;
    bool warned_full;
} diskstats_state;

static void diskstats_close(void *state)
{
    diskstats_state *s = state;
    if (s == NULL)
        return;
    hm_procfile_close(&s->file);
    hm_entity_table_free(&s->dev);
    free(s);
}

static int diskstats_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    diskstats_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    if (hm_procfile_open(&s->file, env->cfg->root, "proc/diskstats", err) < 0) {
        free(s);
        return -1;
    }
    size_t lines = 0;
    for (size_t i = 0; i < s->file.len; i++)
        lines += s->file.buf[i] == '\n';
    if (hm_entity_table_init(&s->dev, lines * 2 + 16, err) < 0 ||
        hm_path_join(s->sys_block, sizeof s->sys_block, env->cfg->root, "sys/block", err) < 0) {
        diskstats_close(s);
        return -1;
    }
    struct stat st;
    s->have_sys_block = stat(s->sys_block, &st) == 0 && S_ISDIR(st.st_mode);
    *state = s;
    return 0;
}

static bool has_prefix(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

/* Decided once per device name, when it first appears. */
static int classify(const diskstats_state *s, const char *name)
{
    if (has_prefix(name, "loop") || has_prefix(name, "ram"))
        return DEV_SKIPPED;
    if (!s->have_sys_block)
        return DEV_SAMPLED;
    char path[PATH_MAX + HM_ENTITY_NAME_MAX + 2];
    snprintf(path, sizeof path, "%s/%s", s->sys_block, name);
    struct stat st;
    return stat(path, &st) == 0 ? DEV_SAMPLED : DEV_SKIPPED;
}

static int diskstats_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    diskstats_state *s = state;
    if (hm_procfile_read(&s->file, err) < 0)
        return -1;
    s->stamp++;
    hm_scan c = hm_scan_of(s->file.buf, s->file.len);
    do {
        uint64_t major, minor;
        const char *name;
        size_t nl;
        hm_scan line = c;
        if (hm_scan_at_eol(&line))
            continue;
        if (!hm_scan_u64(&line, &major) || !hm_scan_u64(&line, &minor) ||
            !hm_scan_word(&line, &name, &nl, false))
            return hm_error_set(err, "%s: malformed line", s->file.path);
        bool created;
        hm_entity *d = hm_entity_get(&s->dev, name, nl, s->stamp, &created);
        if (d == NULL) {
            hm_log_warn_once(&s->warned_full, "%s: more devices than sized at start; some not sampled",
                             s->file.path);
            continue;
        }
        if (created)
            d->flags = classify(s, d->name);
        if (d->flags != DEV_SAMPLED)
            continue; /* partitions and loop devices: not even parsed */
        uint64_t col[11];
        int got = 0;
        while (got < 11 && hm_scan_u64(&line, &col[got]))
            got++;
        if (got < 11)
            return hm_error_set(err, "%s: %.*s has %d counters, expected at least 11",
                                s->file.path, (int)nl, name, got);
        double dt = hm_dt_s(d->prev_mono_ns, ctx->mono_ns);
        double rate[NCOUNTERS];
        for (int k = 0; k < NCOUNTERS; k++) {
            uint64_t now = col[column_of[k] - 1];
            /* 32-bit width: older kernels keep these in unsigned int. */
            rate[k] = d->have_prev ? hm_counter_rate(d->prev[k], now, 32, dt) : NAN;
            d->prev[k] = now;
        }
        d->have_prev = true;
        d->prev_mono_ns = ctx->mono_ns;
        if (isnan(rate[C_READS]) && isnan(rate[C_WRITES]))
            continue;
        hm_lp_begin(out, "disk");
        hm_lp_tag(out, "device", d->name);
        hm_lp_field_f64(out, HM_M(DISK, read_bytes_per_s), rate[C_READ_SECTORS] * 512.0);
        hm_lp_field_f64(out, HM_M(DISK, write_bytes_per_s), rate[C_WRITE_SECTORS] * 512.0);
        hm_lp_field_f64(out, HM_M(DISK, reads_per_s), rate[C_READS]);
        hm_lp_field_f64(out, HM_M(DISK, writes_per_s), rate[C_WRITES]);
        /* io_ticks: ms with at least one request in flight, per second. */
        double busy = rate[C_IO_TICKS_MS] / 10.0;
        hm_lp_field_f64(out, HM_M(DISK, busy_pct), busy > 100.0 ? 100.0 : busy);
        hm_lp_end(out);
    } while (hm_scan_next_line(&c));
    return 0;
}

const hm_sampler_ops hm_sampler_proc_diskstats = {
    .name = "disk",
    .reads = "/proc/diskstats (whole disks listed in /sys/block)",
    .measurement = "disk (tag device)",
    .fields = HM_FIELDS(DISK_METRICS),
    .default_on = true,
    .open = diskstats_open,
    .sample = diskstats_sample,
    .close = diskstats_close,
};
