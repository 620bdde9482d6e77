/* Error reporting shared by every hushmon program.
 *
 * Programs print one line, "PROGRAM: message", and exit non-zero; library
 * code never prints and never exits: it fills an hm_error and returns -1 so
 * the caller can add context ("reading /proc/stat: ...") before reporting. */
#ifndef HM_ERROR_H
#define HM_ERROR_H

#include <stddef.h>

#define HM_ERROR_MSG_MAX 512

typedef struct hm_error {
    char msg[HM_ERROR_MSG_MAX];
} hm_error;

/* Sets the message (printf-style). Returns -1 so callers can write
 * `return hm_error_set(err, "...")`. err may be NULL. */
int hm_error_set(hm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes existing message with context: "context: old message". Returns -1. */
int hm_error_wrap(hm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Like hm_error_set, with ": strerror(errno)" appended. Returns -1. */
int hm_error_errno(hm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "program: message\n" to stderr. */
void hm_error_print(const char *program, const hm_error *err);

#endif
