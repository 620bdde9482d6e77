/* The login and TLS settings every hushmon NATS client in C applies (the
 * agent's nats sink, hushmon-reduce), from the same environment as the
 * Python clients (python/hushmon/transport/natsusers.py, natstls.py):
 * $HUSHMON_NATS_USER and $HUSHMON_NATS_PASSWORD_FILE (hm_nats_login.h),
 * $HUSHMON_NATS_CA_FILE (TLS on: the server's certificate must chain to
 * this CA), $HUSHMON_NATS_CERT_FILE and $HUSHMON_NATS_KEY_FILE (the
 * client's own certificate, for servers that verify clients), and
 * $HUSHMON_NATS_TLS_HOSTNAME (the name the server's certificate must
 * carry; default: the host of the first server URL). The agent may name
 * the TLS settings in its configuration file too ([nats] ca_file,
 * cert_file, key_file, tls_hostname): a setting there wins over its
 * variable.
 *
 * Header-only because hm_common links no libnats (the injector and an
 * agent built without the nats sink use it); only units that include
 * nats.h include this. */
#ifndef HM_NATS_CLIENT_H
#define HM_NATS_CLIENT_H

#include <nats/nats.h>
#include <string.h>

#include "hm_error.h"
#include "hm_nats_login.h"

/* libnats' own last error says more than the status's name when there is one. */
static inline const char *hm_nats_error_text(natsStatus st)
{
    const char *last = nats_GetLastError(NULL);
    return last != NULL && *last != '\0' ? last : natsStatus_GetText(st);
}

static inline int hm_nats_client_fail(hm_error *err, natsStatus st, const char *what, const char *path)
{
    return hm_error_set(err, "%s %s: %s", what, path, hm_nats_error_text(st));
}

/* Login and TLS (configured, else the environment; configured may be
 * NULL) into opts; first_url names the default expected host name. 1 with
 * TLS on, 0 plain, -1 with the reason. */
static inline int hm_nats_client_setup(natsOptions *opts, const char *first_url,
                                       const hm_nats_tls *configured, hm_error *err)
{
    char user[HM_NATS_USER_MAX], password[HM_NATS_PASSWORD_MAX];
    int login = hm_nats_login(user, password, err);
    if (login < 0)
        return -1;
    natsStatus st = NATS_OK;
    if (login == 1)
        st = natsOptions_SetUserInfo(opts, user, password);
    memset(password, 0, sizeof password);
    if (st != NATS_OK)
        return hm_error_set(err, "nats login: %s", natsStatus_GetText(st));
    hm_nats_tls tls;
    int secure = hm_nats_tls_files(&tls, first_url, configured, err);
    if (secure <= 0)
        return secure;
    st = natsOptions_SetSecure(opts, true);
    if (st == NATS_OK)
        st = natsOptions_LoadCATrustedCertificates(opts, tls.ca_file);
    if (st != NATS_OK)
        return hm_nats_client_fail(err, st, tls.from.ca_file, tls.ca_file);
    if (tls.cert_file[0] != '\0') {
        st = natsOptions_LoadCertificatesChain(opts, tls.cert_file, tls.key_file);
        if (st != NATS_OK)
            return hm_nats_client_fail(err, st, tls.from.cert_file, tls.cert_file);
    }
    /* libnats checks the chain only unless told the name to expect. */
    st = natsOptions_SetExpectedHostname(opts, tls.hostname);
    if (st != NATS_OK)
        return hm_error_set(err, "nats TLS host name %s: %s", tls.hostname, natsStatus_GetText(st));
    return 1;
}

#endif
