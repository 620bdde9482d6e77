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

/* The host of "scheme://user:pw@host:port" (or "host:port", "[v6]:port"). */
static int url_host(const char *url, char *out, size_t size)
{
    const char *p = strstr(url, "://");
    p = p != NULL ? p + 3 : url;
    const char *end = p + strcspn(p, ",/");
    const char *at = memchr(p, '@', (size_t)(end - p));
    if (at != NULL)
        p = at + 1;
    size_t len;
    if (*p == '[') {
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (close == NULL)
            return -1;
        p++;
        len = (size_t)(close - p);
    } else {
        len = strcspn(p, ":,/");
    }
    if (len == 0 || len >= size)
        return -1;
    memcpy(out, p, len);
    out[len] = '\0';
    return 0;
}

static int readable(const char *var, const char *path, hm_error *err)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return hm_error_errno(err, "%s %s", var, path);
    fclose(f);
    return 0;
}

/* One setting: the configured value (named key) when set, else the
 * environment's (named var); *from says which, for messages. */
static int pick(const char *configured, const char *key, const char *var, char *out, size_t size,
                const char **from, hm_error *err)
{
    const char *v = configured != NULL && *configured != '\0' ? configured : getenv(var);
    *from = v == configured ? key : var;
    out[0] = '\0';
    if (v == NULL || *v == '\0')
        return 0;
    if (strlen(v) >= size)
        return hm_error_set(err, "%s is over %zu bytes", *from, size - 1);
    memcpy(out, v, strlen(v) + 1);
    return 1;
}

int hm_nats_tls_files(hm_nats_tls *tls, const char *first_url, const hm_nats_tls *configured,
                      hm_error *err)
{
    memset(tls, 0, sizeof *tls);
    const hm_nats_tls none = {0};
    const hm_nats_tls *c = configured != NULL ? configured : &none;
    int ca = pick(c->ca_file, "nats.ca_file", "HUSHMON_NATS_CA_FILE", tls->ca_file,
                  sizeof tls->ca_file, &tls->from.ca_file, err);
    int cert = ca < 0 ? -1 : pick(c->cert_file, "nats.cert_file", "HUSHMON_NATS_CERT_FILE",
                                  tls->cert_file, sizeof tls->cert_file, &tls->from.cert_file, err);
    int key = cert < 0 ? -1 : pick(c->key_file, "nats.key_file", "HUSHMON_NATS_KEY_FILE",
                                   tls->key_file, sizeof tls->key_file, &tls->from.key_file, err);
    const char *host_from = NULL;
    int host = key < 0 ? -1 : pick(c->hostname, "nats.tls_hostname", "HUSHMON_NATS_TLS_HOSTNAME",
                                   tls->hostname, sizeof tls->hostname, &host_from, err);
    if (host < 0)
        return -1;
    if (ca == 0) {
        if (cert || key)
            return hm_error_set(err, "%s and %s need a CA file (nats.ca_file or "
                                     "HUSHMON_NATS_CA_FILE)", tls->from.cert_file, tls->from.key_file);
        return 0;
    }
    if (cert != key)
        return hm_error_set(err, "a client certificate needs both its certificate and key file "
                                 "(nats.cert_file/key_file or HUSHMON_NATS_CERT_FILE/KEY_FILE)");
    if (readable(tls->from.ca_file, tls->ca_file, err) < 0 ||
        (cert && (readable(tls->from.cert_file, tls->cert_file, err) < 0 ||
                  readable(tls->from.key_file, tls->key_file, err) < 0)))
        return -1;
    if (host == 0 && url_host(first_url, tls->hostname, sizeof tls->hostname) < 0)
        return hm_error_set(err, "no host name in '%s' to check the server's certificate "
                                 "against: set nats.tls_hostname or HUSHMON_NATS_TLS_HOSTNAME",
                            first_url);
    return 1;
}

int hm_nats_tls_readable(const char *key, const char *path, hm_error *err)
{
    return path[0] == '\0' ? 0 : readable(key, path, err);
}
