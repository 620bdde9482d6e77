/* A NATS client's login (docs/transport.md, "Users and permissions"): the
 * user in $HUSHMON_NATS_USER, its password in the file named by
 * $HUSHMON_NATS_PASSWORD_FILE (read once at connect; never in a URL, a
 * command line or a log). Neither set: no login (the test bed, a server
 * without authorization). The Python clients read the same two
 * (python/hushmon/transport/natsusers.py). No libnats here: the caller
 * passes the result to natsOptions_SetUserInfo. */
#ifndef HM_NATS_LOGIN_H
#define HM_NATS_LOGIN_H

#include <limits.h>
#include <stddef.h>

#include "hm_error.h"

#define HM_NATS_USER_MAX 128
#define HM_NATS_PASSWORD_MAX 256

/* 1 with user and password filled, 0 when neither variable is set, -1
 * with the reason (one set without the other, file unreadable or empty). */
int hm_nats_login(char user[HM_NATS_USER_MAX], char password[HM_NATS_PASSWORD_MAX], hm_error *err);

/* TLS files of a NATS client (hm_nats_client.h says which variables). */
typedef struct {
    char ca_file[PATH_MAX];
    char cert_file[PATH_MAX]; /* "" = no client certificate */
    char key_file[PATH_MAX];
    char hostname[256];       /* the server certificate must carry this name */
    struct {                  /* where each file came from (a key or a variable), for messages */
        const char *ca_file, *cert_file, *key_file;
    } from;
} hm_nats_tls;

/* 1 with tls filled (a CA named; the host name set or else the host of
 * first_url), 0 when TLS is off (no CA named), -1 with the reason (a
 * certificate without its key, a file that cannot be read, a URL without
 * a host). Each setting comes from configured (the agent's [nats] ca_file,
 * cert_file, key_file, tls_hostname; NULL or "" fields: not set) and,
 * where that is not set, from its variable: a setting in the file wins. */
int hm_nats_tls_files(hm_nats_tls *tls, const char *first_url, const hm_nats_tls *configured,
                      hm_error *err);
/* 0 when path is "" or a file this process can read, else -1 naming key. */
int hm_nats_tls_readable(const char *key, const char *path, hm_error *err);

#endif
