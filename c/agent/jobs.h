/* The jobs running on this node: announced over the control socket
 * (`job begin ID [cgroup=PATH]`) or found in Slurm's cgroup tree. Several
 * jobs may run at once. The table is fixed-size so the sampling loop never
 * allocates; `generation` changes on every change so the cgroup sampler
 * knows when to reopen its files. */
#ifndef HM_JOBS_H
#define HM_JOBS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

#define HM_JOBS_MAX 64
#define HM_JOB_ID_MAX 64
#define HM_JOB_CGROUP_MAX 512

enum {
    HM_JOB_ANNOUNCED = 1u << 0,  /* from the control socket */
    HM_JOB_SLURM = 1u << 1,      /* from Slurm's cgroup directory */
};

typedef struct hm_job {
    bool used;
    char id[HM_JOB_ID_MAX];
    char cgroup[HM_JOB_CGROUP_MAX]; /* relative to the cgroup root; "" if unknown */
    unsigned origin;             /* HM_JOB_* bits */
    long owner_uid;              /* who announced it (control socket SO_PEERCRED); -1 unknown.
                                  * libhushmon clients of that uid may claim the job. */
} hm_job;

typedef struct hm_jobs {
    hm_job job[HM_JOBS_MAX];
    uint64_t generation;
} hm_jobs;

/* A job id: 1..63 characters of [A-Za-z0-9_.-]. */
bool hm_job_id_valid(const char *id);
int hm_jobs_begin(hm_jobs *jobs, const char *id, const char *cgroup, unsigned origin,
                  hm_error *err);
/* Drops origin from the job; the job ends when no origin is left. */
int hm_jobs_end(hm_jobs *jobs, const char *id, unsigned origin, hm_error *err);
size_t hm_jobs_count(const hm_jobs *jobs);
hm_job *hm_jobs_find(hm_jobs *jobs, const char *id);
/* The job whose cgroup holds a process, from the text of its
 * /proc/PID/cgroup (every line: v2 "0::/path", v1 "N:ctrl:/path"); the
 * index in jobs->job, or -1 if none. A job's cgroup is relative to the
 * cgroup root, a line's path to its hierarchy's mount: on a hybrid
 * machine (v1 controllers, the v2 hierarchy mounted at
 * /sys/fs/cgroup/unified, as systemd and the test bed's job cgroups have
 * it) the v2 line's "/x" is the job cgroup "unified/x". Used by the
 * application channel and the GPU source alike. */
int hm_jobs_of_proc_cgroup(const hm_jobs *jobs, const char *cgroup_text);

#endif
