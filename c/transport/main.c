/* hushmon-reduce: flags, signals, and the level to run. */
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "hm_error.h"
#include "hm_log.h"
#include "hm_parse.h"
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
 * throughput"); the resident size stays that of the working set (peak
 * ~20 MiB at 100,000 batches drained). */
static void keep_heap_warm(void)
{
    if (mallopt(M_TOP_PAD, 16 << 20) != 1 || mallopt(M_TRIM_THRESHOLD, 64 << 20) != 1 ||
        mallopt(M_MMAP_THRESHOLD, 16 << 20) != 1)
        hm_log_notice("mallopt refused a heap setting: glibc's defaults stay (slower, same results)");
}

static const char usage[] =
    "usage: hushmon-reduce --rack RACK --url URL [options]\n"
    "       hushmon-reduce --top --url URL [options]\n"
    "\n"
    "In-network reduction of hushmon's NATS transport (docs/transport.md).\n"
    "  --rack RACK             rack level: consume hm.raw.RACK.> (durable pull consumer\n"
    "                          reduce-RACK on HM_RAW, shared by the rack's instances), publish\n"
    "                          partial summaries per (job, period) to hm.sum.rack.RACK\n"
    "  --top                   top level: merge hm.sum.rack.> (durable reduce-top on HM_SUM)\n"
    "                          into job-wide summaries on hm.sum.job.JOB\n"
    "                          The consumer is an admin's (`python -m hushmon.transport.deploy\n"
    "                          streams URL --racks ...`), with its AckWait (how soon a crashed\n"
    "                          instance's messages go to the other; a summary is held at most\n"
    "                          half of it) and MaxAckPending; a reducer only binds to it\n"
    "  --url URL               NATS server, e.g. nats://127.0.0.1:4222 (required)\n"
    "  --period-grace-ms MS    publish a (job, period) once no batch came for it for MS\n"
    "                          (default: 2 periods at rack level, the period read from the\n"
    "                          agents' hushmon_agent period_ms; 2000 at top level)\n"
    "  --stats-every-s N       print counters to stderr every N s (default 0: at exit only)\n"
    "  --max-batch-bytes N     larger batches are refused as oversized (default 1M)\n"
    "  --fetch-batch N         messages per pull request (default 512)\n"
    "  --keep-s N              how long a published (job, period) is remembered to count\n"
    "                          late batches and drop duplicate partials (default 300)\n"
    "  --help                  this text\n"
    "\n"
    "SIGTERM or SIGINT: publish what is open, send the acks, exit 0.\n"
    "Transient trouble (server away, timeouts, the consumer deleted: until an admin\n"
    "declares it again) is retried with backoff and logged; exit status: 0 after a\n"
    "clean stop, 1 when it cannot start (its consumer not declared: one line says so)\n"
    "or on a fatal error (one line on stderr), 2 on bad flags.\n";

static int bad_flag(const char *fmt, const char *arg)
{
    fprintf(stderr, "hushmon-reduce: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see --help)\n");
    return 2;
}

static int int_flag(const char *name, const char *arg, int64_t min, int64_t max, int64_t *out)
{
    hm_error err;
    if (hm_parse_int64(arg, min, max, 1, out, &err) != 0) {
        fprintf(stderr, "hushmon-reduce: --%s: %s (see --help)\n", name, err.msg);
        return 2;
    }
    return 0;
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
    enum { O_RACK = 256, O_TOP, O_URL, O_GRACE, O_STATS, O_MAXB, O_FETCH, O_KEEP, O_HELP };
    static const struct option longopts[] = {
        {"rack", required_argument, NULL, O_RACK},
        {"top", no_argument, NULL, O_TOP},
        {"url", required_argument, NULL, O_URL},
        {"period-grace-ms", required_argument, NULL, O_GRACE},
        {"stats-every-s", required_argument, NULL, O_STATS},
        {"max-batch-bytes", required_argument, NULL, O_MAXB},
        {"fetch-batch", required_argument, NULL, O_FETCH},
        {"keep-s", required_argument, NULL, O_KEEP},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int c, rc = 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1 && rc == 0) {
        switch (c) {
        case O_RACK: o.rack = optarg; break;
        case O_TOP: o.top = true; break;
        case O_URL: o.url = optarg; break;
        case O_GRACE: rc = int_flag("period-grace-ms", optarg, 0, 3600000, &o.grace_ms); break;
        case O_STATS: rc = int_flag("stats-every-s", optarg, 0, 86400, &o.stats_every_s); break;
        case O_MAXB: rc = int_flag("max-batch-bytes", optarg, 1, 1 << 30, &o.max_batch_bytes); break;
        case O_FETCH: rc = int_flag("fetch-batch", optarg, 1, 100000, &o.fetch_batch); break;
        case O_KEEP: rc = int_flag("keep-s", optarg, 1, 86400, &o.keep_s); break;
        case O_HELP: fputs(usage, stdout); return 0;
        default:
            return bad_flag("unknown or incomplete flag %s", argv[optind - 1]);
        }
    }
    if (rc != 0)
        return rc;
    if (optind < argc)
        return bad_flag("unexpected argument %s", argv[optind]);
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
    hm_error err;
    if ((o.top ? hm_reduce_top(&o, &stop_requested, &err) : hm_reduce_rack(&o, &stop_requested, &err)) != 0) {
        hm_error_print("hushmon-reduce", &err);
        return 1;
    }
    return 0;
}
