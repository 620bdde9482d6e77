#include "bench_schedule.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void hm_schedule_params_default(hm_schedule_params *p)
{
    p->launches_per_stage = 8;
    p->warmup_launches = 4;
    p->invalid_fraction = 0.25;
    p->gamma = 1.1;
    p->shrink_after_calm = 1;
    p->wide_factor = 4;
    p->lateness_grows = false;
}

void hm_stop_rule_default(hm_stop_rule *r)
{
    r->rse_max = 0.05;
    r->min_valid = 10;
    r->max_total = 100;
    r->max_valid = 30;
}

hm_launch_status hm_launch_classify(const hm_launch_times *t, int64_t late_tolerance_ns)
{
    if (t->arrive_ns > t->sched_ns || t->start_ns - t->sched_ns > late_tolerance_ns)
        return HM_LAUNCH_LATE;
    if (t->end_ns > t->window_end_ns)
        return HM_LAUNCH_OVERRUN;
    return HM_LAUNCH_VALID;
}

hm_launch_status hm_launch_combine(bool any_late, bool any_overrun)
{
    if (any_late)
        return HM_LAUNCH_LATE;
    return any_overrun ? HM_LAUNCH_OVERRUN : HM_LAUNCH_VALID;
}

void hm_schedule_after_warmup(const hm_schedule_params *p, double warmup_span_ns,
                              double typical_ns, double turnaround_ns, hm_delta_state *st)
{
    double per_launch = warmup_span_ns > 0 ? warmup_span_ns / p->warmup_launches : 0;
    if (typical_ns > 0)
        per_launch = typical_ns;
    st->turnaround_ns = turnaround_ns > 0 ? turnaround_ns : 0;
    st->delta_ns = p->gamma * per_launch + st->turnaround_ns;
    st->calm_stages = 0;
    st->narrowest_ns = 0;
}

int hm_schedule_next_delta(const hm_schedule_params *p, const hm_stage_outcome *o,
                           hm_delta_state *st)
{
    double old = st->delta_ns;
    if (st->narrowest_ns <= 0 || old < st->narrowest_ns)
        st->narrowest_ns = old;
    if (o->turnaround_ns > 0)
        st->turnaround_ns = o->turnaround_ns;
    int counted = p->lateness_grows ? o->invalid : o->invalid - o->not_window;
    if ((double)counted > p->invalid_fraction * o->launches) {
        /* The seed's rule; the gamma*delta floor matters when the stage
         * failed by late starts rather than overruns, so its span stayed
         * on schedule and the seed's formula alone would barely move; the
         * typical launch when most launches did not fit. The span holds
         * any long launch whole (a rank descheduled for 21 ms), so the
         * cap below bounds the growth. */
        double by_span = p->gamma * o->span_ns / o->launches;
        double by_growth = p->gamma * old;
        double by_typical = p->gamma * o->typical_ns + st->turnaround_ns;
        st->delta_ns = by_span > by_growth ? by_span : by_growth;
        if (o->typical_ns > 0 && by_typical > st->delta_ns)
            st->delta_ns = by_typical;
        st->calm_stages = 0;
    } else {
        st->calm_stages++;
        double longest = o->longest_ns > o->typical_ns ? o->longest_ns : o->typical_ns;
        if (p->shrink_after_calm > 0 && st->calm_stages >= p->shrink_after_calm && longest > 0) {
            /* Straight to gamma times the longest valid launch (or the
             * typical one, if longer or if none was valid): the window a
             * clean warm-up would have set. One disturbed stage can blow
             * delta up a thousandfold (a scheduler time slice over a
             * microsecond operation); shrinking by gamma per stage would
             * never win that back within a run. The turnaround keeps a
             * launch that used its whole window from making the next one
             * late. */
            double floor_ns = p->gamma * longest + st->turnaround_ns;
            st->delta_ns = floor_ns < old ? floor_ns : old;
            st->calm_stages = 0;
        }
    }
    double cap = p->wide_factor * st->narrowest_ns;
    if (!p->lateness_grows && p->wide_factor > 0 && st->delta_ns > old && st->delta_ns > cap)
        st->delta_ns = cap > old ? cap : old;
    if (st->delta_ns > old)
        return 1;
    return st->delta_ns < old ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double hm_stage_typical(const double *launch_times, int k, double invalid_fraction)
{
    if (k <= 0)
        return 0;
    double *v = malloc((size_t)k * sizeof *v);
    if (v == NULL)
        return 0;
    memcpy(v, launch_times, (size_t)k * sizeof *v);
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    double keep = ceil((1 - invalid_fraction) * k - 1e-9);
    int i = keep < 1 ? 0 : keep > k ? k - 1 : (int)keep - 1;
    double t = v[i] > 0 ? v[i] : 0;
    free(v);
    return t;
}

bool hm_stop_reached(const hm_stop_rule *r, int n_total, int n_valid, double rse)
{
    if (n_total > r->max_total || n_valid > r->max_valid)
        return true;
    return n_valid >= r->min_valid && !isnan(rse) && rse <= r->rse_max;
}

size_t hm_schedule_set_aside_wide(const double *windows, bool *valid, size_t n, double factor)
{
    if (factor <= 0 || n == 0)
        return 0;
    double narrowest = windows[0];
    for (size_t i = 1; i < n; i++)
        narrowest = windows[i] < narrowest ? windows[i] : narrowest;
    size_t set_aside = 0;
    for (size_t i = 0; i < n; i++)
        if (valid[i] && windows[i] > factor * narrowest) {
            valid[i] = false;
            set_aside++;
        }
    return set_aside;
}

bool hm_clock_error_acceptable(double clock_error_ns, double mean_ns, double share,
                               double late_tolerance_ns, double *allowed_ns)
{
    double allowed = late_tolerance_ns;
    if (!isnan(mean_ns) && share * mean_ns > allowed)
        allowed = share * mean_ns;
    if (allowed_ns != NULL)
        *allowed_ns = allowed;
    /* A NaN error (not measured) is not a pass. */
    return clock_error_ns <= allowed;
}
