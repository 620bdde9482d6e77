/* The control requests (docs/formats.md, "Control socket"; docs/agent.md,
 * "Control channel"): one line in, one line out, starting with "ok" or
 * "error". One table lists them for the control socket and for requests
 * over NATS (sinks/nats.c), which may use only the entries marked remote.
 * Who may do what is one rule, authorized() below (docs/security.md). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "hm_parse.h"
#include "hm_timer.h"
#include "hm_log.h"

#define ARGS_MAX 8

typedef struct request {
    hm_agent *a;
    long uid;          /* the client's uid: SO_PEERCRED, or the NATS request's claim */
    long pid;          /* the client's pid (socket), -1 unknown */
    bool remote;       /* over NATS */
    bool admin;        /* hm_agent_is_admin, once per request */
    int argc;          /* arguments after the command name */
    char *argv[ARGS_MAX];
    char *out;
    size_t size;
} request;

static void append(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *out, size_t size, const char *fmt, ...)
{
    size_t used = strlen(out);
    if (used >= size - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out + used, size - used, fmt, ap);
    va_end(ap);
}

/* " host=H period_ms=P sources=a,b jobs=J scope=S": the applied state. */
static void append_state(const hm_agent *a, bool period, char *out, size_t size)
{
    append(out, size, " host=%s", a->cfg.host);
    if (period)
        append(out, size, " period_ms=%lld", (long long)a->cfg.period_ms);
    append(out, size, " offset_ms=%lld sources=", (long long)a->cfg.offset_ms);
    for (size_t i = 0; i < a->nsources; i++)
        append(out, size, "%s%s", i ? "," : "", a->source[i].ops->name);
    append(out, size, " jobs=");
    bool first = true;
    for (size_t i = 0; i < HM_JOBS_MAX; i++) {
        if (!a->jobs.job[i].used)
            continue;
        append(out, size, "%s%s", first ? "" : ",", a->jobs.job[i].id);
        first = false;
    }
    if (first)
        append(out, size, "-");
    append(out, size, " apps_muted=");
    for (size_t i = 0; i < a->app.muted.n; i++)
        append(out, size, "%s%s", i ? "," : "", a->app.muted.name[i]);
    if (a->app.muted.n == 0)
        append(out, size, "-");
    if (a->job_scope.job[0] != '\0')
        append(out, size, " scope=job:%s", a->job_scope.job);
    else
        append(out, size, " scope=node");
}

static void do_status(request *r)
{
    hm_agent *a = r->a;
    /* period_ms first: older clients (hushmon run, Slurm scripts) read it so. */
    append(r->out, r->size, "ok period_ms=%lld samples=%llu", (long long)a->cfg.period_ms,
           (unsigned long long)a->samples);
    append_state(a, false, r->out, r->size);
    char sink[512];
    a->sink.ops->describe(a->sink.state, sink, sizeof sink);
    append(r->out, r->size, " %s samples_dropped=%llu", sink,
           (unsigned long long)a->self.samples_dropped);
}

bool hm_agent_is_admin(const hm_agent *a, long uid, const hm_control_peer *groups)
{
    if (uid < 0)
        return false;
    /* root, and the agent's own user (an agent a user started for
     * `hushmon run` is theirs to steer; they could stop it anyway) */
    if (uid == 0 || uid == (long)geteuid())
        return true;
    if (groups != NULL && a->admin_gid >= 0) {
        if (groups->gid == a->admin_gid)
            return true;
        for (size_t i = 0; i < groups->ngroups; i++)
            if ((long)groups->groups[i] == a->admin_gid)
                return true;
    }
    char list[sizeof a->cfg.admin_uids];
    snprintf(list, sizeof list, "%s", a->cfg.admin_uids);
    char *save = NULL;
    for (char *t = strtok_r(list, ", ", &save); t != NULL; t = strtok_r(NULL, ", ", &save)) {
        char *end = NULL;
        long v = strtol(t, &end, 10);
        if (end != t && *end == '\0' && v == uid)
            return true;
    }
    return false;
}

bool hm_agent_peer_is_admin(void *agent, const hm_control_peer *peer)
{
    return hm_agent_is_admin(agent, peer->uid, peer);
}

/* A refused request: counted, logged with the uid, and answered
 * "error [prefix]not authorized: WHY". */
static void refuse(request *r, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(request *r, const char *prefix, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    hm_refuse(&r->a->control.log, &r->a->control.refused[HM_CONTROL_UNAUTHORIZED], 1,
              "control", "refused uid %ld%s (pid %ld): %s", r->uid,
              r->remote ? " (claimed, over NATS)" : "", r->pid, why);
    snprintf(r->out, r->size, "error %snot authorized: %s", prefix, why);
}

#define ADMINS "root or an admin (control.admin_uids, control.admin_group)"

/* The one rule: root and admins may do anything; the owner of job (the
 * uid the Slurm prolog named) may act on that job; nobody else may. job
 * NULL: an action on the node (announcing, node-wide settings, reload).
 * action says what for the answer ("end it", "change the node's period").
 * A job that does not run here is answered so, not counted as refused. */
static bool authorized(request *r, const char *prefix, const char *job, const char *action)
{
    if (r->admin)
        return true;
    if (job == NULL) {
        refuse(r, prefix, "uid %ld may not %s: only " ADMINS " may", r->uid, action);
        return false;
    }
    const hm_job *j = hm_jobs_find(&r->a->jobs, job);
    if (j == NULL) {
        snprintf(r->out, r->size, "error %sjob %s does not run on %s", prefix, job,
                 r->a->cfg.host);
        return false;
    }
    if (r->uid < 0 || j->owner_uid != r->uid) {
        refuse(r, prefix, "uid %ld is not the owner of job %s (owner %ld); only its owner or "
               ADMINS " may %s", r->uid, job, j->owner_uid, action);
        return false;
    }
    return true;
}

/* "200ms", "1s", "1.5s", "2m", "1h", or plain milliseconds. */
static int parse_duration_ms(const char *text, int64_t *ms, hm_error *err)
{
    char *end = NULL;
    double v = strtod(text, &end);
    double unit = 0;
    if (end == text)
        unit = 0;
    else if (*end == '\0' || strcmp(end, "ms") == 0)
        unit = 1;
    else if (strcmp(end, "s") == 0)
        unit = 1000;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        unit = 60000;
    else if (strcmp(end, "h") == 0)
        unit = 3600.0 * 1000;
    double total = v * unit;
    if (unit == 0 || !(total >= HM_PERIOD_MS_MIN && total <= HM_PERIOD_MS_MAX) ||
        total != (double)(int64_t)total)
        return hm_error_set(err, "period '%s' is not a whole number of ms in %dms .. %dh "
                                 "(e.g. 200ms, 1s, 2m)", text, HM_PERIOD_MS_MIN,
                            HM_PERIOD_MS_MAX / (3600 * 1000));
    *ms = (int64_t)total;
    return 0;
}

/* set [job=ID] [period=DUR] [sources=+a,-b|a,b] [apps=-NAME,+NAME]:
 * checked whole first, so a bad value changes nothing. A period is the
 * one wanted (a->cfg.period_ms): the sampling loop, which alone owns the
 * timer, re-arms it for the new period when this request returns. */
static void do_set(request *r)
{
    hm_agent *a = r->a;
    hm_error err;
    const char *job = NULL, *period = NULL, *sources = NULL, *apps = NULL;
    for (int i = 0; i < r->argc; i++) {
        char *eq = strchr(r->argv[i], '=');
        const char **slot = NULL;
        if (eq != NULL) {
            *eq = '\0';
            slot = strcmp(r->argv[i], "job") == 0       ? &job
                   : strcmp(r->argv[i], "period") == 0  ? &period
                   : strcmp(r->argv[i], "sources") == 0 ? &sources
                   : strcmp(r->argv[i], "apps") == 0    ? &apps
                                                         : NULL;
        }
        if (slot == NULL || *slot != NULL || eq[1] == '\0') {
            snprintf(r->out, r->size, "error set: '%.60s' is not one of period=DUR, "
                     "sources=+a,-b|a,b, apps=-NAME,+NAME, job=ID (each at most once, with a "
                     "value)", r->argv[i]);
            return;
        }
        *slot = eq + 1;
    }
    if (period == NULL && sources == NULL && apps == NULL) {
        snprintf(r->out, r->size, "error set: nothing to set (period=DUR, sources=+a,-b, "
                 "apps=-NAME,+NAME)");
        return;
    }
    hm_app_muted muted = a->app.muted;
    if (apps != NULL && hm_app_muted_edit(&muted, apps, &err) < 0) {
        snprintf(r->out, r->size, "error set: %s", err.msg);
        return;
    }
    int64_t period_ms = a->cfg.period_ms;
    if (period != NULL && parse_duration_ms(period, &period_ms, &err) < 0) {
        snprintf(r->out, r->size, "error set: %s", err.msg);
        return;
    }
    if (a->cfg.offset_ms >= period_ms) {
        snprintf(r->out, r->size, "error set: period %lld ms is not above offset_ms %lld",
                 (long long)period_ms, (long long)a->cfg.offset_ms);
        return;
    }
    char new_sources[sizeof a->cfg.sources];
    snprintf(new_sources, sizeof new_sources, "%s", a->cfg.sources);
    if (sources != NULL &&
        hm_agent_edit_sources(a->cfg.sources, sources, new_sources, sizeof new_sources, &err) < 0) {
        snprintf(r->out, r->size, "error set: %s", err.msg);
        return;
    }
    if (!authorized(r, "", job, job != NULL ? "change its measurement"
                                            : "change the node's measurement (a job's owner "
                                              "names it: job=ID)"))
        return;
    if (job != NULL && hm_jobs_find(&a->jobs, job) == NULL) {
        snprintf(r->out, r->size, "error set: job %s does not run on %s", job, a->cfg.host);
        return;
    }
    /* A change reaches every job on the node: an owner may make it only
     * where every job is theirs. */
    for (size_t i = 0; i < HM_JOBS_MAX && !r->admin; i++) {
        const hm_job *o = &a->jobs.job[i];
        if (o->used && o->owner_uid != r->uid) {
            refuse(r, "", "job %s shares %s with job %s (owner %ld); on a shared node only "
                   ADMINS " may change the measurement", job, a->cfg.host, o->id, o->owner_uid);
            return;
        }
    }
    /* A job-scoped change remembers the settings it replaced; a node-wide
     * one makes the current settings the node's own. */
    if (job != NULL && a->job_scope.job[0] == '\0') {
        a->job_scope.period_ms = a->cfg.period_ms;
        snprintf(a->job_scope.sources, sizeof a->job_scope.sources, "%s", a->cfg.sources);
        a->job_scope.muted = a->app.muted;
    }
    a->cfg.period_ms = period_ms;
    if (sources != NULL && strcmp(new_sources, a->cfg.sources) != 0 &&
        hm_agent_set_sources(a, new_sources, &err) < 0) {
        snprintf(r->out, r->size, "error set: %s", err.msg);
        return;
    }
    a->app.muted = muted;
    snprintf(a->job_scope.job, sizeof a->job_scope.job, "%s", job != NULL ? job : "");
    hm_log_notice("control: uid %ld%s set period %lld ms, sources %s%s%s", r->uid,
                  r->remote ? " (claimed, over NATS)" : "", (long long)a->cfg.period_ms,
                  a->cfg.sources, job != NULL ? " for job " : "", job != NULL ? job : "");
    append(r->out, r->size, "ok applied");
    append_state(a, true, r->out, r->size);
    /* A source asked for that could not open (no PMU, no GPU) is named. */
    if (sources != NULL) {
        bool first = true;
        char list[sizeof new_sources];
        snprintf(list, sizeof list, "%s", new_sources);
        char *save = NULL;
        for (char *t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
            bool open = false;
            for (size_t i = 0; i < a->nsources && !open; i++)
                open = strcmp(a->source[i].ops->name, t) == 0;
            if (!open) {
                append(r->out, r->size, "%s%s", first ? " unopened=" : ",", t);
                first = false;
            }
        }
    }
}

void hm_agent_control_tick(hm_agent *a)
{
    if (a->job_scope.job[0] == '\0' || hm_jobs_find(&a->jobs, a->job_scope.job) != NULL)
        return;
    hm_error err;
    hm_log_notice("control: job %s ended; back to period %lld ms, sources %s", a->job_scope.job,
                  (long long)a->job_scope.period_ms, a->job_scope.sources);
    a->job_scope.job[0] = '\0';
    a->cfg.period_ms = a->job_scope.period_ms; /* the loop re-arms the timer */
    if (strcmp(a->job_scope.sources, a->cfg.sources) != 0 &&
        hm_agent_set_sources(a, a->job_scope.sources, &err) < 0)
        hm_log_warn("control: restoring the sources: %s", err.msg);
    a->app.muted = a->job_scope.muted;
}

static void do_job(request *r)
{
    hm_agent *a = r->a;
    hm_error err;
    const char *verb = r->argc >= 2 ? r->argv[0] : "";
    const char *id = r->argc >= 2 ? r->argv[1] : "";
    if (strcmp(verb, "begin") == 0 && r->argc <= 4) {
        const char *cgroup = NULL;
        long owner = r->uid;
        bool owner_given = false;
        for (int i = 2; i < r->argc; i++) {
            if (strncmp(r->argv[i], "cgroup=", 7) == 0 && cgroup == NULL) {
                cgroup = r->argv[i] + 7;
            } else if (strncmp(r->argv[i], "uid=", 4) == 0 && !owner_given) {
                int64_t v;
                if (hm_parse_int64(r->argv[i] + 4, 0, 0x7fffffff, 0, &v, &err) < 0) {
                    snprintf(r->out, r->size, "error job begin: uid: %s", err.msg);
                    return;
                }
                owner = (long)v;
                owner_given = true;
            } else {
                snprintf(r->out, r->size, "error expected cgroup=PATH or uid=N after the job id, "
                         "got '%s'", r->argv[i]);
                return;
            }
        }
        /* The Slurm prolog (root) announces a user's job, with its
         * cgroup and owner; the owner may then confirm that it runs
         * (hushmon run inside the job), and change nothing. Anyone else
         * announcing could re-point another user's job, take a job found
         * from Slurm's cgroups, or fill the table of jobs. */
        hm_job *j = hm_jobs_find(&a->jobs, id);
        if (!r->admin && j != NULL && cgroup == NULL && !owner_given && r->uid >= 0 &&
            j->owner_uid == r->uid) {
            snprintf(r->out, r->size, "ok job %s runs already (owner %ld)", id, j->owner_uid);
            return;
        }
        char action[128];
        snprintf(action, sizeof action, "announce job %.64s or name a job's cgroup or owner", id);
        if (!authorized(r, "", NULL, action))
            return;
        if (hm_jobs_begin(&a->jobs, id, cgroup, HM_JOB_ANNOUNCED, &err) < 0) {
            snprintf(r->out, r->size, "error %s", err.msg);
            return;
        }
        /* The owner (the announcer, or uid=): that uid's libhushmon
         * clients may claim the job (app_channel.c), and it may `set
         * job=ID`. */
        j = hm_jobs_find(&a->jobs, id);
        if (j != NULL && (j->owner_uid < 0 || owner_given))
            j->owner_uid = owner;
        snprintf(r->out, r->size, "ok job %s begins", id);
    } else if (strcmp(verb, "end") == 0 && r->argc == 2) {
        /* Ending a job stops its attribution and undoes its settings; the
         * job stays the node's for the period it ends in (jobs.h: its `job`
         * line is written once more at that period's end). */
        if (hm_jobs_find(&a->jobs, id) != NULL && !authorized(r, "", id, "end it"))
            return;
        /* The epilog comes right after the program's exit: what it sent last
         * may still sit in the app socket. Read now, it is the job's, and it
         * goes out with this period's lines, the job's last. */
        hm_app_read(&a->app, &a->jobs);
        if (hm_jobs_end(&a->jobs, id, HM_JOB_ANNOUNCED, &err) < 0)
            snprintf(r->out, r->size, "error %s", err.msg);
        else
            snprintf(r->out, r->size, "ok job %s ends", id);
        hm_agent_control_tick(a);
    } else {
        snprintf(r->out, r->size, "error usage: job begin ID [cgroup=PATH] [uid=N] | job end ID");
    }
}

/* app send JOB NAME COMMAND [ARGS]: a control message to the job's
 * programs named NAME ("*": all) that registered a callback (libhushmon
 * hm_on_control); app acks ID: how many got it so far. The job's owner,
 * root or an admin may send; the answer comes at once, the programs take
 * the message at their next hm_poll (docs/libhushmon.md, "Control"). */
static void do_app(request *r)
{
    hm_agent *a = r->a;
    hm_error err;
    const char *verb = r->argc >= 1 ? r->argv[0] : "";
    if (strcmp(verb, "send") == 0 && r->argc >= 4) {
        const char *job = r->argv[1], *name = r->argv[2];
        char prefix[96];
        snprintf(prefix, sizeof prefix, "host=%s ", a->cfg.host);
        if (!authorized(r, prefix, job, "send to its programs"))
            return;
        if (hm_jobs_find(&a->jobs, job) == NULL) {
            snprintf(r->out, r->size, "error host=%s job %s does not run on %s", a->cfg.host, job,
                     a->cfg.host);
            return;
        }
        char text[HM_APP_CTL_TEXT_MAX + 1] = "";
        for (int i = 3; i < r->argc; i++)
            append(text, sizeof text, "%s%s", i > 3 ? " " : "", r->argv[i]);
        uint32_t id;
        unsigned sent;
        if (hm_app_control_send(&a->app, &a->jobs, job, name, text, &id, &sent, &err) < 0) {
            snprintf(r->out, r->size, "error host=%s app send: %s", a->cfg.host, err.msg);
            return;
        }
        hm_log_notice("control: uid %ld%s sent '%s' to program %s of job %s: %u processes",
                      r->uid, r->remote ? " (claimed, over NATS)" : "", text, name, job, sent);
        snprintf(r->out, r->size, "ok host=%s app_id=%u job=%s name=%s sent=%u", a->cfg.host, id,
                 job, name, sent);
    } else if (strcmp(verb, "acks") == 0 && r->argc == 2) {
        int64_t id;
        hm_app_ctl_pending p;
        if (hm_parse_int64(r->argv[1], 1, UINT32_MAX, 0, &id, &err) < 0 ||
            hm_app_control_acks(&a->app, &a->jobs, (uint32_t)id, &p, &err) < 0) {
            snprintf(r->out, r->size, "error host=%s app acks: %s", a->cfg.host, err.msg);
            return;
        }
        snprintf(r->out, r->size, "ok host=%s app_id=%u sent=%u acked=%u failed=%u", a->cfg.host,
                 p.id, p.sent, p.acked, p.failed);
    } else {
        snprintf(r->out, r->size, "error usage: app send JOB NAME|* COMMAND [ARGS] | app acks ID");
    }
}

static void do_flush(request *r)
{
    hm_error err;
    /* Closing the spool file serves a job's own data (hushmon run flushes
     * so ingest sees it): the owner of a job on the node may. */
    const char *own = NULL;
    for (size_t i = 0; i < HM_JOBS_MAX && own == NULL && r->uid >= 0; i++)
        if (r->a->jobs.job[i].used && r->a->jobs.job[i].owner_uid == r->uid)
            own = r->a->jobs.job[i].id;
    if (!authorized(r, "", own, "flush the spool (the owner of a job on this node may)"))
        return;
    if (r->argc != 0)
        snprintf(r->out, r->size, "error usage: flush");
    else if (r->a->sink.ops->flush(r->a->sink.state, &err) < 0)
        snprintf(r->out, r->size, "error flush: %s", err.msg);
    else
        snprintf(r->out, r->size, "ok flushed");
}

static void do_reload(request *r)
{
    hm_agent *a = r->a;
    hm_error err;
    if (!authorized(r, "", NULL, "reload the config"))
        return;
    if (r->argc != 0) {
        snprintf(r->out, r->size, "error usage: reload");
    } else if (hm_agent_reload(a, &err) < 0) {
        hm_log_warn("reload failed, old config kept: %s", err.msg);
        snprintf(r->out, r->size, "error reload: %s (old config kept)", err.msg);
    } else {
        a->job_scope.job[0] = '\0'; /* the file's settings are the node's now */
        snprintf(r->out, r->size, "ok reloaded period_ms=%lld sources=%zu",
                 (long long)a->cfg.period_ms, a->nsources);
    }
}

static const struct {
    const char *name;
    const char *usage;
    bool remote; /* may come over NATS */
    void (*handle)(request *r);
} requests[] = {
    {"status", "status", true, do_status},
    {"set", "set [job=ID] period=DUR sources=+a,-b apps=-NAME", true, do_set},
    {"job", "job begin ID [cgroup=PATH] [uid=N] | job end ID", false, do_job},
    {"app", "app send JOB NAME COMMAND [ARGS] | app acks ID", true, do_app},
    {"flush", "flush", false, do_flush},
    {"reload", "reload", false, do_reload},
};

/* peer: the socket's, or NULL (remote: uid claimed; the agent itself). */
static void handle(hm_agent *a, long uid, const hm_control_peer *peer, bool remote,
                   const char *line, char *out, size_t size)
{
    char buf[HM_CONTROL_LINE_MAX];
    snprintf(buf, sizeof buf, "%s", line);
    request r = {.a = a, .uid = uid, .pid = peer != NULL ? peer->pid : -1, .remote = remote,
                 .admin = hm_agent_is_admin(a, uid, peer), .out = out, .size = size};
    out[0] = '\0';
    char *save = NULL;
    char *cmd = strtok_r(buf, " \t", &save);
    char *arg;
    while (cmd != NULL && (arg = strtok_r(NULL, " \t", &save)) != NULL) {
        if (r.argc == ARGS_MAX) {
            snprintf(out, size, "error too many arguments in '%.100s'", line);
            return;
        }
        r.argv[r.argc++] = arg;
    }
    char known[256] = "";
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
        if (remote && !requests[i].remote)
            continue;
        if (cmd != NULL && strcmp(cmd, requests[i].name) == 0) {
            requests[i].handle(&r);
            return;
        }
        append(known, sizeof known, "%s%s", known[0] ? ", " : "", requests[i].usage);
    }
    if (cmd == NULL)
        snprintf(out, size, "error empty request (%s)", known);
    else
        snprintf(out, size, "error unknown request '%.100s'%s (%s)", line,
                 remote ? " over NATS" : "", known);
}

void hm_agent_control(void *agent, const char *request, char *response, size_t size)
{
    hm_agent *a = agent;
    const hm_control_peer *peer = a->control.peer;
    handle(a, peer != NULL ? peer->uid : -1, peer, false, request, response, size);
}

void hm_agent_control_remote(void *agent, long claimed_uid, const char *request, char *response,
                             size_t size)
{
    handle(agent, claimed_uid, NULL, true, request, response, size);
}

void hm_agent_control_self(hm_agent *a, const char *request, char *response, size_t size)
{
    handle(a, (long)geteuid(), NULL, false, request, response, size);
}
