/* A daemon's log: warnings and notices for people, one line each.
 *
 * Foreground runs write "PROGRAM: ..." to stderr; a daemon writes to syslog.
 * This is the one piece of process-wide state a daemon keeps (where its log
 * goes and under which name). PROGRAM is the executable's name unless
 * hm_log_set_program() says otherwise. */
#ifndef HM_LOG_H
#define HM_LOG_H

#include <stdbool.h>

void hm_log_set_program(const char *program);
void hm_log_use_syslog(bool on);
void hm_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hm_log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A flag that lets a repeated failure be logged once until it clears:
 * hm_log_once(&flag, ...) logs and sets the flag if it was clear. */
void hm_log_warn_once(bool *said, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
