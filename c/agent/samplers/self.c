/* self: the agent's own cost, every period (hushmon_agent measurement):
 * CPU time of the previous complete cycle, lateness of this wake-up,
 * resident size (from /proc/self/statm, always the real one, not under
 * --root), samples dropped so far, the control socket's refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "procfile.h"
#include "sampler.h"

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
    hm_lp_field_f64(out, "cpu_us", ctx->self->cpu_us);
    hm_lp_field_f64(out, "jitter_us", ctx->self->jitter_us);
    hm_lp_field_i64(out, "rss_bytes", (int64_t)ctx->self->rss_bytes);
    hm_lp_field_i64(out, "samples_dropped", (int64_t)ctx->self->samples_dropped);
    hm_lp_field_i64(out, "period_ms", ctx->self->period_ms);
    /* Refusals on the control socket by reason (docs/security.md). */
    for (int r = 0; r < HM_CONTROL_REFUSALS; r++) {
        char field[48];
        snprintf(field, sizeof field, "control_%s", hm_control_refusal_names[r]);
        hm_lp_field_i64(out, field, (int64_t)ctx->self->control_refused[r]);
    }
    hm_lp_end(out);
    return 0;
}

const hm_sampler_ops hm_sampler_self = {
    .name = "self",
    .reads = "/proc/self/statm and the loop's own clocks",
    .measurement = "hushmon_agent",
    .fields = "cpu_us (previous cycle) jitter_us rss_bytes samples_dropped period_ms "
              "control_unauthorized control_busy control_uid_cap control_idle control_long_line",
    .default_on = true,
    .node_local = true,
    .open = self_open,
    .sample = self_sample,
    .close = self_close,
};
