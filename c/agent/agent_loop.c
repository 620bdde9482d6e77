/* The sampling loop: an absolute CLOCK_REALTIME timerfd for the aligned
 * instants, a signalfd for SIGTERM/SIGINT (stop) and SIGHUP (reload), and
 * the control socket's descriptors, all in one poll(). The loop alone arms
 * the timer: control requests and reloads change the wanted period and
 * offset (a->cfg), and the loop applies them after each turn. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "hm_timer.h"
#include "hm_log.h"

int64_t hm_agent_next_boundary(int64_t now_ns, int64_t period_ns, int64_t offset_ns)
{
    int64_t shifted = now_ns - offset_ns;
    int64_t k = shifted >= 0 ? shifted / period_ns : -((-shifted + period_ns - 1) / period_ns);
    return (k + 1) * period_ns + offset_ns;
}

static int arm_timer(hm_agent *a, int64_t deadline_ns, hm_error *err)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = deadline_ns / 1000000000;
    its.it_value.tv_nsec = deadline_ns % 1000000000;
    /* CANCEL_ON_SET: if someone steps the wall clock (not an NTP slew),
     * the timer wakes us at once instead of sleeping through the jump. */
    if (timerfd_settime(a->timer_fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL) < 0)
        return hm_error_errno(err, "timerfd_settime");
    return 0;
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
    hm_control_settings settings = a->control.settings;
    if (hm_control_open(&a->control, a->cfg.socket_path, &settings, err) < 0)
        return -1;
    hm_error app_err; /* no application channel is not a reason to stop monitoring */
    hm_app_limits limits = a->app.limits;
    if (hm_app_open(&a->app, a->cfg.socket_path, &app_err) < 0)
        hm_log_warn("application channel off: %s", app_err.msg);
    a->app.limits = limits;
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
        /* Woken for the first control client's deadline too. */
        if (poll(fds, (nfds_t)n, hm_control_timeout_ms(&a->control)) < 0) {
            if (errno == EINTR)
                continue;
            return hm_error_errno(err, "poll");
        }
        if (fds[1].revents) {
            struct signalfd_siginfo si;
            while (read(a->signal_fd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGHUP) {
                    char resp[HM_CONTROL_LINE_MAX];
                    hm_agent_control_self(a, "reload", resp, sizeof resp);
                } else {
                    a->stop = true;
                }
            }
        }
        if (fds[0].revents) {
            uint64_t expirations;
            if (read(a->timer_fd, &expirations, sizeof expirations) < 0) {
                if (errno == ECANCELED) {
                    /* The clock was stepped: start again from the new time,
                     * without counting the jump as missed periods. */
                    hm_log_notice("wall clock was set; sampling on the new time");
                    next = hm_agent_next_boundary(hm_realtime_ns(), period_ns, offset_ns);
                    if (arm_timer(a, next, err) < 0)
                        return -1;
                    continue;
                }
                if (errno != EAGAIN)
                    return hm_error_errno(err, "reading timerfd");
            }
            double cpu0 = hm_thread_cpu_us();
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
                a->self.cpu_us = hm_thread_cpu_us() - cpu0;
            }
            /* Control requests over the sink's connection (NATS) are read
             * once per period, with the batch's acks (sinks/nats.c). */
            if (a->sink.ops->serve_requests != NULL)
                a->sink.ops->serve_requests(a->sink.state, hm_agent_control_remote, a);
            next = hm_agent_next_boundary(now, period_ns, offset_ns);
            if (arm_timer(a, next, err) < 0)
                return -1;
        }
        hm_control_serve(&a->control, fds + 2, n - 2, hm_agent_control, hm_agent_peer_is_admin, a);
        hm_agent_control_tick(a);
        /* A `set period=` request (socket or NATS), a job's end or a
         * reload may have changed the wanted schedule. */
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

