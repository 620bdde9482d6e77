#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hm_timer.h"
#include "hm_log.h"

int hm_control_open(hm_control *c, const char *path, hm_error *err)
{
    memset(c, 0, sizeof *c);
    c->listen_fd = -1;
    c->peer_uid = -1;
    for (int i = 0; i < HM_CONTROL_CLIENTS; i++)
        c->client[i].fd = -1;
    if (path[0] == '\0')
        return 0;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path)
        return hm_error_set(err, "control socket path %s too long (max %zu)", path,
                            sizeof addr.sun_path - 1);
    strcpy(addr.sun_path, path);
    /* Create the parent directory (e.g. /run/hushmon) if needed. */
    char dir[sizeof addr.sun_path];
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return hm_error_errno(err, "creating %s", dir);
    }
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0)
        return hm_error_errno(err, "socket");
    if (connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0) {
        close(probe);
        return hm_error_set(err, "another agent is listening on %s", path);
    }
    close(probe);
    unlink(path); /* stale socket from a dead agent */
    c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->listen_fd < 0)
        return hm_error_errno(err, "socket");
    if (bind(c->listen_fd, (struct sockaddr *)&addr, sizeof addr) < 0 ||
        listen(c->listen_fd, 8) < 0) {
        hm_error_errno(err, "listening on %s", path);
        close(c->listen_fd);
        c->listen_fd = -1;
        return -1;
    }
    chmod(path, 0660);
    strcpy(c->path, path);
    return 0;
}

static void drop_client(hm_control_client *cl)
{
    if (cl->fd >= 0)
        close(cl->fd);
    cl->fd = -1;
    cl->len = 0;
}

void hm_control_close(hm_control *c)
{
    for (int i = 0; i < HM_CONTROL_CLIENTS; i++)
        drop_client(&c->client[i]);
    if (c->listen_fd >= 0) {
        close(c->listen_fd);
        unlink(c->path);
    }
    c->listen_fd = -1;
}

size_t hm_control_pollfds(const hm_control *c, struct pollfd *fds)
{
    size_t n = 0;
    if (c->listen_fd < 0)
        return 0;
    fds[n++] = (struct pollfd){.fd = c->listen_fd, .events = POLLIN};
    for (int i = 0; i < HM_CONTROL_CLIENTS; i++)
        if (c->client[i].fd >= 0)
            fds[n++] = (struct pollfd){.fd = c->client[i].fd, .events = POLLIN};
    return n;
}

/* Sends one response line; a client that does not read it is dropped
 * rather than allowed to block the agent. */
static bool respond(hm_control_client *cl, const char *text)
{
    char line[HM_CONTROL_LINE_MAX + 2];
    int n = snprintf(line, sizeof line, "%s\n", text);
    if (n < 0)
        return false;
    if ((size_t)n >= sizeof line) {
        line[sizeof line - 2] = '\n';
        n = (int)sizeof line - 1;
    }
    ssize_t w = send(cl->fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    return w == n;
}

static void serve_client(hm_control_client *cl, hm_control_handler handler, void *arg)
{
    ssize_t n = recv(cl->fd, cl->buf + cl->len, sizeof cl->buf - 1 - cl->len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        drop_client(cl);
        return;
    }
    if (n < 0)
        return;
    cl->len += (size_t)n;
    for (;;) {
        char *nl = memchr(cl->buf, '\n', cl->len);
        if (nl == NULL)
            break;
        *nl = '\0';
        if (nl > cl->buf && nl[-1] == '\r')
            nl[-1] = '\0';
        char response[HM_CONTROL_LINE_MAX];
        handler(arg, cl->buf, response, sizeof response);
        size_t used = (size_t)(nl + 1 - cl->buf);
        memmove(cl->buf, nl + 1, cl->len - used);
        cl->len -= used;
        if (!respond(cl, response)) {
            drop_client(cl);
            return;
        }
    }
    if (cl->len == sizeof cl->buf - 1) {
        respond(cl, "error request line too long");
        drop_client(cl);
    }
}

void hm_control_serve(hm_control *c, const struct pollfd *fds, size_t n,
                      hm_control_handler handler, void *arg)
{
    for (size_t i = 0; i < n; i++) {
        if (fds[i].revents == 0)
            continue;
        if (fds[i].fd == c->listen_fd) {
            int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0)
                continue;
            hm_control_client *slot = NULL;
            for (int k = 0; k < HM_CONTROL_CLIENTS && slot == NULL; k++)
                if (c->client[k].fd < 0)
                    slot = &c->client[k];
            if (slot == NULL) {
                const char *busy = "error too many control clients\n";
                ssize_t ignored = send(fd, busy, strlen(busy), MSG_DONTWAIT | MSG_NOSIGNAL);
                (void)ignored;
                close(fd);
                continue;
            }
            slot->fd = fd;
            slot->len = 0;
            struct ucred cred;
            socklen_t clen = sizeof cred;
            slot->uid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 ? (long)cred.uid
                                                                                  : -1;
            continue;
        }
        for (int k = 0; k < HM_CONTROL_CLIENTS; k++)
            if (c->client[k].fd == fds[i].fd) {
                c->peer_uid = c->client[k].uid;
                serve_client(&c->client[k], handler, arg);
                c->peer_uid = -1;
            }
    }
}

/* Milliseconds left before deadline_ns, at least 0. */
static int ms_left(int64_t deadline_ns)
{
    int64_t left = deadline_ns - hm_monotonic_ns();
    return left > 0 ? (int)((left + 999999) / 1000000) : 0;
}

/* Waits until fd is ready for events or the deadline passes. */
static int wait_ready(int fd, short events, int64_t deadline_ns, int timeout_ms, const char *path,
                      const char *doing, hm_error *err)
{
    for (;;) {
        int ms = ms_left(deadline_ns);
        if (ms == 0)
            return hm_error_set(err, "no answer from %s within %d ms (%s)", path, timeout_ms, doing);
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, ms);
        if (n < 0 && errno != EINTR)
            return hm_error_errno(err, "poll on %s", path);
        if (n > 0)
            return 0;
    }
}

int hm_control_send(const char *path, const char *request, int timeout_ms, char *reply,
                    size_t size, hm_error *err)
{
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (path[0] == '\0')
        return hm_error_set(err, "no control socket configured (control.socket is '')");
    if (strlen(path) >= sizeof addr.sun_path)
        return hm_error_set(err, "control socket path %s too long (max %zu)", path,
                            sizeof addr.sun_path - 1);
    if (request[0] == '\0' || strchr(request, '\n') != NULL ||
        strlen(request) >= HM_CONTROL_LINE_MAX - 1)
        return hm_error_set(err, "not sent to %s: a request is one non-empty line of at most %d "
                                 "bytes", path, HM_CONTROL_LINE_MAX - 2);
    strcpy(addr.sun_path, path);
    int64_t deadline = hm_monotonic_ns() + (int64_t)timeout_ms * 1000000;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return hm_error_errno(err, "socket for %s", path);
    /* A full listen backlog (an agent busy sampling) answers EAGAIN on a
     * Unix socket: try again until the deadline. */
    while (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN) {
            hm_error_errno(err, "connecting to %s", path);
            close(fd);
            return -1;
        }
        if (ms_left(deadline) == 0) {
            close(fd);
            return hm_error_set(err, "no answer from %s within %d ms (listen queue full)", path,
                                timeout_ms);
        }
        struct timespec pause = {0, 5000000};
        while (nanosleep(&pause, &pause) < 0 && errno == EINTR) {
        }
    }
    char line[HM_CONTROL_LINE_MAX];
    size_t len = (size_t)snprintf(line, sizeof line, "%s\n", request);
    for (size_t sent = 0; sent < len;) {
        ssize_t n = send(fd, line + sent, len - sent, MSG_NOSIGNAL);
        if (n >= 0) {
            sent += (size_t)n;
        } else if (errno == EAGAIN) {
            if (wait_ready(fd, POLLOUT, deadline, timeout_ms, path, "sending", err) < 0) {
                close(fd);
                return -1;
            }
        } else if (errno != EINTR) {
            hm_error_errno(err, "sending to %s", path);
            close(fd);
            return -1;
        }
    }
    size_t got = 0;
    for (;;) {
        if (wait_ready(fd, POLLIN, deadline, timeout_ms, path, "waiting for the answer", err) < 0) {
            close(fd);
            return -1;
        }
        ssize_t n = recv(fd, line + got, sizeof line - 1 - got, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n < 0) {
            hm_error_errno(err, "reading from %s", path);
            close(fd);
            return -1;
        }
        if (n == 0) {
            close(fd);
            return hm_error_set(err, "%s closed the connection without answering", path);
        }
        got += (size_t)n;
        char *nl = memchr(line, '\n', got);
        if (nl != NULL || got == sizeof line - 1) {
            if (nl != NULL)
                *nl = '\0';
            line[got] = '\0';
            close(fd);
            snprintf(reply, size, "%s", line);
            return 0;
        }
    }
}
