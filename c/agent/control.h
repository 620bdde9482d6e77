/* The control socket: a Unix stream socket where each request is one line
 * and each response one line starting with "ok" or "error" (protocol in
 * docs/formats.md). Clients are served from the agent's single poll()
 * loop without blocking it: a client that sends half a line waits, until
 * its deadline drops it. Each uid holds a few slots at most, and some are
 * kept for root and admins (docs/security.md, "The agent's sockets"). */
#ifndef HM_CONTROL_H
#define HM_CONTROL_H

#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"
#include "refusals.h"

#define HM_CONTROL_CLIENTS 16
/* Slots only root and admins may take: however many connections users
 * hold, the Slurm prolog's `job begin` finds one. */
#define HM_CONTROL_ADMIN_SLOTS 4
#define HM_CONTROL_LINE_MAX 1024
#define HM_CONTROL_GROUPS_MAX 32

/* Defaults of the settings (config.c). */
#define HM_CONTROL_SOCKET_MODE 0660
#define HM_CONTROL_CLIENT_IDLE_MS 2000
#define HM_CONTROL_CLIENTS_PER_UID 2

/* Who is at the other end: the kernel's word (SO_PEERCRED, SO_PEERGROUPS)
 * when it connected, never what the request says. */
typedef struct hm_control_peer {
    long uid;                /* -1 unknown */
    long gid;                /* primary group; -1 unknown */
    long pid;
    size_t ngroups;          /* supplementary groups (at most HM_CONTROL_GROUPS_MAX kept) */
    uint32_t groups[HM_CONTROL_GROUPS_MAX];
} hm_control_peer;

typedef struct hm_control_client {
    int fd;
    hm_control_peer peer;
    bool admin;              /* root or an admin: may use the reserved slots */
    int64_t deadline_ns;     /* a complete request line must arrive before this */
    size_t len;
    char buf[HM_CONTROL_LINE_MAX];
} hm_control_client;

/* Why a client or a request was refused; counted per reason and written
 * by the `self` source as hushmon_agent control_<name> (docs/security.md). */
enum {
    HM_CONTROL_UNAUTHORIZED, /* a request its uid may not make */
    HM_CONTROL_BUSY,         /* every slot users may take is held */
    HM_CONTROL_UID_CAP,      /* its uid holds control.clients_per_uid slots already */
    HM_CONTROL_IDLE,         /* no complete line within control.client_idle_ms: dropped */
    HM_CONTROL_LONG_LINE,    /* a line longer than HM_CONTROL_LINE_MAX: dropped */
    HM_CONTROL_REFUSALS
};
extern const char *const hm_control_refusal_names[HM_CONTROL_REFUSALS];

typedef struct hm_control_settings {
    unsigned socket_mode;    /* of the socket file (0660) */
    long socket_gid;         /* its group; -1: the agent's own */
    int64_t client_idle_ms;  /* deadline for each request line, from connecting or the last answer */
    int64_t clients_per_uid; /* slots one uid (not root, not an admin) may hold */
} hm_control_settings;

/* Handles one request line; writes the response (without newline). */
typedef void (*hm_control_handler)(void *arg, const char *request, char *response, size_t size);
/* Whether the peer is root or an admin (the agent's rule, agent_control.c). */
typedef bool (*hm_control_admin_test)(void *arg, const hm_control_peer *peer);

typedef struct hm_control {
    int listen_fd;
    const hm_control_peer *peer; /* the client whose request is being handled; NULL none */
    hm_control_settings settings;
    uint64_t refused[HM_CONTROL_REFUSALS];
    hm_refusal_log log;
    char path[108];
    hm_control_client client[HM_CONTROL_CLIENTS];
} hm_control;

/* The default settings (0660, the agent's group, the default deadline and cap). */
void hm_control_default_settings(hm_control_settings *s);
/* Nothing open: close and serve are no-ops. */
void hm_control_init(hm_control *c);
/* Binds path ("" = no socket). A stale socket file left by a dead agent
 * is replaced; one that a live agent answers on is an error. The file is
 * created with its mode and group before anyone can connect (no moment at
 * the umask's mode); a folder anyone may write to without the sticky bit
 * is refused (a user could swap the file). */
int hm_control_open(hm_control *c, const char *path, const hm_control_settings *s,
                    hm_error *err);
void hm_control_close(hm_control *c);
/* Adds the descriptors to poll; returns how many were added. */
size_t hm_control_pollfds(const hm_control *c, struct pollfd *fds);
/* Milliseconds until the earliest client deadline (for poll), -1 none. */
int hm_control_timeout_ms(const hm_control *c);
/* Serves whatever fds (as filled by hm_control_pollfds) report ready,
 * then drops the clients past their deadline. */
void hm_control_serve(hm_control *c, const struct pollfd *fds, size_t n,
                      hm_control_handler handler, hm_control_admin_test is_admin, void *arg);
/* A listening Unix socket of type (SOCK_STREAM, SOCK_SEQPACKET; opened
 * non-blocking) at path, created with mode and group gid (-1: the
 * process's) before it listens; also app.sock's. A live listener there is
 * an error, a stale file is replaced, a folder that anyone may write to
 * without the sticky bit is refused. Returns the descriptor or -1. */
int hm_socket_listen_safely(int type, const char *path, unsigned mode, long gid, int backlog,
                            hm_error *err);

/* The client side, for `hushmon-agent --send` (job prolog/epilog): sends
 * one request line to the agent listening on path and reads its one-line
 * answer into reply (newline removed). The whole exchange takes at most
 * timeout_ms, so a hung or absent agent cannot hold up a job's start.
 * Returns 0 when an answer came, -1 with the reason when none did (no
 * socket, nobody listening, timeout, connection closed early). */
int hm_control_send(const char *path, const char *request, int timeout_ms, char *reply,
                    size_t size, hm_error *err);

#endif
