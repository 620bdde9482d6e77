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

/* X(P, field, unit, help, the /proc/meminfo line it comes from or NULL).
 * used_pct is computed, last. */
#define MEM_METRICS(X, P)                                                                     \
    X(P, total_bytes, "B", "usable RAM", "MemTotal")                                          \
    X(P, free_bytes, "B", "unused", "MemFree")                                                \
    X(P, available_bytes, "B", "available to new work without swapping", "MemAvailable")     \
    X(P, buffers_bytes, "B", "block device buffers", "Buffers")                               \
    X(P, cached_bytes, "B", "page cache", "Cached")                                           \
    X(P, swap_cached_bytes, "B", "swapped out and back, still in swap", "SwapCached")         \
    X(P, swap_total_bytes, "B", "swap space", "SwapTotal")                                    \
    X(P, swap_free_bytes, "B", "unused swap", "SwapFree")                                     \
    X(P, dirty_bytes, "B", "waiting to be written back", "Dirty")                             \
    X(P, writeback_bytes, "B", "being written back", "Writeback")                             \
    X(P, anon_bytes, "B", "anonymous pages", "AnonPages")                                     \
    X(P, shmem_bytes, "B", "shared memory and tmpfs", "Shmem")                                \
    X(P, slab_bytes, "B", "kernel slab", "Slab")                                              \
    X(P, committed_bytes, "B", "committed address space", "Committed_AS")                     \
    X(P, used_pct, "%", "not available to new work: 100 x (total - available) / total", NULL)
HM_METRIC_ENUM(MEM, MEM_METRICS);

#define MEM_ROW_(P, name, unit, help, kernel) {kernel, #name},
static const meminfo_field fields[] = {MEM_METRICS(MEM_ROW_, _)};
#undef MEM_ROW_

/* The fields read from the file: all but the computed used_pct. */
#define NFIELDS ((size_t)MEM_used_pct)
_Static_assert(MEM_used_pct == MEM_COUNT - 1, "used_pct is the one computed field, last");

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
    double total = value[MEM_total_bytes], avail = value[MEM_available_bytes];
    if (total > 0 && avail == avail)
        hm_lp_field_f64(out, HM_M(MEM, used_pct), 100.0 * (total - avail) / total);
    hm_lp_end(out);
    return 0;
}

const hm_sampler_ops hm_sampler_proc_meminfo = {
    .name = "mem",
    .reads = "/proc/meminfo",
    .measurement = "mem",
    .fields = HM_FIELDS(MEM_METRICS),
    .default_on = true,
    .open = meminfo_open,
    .sample = meminfo_sample,
    .close = meminfo_close,
};
