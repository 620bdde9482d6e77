#include "hm_clock_sync.h"

#include <stdlib.h>
#include <time.h>

/* Tags of the ping-pong; sync runs on a duplicate of the caller's
 * communicator, so they cannot collide with the caller's messages. */
enum { TAG_PING = 7301, TAG_PONG = 7302 };

#define MPI_TRY(call, err, what)                                                   \
    do {                                                                           \
        int mpi_rc_ = (call);                                                      \
        if (mpi_rc_ != MPI_SUCCESS)                                                \
            return hm_error_set(err, "%s failed (MPI error %d)", what, mpi_rc_);   \
    } while (0)

int64_t hm_clock_spin_until_ns(const hm_clock *c, int64_t deadline_ns)
{
    int64_t now;
    do {
        now = hm_clock_now_ns(c);
    } while (now < deadline_ns);
    return now;
}

int64_t hm_clock_wait_until_ns(const hm_clock *c, int64_t deadline_ns, int64_t spin_ns)
{
    /* Compare before subtracting: spin_ns may be INT64_MAX (never sleep). */
    int64_t remaining_ns = deadline_ns - hm_clock_now_ns(c);
    if (remaining_ns > spin_ns) {
        int64_t sleep_ns = remaining_ns - spin_ns;
        struct timespec ts = {.tv_sec = sleep_ns / 1000000000, .tv_nsec = sleep_ns % 1000000000};
        /* An early wake-up (signal) is harmless: the spin covers the rest. */
        (void)nanosleep(&ts, NULL);
    }
    return hm_clock_spin_until_ns(c, deadline_ns);
}

void hm_clock_sync_opts_default(hm_clock_sync_opts *o)
{
    o->algo = HM_SYNC_RING;
    o->rounds_without_improvement = 100;
    o->max_rounds = 10000;
    o->ping_shared_clock = false;
    o->simulated_skew_ns = 0;
    o->simulated_drift_ppm = 0.0;
}

/* Client side of one pair: pings `server` until the tracker is satisfied,
 * then tells it to stop. The offset is to the clock the server reads;
 * rtt_ns (may be NULL) gets the round trip of the exchange it came from. */
static int pair_client(MPI_Comm comm, int server, const hm_clock *c, int stop_after,
                       int max_rounds, int64_t *offset_ns, int64_t *rtt_ns, hm_error *err)
{
    hm_rtt_tracker tr;
    hm_rtt_tracker_init(&tr, stop_after, max_rounds);
    int more = 1;
    while (more) {
        int64_t remote_ns;
        int64_t t_send = hm_clock_local_ns(c);
        MPI_TRY(MPI_Send(&more, 1, MPI_INT, server, TAG_PING, comm), err, "clock ping");
        MPI_TRY(MPI_Recv(&remote_ns, 1, MPI_INT64_T, server, TAG_PONG, comm, MPI_STATUS_IGNORE),
                err, "clock pong");
        int64_t t_recv = hm_clock_local_ns(c);
        if (hm_rtt_tracker_add(&tr, t_send, remote_ns, t_recv))
            more = 0;
    }
    MPI_TRY(MPI_Send(&more, 1, MPI_INT, server, TAG_PING, comm), err, "clock ping (stop)");
    *offset_ns = tr.best_offset_ns;
    if (rtt_ns != NULL)
        *rtt_ns = tr.best_rtt_ns;
    return 0;
}

/* Server side: answers each ping with its clock (local + server_offset_ns)
 * until the client says stop. */
static int pair_server(MPI_Comm comm, int client, const hm_clock *c, int64_t server_offset_ns,
                       hm_error *err)
{
    for (;;) {
        int more;
        MPI_TRY(MPI_Recv(&more, 1, MPI_INT, client, TAG_PING, comm, MPI_STATUS_IGNORE), err,
                "clock ping");
        if (!more)
            return 0;
        int64_t now = hm_clock_local_ns(c) + server_offset_ns;
        MPI_TRY(MPI_Send(&now, 1, MPI_INT64_T, client, TAG_PONG, comm), err, "clock pong");
    }
}

static int sync_linear(MPI_Comm comm, const hm_clock *c, const hm_clock_sync_opts *o,
                       int64_t *offset_ns, hm_error *err)
{
    int rank, n;
    MPI_TRY(MPI_Comm_rank(comm, &rank), err, "MPI_Comm_rank");
    MPI_TRY(MPI_Comm_size(comm, &n), err, "MPI_Comm_size");
    *offset_ns = 0;
    if (rank == 0) {
        for (int i = 1; i < n; i++)
            if (pair_server(comm, i, c, 0, err) != 0)
                return -1;
        return 0;
    }
    return pair_client(comm, 0, c, o->rounds_without_improvement, o->max_rounds, offset_ns,
                       NULL, err);
}

/* Ring: rank i measures its offset to i-1 (two phases so that every rank
 * plays one role at a time), rank 0 gathers them, sums prefixes
 * (o_i = o_{1,0} + ... + o_{i,i-1}) and scatters the results. */
static int sync_ring(MPI_Comm comm, const hm_clock *c, const hm_clock_sync_opts *o,
                     int64_t *offset_ns, hm_error *err)
{
    int rank, n;
    MPI_TRY(MPI_Comm_rank(comm, &rank), err, "MPI_Comm_rank");
    MPI_TRY(MPI_Comm_size(comm, &n), err, "MPI_Comm_size");
    int64_t to_left = 0;
    for (int phase = 0; phase < 2; phase++) {
        /* phase 0: odd ranks are clients; phase 1: even ranks > 0 are. */
        bool client = rank > 0 && (rank % 2 == 1) == (phase == 0);
        bool server = rank + 1 < n && ((rank + 1) % 2 == 1) == (phase == 0);
        if (client && pair_client(comm, rank - 1, c, o->rounds_without_improvement,
                                  o->max_rounds, &to_left, NULL, err) != 0)
            return -1;
        if (server && pair_server(comm, rank + 1, c, 0, err) != 0)
            return -1;
    }
    int64_t *all = NULL;
    if (rank == 0) {
        all = malloc(sizeof *all * (size_t)n);
        if (all == NULL)
            return hm_error_set(err, "out of memory for %d clock offsets", n);
    }
    int rc = MPI_Gather(&to_left, 1, MPI_INT64_T, all, 1, MPI_INT64_T, 0, comm);
    if (rc == MPI_SUCCESS && rank == 0) {
        all[0] = 0;
        for (int i = 1; i < n; i++)
            all[i] += all[i - 1];
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Scatter(all, 1, MPI_INT64_T, offset_ns, 1, MPI_INT64_T, 0, comm);
    free(all);
    if (rc != MPI_SUCCESS)
        return hm_error_set(err, "gathering ring clock offsets failed (MPI error %d)", rc);
    return 0;
}

/* Binomial tree: in the round for step L (from the top power of two down
 * to 1) every rank r with lowbit(r) == L syncs directly to the global clock
 * of its parent r - L, which was synced in an earlier round. ceil(log2 n)
 * rounds, all pairs of a round in parallel. */
static int sync_tree(MPI_Comm comm, const hm_clock *c, const hm_clock_sync_opts *o,
                     int64_t *offset_ns, hm_error *err)
{
    int rank, n;
    MPI_TRY(MPI_Comm_rank(comm, &rank), err, "MPI_Comm_rank");
    MPI_TRY(MPI_Comm_size(comm, &n), err, "MPI_Comm_size");
    *offset_ns = 0;
    if (n < 2)
        return 0;
    for (int step = hm_clock_tree_top(n); step >= 1; step /= 2) {
        if (rank > 0 && hm_clock_tree_lowbit(rank) == step) {
            if (pair_client(comm, rank - step, c, o->rounds_without_improvement,
                            o->max_rounds, offset_ns, NULL, err) != 0)
                return -1;
        } else if ((rank == 0 || hm_clock_tree_lowbit(rank) > step) && rank + step < n) {
            if (pair_server(comm, rank + step, c, *offset_ns, err) != 0)
                return -1;
        }
    }
    return 0;
}

static int sync_algo(MPI_Comm comm, const hm_clock *c, const hm_clock_sync_opts *o,
                     int64_t *offset_ns, hm_error *err)
{
    switch (o->algo) {
    case HM_SYNC_LINEAR:
        return sync_linear(comm, c, o, offset_ns, err);
    case HM_SYNC_RING:
        return sync_ring(comm, c, o, offset_ns, err);
    case HM_SYNC_TREE:
        return sync_tree(comm, c, o, offset_ns, err);
    }
    return hm_error_set(err, "clock sync algorithm %d unknown", (int)o->algo);
}

/* Runs the algorithm either on all of `work` or, when ranks of a node share
 * a system-wide clock, on one leader per node and copies the leader's
 * offset to the rest of the node. */
static int sync_on(MPI_Comm work, const hm_clock *c, const hm_clock_sync_opts *o,
                   int64_t *offset_ns, hm_clock_sync_info *info, hm_error *err)
{
    int rank;
    MPI_TRY(MPI_Comm_rank(work, &rank), err, "MPI_Comm_rank");
    MPI_Comm node;
    MPI_TRY(MPI_Comm_split_type(work, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), err,
            "MPI_Comm_split_type(SHARED)");
    int node_rank;
    int rc = MPI_Comm_rank(node, &node_rank);
    int is_leader = node_rank == 0;
    int nodes = 0;
    if (rc == MPI_SUCCESS)
        rc = MPI_Allreduce(&is_leader, &nodes, 1, MPI_INT, MPI_SUM, work);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&node);
        return hm_error_set(err, "counting nodes failed (MPI error %d)", rc);
    }
    info->nodes = nodes;
    /* A simulated skew makes every rank's clock its own. */
    bool shared = c->timer->system_wide && o->simulated_skew_ns == 0;
    if (!shared || o->ping_shared_clock) {
        MPI_Comm_free(&node);
        MPI_TRY(MPI_Comm_size(work, &info->synced_ranks), err, "MPI_Comm_size");
        return sync_algo(work, c, o, offset_ns, err);
    }
    /* Leaders are ordered by rank in `work`, so rank 0 leads its node and is
     * rank 0 among the leaders: the global clock stays rank 0's. */
    MPI_Comm leaders;
    rc = MPI_Comm_split(work, is_leader ? 0 : MPI_UNDEFINED, rank, &leaders);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&node);
        return hm_error_set(err, "splitting node leaders failed (MPI error %d)", rc);
    }
    int status = 0;
    *offset_ns = 0;
    if (is_leader) {
        status = sync_algo(leaders, c, o, offset_ns, err);
        MPI_Comm_free(&leaders);
    }
    /* Agree on failure before the next collective, so nobody waits forever. */
    int worst = status;
    rc = MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MIN, work);
    if (rc == MPI_SUCCESS && worst == 0)
        rc = MPI_Bcast(offset_ns, 1, MPI_INT64_T, 0, node);
    MPI_Comm_free(&node);
    if (status != 0)
        return -1;
    if (rc != MPI_SUCCESS || worst != 0)
        return hm_error_set(err, "clock sync failed on another rank (MPI error %d)", rc);
    info->synced_ranks = nodes;
    return 0;
}

int hm_clock_sync(MPI_Comm comm, const hm_timer *timer, const hm_clock_sync_opts *opts,
                  hm_clock *clock, hm_clock_sync_info *info, hm_error *err)
{
    hm_clock_sync_info local_info = {0, 0, 0.0};
    clock->timer = timer;
    clock->offset_ns = 0;
    clock->skew_ns = 0;
    clock->drift = 0.0;
    clock->drift_origin_ns = hm_timer_now_ns(timer);
    double t0 = MPI_Wtime();
    MPI_Comm work;
    MPI_TRY(MPI_Comm_dup(comm, &work), err, "MPI_Comm_dup");
    int rank = 0;
    int rc = MPI_Comm_rank(work, &rank);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&work);
        return hm_error_set(err, "MPI_Comm_rank failed (MPI error %d)", rc);
    }
    clock->skew_ns = (int64_t)rank * opts->simulated_skew_ns;
    clock->drift = (double)rank * opts->simulated_drift_ppm * 1e-6;
    int64_t offset = 0;
    rc = sync_on(work, clock, opts, &offset, &local_info, err);
    MPI_Comm_free(&work);
    if (rc != 0)
        return hm_error_wrap(err, "clock synchronization (%s)", hm_sync_algo_names[opts->algo]);
    clock->offset_ns = offset;
    local_info.elapsed_s = MPI_Wtime() - t0;
    if (info != NULL)
        *info = local_info;
    return 0;
}

int hm_clock_residual(MPI_Comm comm, const hm_clock *clock, int rounds_without_improvement,
                      hm_clock_residual_info *out, hm_error *err)
{
    MPI_Comm work;
    MPI_TRY(MPI_Comm_dup(comm, &work), err, "MPI_Comm_dup");
    int rank, n;
    int rc = MPI_Comm_rank(work, &rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(work, &n);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&work);
        return hm_error_set(err, "residual clock offset: MPI error %d", rc);
    }
    /* Rank 0 answers with its global clock; each other rank measures the
     * offset of its local clock to it afresh and compares it with the
     * offset it has been using. Every rank, not only node leaders: ranks
     * that sync took to share their leader's clock are checked here. */
    int64_t residual = 0, rtt = 0;
    int status = 0;
    if (rank == 0) {
        for (int i = 1; i < n && status == 0; i++)
            status = pair_server(work, i, clock, clock->offset_ns, err);
    } else {
        int64_t to_global = 0;
        status = pair_client(work, 0, clock, rounds_without_improvement, 10000, &to_global,
                             &rtt, err);
        /* to_global is the offset of our local clock to rank 0's global clock;
         * what remains after our own correction is the residual. */
        residual = to_global - clock->offset_ns;
    }
    int worst_status = 0;
    rc = MPI_Allreduce(&status, &worst_status, 1, MPI_INT, MPI_MIN, work);
    /* Rank 0's reading fell between our send and our receive, so the true
     * residual lies within half the round trip of the estimate (rank 0's own
     * is exactly 0). The smallest spread those intervals allow is what the
     * check proves; the estimate alone, on a busy node, can be microseconds
     * off a clock that is exactly shared. */
    int64_t half = (rtt + 1) / 2;
    int64_t lo = residual - half, hi = residual + half;
    /* One reduction for all: MAX of -x is -(MIN of x). */
    int64_t mine[5] = {residual < 0 ? -residual : residual, residual, -residual, lo, -hi};
    int64_t worst[5] = {0, 0, 0, 0, 0};
    if (rc == MPI_SUCCESS && worst_status == 0)
        rc = MPI_Allreduce(mine, worst, 5, MPI_INT64_T, MPI_MAX, work);
    MPI_Comm_free(&work);
    if (status != 0)
        return hm_error_wrap(err, "residual clock offset");
    if (rc != MPI_SUCCESS || worst_status != 0)
        return hm_error_set(err, "residual clock offset failed on another rank (MPI error %d)",
                            rc);
    out->own_ns = residual;
    out->max_abs_ns = worst[0];
    out->spread_ns = worst[1] + worst[2];
    /* Rank 0's [0, 0] takes part: the largest low end is >= 0, the smallest
     * high end <= 0. */
    out->proven_spread_ns = worst[3] + worst[4] > 0 ? worst[3] + worst[4] : 0;
    return 0;
}

int hm_clock_bcast_bound_ns(MPI_Comm comm, const hm_clock *clock, int repeats, int64_t *bound_ns,
                            hm_error *err)
{
    int64_t worst = 0;
    for (int i = 0; i < repeats; i++) {
        MPI_TRY(MPI_Barrier(comm), err, "barrier before t_bcast probe");
        /* 8 bytes, as the stage start time that the bound is for. */
        int64_t sent_ns = hm_clock_now_ns(clock);
        MPI_TRY(MPI_Bcast(&sent_ns, 1, MPI_INT64_T, 0, comm), err, "t_bcast probe broadcast");
        int64_t delay = hm_clock_now_ns(clock) - sent_ns;
        if (delay > worst)
            worst = delay;
    }
    int64_t all = 0;
    MPI_TRY(MPI_Allreduce(&worst, &all, 1, MPI_INT64_T, MPI_MAX, comm), err, "t_bcast reduce");
    *bound_ns = all;
    return 0;
}
