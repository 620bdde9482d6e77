/* jobs: which jobs run on this node. One `job` line per job per period,
 * from the period it began in to the period it ended in (jobs.h: a job
 * that ended since the last lines is written once more).
 *
 * Jobs come from the control socket (`job begin`) and from Slurm's cgroup
 * v2 tree: <cgroup_root>/<slurm_dir>/job_<id>/ exists while job <id> has
 * a step on the node. The directory is listed every period with one
 * getdents64 call into a stack buffer (opendir would allocate) every
 * jobs.slurm_scan_ms (5 s by default: the path walk costs about as much as
 * reading a /proc file, and `hushmon run` announces its jobs at once over
 * the control socket anyway). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define JOB_METRICS(X, P) X(P, active, "", "1: the job ran on the node this period")
HM_METRIC_ENUM(JOB, JOB_METRICS);

typedef struct jobs_state {
    char slurm_path[PATH_MAX];       /* absolute */
    char slurm_rel[PATH_MAX];        /* relative to the cgroup root */
    bool warned;
    int64_t scan_every_ns;
    int64_t last_scan_mono_ns;
    bool scanned;
} jobs_state;

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static void jobs_close(void *state)
{
    free(state);
}

static int jobs_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    jobs_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    char cg[PATH_MAX];
    if (hm_path_join(cg, sizeof cg, env->cfg->root, env->cfg->cgroup_root, err) < 0 ||
        hm_path_join(s->slurm_path, sizeof s->slurm_path, cg, env->cfg->slurm_dir, err) < 0) {
        free(s);
        return -1;
    }
    snprintf(s->slurm_rel, sizeof s->slurm_rel, "%s", env->cfg->slurm_dir);
    s->scan_every_ns = env->cfg->slurm_scan_ms * 1000000;
    *state = s;
    return 0;
}

/* Brings the Slurm-origin jobs in line with the directory listing. */
static int scan_slurm(jobs_state *s, hm_jobs *jobs, hm_error *err)
{
    bool present[HM_JOBS_MAX] = {false};
    int fd = open(s->slurm_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[8192] __attribute__((aligned(8)));
        for (;;) {
            long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
            if (n < 0) {
                int saved = errno;
                close(fd);
                errno = saved;
                return hm_error_errno(err, "listing %s", s->slurm_path);
            }
            if (n == 0)
                break;
            for (long off = 0; off < n;) {
                struct linux_dirent64 *de = (struct linux_dirent64 *)(buf + off);
                off += de->d_reclen;
                if (de->d_type != DT_DIR || strncmp(de->d_name, "job_", 4) != 0)
                    continue;
                const char *id = de->d_name + 4;
                if (!hm_job_id_valid(id))
                    continue;
                char rel[HM_JOB_CGROUP_MAX];
                int len = snprintf(rel, sizeof rel, "%s/%s", s->slurm_rel, de->d_name);
                if (len < 0 || (size_t)len >= sizeof rel)
                    continue;
                hm_job *j = hm_jobs_find(jobs, id);
                if (j == NULL || !(j->origin & HM_JOB_SLURM)) {
                    hm_error e;
                    if (hm_jobs_begin(jobs, id, j != NULL && j->cgroup[0] ? NULL : rel,
                                      HM_JOB_SLURM, &e) < 0) {
                        hm_log_warn_once(&s->warned, "Slurm job %s: %s", id, e.msg);
                        continue;
                    }
                    j = hm_jobs_find(jobs, id);
                }
                present[j - jobs->job] = true;
            }
        }
        close(fd);
    }
    for (size_t i = 0; i < HM_JOBS_MAX; i++) {
        hm_job *j = &jobs->job[i];
        if (j->used && (j->origin & HM_JOB_SLURM) && !present[i]) {
            hm_error e;
            char id[HM_JOB_ID_MAX];
            memcpy(id, j->id, sizeof id);
            if (hm_jobs_end(jobs, id, HM_JOB_SLURM, &e) < 0)
                return hm_error_set(err, "%s", e.msg);
        }
    }
    return 0;
}

static int jobs_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    jobs_state *s = state;
    int rc = 0;
    if (!s->scanned || ctx->mono_ns - s->last_scan_mono_ns >= s->scan_every_ns) {
        rc = scan_slurm(s, ctx->jobs, err);
        s->scanned = true;
        s->last_scan_mono_ns = ctx->mono_ns;
    }
    /* After the scan: a Slurm job found gone now ran in this period too, and
     * the app lines of this batch were attributed to it before the scan. */
    for (size_t i = 0; i < HM_JOBS_MAX; i++) {
        const hm_job *j = &ctx->jobs->job[i];
        if (!j->used && !j->ending)
            continue;
        hm_lp_begin(out, "job");
        hm_lp_tag(out, "job", j->id);
        hm_lp_field_i64(out, HM_M(JOB, active), 1);
        hm_lp_end(out);
    }
    hm_jobs_written(ctx->jobs);
    return rc;
}

const hm_sampler_ops hm_sampler_jobs = {
    .name = "jobs",
    .reads = "control socket announcements; <cgroup_root>/<slurm_dir>/job_<id>/",
    .measurement = "job (tag job)",
    .fields = HM_FIELDS(JOB_METRICS),
    .default_on = true,
    .node_local = true,
    .open = jobs_open,
    .sample = jobs_sample,
    .close = jobs_close,
};
