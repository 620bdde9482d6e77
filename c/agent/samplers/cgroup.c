/* cgroup: each job's CPU, memory and I/O from its cgroup v2 directory.
 *
 * The files of a job's cgroup are opened when the job appears (the job
 * table's generation changes) and read with pread() every period. When a
 * cgroup disappears under the agent (the job ended before `job end`
 * arrived) its reads fail with ENODEV/ENOENT: that is logged once and the
 * job's lines stop; sampling of everything else goes on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "counter.h"
#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define CG_METRICS(X, P)                                                                      \
    X(P, cpu_usage_pct, "%", "the job's CPU time, share of the node's CPU capacity")          \
    X(P, cpu_user_pct, "%", "user part")                                                      \
    X(P, cpu_system_pct, "%", "system part")                                                  \
    X(P, mem_current_bytes, "B", "memory.current")                                            \
    X(P, mem_swap_bytes, "B", "memory.swap.current")                                          \
    X(P, io_read_bytes_per_s, "B/s", "io.stat rbytes")                                        \
    X(P, io_write_bytes_per_s, "B/s", "io.stat wbytes")
HM_METRIC_ENUM(CG, CG_METRICS);

enum { F_CPU_STAT, F_MEM_CURRENT, F_SWAP_CURRENT, F_IO_STAT, NFILES };
static const char *const file_names[NFILES] = {
    "cpu.stat", "memory.current", "memory.swap.current", "io.stat",
};
/* cpu.stat is always there in cgroup v2; the others only with their
 * controller enabled (memory, swap accounting, io). Missing ones just
 * leave their fields out. */
static const bool file_required[NFILES] = {true, false, false, false};

enum { P_USAGE, P_USER, P_SYSTEM, P_RBYTES, P_WBYTES, NPREV };

typedef struct job_slot {
    bool active;          /* files open */
    bool failed;          /* gave up until the job table changes */
    char id[HM_JOB_ID_MAX];
    char cgroup[HM_JOB_CGROUP_MAX];
    hm_procfile file[NFILES];
    bool have_prev;
    uint64_t prev[NPREV];
    int64_t prev_mono_ns;
} job_slot;

typedef struct cgroup_state {
    char cgroup_root[PATH_MAX];
    uint64_t generation;
    bool synced;
    long ncpus_fallback;
    job_slot slot[HM_JOBS_MAX];
} cgroup_state;

static void slot_close(job_slot *j)
{
    for (int k = 0; k < NFILES; k++)
        hm_procfile_close(&j->file[k]);
    j->active = false;
    j->have_prev = false;
}

static void cgroup_close(void *state)
{
    cgroup_state *s = state;
    if (s == NULL)
        return;
    for (size_t i = 0; i < HM_JOBS_MAX; i++)
        slot_close(&s->slot[i]);
    free(s);
}

static int cgroup_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    cgroup_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    for (size_t i = 0; i < HM_JOBS_MAX; i++)
        for (int k = 0; k < NFILES; k++)
            s->slot[i].file[k].fd = -1;
    if (hm_path_join(s->cgroup_root, sizeof s->cgroup_root, env->cfg->root, env->cfg->cgroup_root,
                     err) < 0) {
        free(s);
        return -1;
    }
    s->ncpus_fallback = sysconf(_SC_NPROCESSORS_ONLN);
    if (s->ncpus_fallback < 1)
        s->ncpus_fallback = 1;
    *state = s;
    return 0;
}

static int slot_open(cgroup_state *s, job_slot *j, hm_error *err)
{
    char dir[PATH_MAX];
    if (hm_path_join(dir, sizeof dir, s->cgroup_root, j->cgroup, err) < 0)
        return -1;
    for (int k = 0; k < NFILES; k++) {
        char path[PATH_MAX];
        if (hm_path_join(path, sizeof path, dir, file_names[k], err) < 0 ||
            (hm_procfile_open_path(&j->file[k], path, err) < 0 && file_required[k])) {
            slot_close(j);
            return -1;
        }
    }
    j->active = true;
    return 0;
}

/* Matches slots to the job table after it changed. */
static void sync_jobs(cgroup_state *s, const hm_jobs *jobs)
{
    for (size_t i = 0; i < HM_JOBS_MAX; i++) {
        job_slot *j = &s->slot[i];
        const hm_job *job = &jobs->job[i];
        bool same = job->used && job->cgroup[0] && strcmp(j->id, job->id) == 0 &&
                    strcmp(j->cgroup, job->cgroup) == 0;
        if (same && (j->active || j->failed))
            continue;
        slot_close(j);
        j->failed = false;
        j->id[0] = j->cgroup[0] = '\0';
        if (!job->used || job->cgroup[0] == '\0')
            continue;
        strcpy(j->id, job->id);
        strcpy(j->cgroup, job->cgroup);
        hm_error e;
        if (slot_open(s, j, &e) < 0) {
            hm_log_warn("cgroup of job %s: %s; its cgroup lines are skipped", j->id, e.msg);
            j->failed = true;
        }
    }
}

/* "key value" lines: the value for key, or false. */
static bool keyed_u64(const hm_procfile *f, const char *key, uint64_t *out)
{
    hm_scan c = hm_scan_of(f->buf, f->len);
    do {
        const char *w;
        size_t wl;
        hm_scan line = c;
        if (hm_scan_word(&line, &w, &wl, false) && hm_word_eq(w, wl, key))
            return hm_scan_u64(&line, out);
    } while (hm_scan_next_line(&c));
    return false;
}

static int sample_slot(job_slot *j, const hm_sample_ctx *ctx, double ncpus, hm_lp *out,
                       hm_error *err)
{
    for (int k = 0; k < NFILES; k++) {
        if (j->file[k].fd < 0)
            continue;
        if (hm_procfile_read(&j->file[k], err) < 0)
            return -1;
    }
    uint64_t now[NPREV];
    bool ok = keyed_u64(&j->file[F_CPU_STAT], "usage_usec", &now[P_USAGE]) &&
              keyed_u64(&j->file[F_CPU_STAT], "user_usec", &now[P_USER]) &&
              keyed_u64(&j->file[F_CPU_STAT], "system_usec", &now[P_SYSTEM]);
    if (!ok)
        return hm_error_set(err, "%s: no usage_usec/user_usec/system_usec", j->file[F_CPU_STAT].path);
    bool have_io = j->file[F_IO_STAT].fd >= 0;
    if (have_io)
        hm_io_stat_totals(j->file[F_IO_STAT].buf, j->file[F_IO_STAT].len, &now[P_RBYTES],
                          &now[P_WBYTES]);
    double dt = hm_dt_s(j->prev_mono_ns, ctx->mono_ns);
    double rate[NPREV];
    for (int k = 0; k < NPREV; k++) {
        rate[k] = j->have_prev ? hm_counter_rate(j->prev[k], now[k], 64, dt) : NAN;
        j->prev[k] = now[k];
    }
    j->have_prev = true;
    j->prev_mono_ns = ctx->mono_ns;
    hm_lp_begin(out, "cgroup");
    hm_lp_tag(out, "job", j->id);
    hm_lp_tag(out, "cgroup", j->cgroup);
    /* Shares of the node's CPU capacity, like the cpu measurement. */
    double capacity_us_per_s = 1e6 * ncpus;
    hm_lp_field_f64(out, HM_M(CG, cpu_usage_pct), 100.0 * rate[P_USAGE] / capacity_us_per_s);
    hm_lp_field_f64(out, HM_M(CG, cpu_user_pct), 100.0 * rate[P_USER] / capacity_us_per_s);
    hm_lp_field_f64(out, HM_M(CG, cpu_system_pct), 100.0 * rate[P_SYSTEM] / capacity_us_per_s);
    hm_scan c;
    uint64_t v;
    if (j->file[F_MEM_CURRENT].fd >= 0) {
        c = hm_scan_of(j->file[F_MEM_CURRENT].buf, j->file[F_MEM_CURRENT].len);
        if (hm_scan_u64(&c, &v))
            hm_lp_field_f64(out, HM_M(CG, mem_current_bytes), (double)v);
    }
    if (j->file[F_SWAP_CURRENT].fd >= 0) {
        c = hm_scan_of(j->file[F_SWAP_CURRENT].buf, j->file[F_SWAP_CURRENT].len);
        if (hm_scan_u64(&c, &v))
            hm_lp_field_f64(out, HM_M(CG, mem_swap_bytes), (double)v);
    }
    if (have_io) {
        hm_lp_field_f64(out, HM_M(CG, io_read_bytes_per_s), rate[P_RBYTES]);
        hm_lp_field_f64(out, HM_M(CG, io_write_bytes_per_s), rate[P_WBYTES]);
    }
    hm_lp_end(out);
    return 0;
}

static int cgroup_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    cgroup_state *s = state;
    if (!s->synced || s->generation != ctx->jobs->generation) {
        sync_jobs(s, ctx->jobs);
        s->generation = ctx->jobs->generation;
        s->synced = true;
    }
    /* In node scope the node's CPUs are the capacity, as for its cpu line. */
    double ncpus = ctx->node->scope_stamp_ns == ctx->ts_ns && ctx->node->scope_cpus > 0
                       ? ctx->node->scope_cpus
                   : ctx->node->stamp_ns == ctx->ts_ns && ctx->node->online_cpus > 0
                       ? ctx->node->online_cpus
                       : (double)s->ncpus_fallback;
    (void)err;
    for (size_t i = 0; i < HM_JOBS_MAX; i++) {
        job_slot *j = &s->slot[i];
        if (!j->active)
            continue;
        hm_error e;
        if (sample_slot(j, ctx, ncpus, out, &e) < 0) {
            /* A vanished cgroup is the normal end of a job that was not
             * announced as ended: say so once and stop reading it. */
            hm_log_warn("cgroup of job %s vanished or unreadable (%s); its cgroup lines stop",
                        j->id, e.msg);
            slot_close(j);
            j->failed = true;
        }
    }
    return 0;
}

const hm_sampler_ops hm_sampler_cgroup = {
    .name = "cgroup",
    .reads = "cgroup v2 cpu.stat memory.current memory.swap.current io.stat of each job",
    .measurement = "cgroup (tags job, cgroup)",
    .fields = HM_FIELDS(CG_METRICS),
    .default_on = true,
    .node_local = true,
    .open = cgroup_open,
    .sample = cgroup_sample,
    .close = cgroup_close,
};
