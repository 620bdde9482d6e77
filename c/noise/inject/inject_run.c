#include "inject_run.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "hm_timer.h"

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t hm_inject_first_start_ns(int64_t now_ns, int64_t period_ns, hm_inject_start start,
                                 int64_t phase_ns, double random_fraction)
{
    if (start == HM_INJECT_START_NOW)
        return now_ns;
    int64_t offset = start == HM_INJECT_START_RANDOM
                         ? (int64_t)(random_fraction * (double)period_ns)
                         : phase_ns % period_ns;
    if (offset < 0)
        offset += period_ns;
    int64_t base = now_ns - now_ns % period_ns + offset;
    while (base <= now_ns)
        base += period_ns;
    return base;
}

int64_t hm_inject_work_ns(const hm_inject_config *cfg, int64_t k)
{
    double per_period = cfg->level_pct / 100.0 * (double)cfg->period_ns;
    if (!cfg->shape->burst || cfg->burst_every <= 1)
        return (int64_t)llround(per_period);
    int64_t n = cfg->burst_every;
    if (k % n != n - 1)
        return 0;
    double work = per_period * (double)n;
    double available = (double)cfg->period_ns * (double)n;
    return (int64_t)llround(work < available ? work : available);
}

int64_t hm_inject_activation_count(const hm_inject_config *cfg)
{
    return (cfg->duration_ns + cfg->period_ns - 1) / cfg->period_ns;
}

/* Sleeps until the realtime deadline; a signal interrupts the sleep, which
 * resumes unless *stop was set. Returns false when told to stop. */
static bool sleep_until_or_stop(int64_t deadline_ns, const volatile sig_atomic_t *stop)
{
    while (!*stop) {
        if (hm_sleep_until_realtime_ns(deadline_ns) == 0)
            return true;
        if (errno != EINTR)
            return !*stop; /* cannot sleep (should not happen): carry on */
    }
    return false;
}

/* splitmix64: a seeded generator without global state. */
static double random_fraction(uint64_t seed)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* Works for work_ns on the chosen clock, a chunk at a time; returns a value
 * depending on every chunk so the work is not optimized away. */
static uint64_t do_work(const hm_inject_kernel *kernel, void *state, hm_inject_work_clock clk,
                        int64_t work_ns)
{
    clockid_t id = clk == HM_INJECT_WORK_CPU ? CLOCK_THREAD_CPUTIME_ID : CLOCK_REALTIME;
    int64_t begin = clock_ns(id);
    uint64_t sink = 0;
    do {
        sink += kernel->chunk(state);
    } while (clock_ns(id) - begin < work_ns);
    return sink;
}

int hm_inject_run(const hm_inject_config *cfg, const volatile sig_atomic_t *stop,
                  hm_inject_result *result, hm_error *err)
{
    *result = (hm_inject_result){0};
    if (cfg->period_ns <= 0 || cfg->duration_ns <= 0)
        return hm_error_set(err, "period and duration must be positive");
    int64_t count = hm_inject_activation_count(cfg);
    void *state = NULL;
    if (cfg->level_pct > 0) {
        result->activations = calloc((size_t)count, sizeof *result->activations);
        if (result->activations == NULL)
            return hm_error_errno(err, "allocating %lld activation records", (long long)count);
        if (cfg->shape->kernel->init(&state, err) != 0) {
            hm_inject_result_free(result);
            return hm_error_wrap(err, "kernel '%s'", cfg->shape->kernel->name);
        }
    }
    int64_t t0 = hm_inject_first_start_ns(hm_realtime_ns(), cfg->period_ns, cfg->start,
                                          cfg->phase_ns, random_fraction(cfg->seed));
    int64_t end = t0 + cfg->duration_ns;
    result->t0_realtime_ns = t0;
    int64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    volatile uint64_t sink = 0;
    /* Level 0 is an idle agent: no wake-ups at all (a wake-up alone costs
     * the job a detour the detector can see), so A/A runs stay A/A. */
    for (int64_t k = 0; state != NULL && k < count && !*stop; k++) {
        int64_t deadline = t0 + k * cfg->period_ns;
        if (!sleep_until_or_stop(deadline, stop))
            break;
        int64_t work = hm_inject_work_ns(cfg, k);
        if (state == NULL || work <= 0)
            continue;
        hm_inject_activation *a = &result->activations[result->activation_count++];
        int64_t thread0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        a->start_realtime_ns = hm_realtime_ns();
        sink += do_work(cfg->shape->kernel, state, cfg->work_clock, work);
        a->wall_ns = hm_realtime_ns() - a->start_realtime_ns;
        a->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - thread0;
        result->planned_work_ns += work;
    }
    (void)sleep_until_or_stop(end, stop);
    result->stopped_by_signal = *stop != 0;
    result->end_realtime_ns = result->stopped_by_signal ? hm_realtime_ns() : end;
    if (result->end_realtime_ns < t0)
        result->end_realtime_ns = t0;
    result->wall_ns = result->end_realtime_ns - t0;
    result->cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    if (state != NULL)
        cfg->shape->kernel->fini(state);
    (void)sink;
    return 0;
}

void hm_inject_result_free(hm_inject_result *result)
{
    free(result->activations);
    result->activations = NULL;
    result->activation_count = 0;
}

void hm_inject_duty_check(const hm_inject_result *result, hm_inject_duty *duty)
{
    double wall = (double)result->wall_ns;
    duty->intended_pct = wall > 0 ? 100.0 * (double)result->planned_work_ns / wall : 0.0;
    duty->measured_pct = wall > 0 ? 100.0 * (double)result->cpu_ns / wall : 0.0;
    duty->error_pct = duty->measured_pct - duty->intended_pct;
    duty->tolerance_pct = fmax(0.1 * duty->intended_pct, 0.001);
    duty->ok = wall > 0 && fabs(duty->error_pct) <= duty->tolerance_pct;
}
