/* The application channel (app_channel.h, docs/libhushmon.md). */
#include "app_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.h"
#include "hm_log.h"
#include "hm_timer.h"

void hm_app_init(hm_app *app)
{
    memset(app, 0, sizeof *app);
    app->listen_fd = -1;
    app->limits = (hm_app_limits){.clients_per_uid = HM_APP_CLIENTS_PER_UID,
                                  .idle_ms = HM_APP_IDLE_MS,
                                  .series_per_job = HM_APP_SERIES_PER_JOB,
                                  .records_per_client = HM_APP_RECORDS_PER_CLIENT};
}

static void free_tables(hm_app *app)
{
    free(app->client);
    free(app->series);
    free(app->used);
    free(app->msg);
    free(app->pidpoll);
    app->pidpoll = NULL;
    app->client = NULL;
    app->series = NULL;
    app->used = NULL;
    app->msg = NULL;
}

int hm_app_open(hm_app *app, const char *control_path, hm_error *err)
{
    hm_app_init(app);
    if (control_path[0] == '\0')
        return 0;
    const char *slash = strrchr(control_path, '/');
    size_t dirlen = slash != NULL ? (size_t)(slash - control_path + 1) : 0;
    if (dirlen + strlen("app.sock") >= sizeof app->path)
        return hm_error_set(err, "application socket path beside %s too long", control_path);
    memcpy(app->path, control_path, dirlen);
    strcpy(app->path + dirlen, "app.sock");
    app->client = calloc(HM_APP_CLIENTS_MAX, sizeof *app->client);
    app->series = calloc(HM_APP_SERIES_MAX, sizeof *app->series);
    app->used = calloc(HM_APP_SERIES_MAX, sizeof *app->used);
    app->msg = malloc(HM_APP_MSG_MAX);
    app->pidpoll = calloc(HM_APP_CLIENTS_MAX, sizeof *app->pidpoll);
    if (app->client == NULL || app->series == NULL || app->used == NULL || app->msg == NULL ||
        app->pidpoll == NULL) {
        free_tables(app);
        return hm_error_set(err, "out of memory for the application channel");
    }
    /* 0666: any user's program may connect. Backlog: every rank of a node
     * may connect within one period. */
    app->listen_fd = hm_socket_listen_safely(SOCK_SEQPACKET, app->path, 0666, -1, 1024, err);
    if (app->listen_fd < 0) {
        free_tables(app);
        return -1;
    }
    return 0;
}

static void drop_client(hm_app *app, size_t i)
{
    app->lib_dropped_closed += app->client[i].lib_dropped;
    close(app->client[i].fd);
    if (app->client[i].pidfd >= 0)
        close(app->client[i].pidfd);
    app->client[i] = app->client[--app->nclients];
}

void hm_app_close(hm_app *app)
{
    if (app->listen_fd < 0)
        return;
    while (app->nclients > 0)
        drop_client(app, app->nclients - 1);
    close(app->listen_fd);
    unlink(app->path);
    free_tables(app);
    hm_app_init(app);
}

int hm_app_attribute(const hm_jobs *jobs, const char *cgroup_text, const char *claim, long uid,
                     bool *rejected)
{
    *rejected = false;
    int held = hm_jobs_of_proc_cgroup(jobs, cgroup_text);
    if (held >= 0) {
        *rejected = claim[0] != '\0' && strcmp(claim, jobs->job[held].id) != 0;
        return held;
    }
    if (claim[0] == '\0')
        return -1;
    for (int j = 0; j < HM_JOBS_MAX; j++) {
        const hm_job *job = &jobs->job[j];
        if (!job->used || strcmp(job->id, claim) != 0)
            continue;
        /* A job with a cgroup holds its processes: one outside it is not
         * the job's, whoever it is. */
        if (job->cgroup[0] == '\0' && uid >= 0 && (uid == 0 || uid == job->owner_uid))
            return j;
        *rejected = true;
        return -1;
    }
    return -1;
}

/* Whether the process that connected has ended: from then on its pid
 * may be another's, and /proc/PID says nothing about the client. */
static bool process_ended(const hm_app_client *cl)
{
    if (cl->pidfd < 0)
        return false;
    struct pollfd p = {.fd = cl->pidfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* Reads the file at <proc_root>/proc/PID/NAME into text (NUL-ended, ""
 * when unreadable). */
static void read_proc(const hm_app *app, pid_t pid, const char *name, char *text, size_t size)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/proc/%d/%s", app->proc_root, (int)pid, name);
    text[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, text, size - 1);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
}

/* Which job cl's data goes to, from its process's cgroup and its claim.
 * Once its process has ended (ended), /proc/PID may be another process's:
 * only the claim and the uid count then. A client stays with the first
 * job it was attributed to: it is never moved to another (its pid reused,
 * its process moved). Returns whether its process has ended. */
static bool attribute(hm_app *app, hm_app_client *cl, const hm_jobs *jobs, bool ended)
{
    char text[4096] = "";
    if (!ended) {
        read_proc(app, cl->pid, "cgroup", text, sizeof text);
        read_proc(app, cl->pid, "comm", cl->comm, sizeof cl->comm);
        cl->comm[strcspn(cl->comm, "\n")] = '\0';
        ended = process_ended(cl); /* after the reads: they were its own if it still ran */
        if (ended)
            text[0] = '\0';
    }
    cl->jobs_generation = jobs->generation;
    cl->attributed_once = true;
    bool rejected;
    int j = hm_app_attribute(jobs, text, cl->claim, cl->uid, &rejected);
    if (rejected)
        hm_refuse(&app->log, &app->total.rejected_claims, 1, "app socket",
                  "uid %ld pid %d claims job '%s': %s", cl->uid, (int)cl->pid, cl->claim,
                  j >= 0 ? "its cgroup is another job's, attributed there"
                         : "not its owner or outside the job's cgroup, not attributed");
    if (j >= 0 && cl->first_job_id[0] != '\0' && strcmp(jobs->job[j].id, cl->first_job_id) != 0) {
        hm_refuse(&app->log, &app->total.job_moves_refused, 1, "app socket",
                  "uid %ld pid %d was job %s's when it connected and is now in job %s: its "
                  "data goes to neither", cl->uid, (int)cl->pid, cl->first_job_id,
                  jobs->job[j].id);
        j = -1;
    }
    cl->job = j;
    snprintf(cl->job_id, sizeof cl->job_id, "%s", j >= 0 ? jobs->job[j].id : "");
    if (j >= 0 && cl->first_job_id[0] == '\0')
        snprintf(cl->first_job_id, sizeof cl->first_job_id, "%s", cl->job_id);
    return ended;
}

static uint32_t hash_key(uint8_t kind, int32_t rank, const char *job, const char *name)
{
    uint32_t h = 2166136261u ^ kind;
    h = (h ^ (uint32_t)rank) * 16777619u;
    for (const char *p = job; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ 0xff) * 16777619u;
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h;
}

/* The series of (kind, rank, job, name) this period; NULL when the table
 * is three quarters full (probing stays short; the rest is counted), or
 * when job_slot has its quota of series (*over_quota). */
static hm_app_series *series_for(hm_app *app, uint8_t kind, int32_t rank, int job_slot,
                                 const char *job, const char *name, bool *over_quota)
{
    uint32_t i = hash_key(kind, rank, job, name) % HM_APP_SERIES_MAX;
    *over_quota = false;
    for (;;) {
        hm_app_series *s = &app->series[i];
        if (s->kind == 0) {
            if (app->job_series[job_slot] >= (uint64_t)app->limits.series_per_job) {
                *over_quota = true;
                return NULL;
            }
            if (app->nused >= HM_APP_SERIES_MAX * 3 / 4)
                return NULL;
            app->job_series[job_slot]++;
            s->kind = kind;
            s->rank = rank;
            snprintf(s->job, sizeof s->job, "%s", job);
            snprintf(s->name, sizeof s->name, "%s", name);
            s->count = 0;
            s->sum = 0;
            s->min = INFINITY;
            s->max = -INFINITY;
            s->text[0] = '\0';
            app->used[app->nused++] = i;
            return s;
        }
        if (s->kind == kind && s->rank == rank && strcmp(s->name, name) == 0 &&
            strcmp(s->job, job) == 0)
            return s;
        i = (i + 1) % HM_APP_SERIES_MAX;
    }
}

/* Names go into tags: keep [A-Za-z0-9_.:/-], the rest becomes '_'. */
static void clean_name(char *out, const unsigned char *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = in[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
        out[i] = ok ? (char)c : '_';
    }
    out[n] = '\0';
}

/* A client's HM_APP_CONTROL record: id 0, it takes control messages;
 * another, it acknowledges that one (status: its callback's return). */
static void take_control_record(hm_app *app, hm_app_client *cl, const unsigned char *name,
                                size_t nlen, double status)
{
    uint64_t id = 0;
    for (size_t i = 0; i < nlen; i++) {
        if (name[i] < '0' || name[i] > '9' || id > UINT32_MAX)
            return;
        id = id * 10 + (uint64_t)(name[i] - '0');
    }
    if (id == 0) {
        cl->listens = true;
        return;
    }
    /* Only a client the message went to acknowledges it, once. */
    uint32_t *awaited = &cl->awaiting[id % HM_APP_CTL_PENDING];
    if (*awaited != id) {
        hm_refuse(&app->log, &app->total.acks_refused, 1, "app socket",
                  "uid %ld pid %d acknowledges control message %llu, which was not sent to it "
                  "(or was acknowledged already): not counted", cl->uid, (int)cl->pid,
                  (unsigned long long)id);
        return;
    }
    *awaited = 0;
    for (size_t i = 0; i < HM_APP_CTL_PENDING; i++) {
        hm_app_ctl_pending *c = &app->ctl[i];
        if (c->id == id && c->acked < c->sent) {
            c->acked++;
            c->failed += status != 0;
        }
    }
}

/* One message from cl; false when it is not a valid message. */
static bool take_message(hm_app *app, hm_app_client *cl, size_t n)
{
    hm_app_header h;
    if (n < sizeof h)
        return false;
    memcpy(&h, app->msg, sizeof h);
    if (h.magic != HM_APP_MAGIC || h.version != HM_APP_VERSION)
        return false;
    cl->lib_dropped = h.dropped_total;
    size_t off = sizeof h;
    uint64_t over_budget = 0, over_quota = 0;
    for (unsigned r = 0; r < h.records; r++) {
        if (off + HM_APP_REC_FIXED > n)
            return false;
        const unsigned char *p = app->msg + off;
        uint8_t type = p[0], nlen = p[1];
        uint16_t tlen;
        uint32_t count;
        double sum, min, max;
        memcpy(&tlen, p + 2, 2);
        memcpy(&count, p + 4, 4);
        memcpy(&sum, p + 8, 8);
        memcpy(&min, p + 16, 8);
        memcpy(&max, p + 24, 8);
        /* A record that overruns the message leaves no way to find the
         * next one: the message is malformed. One whose own fields are bad
         * (no name, an unknown type, a value that is not finite) is skipped
         * by its lengths, and the message's other records are kept. */
        if (off + HM_APP_REC_FIXED + (size_t)nlen + tlen > n)
            return false;
        off += HM_APP_REC_FIXED + nlen + tlen;
        if (nlen == 0 || nlen > HM_APP_NAME_MAX || tlen > HM_APP_TEXT_MAX || count == 0 ||
            (type != HM_APP_METRIC && type != HM_APP_PHASE && type != HM_APP_EVENT &&
             type != HM_APP_CONTROL) ||
            !(sum - sum == 0) || !(min - min == 0) || !(max - max == 0)) {
            app->total.records_malformed++;
            continue;
        }
        if (type == HM_APP_CONTROL) {
            take_control_record(app, cl, p + HM_APP_REC_FIXED, nlen, sum);
            continue;
        }
        app->total.records += count;
        if (cl->job < 0) {
            app->total.unattributed += count;
            continue;
        }
        if (cl->records_this_period >= (uint64_t)app->limits.records_per_client) {
            over_budget += count;
            continue;
        }
        cl->records_this_period++;
        char name[HM_APP_NAME_MAX + 1];
        clean_name(name, p + HM_APP_REC_FIXED, nlen);
        bool quota;
        hm_app_series *s = series_for(app, type, h.rank, cl->job, cl->job_id, name, &quota);
        if (s == NULL && quota) {
            over_quota += count;
            continue;
        }
        if (s == NULL) {
            app->total.series_full += count;
            continue;
        }
        if (type == HM_APP_EVENT) {
            s->count += count;
            size_t k = tlen < HM_APP_EVENT_TEXT_MAX ? tlen : HM_APP_EVENT_TEXT_MAX - 1;
            memcpy(s->text, p + HM_APP_REC_FIXED + nlen, k);
            s->text[k] = '\0';
        } else if (isfinite(sum) && isfinite(min) && isfinite(max)) {
            s->count += count;
            s->sum += sum;
            s->min = min < s->min ? min : s->min;
            s->max = max > s->max ? max : s->max;
        }
    }
    if (over_budget > 0)
        hm_refuse(&app->log, &app->total.records_over_budget, over_budget, "app socket",
                  "uid %ld pid %d (job %s) sent more than app.records_per_client = %lld records "
                  "this period: %llu values dropped", cl->uid, (int)cl->pid, cl->job_id,
                  (long long)app->limits.records_per_client, (unsigned long long)over_budget);
    if (over_quota > 0)
        hm_refuse(&app->log, &app->total.series_quota, over_quota, "app socket",
                  "uid %ld pid %d: job %s has its app.series_per_job = %lld series this period: "
                  "%llu values of new series dropped", cl->uid, (int)cl->pid, cl->job_id,
                  (long long)app->limits.series_per_job, (unsigned long long)over_quota);
    return off == n;
}

static size_t clients_of_uid(const hm_app *app, long uid)
{
    size_t n = 0;
    for (size_t i = 0; i < app->nclients; i++)
        n += app->client[i].uid == uid;
    return n;
}

static void accept_clients(hm_app *app)
{
    int64_t now = hm_monotonic_ns();
    for (;;) {
        int fd = accept4(app->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct ucred cred;
        socklen_t clen = sizeof cred;
        if (app->nclients >= HM_APP_CLIENTS_MAX ||
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
            app->total.clients_refused++;
            close(fd);
            continue;
        }
        if (clients_of_uid(app, (long)cred.uid) >= (size_t)app->limits.clients_per_uid) {
            hm_refuse(&app->log, &app->total.clients_refused_uid, 1, "app socket",
                      "refused uid %ld pid %d: it holds app.clients_per_uid = %lld connections",
                      (long)cred.uid, (int)cred.pid, (long long)app->limits.clients_per_uid);
            close(fd);
            continue;
        }
        /* The process itself, not its number: its end is seen even when
         * the pid is reused (pidfd, Linux 5.3). One that has ended before
         * we came (a short program) is read, attributed by its claim. */
        int pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
        hm_app_client *cl = &app->client[app->nclients++];
        memset(cl, 0, sizeof *cl);
        cl->fd = fd;
        cl->pidfd = pidfd;
        cl->ended_at_accept = pidfd < 0 && errno == ESRCH;
        cl->pid = cred.pid;
        cl->uid = (long)cred.uid;
        cl->job = -1;
        cl->last_message_ns = now;
        app->total.connections++;
    }
}

/* Marks ended[i] for the clients whose process has ended (one poll). */
static void find_ended(hm_app *app, bool *ended)
{
    for (size_t i = 0; i < app->nclients; i++) {
        app->pidpoll[i] = (struct pollfd){.fd = app->client[i].pidfd, .events = POLLIN};
        ended[i] = app->client[i].ended_at_accept;
    }
    if (app->nclients == 0 || poll(app->pidpoll, (nfds_t)app->nclients, 0) <= 0)
        return;
    for (size_t i = 0; i < app->nclients; i++)
        ended[i] = ended[i] || app->pidpoll[i].revents != 0;
}

static void read_clients(hm_app *app, hm_jobs *jobs)
{
    int64_t now = hm_monotonic_ns();
    bool ended[HM_APP_CLIENTS_MAX];
    find_ended(app, ended);
    for (size_t i = 0; i < app->nclients;) {
        hm_app_client *cl = &app->client[i];
        bool gone = false, drained = false;
        for (int k = 0; k < HM_APP_READS_PER_PERIOD; k++) {
            ssize_t n = recv(cl->fd, app->msg, HM_APP_MSG_MAX, MSG_DONTWAIT | MSG_TRUNC);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                gone = true;
                break;
            }
            if (n < 0) {
                drained = true;
                break;
            }
            app->total.messages++;
            cl->last_message_ns = now;
            if ((size_t)n > HM_APP_MSG_MAX) {
                app->total.malformed++;
                continue;
            }
            /* The claim is in every header: attribute once the first
             * message says it, again when the node's jobs change. */
            hm_app_header h;
            if ((size_t)n >= sizeof h) {
                memcpy(&h, app->msg, sizeof h);
                h.job_claim[sizeof h.job_claim - 1] = '\0';
                if (!cl->attributed_once || strcmp(h.job_claim, cl->claim) != 0 ||
                    cl->jobs_generation != jobs->generation) {
                    memcpy(cl->claim, h.job_claim, sizeof cl->claim);
                    ended[i] = attribute(app, cl, jobs, ended[i]);
                }
            }
            if (!take_message(app, cl, (size_t)n))
                app->total.malformed++;
        }
        /* What the process sent before it ended is read; a connection it
         * left open (held by another process) is not kept. */
        if (!gone && ended[i] && drained) {
            hm_refuse(&app->log, &app->total.clients_pid_gone, 1, "app socket",
                      "dropped uid %ld pid %d: the process that connected has ended and "
                      "another holds its connection", cl->uid, (int)cl->pid);
            gone = true;
        }
        if (!gone && app->limits.idle_ms > 0 &&
            now - cl->last_message_ns > app->limits.idle_ms * 1000000) {
            hm_refuse(&app->log, &app->total.clients_idle, 1, "app socket",
                      "dropped uid %ld pid %d: nothing sent for app.idle_ms = %lld ms (it "
                      "reconnects when it sends again)", cl->uid, (int)cl->pid,
                      (long long)app->limits.idle_ms);
            gone = true;
        }
        if (gone) {
            drop_client(app, i);
            ended[i] = ended[app->nclients]; /* drop_client moved the last one here */
        } else {
            i++;
        }
    }
}

bool hm_app_is_muted(const hm_app_muted *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->name[i], name) == 0)
            return true;
    return false;
}

int hm_app_muted_edit(hm_app_muted *m, const char *edit, hm_error *err)
{
    hm_app_muted next = *m;
    char list[1024];
    if (snprintf(list, sizeof list, "%s", edit) >= (int)sizeof list)
        return hm_error_set(err, "apps: list too long");
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        const char *name = t + 1;
        size_t len = strlen(name);
        if ((t[0] != '+' && t[0] != '-') || len == 0 || len > HM_APP_NAME_MAX)
            return hm_error_set(err, "apps: '%s' is not +NAME or -NAME (1 .. %d bytes)", t,
                                HM_APP_NAME_MAX);
        bool muted = hm_app_is_muted(&next, name);
        if (t[0] == '-' && !muted) {
            if (next.n == HM_APP_MUTED_MAX)
                return hm_error_set(err, "apps: at most %d names unsubscribed", HM_APP_MUTED_MAX);
            snprintf(next.name[next.n++], sizeof next.name[0], "%s", name);
        } else if (t[0] == '+' && muted) {
            for (size_t i = 0; i < next.n; i++)
                if (strcmp(next.name[i], name) == 0) {
                    memmove(next.name[i], next.name[i + 1], (next.n - i - 1) * sizeof next.name[0]);
                    next.n--;
                    break;
                }
        }
    }
    *m = next;
    return 0;
}

static void emit(hm_app *app, hm_lp *out)
{
    static const char *const measurement[] = {"", "app", "app_event", "app_phase"};
    static const char *const tag[] = {"", "metric", "event", "phase"};
    for (size_t u = 0; u < app->nused; u++) {
        hm_app_series *s = &app->series[app->used[u]];
        if (s->count > 0 && !hm_app_is_muted(&app->muted, s->name)) {
            hm_lp_begin(out, measurement[s->kind]);
            hm_lp_tag(out, "job", s->job);
            if (s->rank >= 0) {
                char rank[16];
                snprintf(rank, sizeof rank, "%d", (int)s->rank);
                hm_lp_tag(out, "rank", rank);
            }
            hm_lp_tag(out, tag[s->kind], s->name);
            hm_lp_field_i64(out, "count", (int64_t)s->count);
            if (s->kind == HM_APP_METRIC) {
                hm_lp_field_f64(out, "mean", s->sum / (double)s->count);
                hm_lp_field_f64(out, "min", s->min);
                hm_lp_field_f64(out, "max", s->max);
                hm_lp_field_f64(out, "sum", s->sum);
            } else if (s->kind == HM_APP_PHASE) {
                hm_lp_field_f64(out, "mean_s", s->sum / (double)s->count);
                hm_lp_field_f64(out, "min_s", s->min);
                hm_lp_field_f64(out, "max_s", s->max);
                hm_lp_field_f64(out, "total_s", s->sum);
            } else {
                hm_lp_field_str(out, "text", s->text);
            }
            hm_lp_end(out);
        }
        s->kind = 0;
    }
    app->nused = 0;
    memset(app->job_series, 0, sizeof app->job_series);
    for (size_t i = 0; i < app->nclients; i++)
        app->client[i].records_this_period = 0;
    if (app->total.connections == 0)
        return; /* no application ever came: no line */
    uint64_t lib_dropped = app->lib_dropped_closed;
    for (size_t i = 0; i < app->nclients; i++)
        lib_dropped += app->client[i].lib_dropped;
    hm_lp_begin(out, "app_channel");
    hm_lp_field_i64(out, "clients", (int64_t)app->nclients);
    hm_lp_field_i64(out, "connections", (int64_t)app->total.connections);
    hm_lp_field_i64(out, "messages", (int64_t)app->total.messages);
    hm_lp_field_i64(out, "records", (int64_t)app->total.records);
    hm_lp_field_i64(out, "malformed", (int64_t)app->total.malformed);
    hm_lp_field_i64(out, "records_malformed", (int64_t)app->total.records_malformed);
    hm_lp_field_i64(out, "unattributed", (int64_t)app->total.unattributed);
    hm_lp_field_i64(out, "rejected_claims", (int64_t)app->total.rejected_claims);
    hm_lp_field_i64(out, "series_full", (int64_t)app->total.series_full);
    hm_lp_field_i64(out, "clients_refused", (int64_t)app->total.clients_refused);
    hm_lp_field_i64(out, "lib_dropped", (int64_t)lib_dropped);
    hm_lp_field_i64(out, "clients_refused_uid", (int64_t)app->total.clients_refused_uid);
    hm_lp_field_i64(out, "clients_idle", (int64_t)app->total.clients_idle);
    hm_lp_field_i64(out, "clients_pid_gone", (int64_t)app->total.clients_pid_gone);
    hm_lp_field_i64(out, "series_quota", (int64_t)app->total.series_quota);
    hm_lp_field_i64(out, "records_over_budget", (int64_t)app->total.records_over_budget);
    hm_lp_field_i64(out, "job_moves_refused", (int64_t)app->total.job_moves_refused);
    hm_lp_field_i64(out, "acks_refused", (int64_t)app->total.acks_refused);
    hm_lp_end(out);
}

void hm_app_collect(hm_app *app, hm_jobs *jobs, hm_lp *out)
{
    if (app->listen_fd < 0)
        return;
    accept_clients(app);
    read_clients(app, jobs);
    emit(app, out);
}

void hm_app_read(hm_app *app, hm_jobs *jobs)
{
    if (app->listen_fd < 0)
        return;
    accept_clients(app);
    read_clients(app, jobs);
}

int hm_app_control_send(hm_app *app, hm_jobs *jobs, const char *job, const char *name,
                        const char *text, uint32_t *id, unsigned *sent, hm_error *err)
{
    if (app->listen_fd < 0)
        return hm_error_set(err, "no application channel (control.socket is '')");
    size_t tlen = strlen(text);
    if (tlen == 0 || tlen > HM_APP_CTL_TEXT_MAX)
        return hm_error_set(err, "a control message is 1 .. %d bytes", HM_APP_CTL_TEXT_MAX);
    accept_clients(app);
    read_clients(app, jobs);
    /* ids start above 0 and wrap past it; the slot of the oldest is reused */
    if (++app->ctl_next_id == 0)
        app->ctl_next_id = 1;
    hm_app_ctl_pending *slot = &app->ctl[app->ctl_next_id % HM_APP_CTL_PENDING];
    *slot = (hm_app_ctl_pending){.id = app->ctl_next_id};
    unsigned char msg[sizeof(hm_app_ctl_header) + HM_APP_CTL_TEXT_MAX];
    hm_app_ctl_header h = {.magic = HM_APP_CTL_MAGIC, .version = HM_APP_VERSION,
                           .text_len = (uint16_t)tlen, .id = slot->id};
    memcpy(msg, &h, sizeof h);
    memcpy(msg + sizeof h, text, tlen);
    for (size_t i = 0; i < app->nclients; i++) {
        hm_app_client *cl = &app->client[i];
        if (!cl->listens || cl->job < 0 || strcmp(cl->job_id, job) != 0 ||
            (strcmp(name, "*") != 0 && strcmp(cl->comm, name) != 0))
            continue;
        /* Never waits: a client whose socket is full does not get it. */
        if (send(cl->fd, msg, sizeof h + tlen, MSG_DONTWAIT | MSG_NOSIGNAL) ==
            (ssize_t)(sizeof h + tlen)) {
            slot->sent++;
            cl->awaiting[slot->id % HM_APP_CTL_PENDING] = slot->id;
        }
    }
    *id = slot->id;
    *sent = slot->sent;
    return 0;
}

int hm_app_control_acks(hm_app *app, hm_jobs *jobs, uint32_t id, hm_app_ctl_pending *out,
                        hm_error *err)
{
    if (app->listen_fd < 0)
        return hm_error_set(err, "no application channel (control.socket is '')");
    accept_clients(app);
    read_clients(app, jobs);
    for (size_t i = 0; i < HM_APP_CTL_PENDING; i++)
        if (id != 0 && app->ctl[i].id == id) {
            *out = app->ctl[i];
            return 0;
        }
    return hm_error_set(err, "no control message %u here (unknown, or one of more than %d "
                             "newer ones took its place)", id, HM_APP_CTL_PENDING);
}
