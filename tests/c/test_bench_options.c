/* hushmon-bench command line: defaults, lists, and every kind of bad input
 * rejected with a message (each rank parses the same argv, so this is
 * what makes every rank exit non-zero together). */
#include <string.h>

#include "bench_options.h"
#include "hm_test.h"

#define ARGS(...) (char *[]){"hushmon-bench", __VA_ARGS__, NULL}
#define NARGS(...) ((int)(sizeof((char *[]){"hushmon-bench", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(o, err, ...) hm_bench_parse(NARGS(__VA_ARGS__), ARGS(__VA_ARGS__), (o), (err))

static void test_defaults(hm_test_counts *c)
{
    hm_bench_opts o;
    hm_error err;
    char *argv[] = {"hushmon-bench", NULL};
    CHECK(c, hm_bench_parse(1, argv, &o, &err) == 0);
    CHECK(c, o.n_ops == 1 && strcmp(o.ops[0]->name, "bcast") == 0);
    CHECK(c, o.n_sizes == 11 && o.sizes[0] == 1 && o.sizes[10] == 1048576);
    CHECK(c, o.n_methods == 1 && o.methods[0] == HM_METHOD_SYNC);
    CHECK(c, strcmp(o.timer, "monotonic") == 0 && o.sync == HM_SYNC_RING);
    CHECK(c, o.sync_rounds == 100 && o.schedule.launches_per_stage == 8);
    CHECK(c, o.buffers == HM_BUFFERS_ROTATE && o.json_path == NULL);
    CHECK_NEAR(c, o.trim, 0.25, 0);
    CHECK_NEAR(c, o.ci_level, 0.95, 0);
    hm_bench_opts_free(&o);
}

static void test_lists(hm_test_counts *c)
{
    hm_bench_opts o;
    hm_error err;
    CHECK(c, PARSE(&o, &err, "--op", "bcast,iallreduce,bcast", "--sizes", "0:4K:x4,100",
                   "--method", "sync,loop_barrier", "--nprocs", "2,3", "--timer", "mpi_wtime",
                   "--sync", "tree", "--json", "-", "--per-rank", "--raw", "--max-total",
                   "20", "--gamma", "1.5", "--buffers", "reuse", "--spin-us", "50") == 0);
    CHECK(c, o.n_ops == 2 && strcmp(o.ops[1]->name, "iallreduce") == 0);
    CHECK(c, o.ops[1]->nonblocking);
    /* 0, 1, 4, 16, 64, 256, 1024, 4096, 100 */
    CHECK(c, o.n_sizes == 9 && o.sizes[0] == 0 && o.sizes[7] == 4096 && o.sizes[8] == 100);
    CHECK(c, o.n_methods == 2 && o.methods[1] == HM_METHOD_LOOP_BARRIER);
    CHECK(c, o.n_nprocs == 2 && o.nprocs[1] == 3);
    CHECK(c, o.sync == HM_SYNC_TREE && strcmp(o.timer, "mpi_wtime") == 0);
    CHECK(c, o.per_rank && o.raw && strcmp(o.json_path, "-") == 0);
    CHECK(c, o.stop.max_total == 20 && o.buffers == HM_BUFFERS_REUSE);
    CHECK(c, o.spin_ns == 50000);
    CHECK_NEAR(c, o.schedule.gamma, 1.5, 0);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--op", "all") == 0);
    CHECK(c, o.n_ops == hm_op_count());
    hm_bench_opts_free(&o);
}

/* Parses and expects failure with `needle` in the message. */
static void expect_error(hm_test_counts *c, int argc, char **argv, const char *needle)
{
    hm_bench_opts o;
    hm_error err = {{0}};
    int rc = hm_bench_parse(argc, argv, &o, &err);
    CHECK(c, rc == -1);
    if (strstr(err.msg, needle) == NULL) {
        c->failed++;
        fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, needle);
    } else {
        c->passed++;
    }
    CHECK(c, strchr(err.msg, '\n') == NULL); /* one line */
    hm_bench_opts_free(&o);
}

#define EXPECT_ERROR(c, needle, ...) expect_error(c, NARGS(__VA_ARGS__), ARGS(__VA_ARGS__), needle)

static void test_methods_and_passes(hm_test_counts *c)
{
    hm_bench_opts o;
    hm_error err;
    CHECK(c, PARSE(&o, &err, "--method", "osu,imb,sync") == 0);
    CHECK(c, o.n_methods == 3 && o.methods[0] == HM_METHOD_OSU && o.methods[1] == HM_METHOD_IMB);
    /* Without --buffers each method keeps its own policy. */
    CHECK(c, !o.buffers_given && o.passes == 1 && o.shuffle && o.budget_ns == 0);
    CHECK_NEAR(c, o.disagree_share, 0.25, 0);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--passes", "5", "--seed", "7", "--in-order", "--budget-ms", "2.5",
                   "--max-launches", "300", "--disagree-share", "0.1", "--buffers", "rotate") == 0);
    CHECK(c, o.passes == 5 && o.seed == 7 && !o.shuffle && o.max_launches == 300);
    CHECK(c, o.buffers_given && o.buffers == HM_BUFFERS_ROTATE);
    CHECK_NEAR(c, o.budget_ns, 2.5e6, 1e-6);
    CHECK_NEAR(c, o.disagree_share, 0.1, 0);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--passes", "0") != 0);
    CHECK(c, strstr(err.msg, "--passes") != NULL);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--budget-ms", "-1") != 0);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--method", "osu,mpiperf") != 0);
    CHECK(c, strstr(err.msg, "mpiperf") != NULL && strstr(err.msg, "imb") != NULL);
    hm_bench_opts_free(&o);
}

static void test_bad_input(hm_test_counts *c)
{
    EXPECT_ERROR(c, "unknown operation 'bogus'", "--op", "bogus");
    EXPECT_ERROR(c, "unknown operation", "--op", "bcast,,nope");
    EXPECT_ERROR(c, "--sizes", "--sizes", "-8");
    EXPECT_ERROR(c, "--sizes", "--sizes", "1:abc:x2");
    EXPECT_ERROR(c, "--sizes", "--sizes", "");
    EXPECT_ERROR(c, "unknown method", "--method", "fast");
    EXPECT_ERROR(c, "unknown timer", "--timer", "sundial");
    EXPECT_ERROR(c, "--sync", "--sync", "star");
    EXPECT_ERROR(c, "--nprocs", "--nprocs", "0");
    EXPECT_ERROR(c, "--root", "--root", "-1");
    EXPECT_ERROR(c, "--gamma", "--gamma", "1");
    EXPECT_ERROR(c, "--trim", "--trim", "0.5");
    EXPECT_ERROR(c, "--ci-level", "--ci-level", "95");
    EXPECT_ERROR(c, "--max-total", "--max-total", "ten");
    EXPECT_ERROR(c, "unknown option", "--frobnicate");
    EXPECT_ERROR(c, "missing value", "--op");
    EXPECT_ERROR(c, "unexpected argument", "bcast");
}

static void test_rank_checks(hm_test_counts *c)
{
    hm_bench_opts o;
    hm_error err = {{0}};
    CHECK(c, PARSE(&o, &err, "--op", "bcast,waitpatternup") == 0);
    CHECK(c, hm_bench_check_ranks(&o, 2, &err) == 0);
    CHECK(c, hm_bench_check_ranks(&o, 1, &err) == -1);
    CHECK(c, strstr(err.msg, "bcast needs at least 2 processes") != NULL);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--op", "bcast", "--nprocs", "2,8") == 0);
    CHECK(c, hm_bench_check_ranks(&o, 4, &err) == -1);
    CHECK(c, strstr(err.msg, "only 4") != NULL);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--op", "reduce", "--root", "3", "--nprocs", "2,4") == 0);
    CHECK(c, hm_bench_check_ranks(&o, 4, &err) == -1);
    CHECK(c, strstr(err.msg, "--root 3") != NULL);
    hm_bench_opts_free(&o);
    /* n * size must fit an MPI int count; sizeless ops are not limited. */
    CHECK(c, PARSE(&o, &err, "--op", "alltoall", "--sizes", "600M") == 0);
    CHECK(c, hm_bench_check_ranks(&o, 4, &err) == -1);
    CHECK(c, strstr(err.msg, "does not fit an MPI count") != NULL);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--op", "barrier", "--sizes", "600M") == 0);
    CHECK(c, hm_bench_check_ranks(&o, 4, &err) == 0);
    hm_bench_opts_free(&o);
    CHECK(c, PARSE(&o, &err, "--op", "waitpatternnull", "--nprocs", "1") == 0);
    CHECK(c, hm_bench_check_ranks(&o, 1, &err) == 0);
    hm_bench_opts_free(&o);
}

static void test_help_and_table(hm_test_counts *c)
{
    hm_bench_opts o;
    hm_error err;
    CHECK(c, PARSE(&o, &err, "--help") == 0 && o.help);
    hm_bench_opts_free(&o);
    /* The table: every MPI-2.2 collective, its nonblocking form, 3 patterns. */
    CHECK(c, hm_op_count() == 17 * 2 + 3);
    const char *names[] = {"allgather", "allgatherv", "allreduce", "alltoall", "alltoallv",
                           "alltoallw", "barrier", "bcast", "exscan", "gather", "gatherv",
                           "reduce", "reduce_scatter", "reduce_scatter_block", "scan",
                           "scatter", "scatterv"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char inb[64];
        snprintf(inb, sizeof inb, "i%s", names[i]);
        const hm_op *b = hm_op_find(names[i]), *nb = hm_op_find(inb);
        CHECK(c, b != NULL && nb != NULL);
        CHECK(c, b != NULL && !b->nonblocking && b->min_ranks == 2);
        CHECK(c, nb != NULL && nb->nonblocking);
    }
    CHECK(c, hm_op_find("barrier") != NULL && !hm_op_find("barrier")->uses_size);
    CHECK(c, hm_op_find("waitpatternup") != NULL && hm_op_find("waitpatternup")->min_ranks == 1);
    CHECK(c, hm_op_find("nonexistent") == NULL);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_defaults(&c);
    test_lists(&c);
    test_methods_and_passes(&c);
    test_bad_input(&c);
    test_rank_checks(&c);
    test_help_and_table(&c);
    return hm_test_finish("test_bench_options", &c);
}
