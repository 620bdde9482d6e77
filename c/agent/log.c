#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

static bool log_to_syslog;

void hm_log_use_syslog(bool on)
{
    if (on && !log_to_syslog)
        openlog("hushmon-agent", LOG_PID, LOG_DAEMON);
    log_to_syslog = on;
}

static void vlog(int priority, const char *level, const char *fmt, va_list ap)
{
    if (log_to_syslog) {
        vsyslog(priority, fmt, ap);
        return;
    }
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "hushmon-agent: %s%s\n", level, line);
}

void hm_log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(LOG_WARNING, "warning: ", fmt, ap);
    va_end(ap);
}

void hm_log_notice(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(LOG_NOTICE, "", fmt, ap);
    va_end(ap);
}

void hm_log_warn_once(bool *said, const char *fmt, ...)
{
    if (*said)
        return;
    *said = true;
    va_list ap;
    va_start(ap, fmt);
    vlog(LOG_WARNING, "warning: ", fmt, ap);
    va_end(ap);
}
