/* The control socket: a Unix stream socket where each request is one line
 * and each response one line starting with "ok" or "error" (protocol in
 * docs/formats.md). Clients are served from the agent's single poll()
 * loop without blocking it: a client that sends half a line just waits. */
#ifndef HM_CONTROL_H
#define HM_CONTROL_H

#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "hm_error.h"

#define HM_CONTROL_CLIENTS 8
#define HM_CONTROL_LINE_MAX 1024

typedef struct hm_control_client {
    int fd;
    long uid;                /* the client's uid (SO_PEERCRED), -1 unknown */
    size_t len;
    char buf[HM_CONTROL_LINE_MAX];
} hm_control_client;

/* Handles one request line; writes the response (without newline). */
typedef void (*hm_control_handler)(void *arg, const char *request, char *response, size_t size);

typedef struct hm_control {
    int listen_fd;
    long peer_uid;           /* uid of the client whose request is being handled */
    char path[108];
    hm_control_client client[HM_CONTROL_CLIENTS];
} hm_control;

/* Binds path ("" = no socket). A stale socket file left by a dead agent
 * is replaced; one that a live agent answers on is an error. */
int hm_control_open(hm_control *c, const char *path, hm_error *err);
void hm_control_close(hm_control *c);
/* Adds the descriptors to poll; returns how many were added. */
size_t hm_control_pollfds(const hm_control *c, struct pollfd *fds);
/* Serves whatever fds (as filled by hm_control_pollfds) report ready. */
void hm_control_serve(hm_control *c, const struct pollfd *fds, size_t n,
                      hm_control_handler handler, void *arg);

/* The client side, for `hushmon-agent --send` (job prolog/epilog): sends
 * one request line to the agent listening on path and reads its one-line
 * answer into reply (newline removed). The whole exchange takes at most
 * timeout_ms, so a hung or absent agent cannot hold up a job's start.
 * Returns 0 when an answer came, -1 with the reason when none did (no
 * socket, nobody listening, timeout, connection closed early). */
int hm_control_send(const char *path, const char *request, int timeout_ms, char *reply,
                    size_t size, hm_error *err);

#endif
