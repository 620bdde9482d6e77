/* A NATS client's login (docs/transport.md, "Users and permissions"): the
 * user in $HUSHMON_NATS_USER, its password in the file named by
 * $HUSHMON_NATS_PASSWORD_FILE (read once at connect; never in a URL, a
 * command line or a log). Neither set: no login (the test bed, a server
 * without authorization). The Python clients read the same two
 * (python/hushmon/transport/natsusers.py). No libnats here: the caller
 * passes the result to natsOptions_SetUserInfo. */
#ifndef HM_NATS_LOGIN_H
#define HM_NATS_LOGIN_H

#include <stddef.h>

#include "hm_error.h"

#define HM_NATS_USER_MAX 128
#define HM_NATS_PASSWORD_MAX 256

/* 1 with user and password filled, 0 when neither variable is set, -1
 * with the reason (one set without the other, file unreadable or empty). */
int hm_nats_login(char user[HM_NATS_USER_MAX], char password[HM_NATS_PASSWORD_MAX], hm_error *err);

#endif
