/* libhushmon: per-thread batches of records, sent as one SOCK_SEQPACKET
 * message each to the agent, never waiting (docs/libhushmon.md).
 *
 * Why the process-wide state below: the library lives inside someone
 * else's program and must work without an explicit context (any thread,
 * any library layer may call hm_metric), like errno or stdio. It is one
 * struct, touched on the hot path only by relaxed loads.
 *
 * The hot path (hm_metric) is: one relaxed load of the state, one TLS
 * load, a hash of the name into the thread's table of this batch's names
 * (count, sum, min, max updated in place), one CLOCK_MONOTONIC_COARSE
 * read (vDSO, no syscall) to see whether the batch is 100 ms old. A
 * send() happens when the batch is 100 ms old (while calls come) or
 * holds 24 names: a loop calling a million times a second with a few
 * names sends ten small messages a second. */
#include "hushmon.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hm_app_wire.h"

#define FLUSH_AGE_NS 100000000LL   /* a batch is sent at most this old (while calls come) */
#define RETRY_NS 1000000000LL      /* reconnect attempts after the agent went away */
#define PHASES_MAX 16
#define CTL_POLL_NS 50000000LL     /* hm_poll looks at the socket at most this often */
#define CTL_PER_POLL 16            /* control messages delivered by one hm_poll */

enum { ST_UNOPENED = 0, ST_ON, ST_DISCONNECTED, ST_OFF };

typedef struct phase {
    char name[HM_APP_NAME_MAX + 1];
    int64_t t0_ns;
} phase;

/* One name's values in this batch. */
typedef struct slot {
    uint32_t hash;             /* 0 = free */
    uint8_t type, nlen;
    uint16_t tlen;
    uint32_t count;
    double sum, min, max;
    char name[HM_APP_NAME_MAX + 1];
    char text[HM_APP_TEXT_MAX + 1];
} slot;

#define SLOTS 32               /* a power of two */
#define SLOTS_FULL 24          /* sent before probing gets long */

typedef struct tbuf {
    uint64_t gen;              /* the process generation it was filled in (fork) */
    unsigned nrec;             /* names in use */
    uint64_t values;           /* values in this batch */
    int64_t first_ns;          /* coarse time of the oldest unsent value */
    int depth;
    phase phases[PHASES_MAX];
    uint8_t used[SLOTS];       /* slot indices in use, in order */
    slot slots[SLOTS];
    unsigned char msg[HM_APP_MSG_MAX];
} tbuf;

static struct {
    pthread_mutex_t lock;      /* open, reconnect, close, fork */
    _Atomic int state;
    int fd;                    /* a stable number: reconnects dup2 onto it */
    _Atomic uint64_t gen;
    _Atomic uint64_t records, sent, dropped, messages;
    _Atomic int64_t retry_at_ns;
    int32_t rank, size;
    char job_claim[HM_APP_JOB_MAX];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    pthread_key_t key;
    bool key_made, atfork_done;
    /* Control (hm_on_control): fn and user change under lock; ctl_on is
     * what hm_poll reads first, so that without a callback it is one load. */
    hm_control_fn ctl_fn;
    void *ctl_user;
    _Atomic int ctl_on;
    _Atomic int polling;       /* one hm_poll delivers at a time */
    _Atomic int64_t ctl_next_ns;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .rank = -1, .size = -1};

static _Thread_local tbuf *tl;

static int64_t coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int env_int(const char *const *names, int fallback)
{
    for (; *names != NULL; names++) {
        const char *v = getenv(*names);
        if (v == NULL || *v == '\0')
            continue;
        char *end;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= 0 && n < (1L << 30))
            return (int)n;
    }
    return fallback;
}

int hm_rank(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "MV2_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    return env_int(names, -1);
}

int hm_size(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE",
                                        "SLURM_NTASKS", NULL};
    return env_int(names, -1);
}

/* A new connected socket, or -1 (absent, refused, backlog full). */
static int connect_agent(void)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -1;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, g.path, sizeof addr.sun_path);
    if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0) {
        close(s);
        return -1;
    }
    /* What may wait for the agent's next read (it reads once per period):
     * ask for 1 MiB, the kernel caps it at net.core.wmem_max. */
    int bytes = 1 << 20;
    (void)setsockopt(s, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    return s;
}

static void drop_buffer(tbuf *b)
{
    for (unsigned i = 0; i < b->nrec; i++)
        b->slots[b->used[i]].hash = 0;
    b->nrec = 0;
    b->values = 0;
}

/* The batch as one message; returns its length. */
static size_t build_message(tbuf *b)
{
    size_t len = sizeof(hm_app_header);
    for (unsigned i = 0; i < b->nrec; i++) {
        const slot *s = &b->slots[b->used[i]];
        unsigned char *p = b->msg + len;
        p[0] = s->type;
        p[1] = s->nlen;
        memcpy(p + 2, &s->tlen, 2);
        memcpy(p + 4, &s->count, 4);
        memcpy(p + 8, &s->sum, 8);
        memcpy(p + 16, &s->min, 8);
        memcpy(p + 24, &s->max, 8);
        memcpy(p + HM_APP_REC_FIXED, s->name, s->nlen);
        memcpy(p + HM_APP_REC_FIXED + s->nlen, s->text, s->tlen);
        len += HM_APP_REC_FIXED + s->nlen + s->tlen;
    }
    return len;
}

/* One HM_APP_CONTROL record in a message of its own, never waiting: id 0
 * says this process takes control messages, another id acknowledges
 * one (status: what the callback returned). Lost when the socket is
 * full, like any record; the sender then counts it as not delivered. */
static void send_control_record(uint32_t id, int status)
{
    unsigned char msg[sizeof(hm_app_header) + HM_APP_REC_FIXED + 16];
    hm_app_header h;
    memset(&h, 0, sizeof h);
    h.magic = HM_APP_MAGIC;
    h.version = HM_APP_VERSION;
    h.records = 1;
    h.rank = g.rank;
    h.size = g.size;
    h.dropped_total = atomic_load_explicit(&g.dropped, memory_order_relaxed);
    memcpy(h.job_claim, g.job_claim, sizeof h.job_claim);
    memcpy(msg, &h, sizeof h);
    char name[16];
    int nlen = 0;
    uint32_t v = id;
    char digits[12];
    do {
        digits[nlen++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    for (int i = 0; i < nlen; i++)
        name[i] = digits[nlen - 1 - i];
    unsigned char *p = msg + sizeof h;
    uint16_t tlen = 0;
    uint32_t count = 1;
    double value = (double)status;
    p[0] = HM_APP_CONTROL;
    p[1] = (uint8_t)nlen;
    memcpy(p + 2, &tlen, 2);
    memcpy(p + 4, &count, 4);
    memcpy(p + 8, &value, 8);
    memcpy(p + 16, &value, 8);
    memcpy(p + 24, &value, 8);
    memcpy(p + HM_APP_REC_FIXED, name, (size_t)nlen);
    size_t len = sizeof h + HM_APP_REC_FIXED + (size_t)nlen;
    ssize_t ignored = send(g.fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
}

/* On a new connection (open, reconnect, a forked child's): the agent
 * learns that this process has a callback. Called with g.lock held. */
static void send_hello_locked(void)
{
    if (atomic_load_explicit(&g.ctl_on, memory_order_relaxed) && g.fd >= 0)
        send_control_record(0, 0);
}

/* Reconnect under the lock, keeping g.fd's number (other threads may be
 * in send() on it: they then send on the new connection or fail). */
static void try_reconnect(int64_t now)
{
    if (pthread_mutex_trylock(&g.lock) != 0)
        return;
    if (atomic_load_explicit(&g.state, memory_order_relaxed) == ST_DISCONNECTED &&
        now >= atomic_load_explicit(&g.retry_at_ns, memory_order_relaxed)) {
        int s = connect_agent();
        if (s >= 0 && (g.fd < 0 ? (g.fd = s, 0) : (dup2(s, g.fd) < 0 ? -1 : (close(s), 0))) == 0) {
            atomic_store(&g.state, ST_ON);
            send_hello_locked();
        } else {
            if (s >= 0 && s != g.fd)
                close(s);
            atomic_store(&g.retry_at_ns, now + RETRY_NS);
        }
    }
    pthread_mutex_unlock(&g.lock);
}

static void flush_buf(tbuf *b)
{
    if (b->nrec == 0)
        return;
    uint64_t n = b->values;
    atomic_fetch_add_explicit(&g.records, n, memory_order_relaxed);
    int st = atomic_load_explicit(&g.state, memory_order_relaxed);
    if (st == ST_DISCONNECTED) {
        try_reconnect(coarse_ns());
        st = atomic_load_explicit(&g.state, memory_order_relaxed);
    }
    bool sent = false;
    if (st == ST_ON) {
        hm_app_header h;
        memset(&h, 0, sizeof h);
        h.magic = HM_APP_MAGIC;
        h.version = HM_APP_VERSION;
        h.records = (uint16_t)b->nrec;
        h.rank = g.rank;
        h.size = g.size;
        h.dropped_total = atomic_load_explicit(&g.dropped, memory_order_relaxed);
        memcpy(h.job_claim, g.job_claim, sizeof h.job_claim);
        size_t len = build_message(b);
        memcpy(b->msg, &h, sizeof h);
        ssize_t w = send(g.fd, b->msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w == (ssize_t)len) {
            sent = true;
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
                   errno != EINTR) {
            /* The agent went away (restart, reload): try again in a second. */
            atomic_store(&g.retry_at_ns, coarse_ns() + RETRY_NS);
            int on = ST_ON;
            atomic_compare_exchange_strong(&g.state, &on, ST_DISCONNECTED);
        }
    }
    if (sent) {
        atomic_fetch_add_explicit(&g.sent, n, memory_order_relaxed);
        atomic_fetch_add_explicit(&g.messages, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&g.dropped, n, memory_order_relaxed);
    }
    drop_buffer(b);
}

static void thread_exit(void *p)
{
    tbuf *b = p;
    if (b->gen == atomic_load(&g.gen) && atomic_load(&g.state) != ST_OFF)
        flush_buf(b);
    if (tl == b)
        tl = NULL;
    free(b);
}

static void exit_flush(void)
{
    if (tl != NULL && tl->gen == atomic_load(&g.gen) && atomic_load(&g.state) != ST_OFF)
        flush_buf(tl);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&g.lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&g.lock);
}

/* The child is a new process: its own connection (the agent attributes
 * by the connecting pid) and none of the parent's buffered records. */
static void fork_child(void)
{
    atomic_fetch_add(&g.gen, 1);
    atomic_store(&g.records, 0);
    atomic_store(&g.sent, 0);
    atomic_store(&g.dropped, 0);
    atomic_store(&g.messages, 0);
    if (atomic_load(&g.state) == ST_ON || atomic_load(&g.state) == ST_DISCONNECTED) {
        atomic_store(&g.retry_at_ns, 0);
        atomic_store(&g.state, ST_DISCONNECTED);
    }
    /* A thread of the parent may have been delivering: not this one. */
    atomic_store(&g.polling, 0);
    atomic_store(&g.ctl_next_ns, 0);
    pthread_mutex_unlock(&g.lock);
}

int hm_open(void)
{
    pthread_mutex_lock(&g.lock);
    int st = atomic_load(&g.state);
    if (st == ST_ON || st == ST_DISCONNECTED) {
        pthread_mutex_unlock(&g.lock);
        return 0;
    }
    const char *off = getenv("HUSHMON_APP");
    const char *path = getenv("HUSHMON_APP_SOCKET");
    if (path == NULL || *path == '\0')
        path = HM_APP_SOCKET_DEFAULT;
    g.rank = hm_rank();
    g.size = hm_size();
    const char *job = getenv("HUSHMON_JOB");
    if (job == NULL || *job == '\0')
        job = getenv("SLURM_JOB_ID");
    memset(g.job_claim, 0, sizeof g.job_claim);
    if (job != NULL)
        strncpy(g.job_claim, job, sizeof g.job_claim - 1);
    int s = -1;
    if (!(off != NULL && strcmp(off, "0") == 0) && strlen(path) < sizeof g.path) {
        memset(g.path, 0, sizeof g.path);
        memcpy(g.path, path, strlen(path));
        s = connect_agent();
    }
    if (s < 0) {
        atomic_store(&g.state, ST_OFF);
        pthread_mutex_unlock(&g.lock);
        return 1;
    }
    if (g.fd >= 0) {
        if (dup2(s, g.fd) >= 0)
            close(s);
        else
            g.fd = s;
    } else {
        g.fd = s;
    }
    if (!g.key_made && pthread_key_create(&g.key, thread_exit) == 0)
        g.key_made = true;
    if (!g.atfork_done) {
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        atexit(exit_flush);
        g.atfork_done = true;
    }
    atomic_fetch_add(&g.gen, 1); /* buffers of an earlier open are stale */
    atomic_store(&g.state, ST_ON);
    send_hello_locked();
    pthread_mutex_unlock(&g.lock);
    return 0;
}

void hm_close(void)
{
    if (tl != NULL && tl->gen == atomic_load(&g.gen) && atomic_load(&g.state) != ST_OFF)
        flush_buf(tl);
    pthread_mutex_lock(&g.lock);
    if (atomic_load(&g.state) != ST_UNOPENED)
        atomic_store(&g.state, ST_OFF);
    if (g.fd >= 0)
        close(g.fd);
    g.fd = -1;
    pthread_mutex_unlock(&g.lock);
}

/* The calling thread's buffer, or NULL when the library is off. */
static inline tbuf *buffer(void)
{
    int st = atomic_load_explicit(&g.state, memory_order_relaxed);
    if (__builtin_expect(st == ST_OFF, 0))
        return NULL;
    if (__builtin_expect(st == ST_UNOPENED, 0) && hm_open() != 0)
        return NULL;
    tbuf *b = tl;
    uint64_t gen = atomic_load_explicit(&g.gen, memory_order_relaxed);
    if (__builtin_expect(b == NULL, 0)) {
        b = malloc(sizeof *b);
        if (b == NULL)
            return NULL;
        memset(b, 0, offsetof(tbuf, msg));
        b->gen = gen;
        tl = b;
        if (g.key_made)
            pthread_setspecific(g.key, b);
    } else if (__builtin_expect(b->gen != gen, 0)) {
        b->gen = gen; /* the parent's records (after fork) or an earlier open's */
        b->depth = 0;
        drop_buffer(b);
    }
    return b;
}

static void append(tbuf *b, int type, const char *name, size_t nlen, const char *text,
                   size_t tlen, double value)
{
    if (!(value - value == 0))
        return; /* NaN or infinite: not a measurement */
    if (nlen == 0) {
        /* No name is no series: the agent would refuse the record, and
         * with it the rest of the message. Counted, as a full buffer is. */
        atomic_fetch_add_explicit(&g.records, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&g.dropped, 1, memory_order_relaxed);
        return;
    }
    uint32_t h = 2166136261u ^ (uint32_t)type;
    for (size_t i = 0; i < nlen; i++)
        h = (h ^ (uint8_t)name[i]) * 16777619u;
    h |= 1; /* 0 marks a free slot */
    unsigned i = h & (SLOTS - 1);
    slot *s;
    for (;;) {
        s = &b->slots[i];
        if (s->hash == 0)
            break;
        if (s->hash == h && s->type == type && s->nlen == nlen && memcmp(s->name, name, nlen) == 0)
            break;
        i = (i + 1) & (SLOTS - 1);
    }
    int64_t now = coarse_ns();
    if (s->hash == 0) {
        if (b->nrec >= SLOTS_FULL) {
            flush_buf(b);
            append(b, type, name, nlen, text, tlen, value);
            return;
        }
        if (b->nrec == 0)
            b->first_ns = now;
        s->hash = h;
        s->type = (uint8_t)type;
        s->nlen = (uint8_t)nlen;
        memcpy(s->name, name, nlen);
        s->count = 0;
        s->sum = 0;
        s->min = value;
        s->max = value;
        s->tlen = 0;
        b->used[b->nrec++] = (uint8_t)i;
    }
    s->count++;
    s->sum += value;
    s->min = value < s->min ? value : s->min;
    s->max = value > s->max ? value : s->max;
    if (tlen > 0 || type == HM_APP_EVENT) {
        memcpy(s->text, text, tlen);
        s->tlen = (uint16_t)tlen;
    }
    b->values++;
    if (now - b->first_ns >= FLUSH_AGE_NS || s->count == UINT32_MAX)
        flush_buf(b);
}

void hm_metric(const char *name, double value)
{
    tbuf *b = buffer();
    if (b == NULL || name == NULL)
        return;
    append(b, HM_APP_METRIC, name, strnlen(name, HM_APP_NAME_MAX), NULL, 0, value);
}

void hm_event(const char *name, const char *text)
{
    tbuf *b = buffer();
    if (b == NULL || name == NULL)
        return;
    append(b, HM_APP_EVENT, name, strnlen(name, HM_APP_NAME_MAX), text,
           text != NULL ? strnlen(text, HM_APP_TEXT_MAX) : 0, 0.0);
}

void hm_phase_begin(const char *name)
{
    tbuf *b = buffer();
    if (b == NULL || name == NULL || b->depth >= PHASES_MAX)
        return;
    phase *ph = &b->phases[b->depth++];
    size_t n = strnlen(name, HM_APP_NAME_MAX);
    memcpy(ph->name, name, n);
    ph->name[n] = '\0';
    ph->t0_ns = mono_ns();
}

void hm_phase_end(const char *name)
{
    int64_t now = mono_ns();
    tbuf *b = buffer();
    if (b == NULL || name == NULL)
        return;
    size_t n = strnlen(name, HM_APP_NAME_MAX);
    /* The innermost open phase of that name; phases opened inside it and
     * never ended are closed with it. */
    for (int d = b->depth - 1; d >= 0; d--) {
        if (strncmp(b->phases[d].name, name, n) == 0 && b->phases[d].name[n] == '\0') {
            b->depth = d;
            append(b, HM_APP_PHASE, name, n, NULL, 0, (double)(now - b->phases[d].t0_ns) / 1e9);
            return;
        }
    }
}

void hm_profile_dump(const char *prefix, const char *const *names, const double *values, size_t n)
{
    tbuf *b = buffer();
    if (b == NULL || prefix == NULL || values == NULL)
        return;
    char full[HM_APP_NAME_MAX + 1];
    size_t plen = strnlen(prefix, HM_APP_NAME_MAX - 1);
    memcpy(full, prefix, plen);
    full[plen] = '.';
    for (size_t i = 0; i < n; i++) {
        size_t room = HM_APP_NAME_MAX - plen - 1, k;
        if (names != NULL && names[i] != NULL) {
            k = strnlen(names[i], room);
            memcpy(full + plen + 1, names[i], k);
        } else {
            char digits[24];
            int len = 0;
            size_t v = i;
            do {
                digits[len++] = (char)('0' + v % 10);
                v /= 10;
            } while (v > 0 && len < (int)sizeof digits);
            k = 0;
            while (len > 0 && k < room)
                full[plen + 1 + k++] = digits[--len];
        }
        append(b, HM_APP_METRIC, full, plen + 1 + k, NULL, 0, values[i]);
    }
}

void hm_flush(void)
{
    int st = atomic_load_explicit(&g.state, memory_order_relaxed);
    if (st == ST_OFF || st == ST_UNOPENED || tl == NULL)
        return;
    tbuf *b = buffer();
    if (b != NULL)
        flush_buf(b);
}

void hm_stats_get(hm_stats *out)
{
    out->records = atomic_load(&g.records);
    out->sent_records = atomic_load(&g.sent);
    out->dropped_records = atomic_load(&g.dropped);
    out->messages = atomic_load(&g.messages);
    out->connected = atomic_load(&g.state) == ST_ON;
}

int hm_on_control(hm_control_fn fn, void *user_data)
{
    int st = atomic_load(&g.state);
    if (st == ST_UNOPENED && hm_open() != 0)
        return 1;
    pthread_mutex_lock(&g.lock);
    bool was_on = g.ctl_fn != NULL;
    g.ctl_fn = fn;
    g.ctl_user = user_data;
    atomic_store(&g.ctl_on, fn != NULL);
    atomic_store(&g.ctl_next_ns, 0);
    if (fn != NULL && !was_on && atomic_load(&g.state) == ST_ON)
        send_hello_locked();
    st = atomic_load(&g.state);
    pthread_mutex_unlock(&g.lock);
    return st == ST_ON || st == ST_DISCONNECTED ? 0 : 1;
}

/* One control message from the agent to the callback, acknowledged;
 * whether the callback ran. */
static bool deliver(const unsigned char *msg, size_t n)
{
    hm_app_ctl_header h;
    if (n < sizeof h)
        return false;
    memcpy(&h, msg, sizeof h);
    if (h.magic != HM_APP_CTL_MAGIC || h.version != HM_APP_VERSION || h.id == 0 ||
        h.text_len > HM_APP_CTL_TEXT_MAX || sizeof h + h.text_len != n)
        return false;
    char text[HM_APP_CTL_TEXT_MAX + 1];
    memcpy(text, msg + sizeof h, h.text_len);
    text[h.text_len] = '\0';
    char *args = text;
    while (*args != '\0' && *args != ' ')
        args++;
    if (*args == ' ') {
        *args++ = '\0';
        while (*args == ' ')
            args++;
    }
    pthread_mutex_lock(&g.lock);
    hm_control_fn fn = g.ctl_fn;
    void *user = g.ctl_user;
    pthread_mutex_unlock(&g.lock);
    if (fn == NULL)
        return false; /* unregistered meanwhile: not acknowledged, the sender counts it lost */
    int status = fn(text, args, user);
    send_control_record(h.id, status);
    return true;
}

int hm_poll(void)
{
    if (__builtin_expect(!atomic_load_explicit(&g.ctl_on, memory_order_relaxed), 1))
        return 0;
    int64_t now = coarse_ns();
    if (now < atomic_load_explicit(&g.ctl_next_ns, memory_order_relaxed))
        return 0;
    if (atomic_exchange(&g.polling, 1) != 0)
        return 0;
    atomic_store_explicit(&g.ctl_next_ns, now + CTL_POLL_NS, memory_order_relaxed);
    int st = atomic_load(&g.state);
    if (st == ST_DISCONNECTED) {
        try_reconnect(now);
        st = atomic_load(&g.state);
    }
    int delivered = 0;
    unsigned char msg[sizeof(hm_app_ctl_header) + HM_APP_CTL_TEXT_MAX];
    for (int k = 0; st == ST_ON && k < CTL_PER_POLL; k++) {
        ssize_t n = recv(g.fd, msg, sizeof msg, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            break;
        if (n <= 0) {
            /* The agent went away: reconnect like a failed send does. */
            atomic_store(&g.retry_at_ns, now + RETRY_NS);
            int on = ST_ON;
            atomic_compare_exchange_strong(&g.state, &on, ST_DISCONNECTED);
            break;
        }
        if ((size_t)n > sizeof msg)
            continue; /* not ours (too long): skipped */
        delivered += deliver(msg, (size_t)n);
    }
    atomic_store(&g.polling, 0);
    return delivered;
}
