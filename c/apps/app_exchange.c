#include "app_exchange.h"

#include "hushmon.h"

#include <stdlib.h>
#include <string.h>

typedef struct exch_params {
    const exch_pattern *pattern;
    int64_t length_bytes;
    int64_t cycles;
    int64_t rounds;        /* fixed rounds per cycle; 0 = as many as fit in comm_ms */
    double comm_ms;
    double compute_ms;
    double imbalance;      /* rank r computes compute_ms * (1 + imbalance * r / (n-1)) */
    bool corrupt;
} exch_params;

/* Who this rank talks to in every phase, computed once. */
typedef struct exch_plan {
    int n_phases;
    int *to, *n_to;       /* [phase * size + i], [phase] */
    int *from, *n_from;
    int max_from;
} exch_plan;

static void plan_free(exch_plan *plan)
{
    free(plan->to);
    free(plan->n_to);
    free(plan->from);
    free(plan->n_from);
    *plan = (exch_plan){0};
}

static int plan_build(const exch_pattern *pat, const app_context *ctx, exch_plan *plan,
                      hm_error *err)
{
    size_t n = (size_t)pat->n_phases, size = (size_t)ctx->size;
    *plan = (exch_plan){.n_phases = pat->n_phases};
    plan->to = calloc(n * size, sizeof(int));
    plan->from = calloc(n * size, sizeof(int));
    plan->n_to = calloc(n, sizeof(int));
    plan->n_from = calloc(n, sizeof(int));
    if (!plan->to || !plan->from || !plan->n_to || !plan->n_from) {
        plan_free(plan);
        return hm_error_set(err, "out of memory for the communication plan");
    }
    for (int ph = 0; ph < pat->n_phases; ph++) {
        pat->peers(ph, ctx->rank, ctx->size, plan->to + (size_t)ph * size, &plan->n_to[ph],
                   plan->from + (size_t)ph * size, &plan->n_from[ph]);
        if (plan->n_from[ph] > plan->max_from)
            plan->max_from = plan->n_from[ph];
    }
    return 0;
}

/* ---- message contents --------------------------------------------------- */

enum { STAMP_BYTES = 8 };

static uint8_t pattern_byte(int src, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u + (uint32_t)src * 40503u;
    return (uint8_t)(x >> 24);
}

static uint64_t stamp_value(int src, uint64_t seq)
{
    return (seq << 20) ^ (uint64_t)(uint32_t)src ^ 0xA5A5000000000000ull;
}

/* The stamp sits in the first 8 bytes and, for messages of 16 bytes or
 * more, also in the last 8 (a truncated message fails the check). */
static void put_stamp(uint8_t *buf, size_t len, uint64_t stamp)
{
    size_t head = len < STAMP_BYTES ? len : STAMP_BYTES;
    memcpy(buf, &stamp, head);
    if (len >= 2 * STAMP_BYTES)
        memcpy(buf + len - STAMP_BYTES, &stamp, STAMP_BYTES);
}

static void fill_pattern(uint8_t *buf, size_t len, int src)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = pattern_byte(src, i);
}

static bool message_ok(const uint8_t *buf, size_t len, int src, uint64_t seq, bool full)
{
    uint8_t want[STAMP_BYTES];
    uint64_t stamp = stamp_value(src, seq);
    memcpy(want, &stamp, sizeof want);
    size_t head = len < STAMP_BYTES ? len : STAMP_BYTES;
    if (memcmp(buf, want, head) != 0)
        return false;
    if (len >= 2 * STAMP_BYTES && memcmp(buf + len - STAMP_BYTES, want, STAMP_BYTES) != 0)
        return false;
    if (full) {
        size_t end = len >= 2 * STAMP_BYTES ? len - STAMP_BYTES : len;
        for (size_t i = head; i < end; i++)
            if (buf[i] != pattern_byte(src, i))
                return false;
    }
    return true;
}

/* ---- the run ------------------------------------------------------------ */

static int exch_validate(const app_context *ctx, const void *data, hm_error *err)
{
    const exch_params *p = data;
    (void)ctx;
    double messages = (double)p->cycles * (double)p->rounds;
    if (messages > 1e12)
        return hm_error_set(err, "--cycles x --rounds = %.3g is too many", messages);
    if (p->rounds == 0 && p->comm_ms <= 0)
        return hm_error_set(err, "--rounds 0 (time-bounded) needs --comm-ms above 0");
    if (p->imbalance > 0 && p->compute_ms <= 0)
        return hm_error_set(err, "--imbalance needs a compute phase (--compute-ms above 0)");
    return 0;
}

/* What one rank needs during the run. */
typedef struct exch_state {
    const exch_params *p;
    const app_context *ctx;
    exch_plan plan;
    uint8_t *send_buf, *recv_buf;
    MPI_Request *reqs;
    /* Waitall gets a real array: MPICH declares the parameter as an array,
     * and GCC >= 11 rejects MPI_STATUSES_IGNORE ((MPI_Status *)1) for it. */
    MPI_Status *statuses;
    double messages_sent;
} exch_state;

/* One round: every phase's receives and sends, then the checks. `full`
 * checks whole contents, not only the stamps. */
static void exch_round(exch_state *st, uint64_t seq, bool full, bool corrupt, app_result *result)
{
    const exch_params *p = st->p;
    const app_context *ctx = st->ctx;
    const size_t len = (size_t)p->length_bytes, size = (size_t)ctx->size;
    put_stamp(st->send_buf, len, stamp_value(ctx->rank, seq));
    if (corrupt)
        st->send_buf[len / 2] ^= 0x40;   /* the receivers' full check must see it */
    for (int ph = 0; ph < st->plan.n_phases; ph++) {
        const int *to = st->plan.to + (size_t)ph * size;
        const int *from = st->plan.from + (size_t)ph * size;
        int nreq = 0, mpi_rc = MPI_SUCCESS;
        for (int i = 0; i < st->plan.n_from[ph]; i++)
            mpi_rc |= MPI_Irecv(st->recv_buf + (size_t)i * len, (int)len, MPI_BYTE, from[i], ph,
                                ctx->comm, &st->reqs[nreq++]);
        for (int i = 0; i < st->plan.n_to[ph]; i++)
            mpi_rc |= MPI_Isend(st->send_buf, (int)len, MPI_BYTE, to[i], ph, ctx->comm,
                                &st->reqs[nreq++]);
        mpi_rc |= MPI_Waitall(nreq, st->reqs, st->statuses);
        if (mpi_rc != MPI_SUCCESS) {
            hm_error err;
            hm_error_set(&err, "message exchange failed in round %llu", (unsigned long long)seq);
            app_abort(ctx, p->pattern->name, &err);
        }
        st->messages_sent += st->plan.n_to[ph];
        for (int i = 0; i < st->plan.n_from[ph]; i++)
            if (!message_ok(st->recv_buf + (size_t)i * len, len, from[i], seq, full))
                result->failures++;
    }
    if (corrupt)
        st->send_buf[len / 2] ^= 0x40;
}

/* Whether the time-bounded message phase goes on: rank 0's clock decides
 * for all (ranks must run the same rounds). Asked every round: a 4-byte
 * broadcast costs microseconds, while on a loaded machine a single round
 * can take a tenth of a second, so asking less often overshoots the phase. */
static bool exch_go_on(const exch_state *st, int64_t round, int64_t phase_start_ns)
{
    const exch_params *p = st->p;
    if (p->rounds > 0)
        return round < p->rounds;
    int go = (double)(app_now_ns() - phase_start_ns) < p->comm_ms * 1e6;
    if (MPI_Bcast(&go, 1, MPI_INT, 0, st->ctx->comm) != MPI_SUCCESS) {
        hm_error err;
        hm_error_set(&err, "MPI_Bcast of the phase end failed");
        app_abort(st->ctx, p->pattern->name, &err);
    }
    return go != 0;
}

static int exch_run(const app_context *ctx, const void *data, app_result *result, hm_error *err)
{
    const exch_params *p = data;
    const size_t len = (size_t)p->length_bytes;
    exch_state st = {.p = p, .ctx = ctx};
    int rc = plan_build(p->pattern, ctx, &st.plan, err);
    if (rc == 0) {
        st.send_buf = malloc(len);
        st.recv_buf = malloc(len * (size_t)(st.plan.max_from ? st.plan.max_from : 1));
        st.reqs = malloc(2 * (size_t)ctx->size * sizeof *st.reqs);
        st.statuses = malloc(2 * (size_t)ctx->size * sizeof *st.statuses);
        if (!st.send_buf || !st.recv_buf || !st.reqs || !st.statuses)
            rc = hm_error_set(err, "cannot allocate %zu-byte message buffers", len);
    }
    /* Every rank must know before the first message that all can go on. */
    if (!app_all_ok(ctx, rc == 0)) {
        if (rc == 0)
            rc = hm_error_set(err, "another rank could not start");
        goto out;
    }
    fill_pattern(st.send_buf, len, ctx->rank);

    double flops = 0.0;
    int64_t compute_ns = 0;
    /* --imbalance: later ranks compute longer; the others wait for them in
     * the next cycle's first round, as ranks wait for an overloaded one. */
    const double my_compute_ms = p->compute_ms * app_rank_load(ctx, p->imbalance);
    uint64_t seq = 0;
    for (int64_t cycle = 0; cycle < p->cycles; cycle++) {
        const int64_t t0 = app_now_ns();
        /* The first round of every cycle is checked in full; --corrupt
         * damages rank 0's message in the last cycle's first round. */
        for (int64_t round = 0; exch_go_on(&st, round, t0); round++, seq++) {
            const bool first = round == 0;
            const bool corrupt = p->corrupt && first && ctx->rank == 0 && cycle + 1 == p->cycles;
            exch_round(&st, seq, first, corrupt, result);
        }
        const int64_t t1 = app_now_ns();
        result->busy_ns += t1 - t0;
        int64_t t2 = t1;
        if (p->compute_ms > 0) {
            flops += app_compute_ms(my_compute_ms);
            t2 = app_now_ns();
            compute_ns += t2 - t1;
        }
        /* The program's own timeline beside the system sensors (libhushmon:
         * a no-op without an agent). */
        hm_metric("comm_time_s", (double)(t1 - t0) * 1e-9);
        hm_metric("compute_time_s", (double)(t2 - t1) * 1e-9);
        hm_metric("cycle_time_s", (double)(t2 - t0) * 1e-9);
        hm_flush(); /* cycles last seconds: send now, not with the next one */
    }
    result->bytes_moved = st.messages_sent * (double)len;
    app_result_extra(result, "messages", st.messages_sent, APP_SUM);
    app_result_extra(result, "rounds", (double)seq, APP_MAX);
    app_result_extra(result, "message_bytes", (double)len, APP_MAX);
    app_result_extra(result, "compute_s_max", (double)compute_ns * 1e-9, APP_MAX);
    app_result_extra(result, "compute_s_min", (double)compute_ns * 1e-9, APP_MIN);
    app_result_extra(result, "compute_flops", flops, APP_SUM);
out:
    free(st.statuses);
    free(st.reqs);
    free(st.recv_buf);
    free(st.send_buf);
    plan_free(&st.plan);
    return rc;
}

int exch_main(const exch_pattern *pattern, int argc, char **argv)
{
    /* Defaults: 1,000,000-byte messages as in the seed's figures; phases of
     * 3 s, so 1 Hz sampling has at least two whole periods inside every
     * phase (a period straddling two phases averages them); 4 cycles =
     * about 24 s however fast the transport. */
    exch_params params = {
        .pattern = pattern,
        .length_bytes = 1000000,
        .cycles = 4,
        .rounds = 0,
        .comm_ms = 3000.0,
        .compute_ms = 3000.0,
    };
    app_option options[] = {
        APP_SIZE("length", &params.length_bytes, 1, 1 << 30, "BYTES", "message length"),
        APP_INT("cycles", &params.cycles, 1, INT64_C(1) << 40, "N",
                "cycles (each: message rounds, then a compute phase)"),
        APP_DOUBLE("comm-ms", &params.comm_ms, 0.0, 3.6e6, "MS",
                   "message rounds per cycle go on this long (rank 0's clock)"),
        APP_INT("rounds", &params.rounds, 0, INT64_C(1) << 40, "N",
                "fixed message rounds per cycle instead (0 = use --comm-ms)"),
        APP_DOUBLE("compute-ms", &params.compute_ms, 0.0, 3.6e6, "MS",
                   "compute phase after each cycle's messages (0 = none)"),
        APP_DOUBLE("imbalance", &params.imbalance, 0.0, 100.0, "F",
                   "load imbalance: rank r computes --compute-ms x (1 + F r/(n-1)), "
                   "the last rank 1+F times rank 0's (0 = balanced)"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) rank 0 damages one message, to show the check catches it"),
    };
    app_program program = {
        .name = pattern->name,
        .summary = pattern->summary,
        .details = pattern->details,
        .min_ranks = pattern->min_ranks,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = exch_validate,
        .run = exch_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
