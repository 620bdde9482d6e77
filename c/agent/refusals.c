#include "refusals.h"

#include <stdarg.h>
#include <stdio.h>

#include "hm_log.h"
#include "hm_timer.h"

void hm_refuse(hm_refusal_log *log, uint64_t *counter, uint64_t n, const char *prefix,
               const char *fmt, ...)
{
    *counter += n;
    int64_t now = hm_monotonic_ns();
    if (now - log->window_start_ns >= HM_REFUSAL_LOG_WINDOW_NS) {
        if (log->unlogged > 0)
            hm_log_warn("%s: %llu more refusals in the last %lld s were counted but not logged",
                        prefix, (unsigned long long)log->unlogged,
                        (long long)((now - log->window_start_ns) / 1000000000));
        log->window_start_ns = now;
        log->logged = 0;
        log->unlogged = 0;
    }
    if (log->logged >= HM_REFUSAL_LOG_BURST) {
        log->unlogged++;
        return;
    }
    log->logged++;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    hm_log_warn("%s: %s", prefix, text);
}
