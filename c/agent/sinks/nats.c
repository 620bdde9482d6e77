/* nats: every batch goes to the spool first (write-ahead, the same files
 * as the spool sink), then is published with JetStream to
 * hm.raw.<rack>.<host> with the headers of docs/transport.md. The outbox
 * (nats_outbox.c) numbers the batches and keeps which ones the stream has
 * not acknowledged yet; they are replayed from the spool, in order, after
 * a disconnection or a restart.
 *
 * Everything runs on the agent's own thread, once per period, and never
 * waits for the server: acks that arrived since the last period are taken
 * from a synchronous subscription without blocking, then at most
 * WINDOW_BATCHES batches are in flight. Each batch is published as a plain
 * message with a reply subject <inbox>.<seq>; JetStream answers a publish
 * to a stream's subject with its PubAck on that subject. Doing it so
 * rather than with js_PublishMsgAsync keeps the acks off libnats'
 * delivery thread (one thread wake-up and a lock less per batch), names
 * the batch in the ack's subject, and leaves the flow control to the
 * outbox, which can always fall back to the spool instead of stalling
 * (js_PublishMsgAsync blocks when its own pending limit is reached).
 *
 * The connection is driven by the agent's thread too, through libnats'
 * external event loop interface: libnats starts no reader thread and
 * writes nothing itself. Once per period the sink reads what came (one
 * recv(2), EAGAIN when nothing did: the acks of the last period), then
 * publishes, then writes libnats' buffer (one write(2) for all of this
 * period's messages). Measured (docs/transport.md "Agent sink cost"): a
 * wake-up of libnats' reader thread per ack cost about as much as the
 * publish itself on this VM. Reconnection still runs in libnats' own
 * thread, which attaches the new socket. A period longer than
 * EVLOOP_PERIOD_MAX_MS would leave the server's PINGs unanswered too long
 * (it closes a client that misses two, 2 min apart): such an agent keeps
 * libnats' reader thread, whose cost per sample no longer matters. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nats/nats.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hm_timer.h"
#include "hm_log.h"
#include "hm_nats_client.h"
#include "hm_parse.h"
#include "nats_control.h"
#include "nats_outbox.h"
#include "sink.h"
#include "spool_files.h"

/* A batch whose ack has not come back after this is sent again. */
#define ACK_TIMEOUT_NS (INT64_C(5) * 1000000000)
/* Batches held in memory between publishes (nats.publish_every_ms). */
#define HELD_BATCHES 64
#define HELD_BYTES (UINT64_C(1) << 20)
/* Longest period driven by the agent's thread (see the top comment). */
#define EVLOOP_PERIOD_MAX_MS 30000
/* Published messages and acks are destroyed this many at a time: each
 * natsMsg_Destroy wakes libnats' garbage collector thread when it sleeps. */
#define TRASH_MSGS 16
/* Batches in flight at most; more wait in the spool. */
#define WINDOW_BATCHES 64
/* Replay read from the spool per period at most. */
#define REPLAY_BYTES_PER_CYCLE (UINT64_C(2) << 20)
/* The acked cursor goes to the outbox log at least this often (a crash
 * re-sends at most this much, which the stream drops as duplicates). */
#define CURSOR_WRITE_NS (INT64_C(5) * 1000000000)
/* Batches buffered by libnats while it reconnects (those in flight when
 * the link went down). */
#define RECONNECT_BUF_BYTES (8 << 20)
/* A connection libnats closed for good (it does so when the TLS handshake
 * fails at the first connection: a server the agent does not trust) is made
 * again after this wait, doubled up to the maximum while it keeps failing. */
#define REDIAL_FIRST_NS (INT64_C(1) * 1000000000)
#define REDIAL_MAX_NS (INT64_C(60) * 1000000000)

typedef struct spool_file {
    int64_t start_ns;
    uint64_t file_seq;
    uint64_t last_seq; /* the last batch written to it */
} spool_file;

typedef struct nats_state {
    hm_outbox ob;
    bool ob_open;
    hm_spool *spool;
    natsOptions *opts;
    natsConnection *nc;
    natsSubscription *acks;
    hm_nats_control ctl; /* control requests over this connection */
    bool serviced; /* service() ran since the last serve_requests */
    char inbox[sizeof "_INBOX.." + 64 + 32]; /* _INBOX.<host>.<unique>: host[64] below */
    char subject[256];
    char url[1024]; /* nats.url, for messages */
    char host[64];
    char epoch[24];
    atomic_uint_fast64_t reconnects; /* written by libnats' callback thread */
    uint64_t reconnects_seen;
    bool connected;
    /* nc == NULL: closed for good; made again at redial_at_ns (see REDIAL_*) */
    int64_t redial_at_ns, redial_wait_ns;
    uint64_t published, replayed, duplicates, nacks;
    spool_file *files; /* this sink's spool files with batches, oldest first */
    size_t nfiles, files_cap;
    int64_t cursor_written_ns;
    char *rbuf;
    size_t rbuf_cap;
    /* the event loop (see the top comment): written by libnats' threads */
    atomic_int sock;        /* -1 when detached */
    atomic_bool want_write; /* libnats has buffered bytes to write */
    bool evloop;            /* else libnats' reader thread reads */
    natsMsg *trash[TRASH_MSGS];
    size_t ntrash;
    /* nats.publish_every_ms: live batches wait in memory (their bytes in
     * held, back to back) until it is time to publish, then go together:
     * one write for all of them, their acks in one recv. */
    int64_t publish_every_ns, period_ns, published_ns;
    char *held;
    size_t held_len, held_cap;
    struct {
        uint64_t seq, lines;
        size_t off, len;
    } held_batch[HELD_BATCHES];
    size_t nheld;
    bool said_no_stream, said_nack, said_read;
} nats_state;

/* libnats is opened once per process; a reload opens the new sink before
 * it closes the old one, so the library is closed with the last sink. */
static int nats_sinks_open;

static int remember_file(nats_state *s, int64_t start_ns, uint64_t file_seq, uint64_t last_seq,
                         hm_error *err)
{
    if (s->nfiles > 0 && s->files[s->nfiles - 1].start_ns == start_ns &&
        s->files[s->nfiles - 1].file_seq == file_seq) {
        s->files[s->nfiles - 1].last_seq = last_seq;
        return 0;
    }
    if (s->nfiles == s->files_cap) {
        size_t cap = s->files_cap ? s->files_cap * 2 : 16;
        spool_file *bigger = realloc(s->files, cap * sizeof *bigger);
        if (bigger == NULL)
            return hm_error_set(err, "out of memory");
        s->files = bigger;
        s->files_cap = cap;
    }
    s->files[s->nfiles++] = (spool_file){start_ns, file_seq, last_seq};
    return 0;
}

static void forget_file(nats_state *s, size_t i)
{
    memmove(s->files + i, s->files + i + 1, (s->nfiles - i - 1) * sizeof *s->files);
    s->nfiles--;
}

/* The spool's size bound removed a file: its pending batches are dropped. */
static void on_spool_removed(void *arg, int64_t start_ns, uint64_t file_seq, uint64_t lines)
{
    (void)lines;
    nats_state *s = arg;
    hm_error e;
    uint64_t before = s->ob.dropped_batches;
    if (hm_outbox_file_removed(&s->ob, start_ns, file_seq, &e) < 0)
        hm_log_warn("nats: %s", e.msg);
    if (s->ob.dropped_batches > before)
        hm_log_warn("nats: spool bound reached: %llu batches never published were removed "
                    "(Hm-Dropped %llu)", (unsigned long long)(s->ob.dropped_batches - before),
                    (unsigned long long)s->ob.dropped_batches);
    for (size_t i = 0; i < s->nfiles; i++)
        if (s->files[i].start_ns == start_ns && s->files[i].file_seq == file_seq) {
            forget_file(s, i);
            break;
        }
}

/* The event loop callbacks: libnats calls them from the thread that
 * connects (ours at open, its reconnect thread later). */
static natsStatus ev_attach(void **user, void *loop, natsConnection *nc, natsSock sock)
{
    (void)nc;
    nats_state *s = loop;
    atomic_store(&s->sock, (int)sock);
    *user = s;
    return NATS_OK;
}

static natsStatus ev_read(void *user, bool add)
{
    (void)user;
    (void)add; /* read every period anyway */
    return NATS_OK;
}

static natsStatus ev_write(void *user, bool add)
{
    atomic_store(&((nats_state *)user)->want_write, add);
    return NATS_OK;
}

static natsStatus ev_detach(void *user)
{
    atomic_store(&((nats_state *)user)->sock, -1);
    return NATS_OK;
}

/* Writes what libnats buffered (one write(2); the rest, if the socket
 * is full, at the next period). */
static void drive_write(nats_state *s)
{
    if (s->nc != NULL && atomic_load(&s->want_write) && atomic_load(&s->sock) >= 0)
        natsConnection_ProcessWriteEvent(s->nc);
}

/* natsMsg_Destroy later, several at once (see TRASH_MSGS). */
static void trash_msg(nats_state *s, natsMsg *m)
{
    if (s->ntrash == TRASH_MSGS) {
        for (size_t i = 0; i < s->ntrash; i++)
            natsMsg_Destroy(s->trash[i]);
        s->ntrash = 0;
    }
    s->trash[s->ntrash++] = m;
}

static void on_reconnected(natsConnection *nc, void *closure)
{
    (void)nc;
    nats_state *s = closure;
    atomic_fetch_add(&s->reconnects, 1);
}

/* Reads a pending batch back from its spool file into s->rbuf. Returns
 * its length, 0 if nothing of it is left (dropped), -1 on a read error. */
static ssize_t read_batch(nats_state *s, const hm_outbox_entry *e, uint64_t *lines)
{
    char path[PATH_MAX];
    bool is_open = hm_spool_is_open_file(s->spool, e->start_ns, e->file_seq);
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
        if (hm_spool_path(s->spool, e->start_ns, e->file_seq, attempt == 0 ? is_open : !is_open,
                          path, sizeof path) < 0)
            return -1;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
            return -1;
    }
    if (fd < 0)
        return 0; /* the file is gone */
    if (s->rbuf_cap < e->len) {
        char *bigger = realloc(s->rbuf, e->len);
        if (bigger == NULL) {
            close(fd);
            return -1;
        }
        s->rbuf = bigger;
        s->rbuf_cap = e->len;
    }
    size_t got = 0;
    while (got < e->len) {
        ssize_t r = pread(fd, s->rbuf + got, e->len - got, (off_t)(e->offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    *lines = e->lines;
    if (got == e->len && s->rbuf[got - 1] == '\n')
        return (ssize_t)got;
    /* Cut by a crash (the spool cut the file after its last whole line):
     * what is left of the batch goes, the lines lost are counted. */
    while (got > 0 && s->rbuf[got - 1] != '\n')
        got--;
    uint64_t kept = 0;
    for (size_t i = 0; i < got; i++)
        kept += s->rbuf[i] == '\n';
    *lines = kept;
    if (got > 0) {
        s->ob.dropped_lines += e->lines > kept ? e->lines - kept : 0;
        hm_log_warn("nats: batch %llu was cut by a crash: %llu of its %llu lines are published",
                    (unsigned long long)e->seq, (unsigned long long)kept,
                    (unsigned long long)e->lines);
    }
    return (ssize_t)got;
}

static natsStatus set_header_u64(natsMsg *m, const char *key, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    return natsMsgHeader_Set(m, key, text);
}

/* Publishes one batch (never waits for the server). */
static natsStatus publish(nats_state *s, uint64_t seq, const char *data, size_t len,
                          uint64_t lines, bool replay)
{
    char reply[160], id[128];
    snprintf(reply, sizeof reply, "%s.%llu", s->inbox, (unsigned long long)seq);
    snprintf(id, sizeof id, "%s:%s:%llu", s->host, s->epoch, (unsigned long long)seq);
    natsMsg *m = NULL;
    natsStatus st = natsMsg_Create(&m, s->subject, reply, data, (int)len);
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Hm-Host", s->host);
    if (st == NATS_OK)
        st = natsMsgHeader_Set(m, "Hm-Epoch", s->epoch);
    if (st == NATS_OK)
        st = set_header_u64(m, "Hm-Seq", seq);
    if (st == NATS_OK)
        st = set_header_u64(m, "Hm-Lines", lines);
    if (st == NATS_OK)
        st = set_header_u64(m, "Hm-Dropped", s->ob.dropped_batches);
    if (st == NATS_OK && replay)
        st = natsMsgHeader_Set(m, "Hm-Replay", "1");
    if (st == NATS_OK)
        st = natsConnection_PublishMsg(s->nc, m);
    if (m != NULL)
        trash_msg(s, m);
    return st;
}

static void handle_ack(nats_state *s, natsMsg *m)
{
    const char *subj = natsMsg_GetSubject(m);
    const char *dot = strrchr(subj, '.');
    char *end;
    uint64_t seq = dot != NULL ? strtoull(dot + 1, &end, 10) : 0;
    if (dot == NULL || *end != '\0' || seq == 0)
        return;
    const char *data = natsMsg_GetData(m);
    size_t len = (size_t)natsMsg_GetDataLength(m);
    hm_outbox_entry *e = hm_outbox_find(&s->ob, seq);
    if (data != NULL && memmem(data, len, "\"stream\"", 8) != NULL &&
        memmem(data, len, "\"error\"", 7) == NULL) {
        /* the server writes "duplicate": true (with a space), only when true */
        if (memmem(data, len, "\"duplicate\"", 11) != NULL)
            s->duplicates++;
        hm_outbox_ack(&s->ob, seq);
        return;
    }
    /* A negative ack (stream full, no stream, not the leader): sent again
     * later from the spool. */
    s->nacks++;
    if (!s->said_nack)
        hm_log_warn("nats: %s refused batch %llu: %.*s (sent again later; said once)", s->subject,
                    (unsigned long long)seq, (int)(len > 200 ? 200 : len), data ? data : "");
    s->said_nack = true;
    if (e != NULL)
        hm_outbox_unsend(&s->ob, e);
}

/* Takes the acks libnats has read; how many. */
static int take_acks(nats_state *s)
{
    int taken = 0;
    while (s->acks != NULL) {
        /* NextMsg(0) on an empty queue costs a futex(2) (a timed wait
         * that has already expired): look first. */
        int pending_msgs = 0, pending_bytes = 0;
        if (natsSubscription_GetPending(s->acks, &pending_msgs, &pending_bytes) != NATS_OK ||
            pending_msgs == 0)
            break;
        natsMsg *m = NULL;
        natsStatus st = natsSubscription_NextMsg(&m, s->acks, 0);
        if (st == NATS_NO_RESPONDERS) {
            if (!s->said_no_stream)
                hm_log_warn("nats: no JetStream stream takes %s (declare HM_RAW, docs/transport.md); "
                            "batches stay in the spool and are sent again (said once)",
                            s->subject);
            s->said_no_stream = true;
            /* The answer does not say which batch it was for; everything in
             * flight was sent before this period, so all of it goes again. */
            hm_outbox_requeue(&s->ob, INT64_MAX);
            continue;
        }
        if (st != NATS_OK)
            break; /* NATS_TIMEOUT: none left */
        handle_ack(s, m);
        trash_msg(s, m);
        taken++;
    }
    return taken;
}

/* Reads what came (acks, the server's PINGs), reconnections, lost acks:
 * no waiting. */
static void redial(nats_state *s, int64_t now_mono);

static void service(nats_state *s, int64_t now_mono)
{
    s->serviced = true;
    if (s->nc == NULL || natsConnection_IsClosed(s->nc)) {
        redial(s, now_mono);
        if (s->nc == NULL) {
            s->connected = false;
            return;
        }
    }
    drive_write(s); /* what the reconnect or ping timer threads buffered */
    /* One recv(2) of up to libnats' 32 KiB buffer a period (~400 acks;
     * at most 64 batches are in flight): what is left waits a period. */
    if (atomic_load(&s->sock) >= 0)
        natsConnection_ProcessReadEvent(s->nc);
    take_acks(s);
    drive_write(s); /* PONGs */
    uint64_t reconnects = atomic_load(&s->reconnects);
    bool connected = natsConnection_Status(s->nc) == NATS_CONN_STATUS_CONNECTED;
    if (reconnects != s->reconnects_seen) {
        /* Acks of what was in flight may be lost: send it again (the
         * stream drops what it already has by Nats-Msg-Id). */
        s->reconnects_seen = reconnects;
        hm_outbox_requeue(&s->ob, INT64_MAX);
    }
    if (connected != s->connected) {
        char url[256] = "";
        if (connected && natsConnection_GetConnectedUrl(s->nc, url, sizeof url) != NATS_OK)
            url[0] = '\0';
        if (connected)
            s->redial_wait_ns = 0;
        if (connected)
            hm_log_notice("nats: connected to %s; %llu batches to publish from the spool", url,
                          (unsigned long long)hm_outbox_pending(&s->ob));
        else
            hm_log_warn("nats: not connected; batches stay in the spool until it comes back");
        s->connected = connected;
    }
    if (s->ob.inflight > 0)
        hm_outbox_requeue(&s->ob, now_mono - ACK_TIMEOUT_NS);
}

/* The held batch seq (see nats.publish_every_ms), or NULL. */
static const char *held_batch(const nats_state *s, uint64_t seq, size_t *len, uint64_t *lines)
{
    if (s->nheld == 0 || seq < s->held_batch[0].seq || seq - s->held_batch[0].seq >= s->nheld)
        return NULL;
    size_t i = (size_t)(seq - s->held_batch[0].seq);
    *len = s->held_batch[i].len;
    *lines = s->held_batch[i].lines;
    return s->held + s->held_batch[i].off;
}

/* Publishes the pending batches in seq order, up to the window; live_seq
 * is this period's batch, still in memory, and so are the held ones. */
static void pump(nats_state *s, int64_t now_mono, uint64_t live_seq, const char *live,
                 size_t live_len, uint64_t live_lines)
{
    if (!s->connected)
        return;
    uint64_t replay_bytes = 0;
    hm_outbox_entry *e;
    while (s->ob.inflight < WINDOW_BATCHES && replay_bytes < REPLAY_BYTES_PER_CYCLE &&
           (e = hm_outbox_next_unsent(&s->ob)) != NULL) {
        uint64_t seq = e->seq;
        natsStatus st;
        size_t held_len;
        uint64_t held_lines;
        const char *held = held_batch(s, seq, &held_len, &held_lines);
        if (seq == live_seq && live != NULL) {
            st = publish(s, seq, live, live_len, live_lines, false);
        } else if (held != NULL) {
            st = publish(s, seq, held, held_len, held_lines, false);
        } else {
            uint64_t lines;
            ssize_t len = read_batch(s, e, &lines);
            if (len < 0) {
                if (!s->said_read)
                    hm_log_warn("nats: reading batch %llu back from the spool: %s (said once)",
                                (unsigned long long)seq, strerror(errno));
                s->said_read = true;
                return; /* tried again next period */
            }
            if (len == 0) {
                hm_error err;
                hm_log_warn("nats: batch %llu is no longer in the spool: counted as dropped",
                            (unsigned long long)seq);
                if (hm_outbox_drop(&s->ob, seq, e->lines, &err) < 0) {
                    hm_log_warn("nats: %s", err.msg);
                    return;
                }
                continue;
            }
            replay_bytes += (uint64_t)len;
            st = publish(s, seq, s->rbuf, (size_t)len, lines, true);
            if (st == NATS_OK)
                s->replayed++;
        }
        if (st != NATS_OK)
            return; /* disconnected meanwhile: the spool keeps it */
        hm_outbox_mark_sent(&s->ob, e, now_mono);
        s->published++;
    }
}

/* pump, then one write of all it published. */
static void pump_and_write(nats_state *s, int64_t now_mono, uint64_t live_seq, const char *live,
                           size_t live_len, uint64_t live_lines)
{
    pump(s, now_mono, live_seq, live, live_len, live_lines);
    drive_write(s);
}

/* Persists the cursor now and then, and removes closed spool files whose
 * batches are all done (after the cursor that says so is written). */
static void tidy(nats_state *s, int64_t now_mono, bool force)
{
    bool removable = s->nfiles > 0 && s->files[0].last_seq <= s->ob.acked_seq &&
                     !hm_spool_is_open_file(s->spool, s->files[0].start_ns, s->files[0].file_seq);
    if (!force && !removable && now_mono - s->cursor_written_ns < CURSOR_WRITE_NS)
        return;
    hm_error err;
    if (hm_outbox_sync(&s->ob, &err) < 0) {
        hm_log_warn("nats: %s", err.msg);
        return;
    }
    s->cursor_written_ns = now_mono;
    while (s->nfiles > 0 && s->files[0].last_seq <= s->ob.acked_seq &&
           !hm_spool_is_open_file(s->spool, s->files[0].start_ns, s->files[0].file_seq)) {
        if (hm_spool_remove(s->spool, s->files[0].start_ns, s->files[0].file_seq, &err) < 0) {
            hm_log_warn("nats: %s", err.msg);
            return;
        }
        forget_file(s, 0);
    }
}

/* On start: closed files of earlier runs whose batches are all done are
 * removed; the others are remembered until they are. */
static int adopt_old_files(nats_state *s, hm_error *err)
{
    DIR *d = opendir(hm_spool_dir(s->spool));
    if (d == NULL)
        return hm_error_errno(err, "listing %s", hm_spool_dir(s->spool));
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        int64_t start_ns;
        uint64_t file_seq;
        if (!hm_spool_parse_name(de->d_name, hm_spool_host(s->spool), &start_ns, &file_seq) ||
            !hm_outbox_known_run(&s->ob, start_ns))
            continue; /* not written by this sink: left alone */
        uint64_t last = hm_outbox_file_pending(&s->ob, start_ns, file_seq);
        rc = last == 0 ? hm_spool_remove(s->spool, start_ns, file_seq, err)
                       : remember_file(s, start_ns, file_seq, last, err);
    }
    closedir(d);
    if (rc == 0 && s->nfiles > 1) {
        /* oldest first, as the batches are */
        for (size_t i = 1; i < s->nfiles; i++)
            for (size_t j = i; j > 0 && s->files[j].last_seq < s->files[j - 1].last_seq; j--) {
                spool_file t = s->files[j];
                s->files[j] = s->files[j - 1];
                s->files[j - 1] = t;
            }
    }
    return rc;
}

static int dial(nats_state *s, hm_error *err);
static void drop_connection(nats_state *s);

static int connect_servers(nats_state *s, const hm_agent_config *cfg, hm_error *err)
{
    char urls[sizeof cfg->nats_url];
    char *list[32];
    snprintf(urls, sizeof urls, "%s", cfg->nats_url);
    int n = hm_split_list(urls, list, 32);
    if (n <= 0)
        return hm_error_set(err, "nats.url: expected 1 to 32 server URLs, got '%s'", cfg->nats_url);
    char name[128];
    snprintf(name, sizeof name, "hushmon-agent %s", s->host);
    natsStatus st = natsOptions_Create(&s->opts);
    if (st == NATS_OK)
        st = natsOptions_SetServers(s->opts, (const char **)list, n);
    if (st == NATS_OK)
        st = natsOptions_SetName(s->opts, name);
    hm_nats_tls configured = {0};
    snprintf(configured.ca_file, sizeof configured.ca_file, "%s", cfg->nats_ca_file);
    snprintf(configured.cert_file, sizeof configured.cert_file, "%s", cfg->nats_cert_file);
    snprintf(configured.key_file, sizeof configured.key_file, "%s", cfg->nats_key_file);
    snprintf(configured.hostname, sizeof configured.hostname, "%s", cfg->nats_tls_hostname);
    int secure = st == NATS_OK ? hm_nats_client_setup(s->opts, list[0], &configured, err) : 0;
    if (secure < 0)
        return -1;
    /* Reconnect forever on its own, every half second, and keep what
     * was being sent meanwhile; the first connection too is retried in
     * the background, so an agent starts while its leaf is down (that
     * needs the connected callback: without one, natsConnection_Connect
     * blocks until it connects). */
    if (st == NATS_OK)
        st = natsOptions_SetMaxReconnect(s->opts, -1);
    if (st == NATS_OK)
        st = natsOptions_SetReconnectWait(s->opts, 500);
    if (st == NATS_OK)
        st = natsOptions_SetReconnectBufSize(s->opts, RECONNECT_BUF_BYTES);
    if (st == NATS_OK)
        st = natsOptions_SetTimeout(s->opts, 2000);
    /* Written by the publishing thread itself: measured, one wake-up of
     * libnats' flusher thread per batch cost more (76 us per sample on
     * loopback) than the write it saves the agent's thread. */
    if (st == NATS_OK)
        st = natsOptions_SetSendAsap(s->opts, true);
    if (st == NATS_OK)
        st = natsOptions_SetRetryOnFailedConnect(s->opts, true, on_reconnected, s);
    /* Read and written by the agent's thread (see the top comment). Not
     * with TLS: the agent's one recv(2) per period cannot see records
     * OpenSSL has already read and holds, and the agent stalled (measured:
     * no sample after the first few); libnats' own reader thread drains them. */
    s->evloop = cfg->period_ms <= EVLOOP_PERIOD_MAX_MS && secure == 0;
    if (st == NATS_OK && s->evloop)
        st = natsOptions_SetEventLoop(s->opts, s, ev_attach, ev_read, ev_write, ev_detach);
    if (st == NATS_OK)
        st = natsOptions_SetReconnectedCB(s->opts, on_reconnected, s);
    if (st != NATS_OK)
        return hm_error_set(err, "nats options: %s", hm_nats_error_text(st));
    snprintf(s->url, sizeof s->url, "%s", cfg->nats_url);
    if (dial(s, err) == 0)
        return 0;
    if (s->nc == NULL || !natsConnection_IsClosed(s->nc))
        return -1;
    /* libnats closed the connection before it was made (a TLS handshake
     * refused at the first try): the agent keeps sampling into its spool
     * and dials again, as it would after any outage. */
    hm_log_warn("nats: %s; batches stay in the spool, dialling again with back-off up to "
                "%lld s", err->msg, (long long)(REDIAL_MAX_NS / 1000000000));
    drop_connection(s);
    s->redial_wait_ns = REDIAL_FIRST_NS;
    s->redial_at_ns = hm_monotonic_ns() + s->redial_wait_ns;
    return 0;
}

/* The connection and its subscriptions (the options are made once). */
static int dial(nats_state *s, hm_error *err)
{
    natsStatus st = natsConnection_Connect(&s->nc, s->opts);
    if (st != NATS_OK && st != NATS_NOT_YET_CONNECTED)
        return hm_error_set(err, "connecting to %s: %s", s->url, hm_nats_error_text(st));
    /* The acks come to _INBOX.<host>.<unique>: a node's login may read
     * its own inbox only, not the replies and pulled batches of others
     * (python/hushmon/transport/natsusers.py, node_role). */
    natsInbox *inbox = NULL;
    st = natsInbox_Create(&inbox);
    if (st != NATS_OK)
        return hm_error_set(err, "nats inbox: %s", hm_nats_error_text(st));
    const char *unique = strchr((const char *)inbox, '.');
    snprintf(s->inbox, sizeof s->inbox, "_INBOX.%s%s", s->host, unique != NULL ? unique : ".x");
    natsInbox_Destroy(inbox);
    char acks[sizeof s->inbox + 4];
    snprintf(acks, sizeof acks, "%s.*", s->inbox);
    st = natsConnection_SubscribeSync(&s->acks, s->nc, acks);
    if (st != NATS_OK)
        return hm_error_set(err, "subscribing to %s: %s", acks, hm_nats_error_text(st));
    if (hm_nats_control_subscribe(&s->ctl, s->nc, s->host, err) < 0)
        return -1;
    drive_write(s); /* the SUBs */
    return 0;
}

static void drop_connection(nats_state *s)
{
    if (s->acks != NULL)
        natsSubscription_Destroy(s->acks);
    s->acks = NULL;
    hm_nats_control_unsubscribe(&s->ctl);
    if (s->nc != NULL) {
        natsConnection_Close(s->nc);
        natsConnection_Destroy(s->nc);
    }
    s->nc = NULL;
    atomic_store(&s->sock, -1);
    atomic_store(&s->want_write, false);
}

/* A connection closed for good is made again, with back-off (said once
 * until a connection is up); what was in flight goes again from the spool. */
static void redial(nats_state *s, int64_t now_mono)
{
    if (s->nc != NULL) {
        if (s->redial_wait_ns == 0)
            hm_log_warn("nats: the connection to %s was closed; batches stay in the spool, "
                        "dialling again with back-off up to %lld s (said once)", s->url,
                        (long long)(REDIAL_MAX_NS / 1000000000));
        drop_connection(s);
        hm_outbox_requeue(&s->ob, INT64_MAX);
    } else if (now_mono < s->redial_at_ns) {
        return;
    } else {
        hm_error err;
        if (dial(s, &err) == 0)
            return; /* up, or being made in the background */
        hm_log_warn("nats: %s", err.msg);
        drop_connection(s);
    }
    s->redial_wait_ns = s->redial_wait_ns == 0 ? REDIAL_FIRST_NS
                        : s->redial_wait_ns * 2 > REDIAL_MAX_NS ? REDIAL_MAX_NS
                                                                : s->redial_wait_ns * 2;
    s->redial_at_ns = now_mono + s->redial_wait_ns;
}

static void release(nats_state *s)
{
    for (size_t i = 0; i < s->ntrash; i++)
        natsMsg_Destroy(s->trash[i]);
    s->ntrash = 0;
    drop_connection(s);
    if (s->opts != NULL)
        natsOptions_Destroy(s->opts);
    if (s->ob_open) {
        hm_error e;
        if (hm_outbox_close(&s->ob, &e) < 0)
            hm_log_warn("nats: %s", e.msg);
    }
    free(s->files);
    free(s->rbuf);
    free(s->held);
    free(s);
    if (--nats_sinks_open == 0)
        nats_CloseAndWait(2000);
}

static int nats_open(void **state, const hm_agent_config *cfg, int64_t start_ns, hm_error *err)
{
    nats_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    nats_sinks_open++;
    atomic_init(&s->reconnects, 0);
    atomic_init(&s->sock, -1);
    atomic_init(&s->want_write, false);
    snprintf(s->host, sizeof s->host, "%s", cfg->host);
    s->publish_every_ns = cfg->nats_publish_every_ms * 1000000;
    s->period_ns = cfg->period_ms * 1000000;
    snprintf(s->subject, sizeof s->subject, "hm.raw.%s.%s", cfg->nats_rack, cfg->host);
    int rc = hm_spool_mkdir(cfg->spool_dir, err);
    if (rc == 0)
        rc = hm_outbox_open(&s->ob, cfg->spool_dir, start_ns, hm_realtime_ns(), err);
    s->ob_open = rc == 0;
    if (rc == 0)
        rc = hm_spool_open(&s->spool, cfg, start_ns, on_spool_removed, s, err);
    if (rc == 0) {
        snprintf(s->epoch, sizeof s->epoch, "%lld", (long long)s->ob.epoch_ns);
        rc = adopt_old_files(s, err);
    }
    if (rc == 0 && hm_outbox_sync(&s->ob, err) < 0)
        rc = -1;
    if (rc == 0) {
        /* libnats' threads (timers and callbacks from natsOptions_Create
         * on, reader and flusher) inherit this thread's signal mask: with
         * every signal blocked there, SIGTERM, SIGINT and SIGHUP reach the
         * agent's signalfd instead of ending the process from another
         * thread. */
        sigset_t all, old;
        sigfillset(&all);
        int sigrc = pthread_sigmask(SIG_BLOCK, &all, &old);
        if (sigrc != 0) {
            rc = hm_error_set(err, "pthread_sigmask: %s", strerror(sigrc));
        } else {
            rc = connect_servers(s, cfg, err);
            sigrc = pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (sigrc != 0 && rc == 0)
                rc = hm_error_set(err, "pthread_sigmask: %s", strerror(sigrc));
        }
    }
    if (rc < 0) {
        if (s->spool != NULL) {
            hm_error e;
            if (hm_spool_close(s->spool, &e) < 0)
                hm_log_warn("%s", e.msg);
        }
        release(s);
        return -1;
    }
    s->cursor_written_ns = hm_monotonic_ns();
    uint64_t pending = hm_outbox_pending(&s->ob);
    if (pending > 0)
        hm_log_notice("nats: %llu batches of earlier runs to publish from the spool (epoch %s, "
                      "from seq %llu)", (unsigned long long)pending, s->epoch,
                      (unsigned long long)(s->ob.acked_seq + 1));
    *state = s;
    return 0;
}

/* Keeps a live batch in memory until the next publish; false when it
 * cannot (no memory, not next to the held ones): then all go now. */
static bool hold(nats_state *s, uint64_t seq, const char *buf, size_t len, uint64_t lines)
{
    if (s->nheld > 0 && seq != s->held_batch[s->nheld - 1].seq + 1)
        return false;
    if (s->held_cap < s->held_len + len) {
        size_t cap = s->held_len + len > 2 * s->held_cap ? s->held_len + len : 2 * s->held_cap;
        char *bigger = realloc(s->held, cap);
        if (bigger == NULL)
            return false;
        s->held = bigger;
        s->held_cap = cap;
    }
    memcpy(s->held + s->held_len, buf, len);
    s->held_batch[s->nheld].seq = seq;
    s->held_batch[s->nheld].lines = lines;
    s->held_batch[s->nheld].off = s->held_len;
    s->held_batch[s->nheld].len = len;
    s->nheld++;
    s->held_len += len;
    return true;
}

static int nats_write(void *state, const char *buf, size_t len, uint64_t lines, hm_error *err)
{
    nats_state *s = state;
    int64_t now = hm_monotonic_ns();
    hm_spool_pos pos;
    uint64_t seq;
    if (hm_spool_reserve(s->spool, len, &pos, err) < 0)
        return -1;
    /* The record first, then the bytes: after a crash between the two the
     * batch is found missing and counted, never published half unnoticed. */
    if (hm_outbox_add(&s->ob, pos.start_ns, pos.file_seq, pos.offset, len, lines, &seq, err) < 0)
        return -1;
    if (remember_file(s, pos.start_ns, pos.file_seq, seq, err) < 0)
        return -1;
    if (hm_spool_append(s->spool, buf, len, err) < 0) {
        hm_error e;
        if (hm_outbox_drop(&s->ob, seq, 0, &e) < 0) /* the agent counts its lines */
            hm_log_warn("nats: %s", e.msg);
        return -1;
    }
    /* Time to publish (half a period of slack for the timer's jitter), or
     * the memory for held batches is full: everything goes now. While
     * disconnected nothing is held: a batch sampled then goes from the
     * spool as a replay (Hm-Replay), however soon the link comes back. */
    bool due = now - s->published_ns >= s->publish_every_ns - s->period_ns / 2 ||
               s->nheld == HELD_BATCHES || s->held_len + len > HELD_BYTES || !s->connected;
    if (!due && hold(s, seq, buf, len, lines)) {
        tidy(s, now, false);
        return 0;
    }
    service(s, now);
    pump_and_write(s, now, seq, buf, len, lines);
    s->nheld = 0; /* published, or read back from the spool later */
    s->held_len = 0;
    s->published_ns = now;
    tidy(s, now, false);
    return 0;
}

static int nats_flush(void *state, hm_error *err)
{
    nats_state *s = state;
    if (hm_spool_flush(s->spool, err) < 0)
        return -1;
    int64_t now = hm_monotonic_ns();
    service(s, now);
    pump_and_write(s, now, 0, NULL, 0, 0);
    s->nheld = 0;
    s->held_len = 0;
    s->published_ns = now;
    tidy(s, now, true);
    return 0;
}

/* Answers the control requests read since the last call (with the acks,
 * once per period: a request waits at most a period plus the server's
 * round trip; nats_control.c). */
static void nats_serve_requests(void *state, hm_sink_request_handler handler, void *arg)
{
    nats_state *s = state;
    /* A period whose batch waited (publish_every_ms) read nothing: one
     * recv(2) now, EAGAIN when nothing came; acks that came wait in their
     * queue for the next publish. Not while the sink counts itself
     * disconnected: the reconnection's handshake is left to the publish
     * period as before, so batches held during an outage still go as
     * replays from the spool (Hm-Replay). */
    bool read = !s->serviced && s->connected && s->nc != NULL && atomic_load(&s->sock) >= 0;
    if (read)
        natsConnection_ProcessReadEvent(s->nc);
    s->serviced = false;
    bool answered = hm_nats_control_answer(&s->ctl, s->nc, handler, arg);
    if (answered || read)
        drive_write(s); /* the answers, and PONGs to what was read */
}

static uint64_t nats_dropped(void *state)
{
    return ((nats_state *)state)->ob.dropped_lines;
}

static void nats_describe(void *state, char *out, size_t size)
{
    nats_state *s = state;
    snprintf(out, size,
             "sink=nats connected=%d published=%llu acked_seq=%llu replayed=%llu pending=%llu "
             "dropped=%llu dropped_lines=%llu duplicates=%llu next_seq=%llu epoch=%s subject=%s "
             "spool=%s spool_bytes=%llu",
             s->nc != NULL && natsConnection_Status(s->nc) == NATS_CONN_STATUS_CONNECTED,
             (unsigned long long)s->published, (unsigned long long)s->ob.acked_seq,
             (unsigned long long)s->replayed, (unsigned long long)hm_outbox_pending(&s->ob),
             (unsigned long long)s->ob.dropped_batches, (unsigned long long)s->ob.dropped_lines,
             (unsigned long long)s->duplicates, (unsigned long long)s->ob.next_seq, s->epoch,
             s->subject, hm_spool_dir(s->spool), (unsigned long long)hm_spool_bytes(s->spool));
}

static int nats_close(void *state, hm_error *err)
{
    nats_state *s = state;
    /* Give the acks of what is in flight a moment (never more than 1 s):
     * what is not acked by then is sent again at the next start. */
    int64_t deadline = hm_monotonic_ns() + 1000000000;
    if (s->nheld > 0) { /* batches waiting for nats.publish_every_ms go now */
        int64_t now = hm_monotonic_ns();
        service(s, now);
        pump_and_write(s, now, 0, NULL, 0, 0);
        s->nheld = 0;
        s->held_len = 0;
    }
    drive_write(s);
    while (!s->evloop && s->acks != NULL && s->ob.inflight > 0 && hm_monotonic_ns() < deadline) {
        natsMsg *m = NULL;
        natsStatus st = natsSubscription_NextMsg(&m, s->acks, 50);
        if (st == NATS_OK) {
            handle_ack(s, m);
            trash_msg(s, m);
        } else if (st != NATS_TIMEOUT && st != NATS_NO_RESPONDERS) {
            break;
        }
    }
    while (s->evloop && s->nc != NULL && s->ob.inflight > 0 && hm_monotonic_ns() < deadline &&
           natsConnection_Status(s->nc) == NATS_CONN_STATUS_CONNECTED) {
        int fd = atomic_load(&s->sock);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (fd < 0 || poll(&p, 1, 50) < 0)
            break;
        if (p.revents != 0)
            natsConnection_ProcessReadEvent(s->nc);
        take_acks(s);
        drive_write(s);
    }
    /* The open file is closed first, so a file whose batches are all
     * acked is removed now rather than at the next start. */
    int rc = hm_spool_flush(s->spool, err);
    if (rc == 0)
        tidy(s, hm_monotonic_ns(), true);
    hm_error e;
    if (hm_spool_close(s->spool, rc == 0 ? err : &e) < 0)
        rc = -1;
    s->spool = NULL;
    hm_log_notice("nats: stopping: %llu published, acked up to %llu, %llu pending in the spool",
                  (unsigned long long)s->published, (unsigned long long)s->ob.acked_seq,
                  (unsigned long long)hm_outbox_pending(&s->ob));
    release(s);
    return rc;
}

const hm_sink_ops hm_sink_nats = {
    .name = "nats",
    .description = "spool first, then JetStream to hm.raw.<rack>.<host> (docs/transport.md)",
    .open = nats_open,
    .write = nats_write,
    .flush = nats_flush,
    .dropped_lines = nats_dropped,
    .describe = nats_describe,
    .serve_requests = nats_serve_requests,
    .close = nats_close,
};
