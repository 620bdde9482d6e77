/* Timer behaviour that holds on any machine, however loaded: readings are
 * monotone, resolutions sane, names checked, a TSC calibration taken over
 * by another timer reads the same clock. No durations are asserted. */
#include <string.h>

#include "hm_test.h"
#include "hm_timer.h"

int main(void)
{
    hm_test_counts c = {0, 0};
    hm_error err;
    hm_timer t;
    for (const char *const *name = hm_timer_names; *name; name++) {
        if (strcmp(*name, "tsc") == 0 && !hm_tsc_is_invariant())
            continue;
        CHECK(&c, hm_timer_init(&t, *name, &err) == 0);
        int64_t a = hm_timer_now_ns(&t), b = hm_timer_now_ns(&t);
        CHECK(&c, b >= a);
        CHECK(&c, t.resolution_ns > 0 && t.resolution_ns < 1e7);
        CHECK(&c, t.system_wide);
    }
    CHECK(&c, hm_timer_init(&t, "sundial", &err) == -1 && strstr(err.msg, "sundial") != NULL);
    if (hm_tsc_is_invariant()) {
        /* A rank that takes the node leader's calibration reads the
         * leader's clock: no offset, no drift between them. */
        hm_timer leader, other;
        int64_t before = hm_monotonic_ns();
        CHECK(&c, hm_timer_init(&leader, "tsc", &err) == 0);
        CHECK(&c, hm_timer_init_tsc_shared(&other, leader.tsc_ticks_per_ns, leader.tsc_origin,
                                           &err) == 0);
        CHECK(&c, other.system_wide && strcmp(other.name, "tsc") == 0);
        bool ordered = true;
        for (int i = 0; i < 1000; i++) {
            int64_t a = hm_timer_now_ns(&leader), b = hm_timer_now_ns(&other),
                    d = hm_timer_now_ns(&leader);
            ordered = ordered && a <= b && b <= d;
        }
        CHECK(&c, ordered);
        /* Counted from the calibration, not from boot, so a calibration
         * error does not grow with the uptime. */
        int64_t since = hm_timer_now_ns(&leader), elapsed = hm_monotonic_ns() - before;
        CHECK(&c, since >= 0 && since <= elapsed + elapsed / 100);
        CHECK(&c, hm_timer_init_tsc_shared(&other, 0.0, 0, &err) == -1 &&
                      strstr(err.msg, "not positive") != NULL);
    }
    return hm_test_finish("test_timer", &c);
}
