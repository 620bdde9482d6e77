/* self: the agent's own cost, every period (hushmon_agent measurement):
 * CPU time of the previous complete cycle, lateness of this wake-up,
 * resident size (from /proc/self/statm, always the real one, not under
 * --root), samples dropped so far, the control socket's refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "procfile.h"
#include "sampler.h"

#define SELF_METRICS(X, P)                                                                    \
    X(P, cpu_us, "us", "the agent's CPU time in its previous complete cycle")                 \
    X(P, jitter_us, "us", "this wake-up minus its scheduled instant")                         \
    X(P, rss_bytes, "B", "resident size")                                                     \
    X(P, samples_dropped, "", "lines lost and periods skipped since start")                   \
    X(P, period_ms, "ms", "the period now")                                                   \
    X(P, control_unauthorized, "", "control requests refused: not authorized")                \
    X(P, control_busy, "", "control connections refused: all slots taken")                   \
    X(P, control_uid_cap, "", "refused: the uid holds control.clients_per_uid")               \
    X(P, control_idle, "", "dropped: no whole line within control.client_idle_ms")            \
    X(P, control_long_line, "", "dropped: a line too long")
HM_METRIC_ENUM(SELF, SELF_METRICS);
_Static_assert(SELF_COUNT == 5 + HM_CONTROL_REFUSALS, "one control_* field per refusal reason");

typedef struct self_state {
    hm_procfile statm;
    long page_bytes;
} self_state;

static void self_close(void *state)
{
    self_state *s = state;
    if (s == NULL)
        return;
    hm_procfile_close(&s->statm);
    free(s);
}

static int self_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    (void)env;
    self_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    if (hm_procfile_open_path(&s->statm, "/proc/self/statm", err) < 0) {
        free(s);
        return -1;
    }
    s->page_bytes = sysconf(_SC_PAGESIZE);
    *state = s;
    return 0;
}

static int self_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    self_state *s = state;
    if (hm_procfile_read(&s->statm, err) < 0)
        return -1;
    hm_scan c = hm_scan_of(s->statm.buf, s->statm.len);
    uint64_t size_pages, resident_pages;
    if (!hm_scan_u64(&c, &size_pages) || !hm_scan_u64(&c, &resident_pages))
        return hm_error_set(err, "/proc/self/statm: malformed");
    ctx->self->rss_bytes = resident_pages * (uint64_t)s->page_bytes;
    hm_lp_begin(out, "hushmon_agent");
    hm_lp_field_f64(out, HM_M(SELF, cpu_us), ctx->self->cpu_us);
    hm_lp_field_f64(out, HM_M(SELF, jitter_us), ctx->self->jitter_us);
    hm_lp_field_i64(out, HM_M(SELF, rss_bytes), (int64_t)ctx->self->rss_bytes);
    hm_lp_field_i64(out, HM_M(SELF, samples_dropped), (int64_t)ctx->self->samples_dropped);
    hm_lp_field_i64(out, HM_M(SELF, period_ms), ctx->self->period_ms);
    /* Refusals on the control socket by reason (docs/security.md), in
     * the order of control.h's reasons. */
    const char *refused[HM_CONTROL_REFUSALS] = {
        [HM_CONTROL_UNAUTHORIZED] = HM_M(SELF, control_unauthorized),
        [HM_CONTROL_BUSY] = HM_M(SELF, control_busy),
        [HM_CONTROL_UID_CAP] = HM_M(SELF, control_uid_cap),
        [HM_CONTROL_IDLE] = HM_M(SELF, control_idle),
        [HM_CONTROL_LONG_LINE] = HM_M(SELF, control_long_line),
    };
    for (int r = 0; r < HM_CONTROL_REFUSALS; r++)
        hm_lp_field_i64(out, refused[r], (int64_t)ctx->self->control_refused[r]);
    hm_lp_end(out);
    return 0;
}

const hm_sampler_ops hm_sampler_self = {
    .name = "self",
    .reads = "/proc/self/statm and the loop's own clocks",
    .measurement = "hushmon_agent",
    .fields = HM_FIELDS(SELF_METRICS),
    .default_on = true,
    .node_local = true,
    .open = self_open,
    .sample = self_sample,
    .close = self_close,
};
