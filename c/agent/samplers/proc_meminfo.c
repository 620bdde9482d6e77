/* mem: memory and swap sizes from /proc/meminfo.
 *
 * Lines are matched through a name -> field table; a line the kernel does
 * not print (MemAvailable before 3.14, no swap configured) leaves its field
 * absent rather than 0. */
#include <math.h>
#include <stdlib.h>

#include "procfile.h"
#include "sampler.h"

typedef struct meminfo_field {
    const char *kernel_name;
    const char *field;
} meminfo_field;

static const meminfo_field fields[] = {
    {"MemTotal", "total_bytes"},
    {"MemFree", "free_bytes"},
    {"MemAvailable", "available_bytes"},
    {"Buffers", "buffers_bytes"},
    {"Cached", "cached_bytes"},
    {"SwapCached", "swap_cached_bytes"},
    {"SwapTotal", "swap_total_bytes"},
    {"SwapFree", "swap_free_bytes"},
    {"Dirty", "dirty_bytes"},
    {"Writeback", "writeback_bytes"},
    {"AnonPages", "anon_bytes"},
    {"Shmem", "shmem_bytes"},
    {"Slab", "slab_bytes"},
    {"Committed_AS", "committed_bytes"},
};

#define NFIELDS (sizeof fields / sizeof fields[0])

typedef struct meminfo_state {
    hm_procfile file;
    hm_key_hint hint[NFIELDS];
} meminfo_state;

static void meminfo_close(void *state)
{
    meminfo_state *s = state;
    if (s == NULL)
        return;
    hm_procfile_close(&s->file);
    free(s);
}

static int meminfo_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    meminfo_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    if (hm_procfile_open(&s->file, env->cfg->root, "proc/meminfo", err) < 0) {
        free(s);
        return -1;
    }
    for (size_t i = 0; i < NFIELDS; i++)
        s->hint[i].key = fields[i].kernel_name;
    *state = s;
    return 0;
}

static int meminfo_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    (void)ctx;
    meminfo_state *s = state;
    if (hm_procfile_read(&s->file, err) < 0)
        return -1;
    double value[NFIELDS];
    for (size_t i = 0; i < NFIELDS; i++) {
        value[i] = NAN;
        hm_scan line = hm_find_key(s->file.buf, s->file.len, &s->hint[i]);
        if (line.p == line.end)
            continue; /* this kernel does not print it: absent */
        uint64_t v;
        if (!hm_scan_char(&line, ':') || !hm_scan_u64(&line, &v))
            return hm_error_set(err, "%s: no number after %s", s->file.path, fields[i].kernel_name);
        /* "kB" means KiB; lines without a unit are counts. */
        hm_scan_skip_blanks(&line);
        bool kib = line.end - line.p >= 2 && line.p[0] == 'k' && line.p[1] == 'B';
        value[i] = (double)v * (kib ? 1024.0 : 1.0);
    }
    hm_lp_begin(out, "mem");
    for (size_t i = 0; i < NFIELDS; i++)
        hm_lp_field_f64(out, fields[i].field, value[i]);
    /* used_pct: memory not available to new work, as `free` computes it. */
    double total = value[0], avail = value[2];
    if (total > 0 && avail == avail)
        hm_lp_field_f64(out, "used_pct", 100.0 * (total - avail) / total);
    hm_lp_end(out);
    return 0;
}

const hm_sampler_ops hm_sampler_proc_meminfo = {
    .name = "mem",
    .reads = "/proc/meminfo",
    .measurement = "mem",
    .fields = "total_bytes free_bytes available_bytes buffers_bytes cached_bytes swap_cached_bytes "
              "swap_total_bytes swap_free_bytes dirty_bytes writeback_bytes anon_bytes shmem_bytes "
              "slab_bytes committed_bytes used_pct",
    .default_on = true,
    .open = meminfo_open,
    .sample = meminfo_sample,
    .close = meminfo_close,
};
