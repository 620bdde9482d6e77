#include "bench_schedule.h"

#include <math.h>
#include <stddef.h>

void hm_schedule_params_default(hm_schedule_params *p)
{
    p->launches_per_stage = 8;
    p->warmup_launches = 4;
    p->invalid_fraction = 0.25;
    p->gamma = 1.1;
    p->shrink_after_calm = 2;
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
                              double turnaround_ns, hm_delta_state *st)
{
    double span = warmup_span_ns > 0 ? warmup_span_ns : 0;
    st->turnaround_ns = turnaround_ns > 0 ? turnaround_ns : 0;
    st->delta_ns = p->gamma * span / p->warmup_launches + st->turnaround_ns;
    st->calm_stages = 0;
}

int hm_schedule_next_delta(const hm_schedule_params *p, const hm_stage_outcome *o,
                           hm_delta_state *st)
{
    double old = st->delta_ns;
    if (o->turnaround_ns > 0)
        st->turnaround_ns = o->turnaround_ns;
    int counted = p->lateness_grows ? o->invalid : o->invalid - o->not_window;
    if ((double)counted > p->invalid_fraction * o->launches) {
        /* The seed's rule; the gamma*delta floor matters when the stage
         * failed by late starts rather than overruns, so its span stayed
         * on schedule and the seed's formula alone would barely move. */
        double by_span = p->gamma * o->span_ns / o->launches;
        double by_growth = p->gamma * old;
        st->delta_ns = by_span > by_growth ? by_span : by_growth;
        st->calm_stages = 0;
    } else {
        st->calm_stages++;
        if (p->shrink_after_calm > 0 && st->calm_stages >= p->shrink_after_calm &&
            o->longest_ns > 0) {
            /* Straight to gamma times the longest valid launch: the window
             * a clean warm-up would have set. One disturbed stage can blow
             * delta up a thousandfold (a scheduler time slice over a
             * microsecond operation); shrinking by gamma per stage would
             * never win that back within a run. The turnaround keeps a
             * launch that used its whole window from making the next one
             * late. */
            double floor_ns = p->gamma * o->longest_ns + st->turnaround_ns;
            st->delta_ns = floor_ns < old ? floor_ns : old;
            st->calm_stages = 0;
        }
    }
    if (st->delta_ns > old)
        return 1;
    return st->delta_ns < old ? -1 : 0;
}

bool hm_stop_reached(const hm_stop_rule *r, int n_total, int n_valid, double rse)
{
    if (n_total > r->max_total || n_valid > r->max_valid)
        return true;
    return n_valid >= r->min_valid && !isnan(rse) && rse <= r->rse_max;
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
