#include "hm_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

static bool log_to_syslog;
static const char *log_program;

/* The executable's name (GNU libc keeps it), so each program's lines say
 * whose they are without every main() having to set it. */
static const char *program(void)
{
    return log_program ? log_program : program_invocation_short_name;
}

void hm_log_set_program(const char *name)
{
    log_program = name;
}

void hm_log_use_syslog(bool on)
{
    if (on && !log_to_syslog)
        openlog(program(), LOG_PID, LOG_DAEMON);
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
    fprintf(stderr, "%s: %s%s\n", program(), level, line);
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
