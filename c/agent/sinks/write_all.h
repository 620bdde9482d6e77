/* write(2) until everything is written or a real error occurs. */
#ifndef HM_WRITE_ALL_H
#define HM_WRITE_ALL_H

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

static inline int hm_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

#endif
