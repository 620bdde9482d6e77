/* Wait patterns: collectives whose true time is known in advance, so they
 * check the timer, the clock sync and the launch schedule (MPIPerf 6.1,
 * after SKaMPI). If every rank starts at the same global instant:
 *   waitpatternup:   rank i spins (i+1) us  -> the launch takes n us
 *   waitpatterndown: rank i spins (n-i) us  -> the launch takes n us
 *   waitpatternnull: returns at once        -> the launch takes 0 s
 * They spin on the measurement timer (no sleep: waking up costs more than
 * the microseconds being measured) and send no messages. */
#include "op.h"

static int init(hm_op_ctx *c, hm_error *err) { return hm_op_ctx_buffers(c, 0, 0, err); }

static void spin_ns(const hm_timer *t, int64_t wait_ns)
{
    int64_t end = hm_timer_now_ns(t) + wait_ns;
    while (hm_timer_now_ns(t) < end) {
    }
}

static int run_up(hm_op_ctx *c, hm_error *err)
{
    (void)err;
    spin_ns(c->timer, (int64_t)(c->rank + 1) * 1000);
    return 0;
}

static int run_down(hm_op_ctx *c, hm_error *err)
{
    (void)err;
    spin_ns(c->timer, (int64_t)(c->nprocs - c->rank) * 1000);
    return 0;
}

static int run_null(hm_op_ctx *c, hm_error *err)
{
    (void)c;
    (void)err;
    return 0;
}

const hm_op hm_op_waitpatternup = {
    .name = "waitpatternup",
    .description = "rank i waits (i+1) us; true time n us (checks timer and schedule)",
    .min_ranks = 1,
    .uses_size = false,
    .init = init,
    .run = run_up,
};

const hm_op hm_op_waitpatterndown = {
    .name = "waitpatterndown",
    .description = "rank i waits (n-i) us; true time n us",
    .min_ranks = 1,
    .uses_size = false,
    .init = init,
    .run = run_down,
};

const hm_op hm_op_waitpatternnull = {
    .name = "waitpatternnull",
    .description = "returns at once; true time 0 s (checks the timer)",
    .min_ranks = 1,
    .uses_size = false,
    .init = init,
    .run = run_null,
};
