/* bmc: node power from the node's BMC (baseboard management controller),
 * the whole machine's draw at the wall side of the power supplies: CPUs,
 * memory, GPUs, fans, disks, NICs and the supplies' own loss.
 *
 * Backends (bmc.backend): `redfish`, HTTPS GET of the chassis'
 * EnvironmentMetrics (PowerWatts) or Power (PowerControl[0].
 * PowerConsumedWatts) resource; `dcmi`, `ipmitool dcmi power reading`
 * run as a child process (in-band, /dev/ipmi0, root). See
 * bmc_power_fetch.c for each.
 *
 * Why a thread: a BMC answers in 50 ms to 2 s, and sometimes not at all,
 * while the agent samples every second on one thread. The reads run on a
 * poller thread of this source, every bmc.interval_ms (default 10 s; the
 * BMC's own sensor refreshes about as often), each bounded by
 * bmc.timeout_ms. The sampling path only copies the last reading under a
 * mutex the poller holds for a few stores, never across a read. A reading
 * older than 3 intervals is not published (one notice until a reading
 * comes again): a value repeated from a BMC that stopped answering would
 * be a made-up measurement.
 *
 * Energy: the poller integrates its readings (trapezoids between
 * consecutive readings) into a counter of joules since the source opened,
 * monotonic; a gap longer than 3 intervals adds nothing rather than
 * guess. Lines: `bmc,backend=redfish|dcmi power_w=,energy_total_j=,age_s=`
 * every period while the reading is fresh. The BMC measures the machine:
 * in node scope its lines carry scope=host. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <poll.h>

#include "bmc_power_fetch.h"
#include "hm_log.h"
#include "hm_timer.h"
#include "sampler.h"

#define BMC_METRICS(X, P)                                                                     \
    X(P, power_w, "W", "node power, the BMC's last reading")                                  \
    X(P, energy_total_j, "J", "node energy since the source opened: the readings integrated, monotonic") \
    X(P, age_s, "s", "how old the reading is (the poller reads every bmc.interval_ms)")
HM_METRIC_ENUM(BMC, BMC_METRICS);

/* A reading older than this many intervals is not published. */
#define STALE_INTERVALS 3

typedef struct bmc_reading {
    bool have;
    double power_w;
    double energy_total_j;
    int64_t mono_ns; /* when the answer came */
} bmc_reading;

typedef struct bmc_state {
    char backend[16];
    int64_t interval_ns;
    int stop_fd; /* eventfd: readable once the source closes */
    hm_bmc_fetch *fetch;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    bmc_reading shared; /* under lock */
    /* The poller's own. */
    bmc_reading last;
    char said[HM_ERROR_MSG_MAX]; /* the failure last logged; "" after a success */
    /* The sampling path's own. */
    bool stale_said;
} bmc_state;

static int64_t stale_ns(const bmc_state *s)
{
    return STALE_INTERVALS * s->interval_ns;
}

static void record(bmc_state *s, double power_w, int64_t now_ns)
{
    bmc_reading *r = &s->last;
    if (r->have && now_ns - r->mono_ns <= stale_ns(s))
        r->energy_total_j += (power_w + r->power_w) / 2 * (double)(now_ns - r->mono_ns) / 1e9;
    r->have = true;
    r->power_w = power_w;
    r->mono_ns = now_ns;
    pthread_mutex_lock(&s->lock);
    s->shared = *r;
    pthread_mutex_unlock(&s->lock);
}

static void *poller(void *arg)
{
    bmc_state *s = arg;
    int64_t next_ns = hm_monotonic_ns();
    for (;;) {
        double w = 0;
        hm_error e;
        if (hm_bmc_fetch_read(s->fetch, &w, &e) == 0) {
            record(s, w, hm_monotonic_ns());
            if (s->said[0] != '\0')
                hm_log_notice("bmc_power: the BMC answers again (%.0f W)", w);
            s->said[0] = '\0';
        } else if (strcmp(e.msg, "stopping") != 0 && strcmp(e.msg, s->said) != 0) {
            /* Once per distinct failure: a BMC down for a day is one line. */
            hm_log_warn("bmc_power: %s", e.msg);
            snprintf(s->said, sizeof s->said, "%s", e.msg);
        }
        int64_t now_ns = hm_monotonic_ns();
        next_ns += s->interval_ns;
        if (next_ns <= now_ns) /* the read took longer than an interval: no burst to catch up */
            next_ns = now_ns + s->interval_ns;
        struct pollfd p = {.fd = s->stop_fd, .events = POLLIN};
        int64_t wait_ms = (next_ns - now_ns + 999999) / 1000000;
        int n;
        while ((n = poll(&p, 1, (int)wait_ms)) < 0 && errno == EINTR) {
        }
        if (n != 0)
            return NULL; /* stop, or poll itself failed: either way, done */
    }
}

static void bmc_close(void *state)
{
    bmc_state *s = state;
    if (s == NULL)
        return;
    if (s->thread_started) {
        uint64_t one = 1;
        if (write(s->stop_fd, &one, sizeof one) != sizeof one)
            hm_log_warn("bmc_power: cannot signal the poller to stop: %s", strerror(errno));
        pthread_join(s->thread, NULL);
    }
    hm_bmc_fetch_close(s->fetch);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static int bmc_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    const hm_agent_config *cfg = env->cfg;
    if (strcmp(cfg->bmc_backend, "none") == 0)
        return 0; /* no BMC configured: off, no notice */
    bmc_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    snprintf(s->backend, sizeof s->backend, "%s", cfg->bmc_backend);
    s->interval_ns = cfg->bmc_interval_ms * 1000000;
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->stop_fd < 0) {
        hm_error_errno(err, "eventfd");
        bmc_close(s);
        return -1;
    }
    if (hm_bmc_fetch_open(&s->fetch, cfg, s->stop_fd, err) < 0) {
        /* A credentials file others can read, or no libcurl: one notice,
         * and the agent goes on without node power. */
        hm_log_notice("bmc_power: %s: no node power lines", err->msg);
        bmc_close(s);
        return 0;
    }
    /* The poller must not take the signals the agent's signalfd waits
     * for: it starts with every signal blocked. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, poller, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        hm_error_set(err, "pthread_create: %s", strerror(rc));
        bmc_close(s);
        return -1;
    }
    s->thread_started = true;
    *state = s;
    return 0;
}

static int bmc_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    (void)err;
    bmc_state *s = state;
    pthread_mutex_lock(&s->lock);
    bmc_reading r = s->shared;
    pthread_mutex_unlock(&s->lock);
    if (!r.have)
        return 0; /* the first answer has not come yet */
    int64_t age_ns = ctx->mono_ns - r.mono_ns;
    if (age_ns > stale_ns(s)) {
        if (!s->stale_said)
            hm_log_notice("bmc_power: the last reading is %.0f s old (over %d intervals of "
                          "%.0f s): no node power lines until the BMC answers",
                          age_ns / 1e9, STALE_INTERVALS, s->interval_ns / 1e9);
        s->stale_said = true;
        return 0;
    }
    s->stale_said = false;
    hm_lp_begin(out, "bmc");
    hm_lp_tag(out, "backend", s->backend);
    hm_lp_field_f64(out, HM_M(BMC, power_w), r.power_w);
    hm_lp_field_f64(out, HM_M(BMC, energy_total_j), r.energy_total_j);
    hm_lp_field_f64(out, HM_M(BMC, age_s), age_ns > 0 ? age_ns / 1e9 : 0.0);
    hm_lp_end(out);
    return 0;
}

const hm_sampler_ops hm_sampler_bmc_power = {
    .name = "bmc",
    .reads = "the node's BMC, by a poller thread every bmc.interval_ms: Redfish "
             "EnvironmentMetrics/Power over HTTPS, or ipmitool dcmi power reading (bmc.backend)",
    .measurement = "bmc (tag backend)",
    .fields = HM_FIELDS(BMC_METRICS),
    .default_on = true,
    .open = bmc_open,
    .sample = bmc_sample,
    .close = bmc_close,
};
