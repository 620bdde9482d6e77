#include "hm_nats_login.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hm_nats_login(char user[HM_NATS_USER_MAX], char password[HM_NATS_PASSWORD_MAX], hm_error *err)
{
    const char *u = getenv("HUSHMON_NATS_USER");
    const char *path = getenv("HUSHMON_NATS_PASSWORD_FILE");
    bool has_u = u != NULL && *u != '\0', has_p = path != NULL && *path != '\0';
    if (!has_u && !has_p)
        return 0;
    if (!has_u || !has_p)
        return hm_error_set(err, "set both HUSHMON_NATS_USER and HUSHMON_NATS_PASSWORD_FILE "
                                 "(or neither)");
    if (strlen(u) >= HM_NATS_USER_MAX)
        return hm_error_set(err, "HUSHMON_NATS_USER is over %d bytes", HM_NATS_USER_MAX - 1);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return hm_error_errno(err, "HUSHMON_NATS_PASSWORD_FILE %s", path);
    char line[HM_NATS_PASSWORD_MAX + 2];
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    line[got ? strcspn(line, "\r\n") : 0] = '\0';
    if (line[0] == '\0')
        return hm_error_set(err, "HUSHMON_NATS_PASSWORD_FILE %s is empty", path);
    size_t len = strlen(line);
    if (len >= HM_NATS_PASSWORD_MAX)
        return hm_error_set(err, "HUSHMON_NATS_PASSWORD_FILE %s: a password of over %d bytes",
                            path, HM_NATS_PASSWORD_MAX - 1);
    memcpy(user, u, strlen(u) + 1);
    memcpy(password, line, len + 1);
    memset(line, 0, sizeof line);
    return 1;
}
