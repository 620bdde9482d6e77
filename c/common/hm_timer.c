#include "hm_timer.h"

#include <errno.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define HM_HAVE_TSC 1
#else
#define HM_HAVE_TSC 0
#endif

const char *const hm_timer_names[] = {"monotonic", "monotonic_raw", "gettimeofday", "tsc", NULL};

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t hm_monotonic_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
int64_t hm_realtime_ns(void) { return clock_ns(CLOCK_REALTIME); }

static int sleep_until(clockid_t id, int64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = deadline_ns / 1000000000, .tv_nsec = deadline_ns % 1000000000};
    int rc = clock_nanosleep(id, TIMER_ABSTIME, &ts, NULL);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

int hm_sleep_until_realtime_ns(int64_t deadline_ns) { return sleep_until(CLOCK_REALTIME, deadline_ns); }
int hm_sleep_until_monotonic_ns(int64_t deadline_ns) { return sleep_until(CLOCK_MONOTONIC, deadline_ns); }

uint64_t hm_tsc_read(void)
{
#if HM_HAVE_TSC
    unsigned int aux;
    return __rdtscp(&aux);
#else
    return 0;
#endif
}

bool hm_tsc_is_invariant(void)
{
#if HM_HAVE_TSC
    unsigned int eax, ebx, ecx, edx;
    if (__get_cpuid_max(0x80000000, NULL) < 0x80000007)
        return false;
    __cpuid(0x80000007, eax, ebx, ecx, edx);
    return (edx >> 8) & 1;
#else
    return false;
#endif
}

/* Smallest non-zero step seen between consecutive readings. */
static double observed_resolution_ns(const hm_timer *t)
{
    int64_t best = INT64_MAX;
    for (int i = 0; i < 1000; i++) {
        int64_t a = hm_timer_now_ns(t), b;
        do {
            b = hm_timer_now_ns(t);
        } while (b == a);
        if (b - a < best)
            best = b - a;
    }
    return (double)best;
}

static int calibrate_tsc(hm_timer *t, hm_error *err)
{
    /* Two readings of both clocks 50 ms apart; the short windows around each
     * pair bound the error by the time a clock_gettime call takes. */
    int64_t ns0 = clock_ns(CLOCK_MONOTONIC_RAW);
    uint64_t tsc0 = hm_tsc_read();
    int64_t target = ns0 + 50 * 1000000;
    while (clock_ns(CLOCK_MONOTONIC_RAW) < target) {
    }
    int64_t ns1 = clock_ns(CLOCK_MONOTONIC_RAW);
    uint64_t tsc1 = hm_tsc_read();
    if (tsc1 <= tsc0 || ns1 <= ns0)
        return hm_error_set(err, "TSC calibration failed: counter did not advance");
    t->tsc_ticks_per_ns = (double)(tsc1 - tsc0) / (double)(ns1 - ns0);
    /* Counting from here rather than from boot keeps the error of the
     * frequency from scaling with the uptime, and the tick difference exact
     * in a double for 40 days at 2.5 GHz. */
    t->tsc_origin = tsc0;
    return 0;
}

static int tsc_available(hm_error *err)
{
    if (!HM_HAVE_TSC)
        return hm_error_set(err, "timer 'tsc' is only available on x86");
    if (!hm_tsc_is_invariant())
        return hm_error_set(err, "timer 'tsc': this CPU does not report an invariant TSC");
    return 0;
}

int hm_timer_init(hm_timer *t, const char *name, hm_error *err)
{
    memset(t, 0, sizeof *t);
    t->system_wide = true;
    if (strcmp(name, "monotonic") == 0) {
        t->kind = HM_TIMER_MONOTONIC;
        t->name = "monotonic";
    } else if (strcmp(name, "monotonic_raw") == 0) {
        t->kind = HM_TIMER_MONOTONIC_RAW;
        t->name = "monotonic_raw";
    } else if (strcmp(name, "gettimeofday") == 0) {
        t->kind = HM_TIMER_GETTIMEOFDAY;
        t->name = "gettimeofday";
    } else if (strcmp(name, "tsc") == 0) {
        if (tsc_available(err) != 0)
            return -1;
        t->kind = HM_TIMER_TSC;
        t->name = "tsc";
        if (calibrate_tsc(t, err) != 0)
            return -1;
    } else {
        return hm_error_set(err, "unknown timer '%s' (expected monotonic, monotonic_raw, gettimeofday, tsc)", name);
    }
    t->resolution_ns = observed_resolution_ns(t);
    return 0;
}

int hm_timer_init_tsc_shared(hm_timer *t, double ticks_per_ns, uint64_t origin, hm_error *err)
{
    memset(t, 0, sizeof *t);
    if (tsc_available(err) != 0)
        return -1;
    if (!(ticks_per_ns > 0.0))
        return hm_error_set(err, "timer 'tsc': shared calibration of %g ticks/ns is not positive",
                            ticks_per_ns);
    t->kind = HM_TIMER_TSC;
    t->name = "tsc";
    t->system_wide = true;
    t->tsc_ticks_per_ns = ticks_per_ns;
    t->tsc_origin = origin;
    t->resolution_ns = observed_resolution_ns(t);
    return 0;
}

void hm_timer_init_external(hm_timer *t, const char *name, double (*now_s)(void),
                            bool system_wide, double resolution_ns)
{
    memset(t, 0, sizeof *t);
    t->kind = HM_TIMER_EXTERNAL;
    t->name = name;
    t->external_now_s = now_s;
    t->system_wide = system_wide;
    t->resolution_ns = resolution_ns;
}

int64_t hm_timer_now_ns(const hm_timer *t)
{
    switch (t->kind) {
    case HM_TIMER_MONOTONIC:
        return clock_ns(CLOCK_MONOTONIC);
    case HM_TIMER_MONOTONIC_RAW:
        return clock_ns(CLOCK_MONOTONIC_RAW);
    case HM_TIMER_GETTIMEOFDAY: {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
    }
    case HM_TIMER_TSC:
        /* Signed difference: another core's counter may trail the origin
         * by a few ticks. */
        return (int64_t)((double)(int64_t)(hm_tsc_read() - t->tsc_origin) / t->tsc_ticks_per_ns);
    case HM_TIMER_EXTERNAL:
        return (int64_t)(t->external_now_s() * 1e9);
    }
    return 0;
}
