#include "hm_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Writes "a: b" into dst, cutting at the buffer's end: messages are bounded
 * and a cut message is better than none. */
static void join_colon(char *dst, size_t size, const char *a, const char *b)
{
    size_t used = 0;
    const char *parts[] = {a, ": ", b};
    for (size_t i = 0; i < 3; i++) {
        size_t len = strlen(parts[i]);
        if (used + len >= size)
            len = size - 1 - used;
        memcpy(dst + used, parts[i], len);
        used += len;
    }
    dst[used] = '\0';
}

int hm_error_set(hm_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int hm_error_wrap(hm_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    char context[HM_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    char old[HM_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    join_colon(err->msg, sizeof err->msg, context, old);
    return -1;
}

int hm_error_errno(hm_error *err, const char *fmt, ...)
{
    int saved = errno;
    if (err == NULL)
        return -1;
    char what[HM_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    join_colon(err->msg, sizeof err->msg, what, strerror(saved));
    return -1;
}

void hm_error_print(const char *program, const hm_error *err)
{
    fprintf(stderr, "%s: %s\n", program, err->msg[0] ? err->msg : "unknown error");
}
