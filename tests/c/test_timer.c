/* Timer behaviour that holds on any machine, however loaded: readings are
 * monotone, resolutions sane, names checked. No durations are asserted. */
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
    return hm_test_finish("test_timer", &c);
}
