/* What each piece of publishing one agent batch costs the publishing
 * process (all its threads: libnats' reader and garbage collector too) and
 * its own thread, on this machine, once per period as the agent does it.
 * Run by bench/bench_nats_publish.py (it starts a nats-server with the
 * streams of docs/transport.md); not installed, not a test.
 *
 *   nats_publish_cost HOST PORT [iterations] [interval_ms] [batch_bytes]
 *
 * One line per variant: CPU us per batch of the process and of the
 * publishing thread, with the idle loop's cost (sleep, wake-up, the clock
 * reads) subtracted. */
#include <errno.h>
#include <nats/nats.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct bench {
    const char *host;
    int port;
    int iterations;
    int interval_ms;
    char *batch;
    size_t batch_len;
    char url[256];
} bench;

typedef struct variant_state {
    bench *b;
    int fd;                 /* raw variants */
    natsConnection *nc;     /* libnats variants */
    natsSubscription *sub;
    char inbox[128];
    natsMsg *kept[64];
    int nkept;
    int acks;
    int every;              /* reply on every n-th batch */
} variant_state;

typedef struct variant {
    const char *name;
    const char *what;
    int (*setup)(variant_state *v);
    int (*once)(variant_state *v, int i);
    void (*teardown)(variant_state *v);
} variant;

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int fail(const char *what, natsStatus st)
{
    fprintf(stderr, "nats_publish_cost: %s: %s\n", what, natsStatus_GetText(st));
    return -1;
}

/* ---- raw socket: the write alone ---- */

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int raw_setup(variant_state *v)
{
    char port[16];
    snprintf(port, sizeof port, "%d", v->b->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(v->b->host, port, &hints, &ai) != 0)
        return -1;
    v->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = v->fd < 0 ? -1 : connect(v->fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0) {
        perror("nats_publish_cost: connect");
        return -1;
    }
    char buf[4096];
    if (read(v->fd, buf, sizeof buf) <= 0) /* INFO */
        return -1;
    const char *hello = "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true}\r\nPING\r\n";
    if (write_all(v->fd, hello, strlen(hello)) < 0 || read(v->fd, buf, sizeof buf) <= 0)
        return -1;
    return 0;
}

static void raw_teardown(variant_state *v)
{
    close(v->fd);
}

/* PUB to a subject no stream takes: the server reads and discards it. */
static int raw_pub_once(variant_state *v, int i)
{
    (void)i;
    char head[64];
    int n = snprintf(head, sizeof head, "PUB bench.discard %zu\r\n", v->b->batch_len);
    /* one write, as libnats does with its buffer */
    static char out[1 << 20];
    memcpy(out, head, (size_t)n);
    memcpy(out + n, v->b->batch, v->b->batch_len);
    memcpy(out + n + v->b->batch_len, "\r\n", 2);
    return write_all(v->fd, out, (size_t)n + v->b->batch_len + 2);
}

/* HPUB with the contract's headers to a stream subject, no reply: stored. */
static int raw_hpub_once(variant_state *v, int i)
{
    char hdr[512];
    int h = snprintf(hdr, sizeof hdr,
                     "NATS/1.0\r\nNats-Msg-Id: raw:1:%d\r\nHm-Host: raw\r\nHm-Epoch: 1\r\n"
                     "Hm-Seq: %d\r\nHm-Lines: 100\r\nHm-Dropped: 0\r\n\r\n",
                     i + 1, i + 1);
    static char out[1 << 20];
    int n = snprintf(out, 128, "HPUB hm.raw.bench.raw %d %zu\r\n", h, (size_t)h + v->b->batch_len);
    memcpy(out + n, hdr, (size_t)h);
    memcpy(out + n + h, v->b->batch, v->b->batch_len);
    memcpy(out + n + h + v->b->batch_len, "\r\n", 2);
    return write_all(v->fd, out, (size_t)(n + h) + v->b->batch_len + 2);
}

/* ---- libnats ---- */

static void on_ack(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)nc;
    (void)sub;
    ((variant_state *)closure)->acks++;
    natsMsg_Destroy(m);
}

static int lib_connect(variant_state *v, bool async_acks)
{
    natsOptions *o = NULL;
    natsStatus st = natsOptions_Create(&o);
    if (st == NATS_OK)
        st = natsOptions_SetURL(o, v->b->url);
    if (st == NATS_OK)
        st = natsOptions_SetSendAsap(o, true);
    if (st == NATS_OK)
        st = natsConnection_Connect(&v->nc, o);
    natsOptions_Destroy(o);
    if (st != NATS_OK)
        return fail("connect", st);
    natsInbox *inbox = NULL;
    if ((st = natsInbox_Create(&inbox)) != NATS_OK)
        return fail("inbox", st);
    snprintf(v->inbox, sizeof v->inbox, "%s", (const char *)inbox);
    natsInbox_Destroy(inbox);
    char subj[160];
    snprintf(subj, sizeof subj, "%s.*", v->inbox);
    st = async_acks ? natsConnection_Subscribe(&v->sub, v->nc, subj, on_ack, v)
                    : natsConnection_SubscribeSync(&v->sub, v->nc, subj);
    if (st == NATS_OK)
        st = natsConnection_Flush(v->nc);
    return st == NATS_OK ? 0 : fail("subscribe", st);
}

static int lib_setup_sync(variant_state *v)
{
    return lib_connect(v, false);
}

static int lib_setup_async(variant_state *v)
{
    return lib_connect(v, true);
}

static void lib_teardown(variant_state *v)
{
    for (int k = 0; k < v->nkept; k++)
        natsMsg_Destroy(v->kept[k]);
    v->nkept = 0;
    natsSubscription_Destroy(v->sub);
    natsConnection_Close(v->nc);
    natsConnection_Destroy(v->nc);
}

static int lib_publish_once(variant_state *v, int i)
{
    (void)i;
    natsStatus st = natsConnection_Publish(v->nc, "hm.raw.bench.plain", v->b->batch,
                                           (int)v->b->batch_len);
    return st == NATS_OK ? 0 : fail("publish", st);
}

static natsStatus make_msg(variant_state *v, int i, bool reply, natsMsg **out)
{
    char rep[160], id[64], seq[24];
    snprintf(rep, sizeof rep, "%s.%d", v->inbox, i + 1);
    snprintf(id, sizeof id, "lib:1:%d", i + 1);
    snprintf(seq, sizeof seq, "%d", i + 1);
    natsMsg *m = NULL;
    natsStatus st = natsMsg_Create(&m, "hm.raw.bench.lib", reply ? rep : NULL, v->b->batch,
                                   (int)v->b->batch_len);
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Hm-Host", "lib");
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Hm-Epoch", "1");
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Hm-Seq", seq);
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Hm-Lines", "100");
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Hm-Dropped", "0");
    *out = m;
    return st;
}

/* Takes the acks that came back, without waiting (the agent's way). */
static void poll_acks(variant_state *v, bool destroy)
{
    natsMsg *m;
    while (natsSubscription_NextMsg(&m, v->sub, 0) == NATS_OK) {
        v->acks++;
        if (destroy)
            natsMsg_Destroy(m);
        else if (v->nkept < 64)
            v->kept[v->nkept++] = m;
        else
            natsMsg_Destroy(m);
    }
}

static void destroy_kept(variant_state *v, int every)
{
    if (v->nkept >= every) {
        for (int k = 0; k < v->nkept; k++)
            natsMsg_Destroy(v->kept[k]);
        v->nkept = 0;
    }
}

static int msg_common(variant_state *v, int i, bool reply, bool keep)
{
    natsMsg *m;
    natsStatus st = make_msg(v, i, reply, &m);
    if (st == NATS_OK)
        st = natsConnection_PublishMsg(v->nc, m);
    if (keep && st == NATS_OK)
        v->kept[v->nkept++] = m;
    else
        natsMsg_Destroy(m);
    return st == NATS_OK ? 0 : fail("publish msg", st);
}

static int msg_noreply_once(variant_state *v, int i)
{
    return msg_common(v, i, false, false);
}

static int msg_noreply_keep_once(variant_state *v, int i)
{
    destroy_kept(v, 16);
    return msg_common(v, i, false, true);
}

static int msg_create_only_once(variant_state *v, int i)
{
    natsMsg *m;
    natsStatus st = make_msg(v, i, true, &m);
    natsMsg_Destroy(m);
    return st == NATS_OK ? 0 : fail("create msg", st);
}

static int msg_reply_sync_once(variant_state *v, int i)
{
    poll_acks(v, true);
    return msg_common(v, i, true, false);
}

static int msg_reply_sync_keep_once(variant_state *v, int i)
{
    destroy_kept(v, 32);
    poll_acks(v, false);
    return msg_common(v, i, true, true);
}

static int msg_reply_async_once(variant_state *v, int i)
{
    return msg_common(v, i, true, false);
}

static int msg_reply_every_once(variant_state *v, int i)
{
    destroy_kept(v, 2 * v->every);
    poll_acks(v, false);
    return msg_common(v, i, (i + 1) % v->every == 0, true);
}

/* The sink's way: a reply on every 5th batch, which is then followed by a
 * probe (empty, same Nats-Msg-Id, impossible expected subject sequence)
 * for each of the 4 before it; messages destroyed 16 at a time. */
static int msg_reply_probes_once(variant_state *v, int i)
{
    destroy_kept(v, 16);
    poll_acks(v, false);
    bool ask = (i + 1) % 5 == 0;
    if (msg_common(v, i, ask, true) < 0)
        return -1;
    for (int j = ask ? i - 4 : i; j < i; j++) {
        char rep[160], id[64];
        snprintf(rep, sizeof rep, "%s.%d", v->inbox, j + 1);
        snprintf(id, sizeof id, "lib:1:%d", j + 1);
        natsMsg *m = NULL;
        natsStatus st = natsMsg_Create(&m, "hm.raw.bench.lib", rep, NULL, 0);
        if (st == NATS_OK)
            st = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
        if (st == NATS_OK)
            st = natsMsgHeader_Set(m, "Nats-Expected-Last-Subject-Sequence",
                                   "18446744073709551614");
        if (st == NATS_OK)
            st = natsConnection_PublishMsg(v->nc, m);
        if (m != NULL && v->nkept < 64)
            v->kept[v->nkept++] = m;
        else
            natsMsg_Destroy(m);
        if (st != NATS_OK)
            return fail("probe", st);
    }
    return 0;
}

static int idle_setup(variant_state *v)
{
    (void)v;
    return 0;
}

static int idle_once(variant_state *v, int i)
{
    (void)v;
    (void)i;
    return 0;
}

static void idle_teardown(variant_state *v)
{
    (void)v;
}

static const variant variants[] = {
    {"idle", "the loop alone (subtracted from the others)", idle_setup, idle_once, idle_teardown},
    {"raw-pub", "write() of PUB + batch to a subject no stream takes", raw_setup, raw_pub_once,
     raw_teardown},
    {"raw-hpub", "write() of HPUB + headers + batch to HM_RAW, no reply (stored)", raw_setup,
     raw_hpub_once, raw_teardown},
    {"lib-publish", "natsConnection_Publish to HM_RAW (no natsMsg, no headers)", lib_setup_sync,
     lib_publish_once, lib_teardown},
    {"lib-create", "natsMsg_Create + 6 headers + Destroy, nothing sent", lib_setup_sync,
     msg_create_only_once, lib_teardown},
    {"lib-msg", "natsMsg + headers, PublishMsg, Destroy; no reply", lib_setup_sync,
     msg_noreply_once, lib_teardown},
    {"lib-msg-keep", "the same, messages destroyed 16 at a time", lib_setup_sync,
     msg_noreply_keep_once, lib_teardown},
    {"lib-ack-async", "with reply; acks to an async subscription (callback thread)",
     lib_setup_async, msg_reply_async_once, lib_teardown},
    {"lib-ack-sync", "with reply; acks polled NextMsg(0) each period (the agent's way)",
     lib_setup_sync, msg_reply_sync_once, lib_teardown},
    {"lib-ack-sync-keep", "the same, messages and acks destroyed 32 at a time",
     lib_setup_sync, msg_reply_sync_keep_once, lib_teardown},
    {"lib-ack-every10", "reply on every 10th batch only, destroyed 20 at a time",
     lib_setup_sync, msg_reply_every_once, lib_teardown},
    {"lib-ack5-probes", "reply on every 5th, probes for the 4 before it (the sink's way)",
     lib_setup_sync, msg_reply_probes_once, lib_teardown},
};

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nats_publish_cost HOST PORT [iterations] [interval_ms] "
                        "[batch_bytes] [variant]\n");
        return 2;
    }
    bench b = {.host = argv[1], .port = atoi(argv[2])};
    b.iterations = argc > 3 ? atoi(argv[3]) : 200;
    b.interval_ms = argc > 4 ? atoi(argv[4]) : 50;
    b.batch_len = argc > 5 ? (size_t)atol(argv[5]) : 10240;
    const char *only = argc > 6 ? argv[6] : NULL;
    if (b.port <= 0 || b.iterations <= 0 || b.interval_ms < 0 || b.batch_len == 0 ||
        b.batch_len > 512 * 1024) {
        fprintf(stderr, "nats_publish_cost: bad arguments\n");
        return 2;
    }
    snprintf(b.url, sizeof b.url, "nats://%s:%d", b.host, b.port);
    b.batch = malloc(b.batch_len);
    if (b.batch == NULL)
        return 1;
    /* line-protocol-like text, one line per ~100 bytes */
    for (size_t k = 0; k < b.batch_len; k++)
        b.batch[k] = (k % 100 == 99) ? '\n' : (char)('a' + k % 26);
    b.batch[b.batch_len - 1] = '\n';
    natsStatus st = nats_Open(-1);
    if (st != NATS_OK)
        return fail("nats_Open", st) < 0 ? 1 : 0;
    double idle_proc = 0, idle_thread = 0;
    printf("%-18s %10s %10s  %s\n", "variant", "proc_us", "thread_us", "what (per batch, idle "
                                                                        "subtracted)");
    for (size_t k = 0; k < sizeof variants / sizeof *variants; k++) {
        const variant *var = &variants[k];
        if (only != NULL && k > 0 && strcmp(only, var->name) != 0)
            continue;
        variant_state v = {.b = &b, .fd = -1, .every = 10};
        if (var->setup(&v) < 0)
            return 1;
        /* warm-up */
        for (int i = 0; i < 5; i++) {
            if (var->once(&v, i) < 0)
                return 1;
            sleep_ms(b.interval_ms);
        }
        int64_t p0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 5; i < 5 + b.iterations; i++) {
            if (var->once(&v, i) < 0)
                return 1;
            sleep_ms(b.interval_ms);
        }
        double proc = (double)(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - p0) / 1e3 / b.iterations;
        double thread = (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e3 / b.iterations;
        var->teardown(&v);
        if (k == 0) {
            idle_proc = proc;
            idle_thread = thread;
            printf("%-18s %10.1f %10.1f  %s\n", var->name, proc, thread, var->what);
        } else {
            printf("%-18s %10.1f %10.1f  %s\n", var->name, proc - idle_proc,
                   thread - idle_thread, var->what);
        }
        fflush(stdout);
    }
    free(b.batch);
    nats_CloseAndWait(2000);
    return 0;
}
