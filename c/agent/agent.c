#include "agent.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "hm_parse.h"
#include "hm_timer.h"
#include "log.h"

int64_t hm_agent_next_boundary(int64_t now_ns, int64_t period_ns, int64_t offset_ns)
{
    int64_t shifted = now_ns - offset_ns;
    int64_t k = shifted >= 0 ? shifted / period_ns : -((-shifted + period_ns - 1) / period_ns);
    return (k + 1) * period_ns + offset_ns;
}

/* Calls fn(name, len, arg) for each comma-separated name. */
static int each_name(const char *list, int (*fn)(const char *, void *, hm_error *), void *arg,
                     hm_error *err)
{
    char name[64];
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len > 0 && *p == ' ') {
            p++;
            len--;
        }
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (len == 0 || len >= sizeof name)
            return hm_error_set(err, "bad source list '%s'", list);
        memcpy(name, p, len);
        name[len] = '\0';
        if (fn(name, arg, err) < 0)
            return -1;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return 0;
}

static int check_one(const char *name, void *arg, hm_error *err)
{
    (void)arg;
    if (strcmp(name, "default") == 0 || hm_sampler_find(name) != NULL)
        return 0;
    char known[512] = "";
    for (size_t i = 0; i < hm_samplers_count; i++) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, hm_samplers[i]->name, sizeof known - strlen(known) - 1);
    }
    return hm_error_set(err, "unknown source '%s' (known: %s)", name, known);
}

int hm_agent_check_sources(const char *sources, hm_error *err)
{
    return each_name(sources, check_one, NULL, err);
}

static int mark_wanted(const char *name, void *arg, hm_error *err)
{
    (void)err;
    bool *wanted = arg;
    for (size_t i = 0; i < hm_samplers_count; i++)
        if (strcmp(name, "default") == 0 ? hm_samplers[i]->default_on
                                         : strcmp(name, hm_samplers[i]->name) == 0)
            wanted[i] = true;
    return 0;
}

static void close_sources(hm_agent *a)
{
    for (size_t i = 0; i < a->nsources; i++)
        if (a->source[i].state != NULL)
            a->source[i].ops->close(a->source[i].state);
    a->nsources = 0;
}

/* Opens the configured sources in registry order. A source that cannot
 * open is logged and left out; the others run. */
static int open_sources(hm_agent *a, hm_error *err)
{
    bool wanted[HM_AGENT_SOURCES_MAX] = {false};
    if (hm_agent_check_sources(a->cfg.sources, err) < 0 ||
        each_name(a->cfg.sources, mark_wanted, wanted, err) < 0)
        return -1;
    hm_sampler_env env = {.cfg = &a->cfg, .jobs = &a->jobs};
    for (size_t i = 0; i < hm_samplers_count && i < HM_AGENT_SOURCES_MAX; i++) {
        if (!wanted[i])
            continue;
        hm_agent_source *s = &a->source[a->nsources];
        memset(s, 0, sizeof *s);
        s->ops = hm_samplers[i];
        hm_error e;
        if (s->ops->open(&s->state, &env, &e) < 0) {
            hm_log_warn("source %s off: %s", s->ops->name, e.msg);
            continue;
        }
        a->nsources++;
    }
    return 0;
}

int hm_agent_init(hm_agent *a, const hm_agent_config *cfg, const hm_config_override *overrides,
                  size_t n_overrides, hm_error *err)
{
    memset(a, 0, sizeof *a);
    a->cfg = *cfg;
    a->overrides = overrides;
    a->n_overrides = n_overrides;
    a->timer_fd = a->signal_fd = -1;
    a->control.listen_fd = -1;
    a->start_ns = hm_realtime_ns();
    a->self.cpu_us = NAN;
    a->self.jitter_us = NAN;
    a->self.period_ms = cfg->period_ms;
    for (int i = 0; i < HM_CONTROL_CLIENTS; i++)
        a->control.client[i].fd = -1;
    if (hm_lp_init(&a->lp, (size_t)cfg->batch_bytes, cfg->host, err) < 0)
        return -1;
    if (open_sources(a, err) < 0 || hm_sink_open(&a->sink, &a->cfg, a->start_ns, err) < 0) {
        hm_agent_fini(a);
        return -1;
    }
    return 0;
}

static double thread_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int hm_agent_cycle(hm_agent *a, int64_t ts_ns, int64_t mono_ns, hm_error *err)
{
    hm_lp_reset(&a->lp, ts_ns);
    hm_sample_ctx ctx = {
        .ts_ns = ts_ns, .mono_ns = mono_ns, .jobs = &a->jobs, .node = &a->node, .self = &a->self,
    };
    a->self.samples_dropped = a->missed_periods + a->sink.ops->dropped_lines(a->sink.state);
    a->self.period_ms = a->cfg.period_ms;
    for (size_t i = 0; i < a->nsources; i++) {
        hm_agent_source *s = &a->source[i];
        hm_error e;
        double t0 = a->measure_cost ? thread_cpu_us() : 0;
        int rc = s->ops->sample(s->state, &ctx, &a->lp, &e);
        if (a->measure_cost)
            s->cpu_ns_total += (thread_cpu_us() - t0) * 1e3;
        if (rc < 0) {
            if (!s->failing)
                hm_log_warn("source %s: %s (other sources go on; said once until it recovers)",
                            s->ops->name, e.msg);
            s->failing = true;
        } else if (s->failing) {
            hm_log_notice("source %s recovered", s->ops->name);
            s->failing = false;
        }
    }
    if (a->lp.lines_dropped > 0)
        hm_log_warn_once(&a->batch_full_said,
                         "batch buffer full: %llu lines dropped (raise sink.batch_bytes; said once)",
                         (unsigned long long)a->lp.lines_dropped);
    a->missed_periods += a->lp.lines_dropped;
    a->samples++;
    if (a->lp.len == 0)
        return 0;
    double t0 = a->measure_cost ? thread_cpu_us() : 0;
    int rc = a->sink.ops->write(a->sink.state, a->lp.buf, a->lp.len, a->lp.lines, err);
    if (a->measure_cost)
        a->sink_cpu_ns_total += (thread_cpu_us() - t0) * 1e3;
    if (rc < 0) {
        a->missed_periods += a->lp.lines;
        return -1;
    }
    return 0;
}

int hm_agent_measure_cost(hm_agent *a, int64_t n, hm_error *err)
{
    if (hm_agent_cycle(a, hm_realtime_ns(), hm_monotonic_ns(), err) < 0)
        return -1;
    a->measure_cost = true;
    double t0 = thread_cpu_us();
    for (int64_t i = 0; i < n; i++) {
        /* Back to back, as the kernel-cost loop of the benchmark reads the
         * files: both then run with warm caches. (A real period starts
         * cold, which costs both sides alike.) */
        if (hm_agent_cycle(a, hm_realtime_ns(), hm_monotonic_ns(), err) < 0)
            return -1;
    }
    double total_us = thread_cpu_us() - t0;
    fprintf(stderr, "CPU time per sample over %lld samples (this process, CLOCK_THREAD_CPUTIME_ID):\n",
            (long long)n);
    for (size_t i = 0; i < a->nsources; i++)
        fprintf(stderr, "  %-8s %8.2f us\n", a->source[i].ops->name,
                a->source[i].cpu_ns_total / 1e3 / (double)n);
    fprintf(stderr, "  %-8s %8.2f us\n  %-8s %8.2f us\n", "sink", a->sink_cpu_ns_total / 1e3 / (double)n,
            "total", total_us / (double)n);
    return a->sink.ops->flush(a->sink.state, err);
}

int hm_agent_once(hm_agent *a, int64_t interval_ms, hm_error *err)
{
    /* The first pass only primes the counters (rates need two readings);
     * its lines are not written. */
    double cpu0 = thread_cpu_us();
    hm_lp_reset(&a->lp, hm_realtime_ns());
    hm_sample_ctx ctx = {
        .ts_ns = a->lp.ts_ns, .mono_ns = hm_monotonic_ns(), .jobs = &a->jobs, .node = &a->node,
        .self = &a->self,
    };
    for (size_t i = 0; i < a->nsources; i++) {
        hm_error e;
        if (a->source[i].ops->sample(a->source[i].state, &ctx, &a->lp, &e) < 0) {
            hm_log_warn("source %s: %s", a->source[i].ops->name, e.msg);
            a->source[i].failing = true;
        }
    }
    a->self.cpu_us = thread_cpu_us() - cpu0;
    struct timespec pause = {.tv_sec = interval_ms / 1000, .tv_nsec = (interval_ms % 1000) * 1000000};
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR) {
    }
    int64_t now = hm_realtime_ns();
    a->self.jitter_us = 0;
    if (hm_agent_cycle(a, now, hm_monotonic_ns(), err) < 0)
        return -1;
    return a->sink.ops->flush(a->sink.state, err);
}

static int arm_timer(hm_agent *a, int64_t deadline_ns, hm_error *err)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = deadline_ns / 1000000000;
    its.it_value.tv_nsec = deadline_ns % 1000000000;
    if (timerfd_settime(a->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
        return hm_error_errno(err, "timerfd_settime");
    return 0;
}

static int reload(hm_agent *a, hm_error *err)
{
    hm_agent_config cfg;
    if (hm_config_build(&cfg, a->cfg.config_path, a->overrides, a->n_overrides, err) < 0 ||
        hm_agent_check_sources(cfg.sources, err) < 0)
        return -1;
    if (strcmp(cfg.socket_path, a->cfg.socket_path) != 0)
        hm_log_warn("reload: a new control socket path takes effect at restart");
    bool new_sink = strcmp(cfg.sink, a->cfg.sink) != 0 || strcmp(cfg.spool_dir, a->cfg.spool_dir) != 0 ||
                    cfg.spool_file_bytes != a->cfg.spool_file_bytes ||
                    cfg.spool_total_bytes != a->cfg.spool_total_bytes || strcmp(cfg.host, a->cfg.host) != 0;
    if (cfg.batch_bytes != a->cfg.batch_bytes || strcmp(cfg.host, a->cfg.host) != 0) {
        hm_lp lp;
        if (hm_lp_init(&lp, (size_t)cfg.batch_bytes, cfg.host, err) < 0)
            return -1;
        hm_lp_free(&a->lp);
        a->lp = lp;
    }
    if (new_sink) {
        hm_sink sink;
        if (hm_sink_open(&sink, &cfg, hm_realtime_ns(), err) < 0)
            return -1;
        hm_error e;
        if (hm_sink_close(&a->sink, &e) < 0)
            hm_log_warn("closing the old sink: %s", e.msg);
        a->sink = sink;
    }
    strcpy(cfg.socket_path, a->cfg.socket_path);
    close_sources(a);
    a->cfg = cfg;
    if (open_sources(a, err) < 0)
        return -1;
    hm_log_notice("config reloaded: period %lld ms, %zu sources", (long long)cfg.period_ms, a->nsources);
    return 0;
}

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
            if (a->timer_fd >= 0 &&
                arm_timer(a, hm_agent_next_boundary(hm_realtime_ns(), ms * 1000000,
                                                    a->cfg.offset_ms * 1000000), &err) < 0)
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
        if (hm_jobs_begin(&a->jobs, arg2, cgroup, HM_JOB_ANNOUNCED, &err) < 0)
            snprintf(response, size, "error %s", err.msg);
        else
            snprintf(response, size, "ok job %s begins", arg2);
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
        if (reload(a, &err) < 0) {
            hm_log_warn("reload failed, old config kept: %s", err.msg);
            snprintf(response, size, "error reload: %s (old config kept)", err.msg);
        } else {
            snprintf(response, size, "ok reloaded period_ms=%lld sources=%zu",
                     (long long)a->cfg.period_ms, a->nsources);
            if (a->timer_fd >= 0)
                arm_timer(a, hm_agent_next_boundary(hm_realtime_ns(), a->cfg.period_ms * 1000000,
                                                    a->cfg.offset_ms * 1000000), &err);
        }
    } else {
        snprintf(response, size,
                 "error unknown request '%.100s' (status, period MS, job begin ID [cgroup=PATH], "
                 "job end ID, flush, reload)", request);
    }
}

int hm_agent_run(hm_agent *a, hm_error *err)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return hm_error_errno(err, "sigprocmask");
    a->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (a->signal_fd < 0)
        return hm_error_errno(err, "signalfd");
    a->timer_fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    if (a->timer_fd < 0)
        return hm_error_errno(err, "timerfd_create");
    if (hm_control_open(&a->control, a->cfg.socket_path, err) < 0)
        return -1;
    int64_t period_ns = a->cfg.period_ms * 1000000;
    int64_t offset_ns = a->cfg.offset_ms * 1000000;
    int64_t next = hm_agent_next_boundary(hm_realtime_ns(), period_ns, offset_ns);
    if (arm_timer(a, next, err) < 0)
        return -1;
    hm_log_notice("sampling %zu sources every %lld ms (offset %lld ms), sink %s%s%s", a->nsources,
                  (long long)a->cfg.period_ms, (long long)a->cfg.offset_ms, a->cfg.sink,
                  a->control.listen_fd >= 0 ? ", control socket " : "", a->control.path);
    while (!a->stop) {
        struct pollfd fds[2 + 1 + HM_CONTROL_CLIENTS];
        fds[0] = (struct pollfd){.fd = a->timer_fd, .events = POLLIN};
        fds[1] = (struct pollfd){.fd = a->signal_fd, .events = POLLIN};
        size_t n = 2 + hm_control_pollfds(&a->control, fds + 2);
        if (poll(fds, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            return hm_error_errno(err, "poll");
        }
        if (fds[1].revents) {
            struct signalfd_siginfo si;
            while (read(a->signal_fd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGHUP) {
                    char resp[HM_CONTROL_LINE_MAX];
                    hm_agent_control(a, "reload", resp, sizeof resp);
                } else {
                    a->stop = true;
                }
            }
        }
        if (fds[0].revents) {
            uint64_t expirations;
            if (read(a->timer_fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
                return hm_error_errno(err, "reading timerfd");
            double cpu0 = thread_cpu_us();
            int64_t now = hm_realtime_ns();
            int64_t mono = hm_monotonic_ns();
            period_ns = a->cfg.period_ms * 1000000;
            offset_ns = a->cfg.offset_ms * 1000000;
            /* The instant this wake-up was for: the latest boundary not
             * after now. Boundaries skipped (a suspended VM, a stalled
             * disk) are counted as dropped samples. */
            int64_t scheduled = hm_agent_next_boundary(now, period_ns, offset_ns) - period_ns;
            if (scheduled > next && next > 0)
                a->missed_periods += (uint64_t)((scheduled - next) / period_ns);
            if (now >= next || scheduled >= next) {
                a->self.jitter_us = (double)(now - scheduled) / 1e3;
                hm_error e;
                if (hm_agent_cycle(a, scheduled, mono, &e) < 0) {
                    if (!a->sink_failing)
                        hm_log_warn("%s (batches are counted as dropped until it works again)",
                                    e.msg);
                    a->sink_failing = true;
                } else if (a->sink_failing) {
                    hm_log_notice("sink works again");
                    a->sink_failing = false;
                }
                a->self.cpu_us = thread_cpu_us() - cpu0;
            }
            next = hm_agent_next_boundary(now, period_ns, offset_ns);
            if (arm_timer(a, next, err) < 0)
                return -1;
        }
        if (n > 2)
            hm_control_serve(&a->control, fds + 2, n - 2, hm_agent_control, a);
        /* A `period` request or a reload may have changed the schedule. */
        if (a->cfg.period_ms * 1000000 != period_ns || a->cfg.offset_ms * 1000000 != offset_ns) {
            period_ns = a->cfg.period_ms * 1000000;
            offset_ns = a->cfg.offset_ms * 1000000;
            next = hm_agent_next_boundary(hm_realtime_ns(), period_ns, offset_ns);
            if (arm_timer(a, next, err) < 0)
                return -1;
        }
    }
    hm_log_notice("stopping after %llu samples", (unsigned long long)a->samples);
    return 0;
}

void hm_agent_fini(hm_agent *a)
{
    close_sources(a);
    hm_error e;
    if (a->sink.ops != NULL && hm_sink_close(&a->sink, &e) < 0)
        hm_log_warn("closing sink: %s", e.msg);
    hm_control_close(&a->control);
    if (a->timer_fd >= 0)
        close(a->timer_fd);
    if (a->signal_fd >= 0)
        close(a->signal_fd);
    a->timer_fd = a->signal_fd = -1;
    hm_lp_free(&a->lp);
}
