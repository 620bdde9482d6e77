/* procio: each job's I/O from /proc/PID/io of its tasks.
 *
 * cgroup's io.stat counts what reaches the block devices; /proc/PID/io
 * also counts what the page cache absorbed (rchar/wchar: bytes passed to
 * read()/write() and friends, network and pipes included) and the
 * syscalls, which tells a job that reads the same file from cache from
 * one that waits on the disk or a network file system.
 *
 * A job's tasks are the PIDs in the cgroup.procs files of its cgroup and
 * every cgroup below (Slurm puts processes in job_N/step_M/...: a v2
 * cgroup with children holds none itself), re-read every period (new
 * tasks are seen at once; the tree itself is listed every PROCIO_RESCAN
 * periods). Each task's counters are kept from one
 * period to the next (two arrays sorted by PID, merged); a task that is
 * new in a job already sampled counts from zero (it started during the
 * period), so short-lived tasks are not lost.
 *
 * The kernel adds a reaped child's totals to its parent's counters: when
 * a task leaves the job, its last totals are held for two periods as a
 * credit against the job's sum, so that its parent's jump (when the parent
 * is in the job, as slurmstepd and the shells of a Slurm step are) does
 * not count the child's bytes twice. A parent outside the job leaves the
 * credit unused for those two periods: up to that much of the job's I/O
 * in them is not counted (the child's bytes were, while it lived).
 *
 * /proc/PID/io needs ptrace read access to the task: an agent that is not
 * root sees only its own user's tasks. Refused tasks are counted in
 * tasks_refused and named once in the log.
 *
 * Each task's /proc/PID/stat gives what the bytes alone do not: its CPU
 * time (utime + stime) and the time it waited for block I/O
 * (delayacct_blkio_ticks: a read that missed the page cache, a write-back
 * it had to wait for). Those are the job's own, however busy the other
 * CPUs of the machine are; the host's iowait is counted only on idle CPUs
 * and vanishes on a loaded node. The wait is counted only with delay
 * accounting on (kernel.task_delayacct = 1 or the `delayacct` boot
 * option; off by default since Linux 5.14): when it is off the field is
 * left out, never 0. A reaped child's CPU time goes to its parent's
 * cutime, not utime, and its block I/O delay to no one, so these two
 * keys take no credit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define PROCIO_TASKS_MAX 4096 /* tasks of all jobs on the node, per period */
#define PROCIO_DEPTH_MAX 6    /* job_N/step_M/user/task_K and a little more */
#define PROCIO_CREDIT_PERIODS 2
/* /proc/PID/io descriptors kept open from one period to the next: a pread
 * of a kept one costs about half an open+read+close. Beyond this many the
 * rest are opened each period (the agent's descriptor limit is shared). */
#define PROCIO_FDS_MAX 512
/* A job's cgroup tree is listed again every PROCIO_RESCAN periods (and at
 * once when a listed cgroup is gone): listing costs readdir of every
 * cgroup directory (about 18 us a period for a two-level Slurm tree on
 * this VM); the cgroup.procs files found are kept open and re-read each
 * period, so new tasks are seen at once, new job steps within that time. */
#define PROCIO_RESCAN 5
#define PROCIO_DIRS_MAX 64

#define PROCIO_METRICS(X, P)                                                                  \
    X(P, read_bytes_per_s, "B/s", "read_bytes: fetched from storage (not from the cache)")     \
    X(P, write_bytes_per_s, "B/s", "write_bytes: sent towards storage")                       \
    X(P, rchar_bytes_per_s, "B/s", "rchar: bytes read by syscalls, page-cache hits included") \
    X(P, wchar_bytes_per_s, "B/s", "wchar: bytes written by syscalls, cached included")       \
    X(P, syscr_per_s, "1/s", "read syscalls")                                                 \
    X(P, syscw_per_s, "1/s", "write syscalls")                                                \
    X(P, cpu_pct, "%", "the tasks' CPU time (utime + stime), % of one CPU")                   \
    X(P, blkio_wait_pct, "%", "the tasks' block I/O wait (delay accounting), % of one task")  \
    X(P, tasks_blocked, "", "tasks in uninterruptible sleep (D) when read (integer)")         \
    X(P, tasks, "", "tasks read this period (integer)")                                       \
    X(P, tasks_refused, "", "tasks whose /proc/PID/io was refused (integer)")
HM_METRIC_ENUM(PIO, PROCIO_METRICS);

/* The first NIO keys come from /proc/PID/io, the rest from /proc/PID/stat
 * (clock ticks); only the io keys take the reaped-child credit. */
enum { K_RCHAR, K_WCHAR, K_SYSCR, K_SYSCW, K_READ, K_WRITE, NIO, K_CPU = NIO, K_BLKIO, NKEYS };
static const char *const io_keys[NIO] = {"rchar", "wchar", "syscr", "syscw", "read_bytes",
                                         "write_bytes"};
/* Fields of /proc/PID/stat counted from the state (field 3) as 0. */
#define STAT_STATE 0
#define STAT_UTIME 11 /* field 14 */
#define STAT_STIME 12 /* field 15 */
#define STAT_BLKIO 39 /* field 42: delayacct_blkio_ticks */

typedef struct task_io {
    int pid;
    int slot;
    int fd;                   /* its /proc/PID/io kept open, or -1 */
    int stat_fd;              /* its /proc/PID/stat kept open, or -1 */
    uint64_t c[NKEYS];
} task_io;

typedef struct job_io {
    char id[HM_JOB_ID_MAX];
    char dir[PATH_MAX];       /* the job's cgroup directory; "" when the slot is free */
    bool sampled;             /* has a previous period: new tasks count from zero */
    int64_t prev_mono_ns;
    uint64_t sum[NKEYS];      /* this period's deltas */
    uint64_t credit[NKEYS];   /* last totals of tasks that left */
    int credit_periods;
    unsigned tasks, refused, blocked;
    bool present;             /* its cgroup directory was there this period */
    int procs_fd[PROCIO_DIRS_MAX]; /* cgroup.procs of each cgroup of the tree */
    int nprocs;
    int rescan_in;            /* periods until the tree is listed again; 0: now */
    bool overflow;            /* more tasks than PROCIO_TASKS_MAX this period */
} job_io;

typedef struct procio_state {
    char cgroup_root[PATH_MAX];
    char proc_root[PATH_MAX];
    uint64_t generation;
    bool synced;
    job_io job[HM_JOBS_MAX];
    task_io *prev, *cur;
    size_t nprev, ncur;
    int nfds;                 /* descriptors kept open (at most PROCIO_FDS_MAX) */
    hm_procfile delayacct;    /* /proc/sys/kernel/task_delayacct; fd -1 if absent */
    double ticks_per_s;       /* USER_HZ */
    bool warned_refused, warned_full;
} procio_state;

static void close_tree(job_io *j)
{
    for (int k = 0; k < j->nprocs; k++)
        close(j->procs_fd[k]);
    j->nprocs = 0;
    j->rescan_in = 0;
}

static void procio_close(void *state)
{
    procio_state *s = state;
    if (s == NULL)
        return;
    for (int i = 0; i < HM_JOBS_MAX; i++)
        close_tree(&s->job[i]);
    for (size_t i = 0; s->prev != NULL && i < s->nprev; i++) {
        if (s->prev[i].fd >= 0)
            close(s->prev[i].fd);
        if (s->prev[i].stat_fd >= 0)
            close(s->prev[i].stat_fd);
    }
    hm_procfile_close(&s->delayacct);
    free(s->prev);
    free(s->cur);
    free(s);
}

static int procio_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    procio_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    /* calloc: pages are touched only as far as the node's task count. */
    s->prev = calloc(PROCIO_TASKS_MAX, sizeof *s->prev);
    s->cur = calloc(PROCIO_TASKS_MAX, sizeof *s->cur);
    if (s->prev == NULL || s->cur == NULL) {
        procio_close(s);
        return hm_error_set(err, "out of memory");
    }
    s->delayacct.fd = -1;
    if (hm_path_join(s->cgroup_root, sizeof s->cgroup_root, env->cfg->root,
                     env->cfg->cgroup_root, err) < 0 ||
        hm_path_join(s->proc_root, sizeof s->proc_root, env->cfg->root, "proc", err) < 0) {
        procio_close(s);
        return -1;
    }
    char path[PATH_MAX + 32];
    hm_error e;
    snprintf(path, sizeof path, "%s/sys/kernel/task_delayacct", s->proc_root);
    if (access(path, F_OK) == 0 && hm_procfile_open_path(&s->delayacct, path, &e) < 0)
        s->delayacct.fd = -1;
    long hz = sysconf(_SC_CLK_TCK);
    s->ticks_per_s = hz > 0 ? (double)hz : 100.0;
    *state = s;
    return 0;
}

static void sync_jobs(procio_state *s, const hm_jobs *jobs)
{
    for (int i = 0; i < HM_JOBS_MAX; i++) {
        job_io *j = &s->job[i];
        const hm_job *job = &jobs->job[i];
        char dir[PATH_MAX];
        hm_error e;
        bool ok = job->used && job->cgroup[0] &&
                  hm_path_join(dir, sizeof dir, s->cgroup_root, job->cgroup, &e) == 0;
        if (ok && strcmp(j->id, job->id) == 0 && strcmp(j->dir, dir) == 0)
            continue;
        close_tree(j);
        memset(j, 0, sizeof *j);
        if (ok) {
            strcpy(j->id, job->id);
            strcpy(j->dir, dir);
        }
    }
}

/* Parses /proc/PID/io ("rchar: N" lines) into c; false if a key is missing. */
static bool parse_io(const char *text, size_t len, uint64_t c[NIO])
{
    unsigned found = 0;
    hm_scan sc = hm_scan_of(text, len);
    do {
        hm_scan line = sc;
        const char *w;
        size_t wl;
        if (!hm_scan_word(&line, &w, &wl, true))
            continue;
        for (int k = 0; k < NIO; k++)
            if (hm_word_eq(w, wl, io_keys[k]) && hm_scan_char(&line, ':') &&
                hm_scan_u64(&line, &c[k]))
                found |= 1u << k;
    } while (hm_scan_next_line(&sc));
    return found == (1u << NIO) - 1;
}

/* Parses /proc/PID/stat: CPU ticks and block I/O delay ticks into c, and
 * whether the task is in uninterruptible sleep. The command name (field 2)
 * may hold spaces and parentheses: fields are counted after its last ')'. */
static bool parse_stat(const char *text, size_t len, uint64_t c[NKEYS], bool *blocked)
{
    const char *end = text + len, *p = NULL;
    for (const char *q = text; q < end; q++)
        if (*q == ')')
            p = q + 1;
    if (p == NULL)
        return false;
    uint64_t utime = 0, stime = 0, blkio = 0;
    int field = -1, got = 0;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\n'))
            p++;
        if (p == end)
            break;
        field++;
        if (field == STAT_STATE)
            *blocked = *p == 'D';
        uint64_t v = 0;
        const char *start = p;
        while (p < end && *p >= '0' && *p <= '9')
            v = v * 10 + (uint64_t)(*p++ - '0');
        bool number = p > start;
        while (p < end && *p != ' ' && *p != '\n')
            p++;
        if (!number)
            continue;
        if (field == STAT_UTIME)
            utime = v, got |= 1;
        else if (field == STAT_STIME)
            stime = v, got |= 2;
        else if (field == STAT_BLKIO) {
            blkio = v, got |= 4;
            break;
        }
    }
    if ((got & 3) != 3)
        return false;
    c[K_CPU] = utime + stime;
    c[K_BLKIO] = blkio; /* 0 on kernels that do not give it (before 2.6.18) */
    return true;
}

/* Reads the task's /proc/PID/<file> into buf (at most cap - 1 bytes)
 * through its kept descriptor, or a new one kept while there is room. A kept
 * descriptor of an ended task (even if the PID was given to another) reads
 * nothing: reopen. Returns the descriptor kept (>= 0), -2 when read (or not)
 * but not kept, -1 when it could not be opened; *n is pread's result, *err
 * the errno of a failed open or read (0 otherwise). */
static int read_task_file(procio_state *s, int pid, int fd, const char *file, char *buf,
                          size_t cap, ssize_t *n, int *err)
{
    *err = 0;
    if (fd >= 0) {
        *n = pread(fd, buf, cap - 1, 0);
        if (*n > 0)
            return fd;
        close(fd);
        s->nfds--;
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%d/%s", s->proc_root, pid, file);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *n = -1;
        *err = errno;
        return -1;
    }
    *n = pread(fd, buf, cap - 1, 0);
    if (*n < 0)
        *err = errno;
    if (*n <= 0 || s->nfds >= PROCIO_FDS_MAX) {
        close(fd);
        return -2;
    }
    s->nfds++;
    return fd;
}

/* The task's /proc/PID/stat: kept descriptor or a new one (-1 on failure). */
static int read_stat(procio_state *s, int pid, int fd, uint64_t c[NKEYS], bool *blocked)
{
    char buf[1024];
    ssize_t n;
    int err;
    fd = read_task_file(s, pid, fd, "stat", buf, sizeof buf, &n, &err);
    if (fd == -1)
        return -1;
    if (n <= 0 || !parse_stat(buf, (size_t)n, c, blocked)) {
        if (fd >= 0) {
            close(fd);
            s->nfds--;
        }
        return -1;
    }
    return fd;
}

static void note_refused(procio_state *s, job_io *j, const char *path)
{
    j->refused++;
    hm_log_warn_once(&s->warned_refused,
                     "procio: %s refused (the agent may read only its own user's tasks unless "
                     "root); such tasks are counted in tasks_refused",
                     path);
}

/* The task's descriptors from the last period, taken over (-1 if none). */
static int take_prev_fd(procio_state *s, int pid, int *stat_fd)
{
    *stat_fd = -1;
    size_t lo = 0, hi = s->nprev;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->prev[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == s->nprev || s->prev[lo].pid != pid)
        return -1;
    int fd = s->prev[lo].fd;
    s->prev[lo].fd = -1;
    *stat_fd = s->prev[lo].stat_fd;
    s->prev[lo].stat_fd = -1;
    return fd;
}

static void read_task(procio_state *s, int slot, int pid)
{
    job_io *j = &s->job[slot];
    char buf[512];
    ssize_t n;
    int err;
    int stat_fd;
    int fd = take_prev_fd(s, pid, &stat_fd);
    fd = read_task_file(s, pid, fd, "io", buf, sizeof buf, &n, &err);
    if (err == EACCES || err == EPERM) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%d/io", s->proc_root, pid);
        note_refused(s, j, path);
    }
    /* fd -1: ENOENT/ESRCH, the task ended since cgroup.procs was read;
     * its stat descriptor goes too (the n <= 0 path below) */
    bool blocked = false;
    if (n > 0 && s->ncur < PROCIO_TASKS_MAX && parse_io(buf, (size_t)n, s->cur[s->ncur].c)) {
        stat_fd = read_stat(s, pid, stat_fd, s->cur[s->ncur].c, &blocked);
        if (stat_fd == -1)
            n = 0; /* ended between the two reads */
    } else {
        j->overflow |= n > 0 && s->ncur == PROCIO_TASKS_MAX;
        n = 0;
        if (stat_fd >= 0) {
            close(stat_fd);
            s->nfds--;
        }
    }
    if (n <= 0) {
        if (fd >= 0) {
            close(fd);
            s->nfds--;
        }
        return;
    }
    task_io *t = &s->cur[s->ncur];
    t->pid = pid;
    t->slot = slot;
    t->fd = fd < 0 ? -1 : fd;
    t->stat_fd = stat_fd < 0 ? -1 : stat_fd;
    s->ncur++;
    j->tasks++;
    j->blocked += blocked;
}

/* PIDs of one cgroup.procs, read in chunks (a big job lists thousands);
 * false if the cgroup is gone. */
static bool read_procs(procio_state *s, int slot, int fd)
{
    char buf[4096];
    long pid = -1;
    ssize_t n;
    off_t off = 0;
    while ((n = pread(fd, buf, sizeof buf, off)) > 0) {
        off += n;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
                if (pid > 1L << 30)
                    pid = -1;
            } else {
                if (pid > 0)
                    read_task(s, slot, (int)pid);
                pid = -1;
            }
        }
    }
    if (pid > 0)
        read_task(s, slot, (int)pid);
    return n == 0;
}

/* Opens the cgroup.procs of dirfd and of every cgroup below it. */
static void list_tree(job_io *j, int dirfd, int depth)
{
    if (j->nprocs < PROCIO_DIRS_MAX) {
        int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            j->procs_fd[j->nprocs++] = fd;
    }
    if (depth == PROCIO_DEPTH_MAX)
        return;
    int dup_fd = dup(dirfd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (d == NULL) {
        if (dup_fd >= 0)
            close(dup_fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
            continue;
        int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sub < 0)
            continue;
        list_tree(j, sub, depth + 1);
        close(sub);
    }
    closedir(d);
}

/* Reads every task of job slot; false if its cgroup is not there. */
static bool read_job(procio_state *s, int slot)
{
    job_io *j = &s->job[slot];
    if (j->rescan_in <= 0) {
        close_tree(j);
        int fd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return false; /* not made yet, or gone: cgroup says so */
        list_tree(j, fd, 0);
        close(fd);
        j->rescan_in = PROCIO_RESCAN;
    }
    j->rescan_in--;
    for (int k = 0; k < j->nprocs; k++)
        if (!read_procs(s, slot, j->procs_fd[k]))
            j->rescan_in = 0; /* a cgroup went away: list the tree again next period */
    return true;
}

static int by_pid(const void *a, const void *b)
{
    const task_io *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

static void add_all(uint64_t to[NKEYS], const uint64_t from[NKEYS])
{
    for (int k = 0; k < NKEYS; k++)
        to[k] += from[k];
}

/* Deltas per job from the previous and current task lists (both sorted). */
static void merge(procio_state *s)
{
    size_t i = 0, k = 0;
    while (i < s->ncur || k < s->nprev) {
        task_io *c = i < s->ncur ? &s->cur[i] : NULL;
        task_io *p = k < s->nprev ? &s->prev[k] : NULL;
        if (c != NULL && (p == NULL || c->pid < p->pid)) {
            job_io *j = &s->job[c->slot];
            if (j->sampled)
                add_all(j->sum, c->c); /* new task: started during the period */
            i++;
        } else if (p != NULL && (c == NULL || p->pid < c->pid)) {
            job_io *j = &s->job[p->slot];
            add_all(j->credit, p->c); /* left: its parent may soon add its totals */
            if (p->fd >= 0) {
                close(p->fd);
                s->nfds--;
                p->fd = -1;
            }
            if (p->stat_fd >= 0) {
                close(p->stat_fd);
                s->nfds--;
                p->stat_fd = -1;
            }
            j->credit_periods = PROCIO_CREDIT_PERIODS;
            k++;
        } else {
            job_io *j = &s->job[c->slot];
            bool same_task = c->slot == p->slot;
            for (int n = 0; n < NKEYS; n++)
                same_task = same_task && c->c[n] >= p->c[n];
            if (!same_task) {
                /* Another job's, or a reused PID: a new task. */
                if (j->sampled)
                    add_all(j->sum, c->c);
            } else {
                for (int n = 0; n < NKEYS; n++)
                    j->sum[n] += c->c[n] - p->c[n];
            }
            i++;
            k++;
        }
    }
}

static void emit(const procio_state *s, job_io *j, const hm_sample_ctx *ctx, hm_lp *out,
                 bool delayacct)
{
    double dt = hm_dt_s(j->prev_mono_ns, ctx->mono_ns);
    for (int k = 0; k < NIO; k++) {
        uint64_t used = j->sum[k] < j->credit[k] ? j->sum[k] : j->credit[k];
        j->sum[k] -= used;
        j->credit[k] -= used;
    }
    if (j->credit_periods > 0 && --j->credit_periods == 0)
        memset(j->credit, 0, sizeof j->credit);
    bool first = !j->sampled;
    j->sampled = true;
    j->prev_mono_ns = ctx->mono_ns;
    if (first || dt <= 0)
        return;
    hm_lp_begin(out, "procio");
    hm_lp_tag(out, "job", j->id);
    hm_lp_field_f64(out, HM_M(PIO, read_bytes_per_s), (double)j->sum[K_READ] / dt);
    hm_lp_field_f64(out, HM_M(PIO, write_bytes_per_s), (double)j->sum[K_WRITE] / dt);
    hm_lp_field_f64(out, HM_M(PIO, rchar_bytes_per_s), (double)j->sum[K_RCHAR] / dt);
    hm_lp_field_f64(out, HM_M(PIO, wchar_bytes_per_s), (double)j->sum[K_WCHAR] / dt);
    hm_lp_field_f64(out, HM_M(PIO, syscr_per_s), (double)j->sum[K_SYSCR] / dt);
    hm_lp_field_f64(out, HM_M(PIO, syscw_per_s), (double)j->sum[K_SYSCW] / dt);
    hm_lp_field_f64(out, HM_M(PIO, cpu_pct), 100.0 * (double)j->sum[K_CPU] / s->ticks_per_s / dt);
    if (delayacct)
        hm_lp_field_f64(out, HM_M(PIO, blkio_wait_pct),
                        100.0 * (double)j->sum[K_BLKIO] / s->ticks_per_s / dt);
    hm_lp_field_i64(out, HM_M(PIO, tasks_blocked), j->blocked);
    hm_lp_field_i64(out, HM_M(PIO, tasks), j->tasks);
    hm_lp_field_i64(out, HM_M(PIO, tasks_refused), j->refused);
    hm_lp_end(out);
}

static int procio_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    procio_state *s = state;
    (void)err;
    if (!s->synced || s->generation != ctx->jobs->generation) {
        sync_jobs(s, ctx->jobs);
        s->generation = ctx->jobs->generation;
        s->synced = true;
    }
    s->ncur = 0;
    for (int i = 0; i < HM_JOBS_MAX; i++) {
        job_io *j = &s->job[i];
        memset(j->sum, 0, sizeof j->sum);
        j->tasks = j->refused = j->blocked = 0;
        j->overflow = false;
        j->present = false;
        if (j->dir[0] == '\0')
            continue;
        j->present = read_job(s, i);
        if (!j->present)
            j->sampled = false;
    }
    qsort(s->cur, s->ncur, sizeof *s->cur, by_pid);
    merge(s);
    /* Delay accounting can be switched at run time: read each period. */
    bool delayacct = true; /* no sysctl (before 5.14): on unless booted nodelayacct */
    hm_error e;
    if (s->delayacct.fd >= 0) {
        uint64_t on = 0;
        delayacct = false;
        if (hm_procfile_read(&s->delayacct, &e) == 0) {
            hm_scan sc = hm_scan_of(s->delayacct.buf, s->delayacct.len);
            delayacct = hm_scan_u64(&sc, &on) && on != 0;
        }
    }
    for (int i = 0; i < HM_JOBS_MAX; i++) {
        job_io *j = &s->job[i];
        if (!j->present)
            continue;
        if (j->overflow)
            hm_log_warn_once(&s->warned_full, "procio: more than %d tasks on the node; the rest "
                             "are not read", PROCIO_TASKS_MAX);
        emit(s, j, ctx, out, delayacct);
    }
    task_io *t = s->prev;
    s->prev = s->cur;
    s->cur = t;
    s->nprev = s->ncur;
    return 0;
}

const hm_sampler_ops hm_sampler_proc_pid_io = {
    .name = "procio",
    .reads = "/proc/PID/io of every task in each job's cgroup tree (cgroup.procs)",
    .measurement = "procio (tag job)",
    .fields = HM_FIELDS(PROCIO_METRICS),
    .default_on = true,
    .node_local = true,
    .open = procio_open,
    .sample = procio_sample,
    .close = procio_close,
};
