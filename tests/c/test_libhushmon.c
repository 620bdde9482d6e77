/* libhushmon against the agent's application channel, in one process:
 * absent agent = no-op, the per-period aggregates, phases, events,
 * threads, fork, drops counted when the socket is full, malformed
 * messages, and the attribution rules (claims checked against owners and
 * cgroups; a client never moves to another job, seen through a /proc tree
 * of our own where this process's cgroup is what the test says). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app_channel.h"
#include "hm_test.h"
#include "hushmon.h"

static hm_test_counts tc;

static const char *collect(hm_app *app, hm_jobs *jobs, hm_lp *lp)
{
    hm_lp_reset(lp, 1000000000);
    hm_app_collect(app, jobs, lp);
    lp->buf[lp->len] = '\0';
    return lp->buf;
}

static void *thread_metrics(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        hm_metric("t_metric", 2.0);
    hm_flush();
    return NULL;
}

static void test_attribution(void)
{
    hm_jobs jobs;
    memset(&jobs, 0, sizeof jobs);
    hm_error err;
    CHECK(&tc, hm_jobs_begin(&jobs, "cg1", "slurm/job_1", HM_JOB_SLURM, &err) == 0);
    CHECK(&tc, hm_jobs_begin(&jobs, "own", NULL, HM_JOB_ANNOUNCED, &err) == 0);
    hm_jobs_find(&jobs, "own")->owner_uid = 1000;
    bool rej;
    const char *in_cg1 = "0::/slurm/job_1/step_0/task_3\n";
    int cg1 = (int)(hm_jobs_find(&jobs, "cg1") - jobs.job);
    int own = (int)(hm_jobs_find(&jobs, "own") - jobs.job);
    /* The kernel's word wins; a claim of another job is a rejection. */
    CHECK(&tc, hm_app_attribute(&jobs, in_cg1, "", 1001, &rej) == cg1 && !rej);
    CHECK(&tc, hm_app_attribute(&jobs, in_cg1, "own", 1000, &rej) == cg1 && rej);
    CHECK(&tc, hm_app_attribute(&jobs, "0::/slurm/job_10\n", "", 1000, &rej) == -1 && !rej);
    /* Claims: the owner and root, nobody else; never into a cgroup job. */
    CHECK(&tc, hm_app_attribute(&jobs, "0::/user.slice\n", "own", 1000, &rej) == own && !rej);
    CHECK(&tc, hm_app_attribute(&jobs, "0::/user.slice\n", "own", 0, &rej) == own && !rej);
    CHECK(&tc, hm_app_attribute(&jobs, "0::/user.slice\n", "own", 1001, &rej) == -1 && rej);
    CHECK(&tc, hm_app_attribute(&jobs, "", "own", -1, &rej) == -1 && rej);
    CHECK(&tc, hm_app_attribute(&jobs, "0::/user.slice\n", "cg1", 0, &rej) == -1 && rej);
    CHECK(&tc, hm_app_attribute(&jobs, "", "nosuch", 0, &rej) == -1 && !rej);
    /* v1 hierarchy lines count too. */
    CHECK(&tc, hm_app_attribute(&jobs, "4:cpu:/slurm/job_1\n", "", 5, &rej) == cg1);
    /* A hybrid machine's v2 hierarchy at <root>/unified: the job's cgroup
     * "unified/x" is the v2 line's "/x" (and no v1 line's). */
    CHECK(&tc, hm_jobs_begin(&jobs, "hy", "unified/bed/n1/job_7", HM_JOB_ANNOUNCED, &err) == 0);
    int hy = (int)(hm_jobs_find(&jobs, "hy") - jobs.job);
    CHECK(&tc, hm_app_attribute(&jobs, "4:memory:/x\n0::/bed/n1/job_7\n", "", 0, &rej) == hy &&
                   !rej);
    CHECK(&tc, hm_app_attribute(&jobs, "4:memory:/bed/n1/job_7\n0::/bed/n1\n", "hy", 0, &rej) ==
                   -1 && rej);
}

/* One metric record named name, claiming no job, on a raw connection. */
static void send_metric(int fd, const char *name)
{
    unsigned char msg[sizeof(hm_app_header) + HM_APP_REC_FIXED + 16];
    hm_app_header h = {.magic = HM_APP_MAGIC, .version = HM_APP_VERSION, .records = 1,
                       .rank = 0, .size = 1};
    memcpy(msg, &h, sizeof h);
    unsigned char *r = msg + sizeof h;
    memset(r, 0, HM_APP_REC_FIXED);
    uint8_t nlen = (uint8_t)strlen(name);
    uint32_t count = 1;
    double one = 1.0;
    r[0] = HM_APP_METRIC;
    r[1] = nlen;
    memcpy(r + 4, &count, 4);
    memcpy(r + 8, &one, 8);
    memcpy(r + 16, &one, 8);
    memcpy(r + 24, &one, 8);
    memcpy(r + HM_APP_REC_FIXED, name, nlen);
    CHECK(&tc, send(fd, msg, sizeof h + HM_APP_REC_FIXED + nlen, 0) ==
                   (ssize_t)(sizeof h + HM_APP_REC_FIXED + nlen));
}

static void set_cgroup(const char *file, const char *cgroup)
{
    FILE *f = fopen(file, "w");
    CHECK(&tc, f != NULL && fprintf(f, "0::/%s\n", cgroup) > 0 && fclose(f) == 0);
}

/* A process whose cgroup becomes another job's (a reused pid reads so
 * too) keeps its first job or none: its data never goes to the other. */
static void test_no_move_to_another_job(void)
{
    char dir[] = "/tmp/hm_libmove_XXXXXX";
    CHECK(&tc, mkdtemp(dir) != NULL);
    char ctl[96], sock[96], procdir[160], cgfile[200];
    snprintf(ctl, sizeof ctl, "%s/agent.sock", dir);
    snprintf(sock, sizeof sock, "%s/app.sock", dir);
    snprintf(procdir, sizeof procdir, "%s/proc/%d", dir, (int)getpid());
    snprintf(cgfile, sizeof cgfile, "%s/cgroup", procdir);
    char mk[256];
    snprintf(mk, sizeof mk, "mkdir -p %s", procdir);
    CHECK(&tc, system(mk) == 0);
    set_cgroup(cgfile, "slurm/job_a");
    hm_app app;
    hm_error err;
    CHECK(&tc, hm_app_open(&app, ctl, &err) == 0);
    snprintf(app.proc_root, sizeof app.proc_root, "%s", dir);
    hm_jobs jobs;
    memset(&jobs, 0, sizeof jobs);
    CHECK(&tc, hm_jobs_begin(&jobs, "a", "slurm/job_a", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(&tc, hm_jobs_begin(&jobs, "b", "slurm/job_b", HM_JOB_ANNOUNCED, &err) == 0);
    hm_lp lp;
    CHECK(&tc, hm_lp_init(&lp, 1 << 20, "n1", &err) == 0);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock);
    CHECK(&tc, connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0);
    send_metric(fd, "first");
    const char *out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "app,host=n1,job=a,rank=0,metric=first count=1i") != NULL);
    set_cgroup(cgfile, "slurm/job_b");
    CHECK(&tc, hm_jobs_begin(&jobs, "c", NULL, HM_JOB_ANNOUNCED, &err) == 0); /* re-attribute */
    send_metric(fd, "moved");
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "metric=moved") == NULL);
    CHECK(&tc, strstr(out, "job_moves_refused=1i") != NULL && strstr(out, "unattributed=1i"));
    set_cgroup(cgfile, "slurm/job_a"); /* back in its own job: its data counts again */
    CHECK(&tc, hm_jobs_end(&jobs, "c", HM_JOB_ANNOUNCED, &err) == 0);
    send_metric(fd, "back");
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "app,host=n1,job=a,rank=0,metric=back count=1i") != NULL);
    close(fd);
    hm_app_close(&app);
    hm_lp_free(&lp);
    char rm[160];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    CHECK(&tc, system(rm) == 0);
}

int main(void)
{
    test_attribution();
    test_no_move_to_another_job();

    /* Absent agent: every call a no-op, nothing counted. */
    char dir[] = "/tmp/hm_libtest_XXXXXX";
    CHECK(&tc, mkdtemp(dir) != NULL);
    char ctl[96], sock[96];
    snprintf(ctl, sizeof ctl, "%s/agent.sock", dir);
    snprintf(sock, sizeof sock, "%s/app.sock", dir);
    setenv("HUSHMON_APP_SOCKET", sock, 1);
    setenv("HUSHMON_JOB", "j1", 1);
    CHECK(&tc, hm_open() == 1);
    hm_metric("x", 1.0);
    hm_phase_begin("p");
    hm_phase_end("p");
    hm_stats st;
    hm_stats_get(&st);
    CHECK(&tc, st.records == 0 && st.dropped_records == 0 && st.connected == 0);

    hm_app app;
    hm_error err;
    CHECK(&tc, hm_app_open(&app, ctl, &err) == 0);
    hm_jobs jobs;
    memset(&jobs, 0, sizeof jobs);
    CHECK(&tc, hm_jobs_begin(&jobs, "j1", NULL, HM_JOB_ANNOUNCED, &err) == 0);
    hm_jobs_find(&jobs, "j1")->owner_uid = (long)getuid();
    hm_lp lp;
    CHECK(&tc, hm_lp_init(&lp, 1 << 20, "n1", &err) == 0);

    CHECK(&tc, hm_open() == 0);
    for (int i = 0; i < 1000; i++)
        hm_metric("iter_time_s", (double)i);
    hm_phase_begin("solve");
    hm_phase_begin("inner");
    hm_phase_end("solve"); /* closes inner with it: one record */
    hm_phase_end("inner"); /* no longer open: nothing */
    hm_event("checkpoint", "step \"7\"\nok");
    const char *names[] = {"a", "b"};
    double vals[] = {1.5, 2.5};
    hm_profile_dump("region_s", names, vals, 2);
    hm_profile_dump("it", NULL, vals, 2);
    hm_metric("bad name,=x", 3.0);
    hm_metric("nan", 0.0 / 0.0); /* not a measurement: left out */
    hm_flush();
    const char *out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "app,host=n1,job=j1,metric=iter_time_s count=1000i,mean=499.5,min=0,"
                           "max=999,sum=499500 ") != NULL);
    CHECK(&tc, strstr(out, "app_phase,host=n1,job=j1,phase=solve count=1i,mean_s=") != NULL);
    CHECK(&tc, strstr(out, "phase=inner") == NULL);
    CHECK(&tc, strstr(out, "app_event,host=n1,job=j1,event=checkpoint count=1i,"
                           "text=\"step \\\"7\\\" ok\"") != NULL);
    CHECK(&tc, strstr(out, "metric=region_s.b count=1i,mean=2.5") != NULL);
    CHECK(&tc, strstr(out, "metric=it.1 count=1i,mean=2.5") != NULL);
    CHECK(&tc, strstr(out, "metric=bad_name__x ") != NULL);
    CHECK(&tc, strstr(out, "metric=nan ") == NULL);
    CHECK(&tc, strstr(out, "app_channel,host=n1 clients=1i,connections=1i") != NULL);
    /* Nothing new: no app line the next period, the counters stay. */
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "app,") == NULL && strstr(out, "app_channel,") != NULL);

    /* Threads: one series, every thread's values. */
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, thread_metrics, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "metric=t_metric count=4000i,mean=2,") != NULL);

    /* Fork: the child has its own connection and none of the parent's
     * unsent records. */
    hm_metric("before_fork", 1.0); /* buffered, not flushed */
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 10; i++)
            hm_metric("child", 1.0);
        hm_flush();
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    hm_flush();
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "metric=child count=10i") != NULL);
    CHECK(&tc, strstr(out, "metric=before_fork count=1i") != NULL);
    CHECK(&tc, strstr(out, "connections=2i") != NULL);

    /* Unattributed: a claim of a job that is not there. The claim is read
     * when the library opens. */
    hm_close();
    setenv("HUSHMON_JOB", "other", 1);
    CHECK(&tc, hm_open() == 0);
    hm_metric("stray", 1.0);
    hm_flush();
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "stray") == NULL && strstr(out, "unattributed=1i") != NULL);
    hm_close();
    setenv("HUSHMON_JOB", "j1", 1);
    CHECK(&tc, hm_open() == 0);

    /* The agent does not read (stopped): the socket fills, the library
     * drops and counts, and never waits. */
    hm_stats_get(&st);
    uint64_t dropped0 = st.dropped_records;
    long calls = 0;
    /* 64 names: a batch holds 24, so a send every 24 calls (one name
     * would be aggregated into one record per 100 ms and never fill it). */
    char flood[64][16];
    for (int k = 0; k < 64; k++)
        snprintf(flood[k], sizeof flood[k], "flood%d", k);
    for (; calls < 20000000; calls++) {
        hm_metric(flood[calls % 64], 1.0);
        if (calls % 4096 == 0) {
            hm_stats_get(&st);
            if (st.dropped_records > dropped0)
                break;
        }
    }
    hm_flush();
    hm_stats_get(&st);
    CHECK(&tc, st.dropped_records > dropped0);
    CHECK(&tc, st.records == st.sent_records + st.dropped_records);
    collect(&app, &jobs, &lp); /* reads what was queued */
    for (int k = 0; k < 50; k++)
        collect(&app, &jobs, &lp);
    hm_metric("after", 1.0);
    hm_flush();
    hm_stats_get(&st);
    out = collect(&app, &jobs, &lp);
    char want[64];
    snprintf(want, sizeof want, "lib_dropped=%llui", (unsigned long long)st.dropped_records);
    CHECK(&tc, strstr(out, "metric=after count=1i") != NULL);
    CHECK(&tc, strstr(out, want) != NULL);

    /* No name: that one call is dropped and counted; the records after it
     * in the same message still arrive (the agent refused the message). */
    hm_stats_get(&st);
    uint64_t dropped_before_empty = st.dropped_records;
    hm_metric("before_empty", 3.0);
    hm_metric("", 1.0);
    hm_phase_begin("");
    hm_phase_end("");
    hm_metric("after_empty", 4.0);
    hm_stats_get(&st);
    CHECK(&tc, st.dropped_records == dropped_before_empty + 2);
    hm_flush();
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "metric=before_empty count=1i,mean=3") != NULL);
    CHECK(&tc, strstr(out, "metric=after_empty count=1i,mean=4") != NULL);

    /* A malformed message is counted, not taken. */
    int raw = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock);
    CHECK(&tc, connect(raw, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK(&tc, send(raw, "garbage-garbage-garbage-garbage-garbage-garbage-garbage-garbage-"
                         "garbage-garbage-garbage-garbage-garbage", 100, 0) == 100);
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "malformed=1i") != NULL);

    /* A bad record inside a well-framed message (another library, a
     * hostile client): that record is skipped and counted, the others kept. */
    unsigned char msg[256];
    hm_app_header hdr = {.magic = HM_APP_MAGIC, .version = HM_APP_VERSION, .records = 4,
                         .rank = 0, .size = 1};
    snprintf(hdr.job_claim, sizeof hdr.job_claim, "j1");
    memcpy(msg, &hdr, sizeof hdr);
    size_t off = sizeof hdr;
    const char *rec_names[] = {"raw_first", "", "raw_nan", "raw_last"};
    for (int r = 0; r < 4; r++) {
        unsigned char *p = msg + off;
        uint8_t nlen = (uint8_t)strlen(rec_names[r]);
        uint16_t tlen = 0;
        uint32_t count = 1;
        double v = r == 2 ? 0.0 / 0.0 : 7.0;
        p[0] = HM_APP_METRIC;
        p[1] = nlen;
        memcpy(p + 2, &tlen, 2);
        memcpy(p + 4, &count, 4);
        memcpy(p + 8, &v, 8);
        memcpy(p + 16, &v, 8);
        memcpy(p + 24, &v, 8);
        memcpy(p + HM_APP_REC_FIXED, rec_names[r], nlen);
        off += HM_APP_REC_FIXED + nlen;
    }
    CHECK(&tc, send(raw, msg, off, 0) == (ssize_t)off);
    out = collect(&app, &jobs, &lp);
    CHECK(&tc, strstr(out, "metric=raw_first count=1i,mean=7") != NULL);
    CHECK(&tc, strstr(out, "metric=raw_last count=1i,mean=7") != NULL);
    CHECK(&tc, strstr(out, "raw_nan") == NULL);
    CHECK(&tc, strstr(out, "malformed=1i,records_malformed=2i") != NULL);
    close(raw);

    hm_close();
    hm_metric("after_close", 1.0); /* no-op */
    hm_app_close(&app);
    hm_lp_free(&lp);
    rmdir(dir);
    return hm_test_finish("test_libhushmon", &tc);
}
