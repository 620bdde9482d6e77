/* hushmon-reduce: flags, signals, and the level to run. */
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "hm_error.h"
#include "hm_log.h"
#include "hm_options.h"
#include "reduce.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* The reducer frees and allocates its fetched messages, parsed batches
 * and groups by the thousand every second; with glibc's defaults the heap
 * top is given back (trimmed) and grown again (sbrk, page faults) over and
 * over, and fetch lists above the dynamic mmap threshold get mmap'ed and
 * unmapped each time. Keeping 16 MiB of slack and raising both thresholds
 * cut the reducer's CPU per batch by 5-10 % (docs/transport.md, "Reducer
 * throughput"). The price was that a backlog's pages stayed resident
 * (a rack reducer's 6 -> 10 MiB over an hour): the once-a-minute trim of
 * the loop's upkeep (reduce.h) gives them back, far too rarely to cost
 * what the per-second trimming did. */
static void keep_heap_warm(void)
{
    if (mallopt(M_TOP_PAD, 16 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, 64 << 20) != 1 ||
        mallopt(M_MMAP_THRESHOLD, 16 << 20) != 1)
        hm_log_notice("mallopt refused a heap setting: glibc's defaults stay (slower, same results)");
}

#define AT(field) .offset = offsetof(hm_reduce_opts, field)
static const hm_option option_rows[] = {
    {.name = "rack", .kind = HM_OPT_STRING, AT(rack), .arg = "RACK",
     .help = "rack level: consume hm.raw.RACK.> (durable pull consumer\n"
             "reduce-RACK on HM_RAW, shared by the rack's instances), publish\n"
             "partial summaries per (job, period) to hm.sum.rack.RACK"},
    {.name = "top", .kind = HM_OPT_SET, AT(top),
     .help = "top level: merge hm.sum.rack.> (durable reduce-top on HM_SUM)\n"
             "into job-wide summaries on hm.sum.job.JOB\n"
             "The consumer is an admin's (`python -m hushmon.transport.deploy\n"
             "streams URL --racks ...`), with its AckWait (how soon a crashed\n"
             "instance's messages go to the other; a summary is held at most\n"
             "half of it) and MaxAckPending; a reducer only binds to it"},
    {.name = "url", .kind = HM_OPT_STRING, AT(url), .arg = "URL",
     .help = "NATS server, e.g. nats://127.0.0.1:4222 (required)"},
    {.name = "period-grace-ms", .kind = HM_OPT_INT64, AT(grace_ms), .arg = "MS", .min = 0,
     .max = 3600000, .suffixes = true,
     .help = "publish a (job, period) once no batch came for it for MS\n"
             "(default: 2 periods at rack level, the period read from the\n"
             "agents' hushmon_agent period_ms; 2000 at top level)"},
    {.name = "stats-every-s", .kind = HM_OPT_INT64, AT(stats_every_s), .arg = "N", .min = 0,
     .max = 86400, .suffixes = true,
     .help = "print counters to stderr every N s (default 0: at exit only)"},
    {.name = "max-batch-bytes", .kind = HM_OPT_INT64, AT(max_batch_bytes), .arg = "N", .min = 1,
     .max = 1 << 30, .suffixes = true,
     .help = "larger batches are refused as oversized (default 1M)"},
    {.name = "fetch-batch", .kind = HM_OPT_INT64, AT(fetch_batch), .arg = "N", .min = 1,
     .max = 100000, .suffixes = true, .help = "messages per pull request (default 512)"},
    {.name = "keep-s", .kind = HM_OPT_INT64, AT(keep_s), .arg = "N", .min = 1, .max = 86400,
     .suffixes = true,
     .help = "how long a published (job, period) is remembered to count\n"
             "late batches and drop duplicate partials (default 300)"},
    {.name = "help", .kind = HM_OPT_HELP, .help = "this text"},
};
#undef AT
static const hm_option_table options = HM_OPTION_TABLE(option_rows);

static void usage(FILE *out)
{
    fputs("usage: hushmon-reduce --rack RACK --url URL [options]\n"
          "       hushmon-reduce --top --url URL [options]\n"
          "\n"
          "In-network reduction of hushmon's NATS transport (docs/transport.md).\n",
          out);
    hm_options_print_help(&options, out);
    fputs("\n"
          "SIGTERM or SIGINT: publish what is open, send the acks, exit 0.\n"
          "Transient trouble (server away, timeouts, the consumer deleted: until an admin\n"
          "declares it again) is retried with backoff and logged; exit status: 0 after a\n"
          "clean stop, 1 when it cannot start (its consumer not declared: one line says so)\n"
          "or on a fatal error (one line on stderr), 2 on bad flags.\n",
          out);
}

static int bad_flag(const char *fmt, const char *arg)
{
    fprintf(stderr, "hushmon-reduce: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see --help)\n");
    return 2;
}

int main(int argc, char **argv)
{
    hm_reduce_opts o = {
        .grace_ms = -1,
        .stats_every_s = 0,
        .max_batch_bytes = 1 << 20,
        .fetch_batch = 512,
        .keep_s = 300,
    };
    hm_error err;
    int rc = hm_options_parse(&options, argc, argv, &o, &err);
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc != 0) {
        hm_error_print("hushmon-reduce", &err);
        return 2;
    }
    if (o.url == NULL || *o.url == '\0')
        return bad_flag("%s", "--url is required");
    if (o.top == (o.rack != NULL))
        return bad_flag("%s", "give exactly one of --rack RACK and --top");
    if (o.rack && (*o.rack == '\0' || strpbrk(o.rack, ".*> \t\r\n") != NULL || strlen(o.rack) > 100))
        return bad_flag("--rack %s: not a subject token (no '.', '*', '>', spaces; 100 bytes at most)",
                        o.rack);
    hm_log_set_program("hushmon-reduce");
    keep_heap_warm();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((o.top ? hm_reduce_top(&o, &stop_requested, &err) : hm_reduce_rack(&o, &stop_requested, &err)) != 0) {
        hm_error_print("hushmon-reduce", &err);
        return 1;
    }
    return 0;
}
