/* The reads behind bmc_power (see bmc_power_fetch.h). This file runs on
 * the source's poller thread only: it may block (up to bmc.timeout_ms)
 * and allocate; the sampling loop never calls it.
 *
 * Redfish: one libcurl easy handle for the source's life, so the TLS
 * session and the connection are kept between polls where the BMC allows
 * (a handshake costs a BMC's small CPU far more than the GET). Driven
 * through a multi handle so that curl_multi_poll also watches stop_fd.
 * HTTPS only, peer and host name verified (against bmc.ca_file, else the
 * system's CAs), no redirects followed (the password would go with them),
 * HTTP Basic authentication, which every Redfish service accepts.
 *
 * Without bmc.url naming a resource (a URL without /redfish/ in it), the
 * first poll asks the chassis' EnvironmentMetrics (PowerWatts, Redfish
 * 2020.4 on) and, when the BMC has none, its Power resource
 * (PowerControl[0].PowerConsumedWatts, deprecated but what most BMCs in
 * service answer); the one that gave a reading is kept.
 *
 * DCMI: `ipmitool dcmi power reading` in its own process group, stdin
 * /dev/null, its output read through a pipe until EOF or the deadline;
 * past the deadline the group is killed (ipmitool stuck on a BMC that
 * does not answer waits far longer than a period). */
#include "bmc_power_fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HM_HAVE_CURL
#include <curl/curl.h>
#endif

#include "bmc_power_parse.h"
#include "hm_log.h"
#include "hm_timer.h"

extern char **environ;

#define BODY_BYTES_MAX (1 << 20) /* a Power resource with every PSU is a few KiB */
#define DCMI_OUTPUT_MAX 16384

enum { RES_UNKNOWN, RES_ENVIRONMENT, RES_POWER, RES_GIVEN };

struct hm_bmc_fetch {
    bool redfish;
    int stop_fd;
    int64_t timeout_ms;
    char ipmitool[PATH_MAX];
    char url[512];
    char chassis_url[768]; /* https://BMC/redfish/v1/Chassis/<id> */
    int resource;
    char *body;
    size_t body_len, body_cap;
    bool body_overflow;
#ifdef HM_HAVE_CURL
    CURL *easy;
    CURLM *multi;
    struct curl_slist *headers;
#endif
    char output[DCMI_OUTPUT_MAX];
};

static bool stop_requested(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

#ifdef HM_HAVE_CURL
static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    hm_bmc_fetch *f = user;
    size_t bytes = size * n;
    if (f->body_len + bytes + 1 > f->body_cap) {
        size_t cap = f->body_cap * 2;
        while (cap < f->body_len + bytes + 1)
            cap *= 2;
        char *grown = cap <= BODY_BYTES_MAX ? realloc(f->body, cap) : NULL;
        if (grown == NULL) {
            f->body_overflow = true;
            return 0; /* aborts the transfer */
        }
        f->body = grown;
        f->body_cap = cap;
    }
    memcpy(f->body + f->body_len, data, bytes);
    f->body_len += bytes;
    f->body[f->body_len] = '\0';
    return bytes;
}

/* One GET: 0 with *status and the body, or -1 (no answer, TLS refused,
 * timeout, stop). */
static int http_get(hm_bmc_fetch *f, const char *url, long *status, hm_error *err)
{
    f->body_len = 0;
    f->body[0] = '\0';
    f->body_overflow = false;
    curl_easy_setopt(f->easy, CURLOPT_URL, url);
    if (curl_multi_add_handle(f->multi, f->easy) != CURLM_OK)
        return hm_error_set(err, "curl_multi_add_handle failed");
    CURLcode result = CURLE_OK;
    bool done = false, stopped = false;
    CURLMcode mc = CURLM_OK;
    while (!done && !stopped) {
        int running = 0;
        mc = curl_multi_perform(f->multi, &running);
        if (mc != CURLM_OK)
            break;
        CURLMsg *m;
        int queued;
        while ((m = curl_multi_info_read(f->multi, &queued)) != NULL)
            if (m->msg == CURLMSG_DONE) {
                result = m->data.result;
                done = true;
            }
        if (done || running == 0)
            break;
        struct curl_waitfd stop = {.fd = f->stop_fd, .events = CURL_WAIT_POLLIN, .revents = 0};
        mc = curl_multi_poll(f->multi, &stop, 1, 1000, NULL);
        if (mc != CURLM_OK)
            break;
        stopped = stop.revents != 0;
    }
    curl_multi_remove_handle(f->multi, f->easy);
    if (stopped)
        return hm_error_set(err, "stopping");
    if (mc != CURLM_OK)
        return hm_error_set(err, "%s: %s", url, curl_multi_strerror(mc));
    if (!done)
        return hm_error_set(err, "%s: the transfer ended without a result", url);
    if (result != CURLE_OK)
        return hm_error_set(err, "%s: %s%s", url, curl_easy_strerror(result),
                            f->body_overflow ? " (answer over 1 MiB)" : "");
    curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, status);
    return 0;
}

/* GET url and parse a reading: 0, -1, or 1 when the resource is not
 * there (404, or an answer without the reading: try the other one). */
static int redfish_try(hm_bmc_fetch *f, const char *url, double *watts, hm_error *err)
{
    long status = 0;
    if (http_get(f, url, &status, err) < 0)
        return -1;
    if (status == 401 || status == 403)
        return hm_error_set(err, "%s: HTTP %ld: the BMC refused the credentials of "
                                 "bmc.credentials_file", url, status);
    if (status == 404) {
        hm_error_set(err, "%s: HTTP 404", url);
        return 1;
    }
    if (status != 200)
        return hm_error_set(err, "%s: HTTP %ld", url, status);
    if (hm_bmc_parse_redfish(f->body, f->body_len, watts, err) < 0) {
        hm_error_wrap(err, "%s", url);
        return f->resource == RES_UNKNOWN ? 1 : -1;
    }
    return 0;
}

static int redfish_read(hm_bmc_fetch *f, double *watts, hm_error *err)
{
    char url[1024];
    if (f->resource == RES_GIVEN)
        return redfish_try(f, f->url, watts, err) == 0 ? 0 : -1;
    if (f->resource != RES_POWER) {
        snprintf(url, sizeof url, "%s/EnvironmentMetrics", f->chassis_url);
        int rc = redfish_try(f, url, watts, err);
        if (rc == 0 && f->resource == RES_UNKNOWN) {
            f->resource = RES_ENVIRONMENT;
            hm_log_notice("bmc_power: reading %s (PowerWatts)", url);
        }
        if (rc <= 0)
            return rc;
    }
    snprintf(url, sizeof url, "%s/Power", f->chassis_url);
    hm_error first = *err;
    int rc = redfish_try(f, url, watts, err);
    if (rc == 0 && f->resource == RES_UNKNOWN) {
        f->resource = RES_POWER;
        hm_log_notice("bmc_power: reading %s (PowerControl[0].PowerConsumedWatts; the chassis "
                      "has no EnvironmentMetrics power: %s)",
                      url, first.msg);
    }
    return rc == 0 ? 0 : -1;
}

static int redfish_open(hm_bmc_fetch *f, const hm_agent_config *cfg, hm_error *err)
{
    if (cfg->bmc_credentials_file[0] == '\0')
        return hm_error_set(err, "bmc.backend redfish needs bmc.credentials_file (user:password, "
                                 "mode 0600)");
    char user[256], password[256];
    if (hm_bmc_read_credentials(cfg->bmc_credentials_file, user, sizeof user, password,
                                sizeof password, err) < 0)
        return -1;
    if (strstr(cfg->bmc_url, "/redfish/") != NULL) {
        f->resource = RES_GIVEN;
    } else {
        size_t n = strlen(cfg->bmc_url);
        while (n > 0 && cfg->bmc_url[n - 1] == '/')
            n--;
        snprintf(f->chassis_url, sizeof f->chassis_url, "%.*s/redfish/v1/Chassis/%s", (int)n,
                 cfg->bmc_url, cfg->bmc_chassis);
    }
    int rc = 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        rc = hm_error_set(err, "curl_global_init failed");
    } else {
        f->easy = curl_easy_init();
        f->multi = curl_multi_init();
        f->body_cap = 65536;
        f->body = malloc(f->body_cap);
        f->headers = curl_slist_append(NULL, "Accept: application/json");
        if (f->easy == NULL || f->multi == NULL || f->body == NULL || f->headers == NULL)
            rc = hm_error_set(err, "out of memory");
    }
    if (rc == 0) {
        CURL *h = f->easy;
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the string form; the bitmask is deprecated */
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
#else
        curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
        if (cfg->bmc_ca_file[0] != '\0')
            curl_easy_setopt(h, CURLOPT_CAINFO, cfg->bmc_ca_file);
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERNAME, user);
        curl_easy_setopt(h, CURLOPT_PASSWORD, password); /* libcurl keeps its own copy */
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, f->headers);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)f->timeout_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)f->timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    }
    explicit_bzero(password, sizeof password);
    return rc;
}
#endif

/* Reads the child's output until EOF; false at the deadline or on stop. */
static bool read_output(hm_bmc_fetch *f, int fd, int64_t deadline_ns, size_t *len, bool *stopped)
{
    *len = 0;
    for (;;) {
        int64_t left_ms = (deadline_ns - hm_monotonic_ns()) / 1000000;
        if (left_ms <= 0)
            return false;
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = f->stop_fd, .events = POLLIN}};
        int n = poll(p, 2, (int)(left_ms < 1000 ? left_ms : 1000));
        if (n < 0 && errno != EINTR)
            return false;
        if (p[1].revents != 0) {
            *stopped = true;
            return false;
        }
        if (n <= 0 || p[0].revents == 0)
            continue;
        char sink[512];
        bool room = *len < sizeof f->output - 1;
        ssize_t got = room ? read(fd, f->output + *len, sizeof f->output - 1 - *len)
                           : read(fd, sink, sizeof sink); /* the rest is not kept */
        if (got == 0)
            return true;
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return true;
        }
        if (room)
            *len += (size_t)got;
    }
}

static int dcmi_read(hm_bmc_fetch *f, double *watts, hm_error *err)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return hm_error_errno(err, "pipe2");
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    posix_spawnattr_init(&at);
    /* This thread blocks every signal (the agent's signalfd takes them);
     * the child starts with none blocked and default actions, in a group
     * of its own so a timeout kills whatever it started too. */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
    char *argv[] = {f->ipmitool, "dcmi", "power", "reading", NULL};
    pid_t pid = -1;
    int rc = posix_spawnp(&pid, f->ipmitool, &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        return hm_error_set(err, "cannot run %s: %s", f->ipmitool, strerror(rc));
    }
    size_t len = 0;
    bool stopped = false;
    bool ended = read_output(f, pipefd[0], hm_monotonic_ns() + f->timeout_ms * 1000000, &len,
                             &stopped);
    close(pipefd[0]);
    if (!ended)
        kill(-pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    f->output[len] = '\0';
    if (stopped)
        return hm_error_set(err, "stopping");
    if (!ended)
        return hm_error_set(err, "%s dcmi power reading: no answer in %lld ms (killed)",
                            f->ipmitool, (long long)f->timeout_ms);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        hm_error e;
        double ignored;
        hm_bmc_parse_dcmi(f->output, len, &ignored, &e);
        return hm_error_set(err, "%s dcmi power reading: exit %d: %s", f->ipmitool,
                            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                            e.msg);
    }
    if (hm_bmc_parse_dcmi(f->output, len, watts, err) < 0)
        return hm_error_wrap(err, "%s", f->ipmitool);
    return 0;
}

int hm_bmc_fetch_open(hm_bmc_fetch **out, const hm_agent_config *cfg, int stop_fd, hm_error *err)
{
    hm_bmc_fetch *f = calloc(1, sizeof *f);
    if (f == NULL)
        return hm_error_set(err, "out of memory");
    f->stop_fd = stop_fd;
    f->timeout_ms = cfg->bmc_timeout_ms;
    f->redfish = strcmp(cfg->bmc_backend, "redfish") == 0;
    snprintf(f->url, sizeof f->url, "%s", cfg->bmc_url);
    snprintf(f->ipmitool, sizeof f->ipmitool, "%s", cfg->bmc_ipmitool);
    int rc = 0;
    if (f->redfish) {
#ifdef HM_HAVE_CURL
        rc = redfish_open(f, cfg, err);
#else
        rc = hm_error_set(err, "this agent was built without libcurl (libcurl4-openssl-dev): no "
                               "Redfish; bmc.backend dcmi needs none");
#endif
    }
    if (rc < 0) {
        hm_bmc_fetch_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int hm_bmc_fetch_read(hm_bmc_fetch *f, double *watts, hm_error *err)
{
    if (stop_requested(f->stop_fd))
        return hm_error_set(err, "stopping");
#ifdef HM_HAVE_CURL
    if (f->redfish)
        return redfish_read(f, watts, err);
#endif
    return dcmi_read(f, watts, err);
}

void hm_bmc_fetch_close(hm_bmc_fetch *f)
{
    if (f == NULL)
        return;
#ifdef HM_HAVE_CURL
    if (f->redfish) {
        if (f->multi != NULL)
            curl_multi_cleanup(f->multi);
        if (f->easy != NULL)
            curl_easy_cleanup(f->easy);
        curl_slist_free_all(f->headers);
        curl_global_cleanup();
    }
#endif
    free(f->body);
    free(f);
}
