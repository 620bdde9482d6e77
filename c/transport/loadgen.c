/* hushmon-loadgen: a load generator and raw baseline for the reducer
 * benchmark (bench/bench_reduce.py). Not installed for users.
 *
 *   hushmon-loadgen publish --url U --rack R --template FILE --hosts H --batches N
 *                   [--period-ms P] [--live] [--t0-ns T] [--epoch E] [--first-host K]
 *                   [--job ID:FIRST:COUNT:START:END ...]
 *     publishes N batches (H hosts, N/H periods) made from the first period
 *     of a real spool file, host and time replaced, with the contract's
 *     headers, JetStream async publish as fast as acks allow; --live
 *     publishes each period's batches at its end on the real-time clock,
 *     from the next period boundary, or from --t0-ns when it is given (so
 *     the loadgens of several racks share their periods).
 *     Message ids are host:epoch:seq: a second run within the stream's
 *     duplicate window needs another --epoch. Hosts are nK..n(K+H-1)
 *     (--first-host K, default 0): racks of one run need disjoint ranges.
 *     --job (repeatable) is a schedule of jobs: job ID runs on hosts
 *     nFIRST..n(FIRST+COUNT-1) in periods START <= p < END (p counts from
 *     0): those hosts' batches carry `job,host=H,job=ID active=1i` lines
 *     then, as the agent writes them for a running job, and the template's
 *     own job lines are dropped. A job may span racks: each rack's loadgen
 *     gets the whole schedule and writes the lines of its own hosts.
 *   hushmon-loadgen consume --url U --stream S --filter F --count N
 *     pulls and acks N messages without reading them: what NATS alone costs.
 * Prints one line of key=value figures. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nats/nats.h>

#include "hm_error.h"
#include "hm_options.h"

typedef struct tline {
    char *a, *b; /* before the host value; from after it to the timestamp */
} tline;

typedef struct job_plan {
    char id[64];
    int64_t first, count, start, end; /* hosts [first, first+count), periods [start, end) */
} job_plan;

#define MAX_JOBS 64

static double now_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int die(const char *what, natsStatus s)
{
    fprintf(stderr, "hushmon-loadgen: %s: %s\n", what, natsStatus_GetText(s));
    return 1;
}

/* The template's lines of its first timestamp, cut around host and time. */
static int read_template(const char *path, tline **out, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    char buf[16384];
    char first_ts[32] = "";
    size_t cap = 0;
    *n = 0;
    *out = NULL;
    while (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        char *sp = strrchr(buf, ' '), *host = strstr(buf, ",host=");
        if (sp == NULL || host == NULL)
            continue;
        if (first_ts[0] == '\0')
            snprintf(first_ts, sizeof first_ts, "%s", sp + 1);
        else if (strcmp(first_ts, sp + 1) != 0)
            break;
        host += 6;
        size_t vlen = strcspn(host, ", ");
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            *out = realloc(*out, cap * sizeof **out);
        }
        (*out)[*n].a = strndup(buf, (size_t)(host - buf));
        (*out)[*n].b = strndup(host + vlen, (size_t)(sp + 1 - (host + vlen)));
        (*n)++;
    }
    fclose(f);
    return *n ? 0 : -1;
}

static bool is_job_line(const tline *t)
{
    return strncmp(t->a, "job,", 4) == 0;
}

/* The batch of `host` (number hostno) for period `period` at time ts: the
 * template's lines; with a job schedule (njobs > 0) the template's job
 * lines give way to one line per scheduled job running on the host. */
static size_t make_batch(char *buf, size_t cap, const tline *t, size_t n, const char *host, int64_t hostno,
                         int64_t period, int64_t ts, const job_plan *jobs, size_t njobs, size_t *lines)
{
    size_t len = 0;
    *lines = 0;
    for (size_t i = 0; i < n && len < cap; i++) {
        if (njobs > 0 && is_job_line(&t[i]))
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s%s%s%" PRId64 "\n", t[i].a, host, t[i].b, ts);
        (*lines)++;
    }
    for (size_t j = 0; j < njobs && len < cap; j++) {
        const job_plan *p = &jobs[j];
        if (hostno < p->first || hostno >= p->first + p->count || period < p->start || period >= p->end)
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "job,host=%s,job=%s active=1i %" PRId64 "\n", host, p->id, ts);
        (*lines)++;
    }
    return len < cap ? len : cap;
}

typedef struct publish_opts {
    const char *url, *rack, *template;
    int64_t hosts, batches, period_ms, first_host, epoch, t0_ns; /* t0_ns -1: not given */
    bool live;
    job_plan jobs[MAX_JOBS];
    size_t njobs;
} publish_opts;

typedef struct consume_opts {
    const char *url, *stream, *filter;
    int64_t count;
} consume_opts;

/* --job ID:FIRST:COUNT:START:END, repeatable. */
static int add_job(void *base, const hm_option *opt, const char *v, hm_error *err)
{
    publish_opts *o = base;
    const char *colon = strchr(v, ':');
    job_plan p;
    int used = 0;
    size_t idlen = colon ? (size_t)(colon - v) : 0;
    if (o->njobs == MAX_JOBS || colon == NULL || idlen == 0 || idlen >= sizeof p.id ||
        strcspn(v, " ,=\\\"") < idlen ||
        sscanf(colon + 1, "%" SCNd64 ":%" SCNd64 ":%" SCNd64 ":%" SCNd64 "%n", &p.first, &p.count, &p.start,
               &p.end, &used) != 4 ||
        colon[1 + used] != '\0' || p.first < 0 || p.count < 1 || p.start < 0 || p.end <= p.start)
        return hm_error_set(err,
                            "--%s %s: want ID:FIRST:COUNT:START:END (ID without space, comma, '=', "
                            "quote or backslash; COUNT >= 1, 0 <= START < END; at most %d jobs)",
                            opt->name, v, MAX_JOBS);
    memcpy(p.id, v, idlen);
    p.id[idlen] = '\0';
    o->jobs[o->njobs++] = p;
    return 0;
}

#define AT(field) .offset = offsetof(publish_opts, field)
static const hm_option publish_rows[] = {
    {.name = "url", .kind = HM_OPT_STRING, AT(url), .arg = "URL", .help = "NATS server (required)"},
    {.name = "rack", .kind = HM_OPT_STRING, AT(rack), .arg = "R", .help = "subject hm.raw.R.<host> (default r1)"},
    {.name = "template", .kind = HM_OPT_STRING, AT(template), .arg = "FILE",
     .help = "a spool file: its first period's lines are the batch (required)"},
    {.name = "hosts", .kind = HM_OPT_INT64, AT(hosts), .arg = "H", .min = 1, .max = INT64_MAX, .suffixes = true,
     .help = "hosts nK..n(K+H-1) (default 1000)"},
    {.name = "batches", .kind = HM_OPT_INT64, AT(batches), .arg = "N", .min = 0, .max = INT64_MAX,
     .suffixes = true, .help = "batches in all, N/H periods (default 10000)"},
    {.name = "period-ms", .kind = HM_OPT_INT64, AT(period_ms), .arg = "P", .min = 1, .max = 86400000,
     .suffixes = true, .help = "the period (default 1000)"},
    {.name = "live", .kind = HM_OPT_SET, AT(live),
     .help = "publish each period's batches at its end on the real-time clock"},
    {.name = "t0-ns", .kind = HM_OPT_INT64, AT(t0_ns), .arg = "T", .min = 0, .max = INT64_MAX,
     .help = "the first period's start (default: the next boundary with --live,\nelse 1732270000000000000)"},
    {.name = "epoch", .kind = HM_OPT_INT64, AT(epoch), .arg = "E", .min = 0, .max = INT64_MAX,
     .help = "Hm-Epoch and message ids (default 1700000000000000000)"},
    {.name = "first-host", .kind = HM_OPT_INT64, AT(first_host), .arg = "K", .min = 0, .max = INT64_MAX,
     .suffixes = true, .help = "first host number (default 0)"},
    {.name = "job", .kind = HM_OPT_CALL, .call = add_job, .arg = "ID:FIRST:COUNT:START:END",
     .help = "job ID on hosts nFIRST.. for COUNT hosts in periods START..END-1\n(repeatable)"},
    {.name = "help", .kind = HM_OPT_HELP, .help = "this text"},
};
#undef AT

#define AT(field) .offset = offsetof(consume_opts, field)
static const hm_option consume_rows[] = {
    {.name = "url", .kind = HM_OPT_STRING, AT(url), .arg = "URL", .help = "NATS server (required)"},
    {.name = "stream", .kind = HM_OPT_STRING, AT(stream), .arg = "S", .help = "stream (default HM_RAW)"},
    {.name = "filter", .kind = HM_OPT_STRING, AT(filter), .arg = "F", .help = "subject filter (default hm.raw.>)"},
    {.name = "count", .kind = HM_OPT_INT64, AT(count), .arg = "N", .min = 0, .max = INT64_MAX,
     .suffixes = true, .help = "messages to pull and ack (default 10000)"},
    {.name = "help", .kind = HM_OPT_HELP, .help = "this text"},
};
#undef AT

static void usage(FILE *out)
{
    fprintf(out, "usage: hushmon-loadgen publish --url U --template FILE [options]\n"
                 "       hushmon-loadgen consume --url U [options]\n"
                 "A load generator and raw NATS baseline for bench/bench_reduce.py (c/transport/loadgen.c);\n"
                 "prints one line of key=value figures.\n\npublish:\n");
    hm_options_print_help(&HM_OPTION_TABLE(publish_rows), out);
    fprintf(out, "\nconsume:\n");
    hm_options_print_help(&HM_OPTION_TABLE(consume_rows), out);
}

/* The subcommand's options (argv[0] is the subcommand): 0, or the exit
 * status (help printed: 0 as well, *done set). */
static int parse(const hm_option_table *t, int argc, char **argv, void *opts, bool *done)
{
    hm_error err;
    int rc = hm_options_parse(t, argc, argv, opts, &err);
    *done = rc != 0;
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc < 0) {
        hm_error_print("hushmon-loadgen", &err);
        return 2;
    }
    return 0;
}

static int connect(const char *url, natsConnection **nc, jsCtx **js)
{
    natsStatus s = natsConnection_ConnectTo(nc, url);
    if (s != NATS_OK)
        return die(url, s);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = 4096;
    /* A loaded hub answers late: wait for room rather than fail the run. */
    jo.PublishAsync.StallWait = 60000;
    s = natsConnection_JetStream(js, *nc, &jo);
    return s == NATS_OK ? 0 : die("jetstream", s);
}

static int publish(int argc, char **argv)
{
    publish_opts o = {.rack = "r1", .hosts = 1000, .batches = 10000, .period_ms = 1000,
                      .epoch = INT64_C(1700000000000000000), .t0_ns = -1};
    bool done;
    int rc = parse(&HM_OPTION_TABLE(publish_rows), argc, argv, &o, &done);
    if (done)
        return rc;
    const char *url = o.url, *rack = o.rack, *template = o.template;
    int64_t hosts = o.hosts, batches = o.batches, period_ms = o.period_ms, first_host = o.first_host;
    bool live = o.live;
    const job_plan *jobs = o.jobs;
    size_t njobs = o.njobs;
    tline *t;
    size_t nt;
    if (url == NULL || template == NULL || hosts < 1 || first_host < 0 || read_template(template, &t, &nt) != 0) {
        fprintf(stderr, "hushmon-loadgen: publish needs --url, --template FILE (line protocol), --hosts >= 1, --first-host >= 0\n");
        return 2;
    }
    natsConnection *nc;
    jsCtx *js;
    if (connect(url, &nc, &js) != 0)
        return 1;
    int64_t epoch = o.epoch;
    int64_t period_ns = period_ms * 1000000;
    int64_t t0 = o.t0_ns >= 0 ? o.t0_ns : INT64_C(1732270000000000000);
    if (live && o.t0_ns < 0) /* the next period boundary */
        t0 = ((int64_t)(now_s(CLOCK_REALTIME) * 1e9) / period_ns + 1) * period_ns;
    char *buf = malloc(1 << 20);
    double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t bytes = 0, total_lines = 0;
    for (int64_t i = 0; i < batches; i++) {
        int64_t period = i / hosts;
        if (live && i % hosts == 0) { /* publish period p's batches at its end */
            double due = (double)(t0 + (period + 1) * period_ns) * 1e-9;
            double wait = due - now_s(CLOCK_REALTIME);
            if (wait > 0) {
                struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
        char host[32], subject[128], seq[32], id[128], lines[32], ep[32];
        int64_t hostno = first_host + i % hosts;
        size_t nlines;
        snprintf(host, sizeof host, "n%05" PRId64, hostno);
        size_t len = make_batch(buf, 1 << 20, t, nt, host, hostno, period, t0 + period * period_ns, jobs, njobs,
                                &nlines);
        snprintf(subject, sizeof subject, "hm.raw.%s.%s", rack, host);
        snprintf(seq, sizeof seq, "%" PRId64, period + 1);
        snprintf(ep, sizeof ep, "%" PRId64, epoch);
        snprintf(id, sizeof id, "%s:%s:%s", host, ep, seq);
        snprintf(lines, sizeof lines, "%zu", nlines);
        natsMsg *m;
        natsStatus s = natsMsg_Create(&m, subject, NULL, buf, (int)len);
        if (s == NATS_OK) s = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
        if (s == NATS_OK) s = natsMsgHeader_Set(m, "Hm-Host", host);
        if (s == NATS_OK) s = natsMsgHeader_Set(m, "Hm-Epoch", ep);
        if (s == NATS_OK) s = natsMsgHeader_Set(m, "Hm-Seq", seq);
        if (s == NATS_OK) s = natsMsgHeader_Set(m, "Hm-Lines", lines);
        if (s == NATS_OK) s = js_PublishMsgAsync(js, &m, NULL);
        natsMsg_Destroy(m); /* NULL when the library took it */
        if (s != NATS_OK)
            return die("publish", s);
        bytes += len;
        total_lines += nlines;
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 60000;
    natsStatus s = js_PublishAsyncComplete(js, &po);
    if (s != NATS_OK)
        return die("waiting for the stream's acks", s);
    natsMsgList failed;
    int nfailed = 0;
    if (js_PublishAsyncGetPendingList(&failed, js) == NATS_OK) {
        nfailed = failed.Count;
        natsMsgList_Destroy(&failed);
    }
    double wall = now_s(CLOCK_MONOTONIC) - w0, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("published=%" PRId64 " failed=%d wall_s=%.3f cpu_s=%.3f msgs_per_s=%.0f batch_bytes=%.0f "
           "lines_per_batch=%.2f t0_ns=%" PRId64 "\n",
           batches, nfailed, wall, cpu, (double)batches / wall, (double)bytes / (double)batches,
           (double)total_lines / (double)batches, t0);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(buf);
    return nfailed ? 1 : 0;
}

static int consume(int argc, char **argv)
{
    consume_opts o = {.stream = "HM_RAW", .filter = "hm.raw.>", .count = 10000};
    bool done;
    int rc = parse(&HM_OPTION_TABLE(consume_rows), argc, argv, &o, &done);
    if (done)
        return rc;
    const char *url = o.url, *stream = o.stream, *filter = o.filter;
    int64_t count = o.count;
    if (url == NULL) {
        fprintf(stderr, "hushmon-loadgen: consume needs --url\n");
        return 2;
    }
    natsConnection *nc;
    jsCtx *js;
    if (connect(url, &nc, &js) != 0)
        return 1;
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = stream;
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.MaxAckPending = 100000;
    natsSubscription *sub;
    jsErrCode jerr;
    natsStatus s = js_PullSubscribe(&sub, js, filter, "bench-raw", NULL, &so, &jerr);
    if (s != NATS_OK)
        return die("pull subscribe", s);
    double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    int64_t got = 0;
    uint64_t bytes = 0;
    while (got < count) {
        natsMsgList list;
        s = natsSubscription_Fetch(&list, sub, 512, 2000, &jerr);
        if (s == NATS_TIMEOUT)
            break;
        if (s != NATS_OK)
            return die("fetch", s);
        for (int i = 0; i < list.Count; i++) {
            bytes += (uint64_t)natsMsg_GetDataLength(list.Msgs[i]);
            natsConnection_PublishString(nc, natsMsg_GetReply(list.Msgs[i]), "+ACK");
        }
        got += list.Count;
        natsMsgList_Destroy(&list);
    }
    natsConnection_Flush(nc);
    double wall = now_s(CLOCK_MONOTONIC) - w0, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("consumed=%" PRId64 " wall_s=%.3f cpu_s=%.3f msgs_per_s=%.0f msgs_per_cpu_s=%.0f bytes=%" PRIu64 "\n",
           got, wall, cpu, (double)got / wall, (double)got / cpu, bytes);
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return got == count ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "publish") == 0)
        return publish(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "consume") == 0)
        return consume(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "hushmon-loadgen: %s%s%s: expected publish or consume (see --help)\n",
            argc >= 2 ? "unknown command '" : "no command", argc >= 2 ? argv[1] : "",
            argc >= 2 ? "'" : "");
    return 2;
}
