/* The jobs running on this node: announced over the control socket
 * (`job begin ID [cgroup=PATH]`) or found in Slurm's cgroup tree. Several
 * jobs may run at once. The table is fixed-size so the sampling loop never
 * allocates; `generation` changes on every change so the cgroup sampler
 * knows when to reopen its files.
 *
 * A job that ends is the node's job for the period it ended in: its slot
 * stays `ending` (no longer `used`: nothing samples or attributes to it)
 * until the jobs source has written its `job` line for that period once
 * more. What the agent attributed to the job in that period -- the app
 * lines `job end` reads, app records read before a Slurm scan found the
 * job gone -- then lies inside the job's periods for every reader (spool,
 * NATS reducers, summaries, the live view), as a job that begins mid-period
 * is the node's job for the period it began in. */
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
    bool used;                   /* running: sampled, attributed to, listed */
    bool ending;                 /* ended since its last `job` line: written once more */
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
/* Drops origin from the job; the job ends when no origin is left (its slot
 * is then `ending` until hm_jobs_written). */
int hm_jobs_end(hm_jobs *jobs, const char *id, unsigned origin, hm_error *err);
/* The ending jobs' last `job` lines are written: their slots are free. */
void hm_jobs_written(hm_jobs *jobs);
/* Running jobs (ending ones are not). */
size_t hm_jobs_count(const hm_jobs *jobs);
/* A running job, or NULL (an ending one is not running). */
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
