/* What every shipped test program shares: the option table and its strict
 * parsing (identical on every rank), --help printed from the table, agreement
 * of all ranks on success or failure, a compute phase, and the summary
 * (text on rank 0, JSON with --json FILE|-).
 *
 * A program is a table of options plus a run function, built in main:
 *
 *     snake_params params = {.length = 1024 * 1024, ...};   // the defaults
 *     app_option options[] = { APP_SIZE("length", &params.length, ...), ... };
 *     app_program program = { .name = "snake", .options = options, .data = &params, ... };
 *     return app_main(&program, argc, argv);
 *
 * Errors are carried up in an hm_error; app_main turns them into one line
 * "PROGRAM: message" and the same non-zero exit code on every rank. */
#ifndef APP_COMMON_H
#define APP_COMMON_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"

/* Exit codes shared by every program (and documented in docs/apps.md). */
enum {
    APP_EXIT_OK = 0,
    APP_EXIT_FAILED = 1,    /* a run-time failure: I/O error, wrong result */
    APP_EXIT_USAGE = 2,     /* bad arguments or too few ranks */
};

typedef enum app_option_kind {
    APP_OPT_SIZE,     /* int64 with optional K/M/G suffix */
    APP_OPT_INT,      /* plain int64 */
    APP_OPT_DOUBLE,
    APP_OPT_FLAG,     /* --NAME sets, --no-NAME clears */
    APP_OPT_STRING,
} app_option_kind;

typedef struct app_option {
    const char *name;       /* long name without the dashes */
    app_option_kind kind;
    const char *metavar;
    const char *help;
    int64_t min, max;       /* SIZE, INT */
    double min_d, max_d;    /* DOUBLE */
    void *value;            /* int64_t*, double*, bool*, const char** (default preset) */
} app_option;

#define APP_SIZE(n, ptr, lo, hi, meta, text) \
    { .name = (n), .kind = APP_OPT_SIZE, .metavar = (meta), .help = (text), \
      .min = (lo), .max = (hi), .value = (ptr) }
#define APP_INT(n, ptr, lo, hi, meta, text) \
    { .name = (n), .kind = APP_OPT_INT, .metavar = (meta), .help = (text), \
      .min = (lo), .max = (hi), .value = (ptr) }
#define APP_DOUBLE(n, ptr, lo, hi, meta, text) \
    { .name = (n), .kind = APP_OPT_DOUBLE, .metavar = (meta), .help = (text), \
      .min_d = (lo), .max_d = (hi), .value = (ptr) }
#define APP_FLAG(n, ptr, text) \
    { .name = (n), .kind = APP_OPT_FLAG, .help = (text), .value = (ptr) }
#define APP_STRING(n, ptr, meta, text) \
    { .name = (n), .kind = APP_OPT_STRING, .metavar = (meta), .help = (text), .value = (ptr) }

typedef struct app_context {
    MPI_Comm comm;
    int rank;
    int size;
} app_context;

/* What a run measured. bytes_moved is this rank's share (bytes it sent or
 * wrote); the summary sums it over ranks. busy_ns is the time this rank
 * spent in the program's main activity (messages, I/O), so the rate is
 * bytes over that time rather than over the whole run with compute. */
#define APP_RESULT_MAX_EXTRA 12

typedef struct app_result {
    double bytes_moved;
    int64_t busy_ns;
    int64_t failures;        /* verification failures on this rank */
    struct {
        const char *key;
        double value;
        int reduce;          /* APP_SUM, APP_MAX or APP_MIN over ranks */
    } extra[APP_RESULT_MAX_EXTRA];
    size_t n_extra;
} app_result;

enum { APP_SUM, APP_MAX, APP_MIN };

typedef struct app_program app_program;
struct app_program {
    const char *name;
    const char *summary;          /* one line for --help */
    const char *details;          /* a paragraph for --help: what it does, how it verifies */
    int min_ranks;
    app_option *options;
    size_t n_options;
    /* Checks combinations of options; same inputs on every rank, so every
     * rank reaches the same verdict. May be NULL. */
    int (*validate)(const app_context *ctx, const void *data, hm_error *err);
    /* The work. Called on every rank between two barriers; the run time is
     * the slowest rank's. Returns 0, or -1 with err set (this rank's
     * failure; app_main makes every rank fail). It must not return early
     * between matching communication calls (the other ranks would wait
     * forever): allocate first and check with app_all_ok, count wrong data
     * in result->failures, and use app_abort for what cannot wait. */
    int (*run)(const app_context *ctx, const void *data, app_result *result, hm_error *err);
    /* The program's parameters (what the option table points into), passed
     * to validate and run; lives on main's stack, so no global state. */
    const void *data;
};

/* Initializes MPI, parses, runs, reports, finalizes. Returns the exit code,
 * the same on every rank. */
int app_main(const app_program *program, int argc, char **argv);

/* Adds a named figure to the summary (e.g. "gflops_per_s"). */
void app_result_extra(app_result *r, const char *key, double value, int reduce);

/* True on every rank if `ok` is true on every rank. A collective: every
 * rank must call it at the same point. */
bool app_all_ok(const app_context *ctx, bool ok);

/* Floating-point work for `ms` milliseconds (a compute phase the CPU
 * sensors see). Returns the number of floating-point operations done. */
double app_compute_ms(double ms);

/* The load of this rank under --imbalance F: 1 + F * rank / (size - 1), so
 * rank 0 does the nominal work, the last rank (1 + F) times it and the
 * others in between (1 with a single rank). F = 0: every rank the same. */
double app_rank_load(const app_context *ctx, double imbalance);

/* Prints "PROGRAM: rank R: message" and aborts every rank (MPI_Abort):
 * for failures in the middle of communication, where returning would hang
 * the others. */
_Noreturn void app_abort(const app_context *ctx, const char *program, const hm_error *err);

/* CLOCK_MONOTONIC in ns (re-exported so programs need not include hm_timer). */
int64_t app_now_ns(void);

#endif
