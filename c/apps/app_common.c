#include "app_common.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hm_json.h"
#include "hm_mpi_launch.h"
#include "hm_parse.h"
#include "hm_timer.h"

/* Options every program has besides its own table. */
typedef struct app_common_args {
    bool help;
    const char *json_path;   /* NULL: no JSON summary */
} app_common_args;

int64_t app_now_ns(void)
{
    return hm_monotonic_ns();
}

void app_result_extra(app_result *r, const char *key, double value, int reduce)
{
    if (r->n_extra >= APP_RESULT_MAX_EXTRA)
        return;   /* a programming error caught by the tests' JSON checks */
    r->extra[r->n_extra].key = key;
    r->extra[r->n_extra].value = value;
    r->extra[r->n_extra].reduce = reduce;
    r->n_extra++;
}

bool app_all_ok(const app_context *ctx, bool ok)
{
    int mine = ok ? 1 : 0, all = 0;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS)
        MPI_Abort(ctx->comm, APP_EXIT_FAILED);
    return all == 1;
}

_Noreturn void app_abort(const app_context *ctx, const char *program, const hm_error *err)
{
    fprintf(stderr, "%s: rank %d: %s\n", program, ctx->rank, err->msg);
    fflush(stderr);
    MPI_Abort(ctx->comm, APP_EXIT_FAILED);
    abort();   /* MPI_Abort does not return; this keeps _Noreturn honest */
}

/* A sum kept in a volatile so the compiler cannot drop the work. */
static volatile double compute_sink;

double app_compute_ms(double ms)
{
    /* A small array that stays in L1: the phase loads the FPU, not memory,
     * so it reads as "user CPU, no traffic" in the sensors. */
    enum { N = 512, CHECK_EVERY = 64 };
    double x[N];
    for (int i = 0; i < N; i++)
        x[i] = 1.0 + 1e-3 * i;
    const int64_t deadline = hm_monotonic_ns() + (int64_t)(ms * 1e6);
    double acc = 0.0, flops = 0.0;
    for (;;) {
        for (int rep = 0; rep < CHECK_EVERY; rep++) {
            for (int i = 0; i < N; i++) {
                x[i] = x[i] * 0.999999 + 1e-6;   /* stays near 1: no overflow */
                acc += x[i];
            }
        }
        flops += 3.0 * N * CHECK_EVERY;
        if (hm_monotonic_ns() >= deadline)
            break;
    }
    compute_sink = acc;
    return flops;
}

double app_rank_load(const app_context *ctx, double imbalance)
{
    if (ctx->size < 2)
        return 1.0;
    return 1.0 + imbalance * (double)ctx->rank / (double)(ctx->size - 1);
}

/* ---- options ------------------------------------------------------------ */

static void print_value(FILE *out, const app_option *o)
{
    switch (o->kind) {
    case APP_OPT_SIZE:
    case APP_OPT_INT:
        fprintf(out, "%" PRId64, *(const int64_t *)o->value);
        break;
    case APP_OPT_DOUBLE:
        fprintf(out, "%g", *(const double *)o->value);
        break;
    case APP_OPT_FLAG:
        fprintf(out, "%s", *(const bool *)o->value ? "on" : "off");
        break;
    case APP_OPT_STRING: {
        const char *s = *(const char *const *)o->value;
        fprintf(out, "%s", s ? s : "(none)");
        break;
    }
    }
}

static void print_help(const app_program *p, FILE *out)
{
    fprintf(out, "usage: mpirun -np N %s [OPTIONS]\n\n%s\n\n%s\n\n", p->name, p->summary,
            p->details);
    fprintf(out, "Needs at least %d rank%s. Options (default in brackets):\n", p->min_ranks,
            p->min_ranks == 1 ? "" : "s");
    for (size_t i = 0; i < p->n_options; i++) {
        const app_option *o = &p->options[i];
        char left[64];
        if (o->kind == APP_OPT_FLAG)
            snprintf(left, sizeof left, "--[no-]%s", o->name);
        else
            snprintf(left, sizeof left, "--%s %s", o->name, o->metavar);
        fprintf(out, "  %-26s %s [", left, o->help);
        print_value(out, o);
        fprintf(out, "]\n");
    }
    fprintf(out, "  %-26s %s\n", "--json FILE|-", "write the summary as JSON (- = stdout)");
    fprintf(out, "  %-26s %s\n", "--help", "show this help");
    fprintf(out, "\nSizes accept K, M, G suffixes (powers of 1024). Exit codes: 0 success, "
                 "1 run-time failure or wrong result, 2 bad arguments (on every rank).\n");
}

static int set_option(const app_option *o, const char *value, hm_error *err)
{
    switch (o->kind) {
    case APP_OPT_SIZE:
    case APP_OPT_INT:
        if (hm_parse_int64(value, o->min, o->max, o->kind == APP_OPT_SIZE,
                           (int64_t *)o->value, err) != 0)
            return hm_error_wrap(err, "--%s", o->name);
        return 0;
    case APP_OPT_DOUBLE:
        if (hm_parse_double(value, o->min_d, o->max_d, (double *)o->value, err) != 0)
            return hm_error_wrap(err, "--%s", o->name);
        return 0;
    case APP_OPT_STRING:
        if (*value == '\0')
            return hm_error_set(err, "--%s: empty value", o->name);
        *(const char **)o->value = value;
        return 0;
    case APP_OPT_FLAG:
        break;
    }
    return hm_error_set(err, "--%s takes no value", o->name);
}

/* Parses argv strictly: every argument must be a known option with a valid
 * value. Pure function of argv, so every rank gets the same verdict. */
static int parse_args(const app_program *p, int argc, char **argv, app_common_args *common,
                      hm_error *err)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0)
            return hm_error_set(err, "unexpected argument '%s' (see --help)", arg);
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const char *inline_value = eq ? eq + 1 : NULL;

        if (name_len == 4 && strncmp(name, "help", 4) == 0 && !eq) {
            common->help = true;
            continue;
        }
        if (name_len == 4 && strncmp(name, "json", 4) == 0) {
            const char *v = inline_value;
            if (v == NULL) {
                if (i + 1 >= argc)
                    return hm_error_set(err, "--json needs a value (FILE or -)");
                v = argv[++i];
            }
            if (*v == '\0')
                return hm_error_set(err, "--json: empty file name");
            common->json_path = v;
            continue;
        }
        const app_option *found = NULL;
        bool negated = false;
        for (size_t k = 0; k < p->n_options && !found; k++) {
            const app_option *o = &p->options[k];
            if (strlen(o->name) == name_len && strncmp(o->name, name, name_len) == 0)
                found = o;
            else if (o->kind == APP_OPT_FLAG && name_len == strlen(o->name) + 3 &&
                     strncmp(name, "no-", 3) == 0 &&
                     strncmp(name + 3, o->name, name_len - 3) == 0) {
                found = o;
                negated = true;
            }
        }
        if (found == NULL)
            return hm_error_set(err, "unknown option '%.*s' (see --help)", (int)(name_len + 2),
                                arg);
        if (found->kind == APP_OPT_FLAG) {
            if (eq)
                return hm_error_set(err, "--%s takes no value", found->name);
            *(bool *)found->value = !negated;
            continue;
        }
        const char *v = inline_value;
        if (v == NULL) {
            if (i + 1 >= argc)
                return hm_error_set(err, "--%s needs a value (%s)", found->name,
                                    found->metavar);
            v = argv[++i];
        }
        if (set_option(found, v, err) != 0)
            return -1;
    }
    return 0;
}

/* ---- summary ------------------------------------------------------------ */

typedef struct app_totals {
    double time_s;
    double busy_s;
    double bytes_moved;
    int64_t failures;
    double extra[APP_RESULT_MAX_EXTRA];
} app_totals;

static int reduce_totals(const app_context *ctx, const app_result *r, int64_t elapsed_ns,
                         app_totals *t)
{
    double elapsed_s = (double)elapsed_ns * 1e-9, busy_s = (double)r->busy_ns * 1e-9;
    long long failures = r->failures, all_failures = 0;
    int rc = MPI_SUCCESS;
    rc |= MPI_Reduce(&elapsed_s, &t->time_s, 1, MPI_DOUBLE, MPI_MAX, 0, ctx->comm);
    rc |= MPI_Reduce(&busy_s, &t->busy_s, 1, MPI_DOUBLE, MPI_MAX, 0, ctx->comm);
    rc |= MPI_Reduce(&r->bytes_moved, &t->bytes_moved, 1, MPI_DOUBLE, MPI_SUM, 0, ctx->comm);
    rc |= MPI_Allreduce(&failures, &all_failures, 1, MPI_LONG_LONG, MPI_SUM, ctx->comm);
    for (size_t i = 0; i < r->n_extra; i++) {
        MPI_Op op = r->extra[i].reduce == APP_SUM   ? MPI_SUM
                    : r->extra[i].reduce == APP_MAX ? MPI_MAX
                                                    : MPI_MIN;
        rc |= MPI_Reduce(&r->extra[i].value, &t->extra[i], 1, MPI_DOUBLE, op, 0, ctx->comm);
    }
    t->failures = all_failures;
    return rc == MPI_SUCCESS ? 0 : -1;
}

static void human_bytes(double b, char *buf, size_t size)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.3g %s", b, units[u]);
}

static void print_text(FILE *out, const app_program *p, const app_context *ctx,
                       const app_result *r, const app_totals *t)
{
    char moved[32], rate[32];
    human_bytes(t->bytes_moved, moved, sizeof moved);
    human_bytes(t->busy_s > 0 ? t->bytes_moved / t->busy_s : 0.0, rate, sizeof rate);
    fprintf(out, "%s: %d ranks, %.3f s, %s moved in %.3f s busy (%s/s), %s\n", p->name,
            ctx->size, t->time_s, moved, t->busy_s, rate,
            t->failures == 0 ? "verified" : "VERIFICATION FAILED");
    for (size_t i = 0; i < r->n_extra; i++)
        fprintf(out, "  %s = %.6g\n", r->extra[i].key, t->extra[i]);
}

static int write_json(const char *path, const app_program *p, const app_context *ctx,
                      const app_result *r, const app_totals *t, hm_error *err)
{
    FILE *out = stdout;
    if (strcmp(path, "-") != 0) {
        out = fopen(path, "w");
        if (out == NULL)
            return hm_error_errno(err, "--json: cannot write %s", path);
    }
    char host[256] = "unknown";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    hm_json j;
    hm_json_init(&j, out, true);
    hm_json_object_begin(&j);
    hm_json_kv_string(&j, "program", p->name);
    hm_json_kv_int(&j, "ranks", ctx->size);
    hm_json_kv_string(&j, "host_rank0", host);
    hm_json_key(&j, "parameters");
    hm_json_object_begin(&j);
    for (size_t i = 0; i < p->n_options; i++) {
        const app_option *o = &p->options[i];
        switch (o->kind) {
        case APP_OPT_SIZE:
        case APP_OPT_INT:
            hm_json_kv_int(&j, o->name, *(const int64_t *)o->value);
            break;
        case APP_OPT_DOUBLE:
            hm_json_kv_double(&j, o->name, *(const double *)o->value);
            break;
        case APP_OPT_FLAG:
            hm_json_kv_bool(&j, o->name, *(const bool *)o->value);
            break;
        case APP_OPT_STRING: {
            const char *s = *(const char *const *)o->value;
            hm_json_key(&j, o->name);
            if (s)
                hm_json_string(&j, s);
            else
                hm_json_null(&j);
            break;
        }
        }
    }
    hm_json_object_end(&j);
    hm_json_kv_double(&j, "time_s", t->time_s);
    hm_json_kv_double(&j, "busy_s", t->busy_s);
    hm_json_kv_double(&j, "bytes_moved", t->bytes_moved);
    hm_json_kv_double(&j, "rate_bytes_per_s", t->busy_s > 0 ? t->bytes_moved / t->busy_s : 0.0);
    hm_json_kv_bool(&j, "verified", t->failures == 0);
    hm_json_kv_int(&j, "failures", t->failures);
    hm_json_key(&j, "metrics");
    hm_json_object_begin(&j);
    for (size_t i = 0; i < r->n_extra; i++)
        hm_json_kv_double(&j, r->extra[i].key, t->extra[i]);
    hm_json_object_end(&j);
    hm_json_object_end(&j);
    int rc = hm_json_finish(&j);
    if (out != stdout && fclose(out) != 0)
        rc = -1;
    if (rc != 0)
        return hm_error_set(err, "--json: error writing %s", path);
    return 0;
}

/* ---- main --------------------------------------------------------------- */

/* One rank's failure becomes every rank's: the lowest failing rank prints
 * its message (one line, whichever rank it is), all return `code`. */
static int agree(const app_context *ctx, const app_program *p, int rc, const hm_error *err,
                 bool name_rank, int code)
{
    int mine = rc != 0 ? ctx->rank : ctx->size, first = ctx->size;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS)
        MPI_Abort(ctx->comm, APP_EXIT_FAILED);
    if (first == ctx->size)
        return 0;
    if (first == ctx->rank) {
        if (name_rank && ctx->size > 1)
            fprintf(stderr, "%s: rank %d: %s\n", p->name, ctx->rank, err->msg);
        else
            fprintf(stderr, "%s: %s\n", p->name, err->msg);
    }
    return code;
}

static int app_execute(const app_program *p, const app_context *ctx, int argc, char **argv)
{
    hm_error err = {{0}};
    app_common_args common = {0};

    /* Arguments: a pure function of argv, identical on every rank; the
     * agreement below still makes a rank-specific verdict (a directory one
     * rank cannot see) fail everywhere. */
    int rc = parse_args(p, argc, argv, &common, &err);
    if (rc == 0 && common.help) {
        if (ctx->rank == 0)
            print_help(p, stdout);
        return app_all_ok(ctx, true) ? APP_EXIT_OK : APP_EXIT_USAGE;
    }
    if (rc == 0)
        rc = hm_mpi_launch_check(ctx->size, &err);
    if (rc == 0 && ctx->size < p->min_ranks)
        rc = hm_error_set(&err, "needs at least %d ranks, got %d (mpirun -np %d ...)",
                          p->min_ranks, ctx->size, p->min_ranks);
    if (rc == 0 && p->validate)
        rc = p->validate(ctx, p->data, &err);
    int code = agree(ctx, p, rc, &err, false, APP_EXIT_USAGE);
    if (code != 0)
        return code;

    app_result result = {0};
    if (MPI_Barrier(ctx->comm) != MPI_SUCCESS)
        return APP_EXIT_FAILED;
    int64_t start_ns = app_now_ns();
    rc = p->run(ctx, p->data, &result, &err);
    int64_t elapsed_ns = app_now_ns() - start_ns;
    code = agree(ctx, p, rc, &err, true, APP_EXIT_FAILED);
    if (code != 0)
        return code;

    app_totals totals = {0};
    if (reduce_totals(ctx, &result, elapsed_ns, &totals) != 0) {
        if (ctx->rank == 0)
            fprintf(stderr, "%s: collecting the summary failed\n", p->name);
        return APP_EXIT_FAILED;
    }
    rc = 0;
    if (ctx->rank == 0) {
        bool json_stdout = common.json_path && strcmp(common.json_path, "-") == 0;
        print_text(json_stdout ? stderr : stdout, p, ctx, &result, &totals);
        if (totals.failures != 0)
            rc = hm_error_set(&err, "verification failed: %" PRId64 " wrong results",
                              totals.failures);
        if (common.json_path && write_json(common.json_path, p, ctx, &result, &totals, &err) != 0)
            rc = -1;
        if (rc != 0)
            fprintf(stderr, "%s: %s\n", p->name, err.msg);
    }
    int failed = rc != 0;
    if (MPI_Bcast(&failed, 1, MPI_INT, 0, ctx->comm) != MPI_SUCCESS)
        return APP_EXIT_FAILED;
    return failed ? APP_EXIT_FAILED : APP_EXIT_OK;
}

int app_main(const app_program *p, int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init failed\n", p->name);
        return APP_EXIT_FAILED;
    }
    app_context ctx = {.comm = MPI_COMM_WORLD};
    if (MPI_Comm_rank(ctx.comm, &ctx.rank) != MPI_SUCCESS ||
        MPI_Comm_size(ctx.comm, &ctx.size) != MPI_SUCCESS) {
        fprintf(stderr, "%s: cannot query MPI_COMM_WORLD\n", p->name);
        MPI_Abort(MPI_COMM_WORLD, APP_EXIT_FAILED);
    }
    int code = app_execute(p, &ctx, argc, argv);
    fflush(stdout);
    fflush(stderr);
    if (MPI_Finalize() != MPI_SUCCESS && code == 0)
        code = APP_EXIT_FAILED;
    return code;
}
