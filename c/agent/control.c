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

const char *const hm_control_refusal_names[HM_CONTROL_REFUSALS] = {
    [HM_CONTROL_UNAUTHORIZED] = "unauthorized", [HM_CONTROL_BUSY] = "busy",
    [HM_CONTROL_UID_CAP] = "uid_cap",           [HM_CONTROL_IDLE] = "idle",
    [HM_CONTROL_LONG_LINE] = "long_line",
};

void hm_control_default_settings(hm_control_settings *s)
{
    *s = (hm_control_settings){.socket_mode = HM_CONTROL_SOCKET_MODE,
                               .socket_gid = -1,
                               .client_idle_ms = HM_CONTROL_CLIENT_IDLE_MS,
                               .clients_per_uid = HM_CONTROL_CLIENTS_PER_UID};
}

void hm_control_init(hm_control *c)
{
    memset(c, 0, sizeof *c);
    c->listen_fd = -1;
    hm_control_default_settings(&c->settings);
    for (int i = 0; i < HM_CONTROL_CLIENTS; i++)
        c->client[i].fd = -1;
}

int hm_socket_listen_safely(int type, const char *path, unsigned mode, long gid, int backlog,
                            hm_error *err)
{
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path)
        return hm_error_set(err, "socket path %s too long (max %zu)", path,
                            sizeof addr.sun_path - 1);
    strcpy(addr.sun_path, path);
    /* In a folder anyone may write to, another user could remove our file
     * and put theirs (or a link) in its place: nothing would be safe. */
    char dir[sizeof addr.sun_path];
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    else
        strcpy(dir, ".");
    struct stat st;
    if (stat(dir, &st) < 0)
        return hm_error_errno(err, "folder of %s", path);
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        return hm_error_set(err, "refusing to listen on %s: anyone may write to %s (mode %04o, "
                            "no sticky bit), so another user could replace the socket",
                            path, dir, (unsigned)(st.st_mode & 07777));
    int probe = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (probe < 0)
        return hm_error_errno(err, "socket");
    if (connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0) {
        close(probe);
        return hm_error_set(err, "another agent is listening on %s", path);
    }
    close(probe);
    if (unlink(path) < 0 && errno != ENOENT) /* stale socket from a dead agent */
        return hm_error_errno(err, "removing the stale %s", path);
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return hm_error_errno(err, "socket");
    /* bind() creates the file at 0777 & ~umask: with this umask it has its
     * final mode from the start (the agent has one thread, so the umask is
     * ours for these lines). Nobody can connect before listen(), by which
     * time its group is set too. */
    mode_t old = umask((mode_t)(~mode & 0777));
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    umask(old);
    if (rc < 0) {
        hm_error_errno(err, "binding %s", path);
        close(fd);
        return -1;
    }
    if (gid >= 0 && lchown(path, (uid_t)-1, (gid_t)gid) < 0) {
        hm_error_errno(err, "giving %s to group %ld", path, gid);
        close(fd);
        unlink(path);
        return -1;
    }
    if (listen(fd, backlog) < 0) {
        hm_error_errno(err, "listening on %s", path);
        close(fd);
        unlink(path);
        return -1;
    }
    return fd;
}

int hm_control_open(hm_control *c, const char *path, const hm_control_settings *s,
                    hm_error *err)
{
    hm_control_init(c);
    c->settings = *s;
    if (path[0] == '\0')
        return 0;
    if (strlen(path) >= sizeof c->path)
        return hm_error_set(err, "control socket path %s too long (max %zu)", path,
                            sizeof c->path - 1);
    /* Create the parent directory (e.g. /run/hushmon) if needed. */
    char dir[sizeof c->path];
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return hm_error_errno(err, "creating %s", dir);
    }
    /* A backlog that a burst of refused connections does not fill before
     * the loop accepts (and refuses) them. */
    c->listen_fd = hm_socket_listen_safely(SOCK_STREAM, path, s->socket_mode, s->socket_gid, 64,
                                           err);
    if (c->listen_fd < 0)
        return hm_error_wrap(err, "control socket");
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

int hm_control_timeout_ms(const hm_control *c)
{
    int64_t first = INT64_MAX;
    for (int i = 0; i < HM_CONTROL_CLIENTS; i++)
        if (c->client[i].fd >= 0 && c->client[i].deadline_ns < first)
            first = c->client[i].deadline_ns;
    if (first == INT64_MAX)
        return -1;
    int64_t left = first - hm_monotonic_ns();
    return left > 0 ? (int)((left + 999999) / 1000000) : 0;
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

static void serve_client(hm_control *c, hm_control_client *cl, hm_control_handler handler,
                         void *arg)
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
        c->peer = &cl->peer;
        handler(arg, cl->buf, response, sizeof response);
        c->peer = NULL;
        size_t used = (size_t)(nl + 1 - cl->buf);
        memmove(cl->buf, nl + 1, cl->len - used);
        cl->len -= used;
        if (!respond(cl, response)) {
            drop_client(cl);
            return;
        }
        /* The next line has the same time again, from this answer. */
        cl->deadline_ns = hm_monotonic_ns() + c->settings.client_idle_ms * 1000000;
    }
    if (cl->len == sizeof cl->buf - 1) {
        hm_refuse(&c->log, &c->refused[HM_CONTROL_LONG_LINE], 1, "control socket",
                  "dropped uid %ld (pid %ld): a request line longer than %d bytes", cl->peer.uid,
                  cl->peer.pid, HM_CONTROL_LINE_MAX - 2);
        respond(cl, "error request line too long");
        drop_client(cl);
    }
}

/* The kernel's word on who connected. */
static void read_peer(int fd, hm_control_peer *p)
{
    *p = (hm_control_peer){.uid = -1, .gid = -1, .pid = -1};
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        p->uid = (long)cred.uid;
        p->gid = (long)cred.gid;
        p->pid = (long)cred.pid;
    }
    gid_t groups[HM_CONTROL_GROUPS_MAX];
    len = sizeof groups;
    /* A peer in more groups than we keep answers ERANGE: then only its
     * primary group counts (an admin group should be among its first). */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0) {
        p->ngroups = len / sizeof groups[0];
        for (size_t i = 0; i < p->ngroups; i++)
            p->groups[i] = (uint32_t)groups[i];
    }
}

/* A new connection: refused when its uid holds its share of slots, or
 * every slot it may take is held; the reason is its answer. */
static void accept_client(hm_control *c, int fd, hm_control_admin_test is_admin, void *arg)
{
    hm_control_peer peer;
    read_peer(fd, &peer);
    bool admin = peer.uid >= 0 && is_admin(arg, &peer);
    int free_slot = -1, held_by_uid = 0, held_by_users = 0;
    for (int k = 0; k < HM_CONTROL_CLIENTS; k++) {
        const hm_control_client *o = &c->client[k];
        if (o->fd < 0) {
            if (free_slot < 0)
                free_slot = k;
            continue;
        }
        held_by_users += !o->admin;
        held_by_uid += o->peer.uid == peer.uid;
    }
    const char *refusal = NULL;
    int reason = -1;
    if (free_slot < 0 || (!admin && held_by_users >= HM_CONTROL_CLIENTS - HM_CONTROL_ADMIN_SLOTS)) {
        reason = HM_CONTROL_BUSY;
        refusal = "error too many control clients\n";
    } else if (!admin && held_by_uid >= c->settings.clients_per_uid) {
        reason = HM_CONTROL_UID_CAP;
        refusal = "error too many control clients of this uid (control.clients_per_uid)\n";
    }
    if (refusal != NULL) {
        hm_refuse(&c->log, &c->refused[reason], 1, "control socket",
                  "refused uid %ld (pid %ld): %s", peer.uid, peer.pid,
                  reason == HM_CONTROL_UID_CAP ? "it holds control.clients_per_uid connections"
                                               : "every slot users may take is held");
        ssize_t ignored = send(fd, refusal, strlen(refusal), MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)ignored;
        close(fd);
        return;
    }
    hm_control_client *slot = &c->client[free_slot];
    slot->fd = fd;
    slot->len = 0;
    slot->peer = peer;
    slot->admin = admin;
    slot->deadline_ns = hm_monotonic_ns() + c->settings.client_idle_ms * 1000000;
}

void hm_control_serve(hm_control *c, const struct pollfd *fds, size_t n,
                      hm_control_handler handler, hm_control_admin_test is_admin, void *arg)
{
    for (size_t i = 0; i < n; i++) {
        if (fds[i].revents == 0)
            continue;
        if (fds[i].fd == c->listen_fd) {
            /* Everything queued, so a flood of connections is refused as
             * fast as it comes and the backlog stays open for the prolog. */
            for (int k = 0; k < 256; k++) {
                int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                    break;
                accept_client(c, fd, is_admin, arg);
            }
            continue;
        }
        for (int k = 0; k < HM_CONTROL_CLIENTS; k++)
            if (c->client[k].fd == fds[i].fd)
                serve_client(c, &c->client[k], handler, arg);
    }
    int64_t now = hm_monotonic_ns();
    for (int k = 0; k < HM_CONTROL_CLIENTS; k++) {
        hm_control_client *cl = &c->client[k];
        if (cl->fd < 0 || now < cl->deadline_ns)
            continue;
        hm_refuse(&c->log, &c->refused[HM_CONTROL_IDLE], 1, "control socket",
                  "dropped uid %ld (pid %ld): no complete request line within %lld ms "
                  "(control.client_idle_ms; %zu bytes of one were sent)", cl->peer.uid,
                  cl->peer.pid, (long long)c->settings.client_idle_ms, cl->len);
        const char *gone = "error no complete request line in time\n";
        ssize_t ignored = send(cl->fd, gone, strlen(gone), MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)ignored;
        drop_client(cl);
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
