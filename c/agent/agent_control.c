/* The control requests (docs/formats.md, "Control socket"): one line in,
 * one line out, starting with "ok" or "error". */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "hm_parse.h"
#include "hm_timer.h"
#include "hm_log.h"

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

void hm_agent_control(void *agent, const char *request, char *response, size_t size)
{
    hm_agent *a = agent;
    char req[HM_CONTROL_LINE_MAX];
    snprintf(req, sizeof req, "%s", request);
    char *save = NULL;
    char *cmd = strtok_r(req, " \t", &save);
    char *arg1 = cmd ? strtok_r(NULL, " \t", &save) : NULL;
    char *arg2 = arg1 ? strtok_r(NULL, " \t", &save) : NULL;
    char *arg3 = arg2 ? strtok_r(NULL, " \t", &save) : NULL;
    char *extra = arg3 ? strtok_r(NULL, " \t", &save) : NULL;
    hm_error err;
    response[0] = '\0';
    if (cmd == NULL) {
        snprintf(response, size, "error empty request (status, period MS, job begin|end ID, flush, reload)");
    } else if (strcmp(cmd, "status") == 0 && arg1 == NULL) {
        append(response, size, "ok period_ms=%lld offset_ms=%lld samples=%llu sources=",
               (long long)a->cfg.period_ms, (long long)a->cfg.offset_ms,
               (unsigned long long)a->samples);
        for (size_t i = 0; i < a->nsources; i++)
            append(response, size, "%s%s", i ? "," : "", a->source[i].ops->name);
        append(response, size, " jobs=");
        bool first = true;
        for (size_t i = 0; i < HM_JOBS_MAX; i++) {
            if (!a->jobs.job[i].used)
                continue;
            append(response, size, "%s%s", first ? "" : ",", a->jobs.job[i].id);
            first = false;
        }
        if (first)
            append(response, size, "-");
        char sink[512];
        a->sink.ops->describe(a->sink.state, sink, sizeof sink);
        append(response, size, " %s samples_dropped=%llu", sink,
               (unsigned long long)a->self.samples_dropped);
    } else if (strcmp(cmd, "period") == 0 && arg1 != NULL && arg2 == NULL) {
        int64_t ms;
        if (hm_parse_int64(arg1, 10, 3600000, 0, &ms, &err) < 0) {
            snprintf(response, size, "error period: %s (10 .. 3600000 ms)", err.msg);
        } else if (a->cfg.offset_ms >= ms) {
            snprintf(response, size, "error period %lld ms is not above offset_ms %lld",
                     (long long)ms, (long long)a->cfg.offset_ms);
        } else {
            a->cfg.period_ms = ms;
            if (hm_agent_reschedule(a, &err) < 0)
                snprintf(response, size, "error %s", err.msg);
            else
                snprintf(response, size, "ok period_ms=%lld", (long long)ms);
        }
    } else if (strcmp(cmd, "job") == 0 && arg1 != NULL && arg2 != NULL &&
               strcmp(arg1, "begin") == 0 && extra == NULL) {
        const char *cgroup = NULL;
        if (arg3 != NULL && strncmp(arg3, "cgroup=", 7) != 0) {
            snprintf(response, size, "error expected cgroup=PATH after the job id, got '%s'", arg3);
            return;
        }
        if (arg3 != NULL)
            cgroup = arg3 + 7;
        if (hm_jobs_begin(&a->jobs, arg2, cgroup, HM_JOB_ANNOUNCED, &err) < 0) {
            snprintf(response, size, "error %s", err.msg);
        } else {
            /* The announcer owns the job: its uid's libhushmon clients may
             * claim it (app_channel.c). */
            hm_job *j = hm_jobs_find(&a->jobs, arg2);
            if (j != NULL && j->owner_uid < 0)
                j->owner_uid = a->control.peer_uid;
            snprintf(response, size, "ok job %s begins", arg2);
        }
    } else if (strcmp(cmd, "job") == 0 && arg1 != NULL && arg2 != NULL &&
               strcmp(arg1, "end") == 0 && arg3 == NULL) {
        if (hm_jobs_end(&a->jobs, arg2, HM_JOB_ANNOUNCED, &err) < 0)
            snprintf(response, size, "error %s", err.msg);
        else
            snprintf(response, size, "ok job %s ends", arg2);
    } else if (strcmp(cmd, "flush") == 0 && arg1 == NULL) {
        if (a->sink.ops->flush(a->sink.state, &err) < 0)
            snprintf(response, size, "error flush: %s", err.msg);
        else
            snprintf(response, size, "ok flushed");
    } else if (strcmp(cmd, "reload") == 0 && arg1 == NULL) {
        if (hm_agent_reload(a, &err) < 0) {
            hm_log_warn("reload failed, old config kept: %s", err.msg);
            snprintf(response, size, "error reload: %s (old config kept)", err.msg);
        } else {
            snprintf(response, size, "ok reloaded period_ms=%lld sources=%zu",
                     (long long)a->cfg.period_ms, a->nsources);
            if (hm_agent_reschedule(a, &err) < 0)
                hm_log_warn("re-arming the timer: %s", err.msg);
        }
    } else {
        snprintf(response, size,
                 "error unknown request '%.100s' (status, period MS, job begin ID [cgroup=PATH], "
                 "job end ID, flush, reload)", request);
    }
}

