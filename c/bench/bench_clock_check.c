#include "bench_clock_check.h"

#include <math.h>
#include <string.h>

#include "bench_schedule.h"

void hm_bench_clock_judge(hm_bench_result *r, double clock_error_s, double share,
                          double late_tolerance_s)
{
    if (!r->has_global) {
        r->clock_judged = false;
        return;
    }
    double allowed_ns = 0;
    r->clock_judged = true;
    r->clock_valid = hm_clock_error_acceptable(clock_error_s * 1e9, r->local.mean * 1e9, share,
                                               late_tolerance_s * 1e9, &allowed_ns);
    r->clock_allowed_s = allowed_ns * 1e-9;
}

/* "op/size" of the failed results, as many as fit. */
static void list_failed(char *buf, size_t cap, const hm_bench_result *results, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!results[i].clock_judged || results[i].clock_valid)
            continue;
        int w = snprintf(buf + used, cap - used, "%s%s/%lld", used > 0 ? ", " : "",
                         results[i].op->name, (long long)results[i].size);
        if (w < 0 || (size_t)w >= cap - used) {
            /* Cut at the last whole entry. */
            buf[used] = '\0';
            if (cap - used > sizeof ", ...")
                memcpy(buf + used, ", ...", sizeof ", ...");
            return;
        }
        used += (size_t)w;
    }
}

void hm_bench_clock_final(FILE *table, hm_bench_meta *m, hm_bench_result *results, size_t n)
{
    double error_s = fmax(m->clock_error_start_s, m->clock_error_end_s);
    size_t judged = 0, failed = 0, taken_back = 0;
    for (size_t i = 0; i < n; i++) {
        hm_bench_result *r = &results[i];
        bool was_valid = r->clock_judged && r->clock_valid;
        hm_bench_clock_judge(r, error_s, m->clock_error_share, m->late_tolerance_us * 1e-6);
        if (!r->clock_judged)
            continue;
        judged++;
        if (!r->clock_valid) {
            failed++;
            taken_back += was_valid;
        }
    }
    m->results_clock_invalid = failed;
    if (failed == 0)
        return;
    char names[512];
    list_failed(names, sizeof names, results, n);
    if (table != NULL)
        fprintf(table,
                "# NOT VALID: %zu of %zu synchronized results (%s): the ranks' clocks "
                "were at least %.3f us apart (%.3f us after sync, %.3f us at the end), more "
                "than %.0f%% of their times and the late tolerance %.3f us%s\n",
                failed, judged, names, error_s * 1e6, m->clock_error_start_s * 1e6,
                m->clock_error_end_s * 1e6, m->clock_error_share * 100, m->late_tolerance_us,
                taken_back > 0 ? "; rows marked ok above failed the check at the end" : "");
    fprintf(stderr,
            "hushmon-bench: warning: %zu of %zu synchronized results not valid: the ranks' "
            "clocks were at least %.3f us apart (clock_valid false in the JSON)\n",
            failed, judged, error_s * 1e6);
}
