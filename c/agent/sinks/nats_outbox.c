/* The nats sink's outbox log (see nats_outbox.h for the format). */
#include "nats_outbox.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hm_log.h"
#include "write_all.h"

/* A rewrite when this many records were appended: about 3 h at 1 Hz. */
#define REWRITE_RECORDS 20000

static int append_record(hm_outbox *o, hm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int append_record(hm_outbox *o, hm_error *err, const char *fmt, ...)
{
    char line[192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return hm_error_set(err, "outbox record too long");
    /* One write(2) per record: a killed agent leaves whole records. */
    if (hm_write_all(o->fd, line, (size_t)n) < 0)
        return hm_error_errno(err, "writing %s", o->path);
    o->records++;
    return 0;
}

static int push_entry(hm_outbox *o, const hm_outbox_entry *entry, hm_error *err)
{
    if (o->head > 0 && o->head == o->n)
        o->head = o->n = 0;
    if (o->n == o->cap) {
        if (o->head > 0) {
            memmove(o->e, o->e + o->head, (o->n - o->head) * sizeof *o->e);
            o->n -= o->head;
            o->head = 0;
        } else {
            size_t cap = o->cap ? o->cap * 2 : 64;
            hm_outbox_entry *bigger = realloc(o->e, cap * sizeof *bigger);
            if (bigger == NULL)
                return hm_error_set(err, "out of memory (%zu pending batches)", o->n);
            o->e = bigger;
            o->cap = cap;
        }
    }
    o->e[o->n++] = *entry;
    return 0;
}

/* Moves acked_seq over the done entries at the front. */
static void advance(hm_outbox *o)
{
    while (o->head < o->n &&
           (o->e[o->head].state == HM_OUTBOX_ACKED || o->e[o->head].state == HM_OUTBOX_DROPPED)) {
        o->acked_seq = o->e[o->head].seq;
        o->head++;
    }
    if (o->head == o->n)
        o->head = o->n = 0;
}

hm_outbox_entry *hm_outbox_find(hm_outbox *o, uint64_t seq)
{
    if (o->head == o->n || seq < o->e[o->head].seq)
        return NULL;
    size_t i = o->head + (size_t)(seq - o->e[o->head].seq);
    if (i >= o->n)
        return NULL;
    hm_outbox_entry *e = &o->e[i];
    return e->state == HM_OUTBOX_ACKED || e->state == HM_OUTBOX_DROPPED ? NULL : e;
}

static void mark_dropped(hm_outbox *o, hm_outbox_entry *e, uint64_t lines_lost)
{
    if (e->state == HM_OUTBOX_SENT)
        o->inflight--;
    e->state = HM_OUTBOX_DROPPED;
    o->dropped_batches++;
    o->dropped_lines += lines_lost;
}

static void add_run(hm_outbox *o, int64_t run_ns)
{
    if (hm_outbox_known_run(o, run_ns))
        return;
    if (o->nruns == HM_OUTBOX_RUNS_MAX) { /* forget the oldest */
        memmove(o->runs, o->runs + 1, (HM_OUTBOX_RUNS_MAX - 1) * sizeof o->runs[0]);
        o->nruns--;
    }
    o->runs[o->nruns++] = run_ns;
}

/* Applies one log line; false if it is not a valid record. */
static bool apply_line(hm_outbox *o, const char *line, bool first, hm_error *err)
{
    long long a;
    unsigned long long u1, u2, u3, u4, u5;
    int end = 0;
    if (first) {
        if (sscanf(line, "hm-outbox 1 epoch=%lld next=%llu acked=%llu dropped=%llu dropped_lines=%llu%n",
                   &a, &u1, &u2, &u3, &u4, &end) != 5 || line[end] != '\0' || a <= 0 || u1 < 1 ||
            u2 >= u1)
            return false;
        o->epoch_ns = a;
        o->next_seq = u1;
        o->acked_seq = o->acked_written = u2;
        o->dropped_batches = u3;
        o->dropped_lines = u4;
        return true;
    }
    if (sscanf(line, "R %lld%n", &a, &end) == 1 && line[end] == '\0') {
        add_run(o, a);
        return true;
    }
    if (sscanf(line, "B %llu %lld %llu %llu %llu %llu%n", &u1, &a, &u2, &u3, &u4, &u5, &end) == 6 &&
        line[end] == '\0') {
        /* Batches follow each other from the cursor on; a rewritten log
         * has them after a header whose next is already past them. */
        uint64_t expected = o->n > o->head ? o->e[o->n - 1].seq + 1 : o->acked_seq + 1;
        if (u1 != expected || u4 == 0)
            return false;
        hm_outbox_entry e = {.seq = u1, .start_ns = a, .file_seq = u2, .offset = u3, .len = u4,
                             .lines = u5, .state = HM_OUTBOX_UNSENT};
        if (push_entry(o, &e, err) < 0)
            return false;
        if (o->next_seq < u1 + 1)
            o->next_seq = u1 + 1;
        return true;
    }
    if (sscanf(line, "A %llu%n", &u1, &end) == 1 && line[end] == '\0') {
        if (u1 >= o->next_seq)
            return false;
        while (o->head < o->n && o->e[o->head].seq <= u1)
            o->e[o->head++].state = HM_OUTBOX_ACKED;
        if (u1 > o->acked_seq)
            o->acked_seq = u1;
        advance(o);
        return true;
    }
    if (sscanf(line, "X %llu %llu%n", &u1, &u2, &end) == 2 && line[end] == '\0') {
        hm_outbox_entry *e = hm_outbox_find(o, u1);
        if (e != NULL) {
            mark_dropped(o, e, u2);
            advance(o);
        }
        return true;
    }
    return false;
}

static int load(hm_outbox *o, hm_error *err)
{
    int fd = open(o->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : hm_error_errno(err, "opening %s", o->path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return hm_error_errno(err, "stat %s", o->path);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        close(fd);
        return hm_error_set(err, "out of memory reading %s", o->path);
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    int rc = 0, lineno = 0;
    char *line = buf;
    /* A last line without its newline is a record cut by a crash: skipped. */
    for (char *nl; rc == 0 && (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        *nl = '\0';
        lineno++;
        if (!apply_line(o, line, lineno == 1, err))
            rc = hm_error_set(err, "%s:%d: not an outbox record: '%.60s'", o->path, lineno, line);
    }
    free(buf);
    if (rc == 0 && lineno == 0)
        o->epoch_ns = 0; /* empty: a new one */
    return rc;
}

/* Writes header, runs and pending batches to a new file that replaces the log. */
static int rewrite(hm_outbox *o, bool keep_all_runs, int64_t current_run, hm_error *err)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->path);
    FILE *f = fopen(tmp, "we");
    if (f == NULL)
        return hm_error_errno(err, "creating %s", tmp);
    /* Drops still inside the window are written as X records below and
     * counted again when read: the header leaves them out. */
    uint64_t dropped_in_window = 0;
    for (size_t i = o->head; i < o->n; i++)
        dropped_in_window += o->e[i].state == HM_OUTBOX_DROPPED;
    fprintf(f, "hm-outbox 1 epoch=%lld next=%llu acked=%llu dropped=%llu dropped_lines=%llu\n",
            (long long)o->epoch_ns, (unsigned long long)o->next_seq,
            (unsigned long long)o->acked_seq,
            (unsigned long long)(o->dropped_batches - dropped_in_window),
            (unsigned long long)o->dropped_lines);
    size_t kept = 0;
    for (size_t r = 0; r < o->nruns; r++) {
        bool used = keep_all_runs || o->runs[r] == current_run;
        for (size_t i = o->head; i < o->n && !used; i++)
            used = o->e[i].start_ns == o->runs[r];
        if (!used)
            continue;
        o->runs[kept++] = o->runs[r];
        fprintf(f, "R %lld\n", (long long)o->runs[r]);
    }
    o->nruns = kept;
    for (size_t i = o->head; i < o->n; i++) {
        const hm_outbox_entry *e = &o->e[i];
        fprintf(f, "B %llu %lld %llu %llu %llu %llu\n", (unsigned long long)e->seq,
                (long long)e->start_ns, (unsigned long long)e->file_seq,
                (unsigned long long)e->offset, (unsigned long long)e->len,
                (unsigned long long)e->lines);
        /* An ack that came out of order is not kept: at worst that
         * batch is published once more, and the stream drops it. */
        if (e->state == HM_OUTBOX_DROPPED)
            fprintf(f, "X %llu 0\n", (unsigned long long)e->seq);
    }
    /* Data on disk before the name changes, as the spool does. */
    if (fflush(f) != 0 || fdatasync(fileno(f)) < 0) {
        hm_error_errno(err, "writing %s", tmp);
        fclose(f);
        unlink(tmp);
        return -1;
    }
    if (fclose(f) != 0) {
        unlink(tmp);
        return hm_error_errno(err, "writing %s", tmp);
    }
    if (rename(tmp, o->path) < 0)
        return hm_error_errno(err, "renaming %s", tmp);
    if (o->fd >= 0)
        close(o->fd);
    o->fd = open(o->path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (o->fd < 0)
        return hm_error_errno(err, "opening %s", o->path);
    o->records = 0;
    o->acked_written = o->acked_seq;
    return 0;
}

static void reset_state(hm_outbox *o)
{
    o->head = o->n = 0;
    o->nruns = 0;
    o->inflight = 0;
    o->epoch_ns = 0;
    o->next_seq = 1;
    o->acked_seq = o->acked_written = 0;
    o->dropped_batches = o->dropped_lines = 0;
}

int hm_outbox_open(hm_outbox *o, const char *dir, int64_t run_ns, int64_t now_ns, hm_error *err)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    int n = snprintf(o->path, sizeof o->path, "%s/%s", dir, HM_OUTBOX_FILE);
    if (n < 0 || (size_t)n >= sizeof o->path)
        return hm_error_set(err, "outbox path too long");
    reset_state(o);
    hm_error lerr;
    if (load(o, &lerr) < 0) {
        /* A damaged log must not keep the agent from sampling: keep it
         * for a person to look at and begin a new epoch (the spool files
         * it named stay for `hushmon ingest`). */
        char bad[PATH_MAX + 32];
        snprintf(bad, sizeof bad, "%s.bad-%lld", o->path, (long long)now_ns);
        if (rename(o->path, bad) < 0) {
            free(o->e);
            o->e = NULL;
            return hm_error_errno(err, "%s; moving it away", lerr.msg);
        }
        hm_log_warn("%s; moved to %s, starting a new sequence epoch", lerr.msg, bad);
        reset_state(o);
    }
    if (o->epoch_ns == 0) {
        o->epoch_ns = now_ns;
        o->next_seq = 1;
    }
    add_run(o, run_ns);
    if (rewrite(o, true, run_ns, err) < 0) {
        free(o->e);
        o->e = NULL;
        return -1;
    }
    return 0;
}

int hm_outbox_close(hm_outbox *o, hm_error *err)
{
    int rc = 0;
    if (o->fd >= 0 && o->acked_seq != o->acked_written)
        rc = append_record(o, err, "A %llu\n", (unsigned long long)o->acked_seq);
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    free(o->e);
    o->e = NULL;
    o->n = o->head = o->cap = 0;
    return rc;
}

int hm_outbox_add(hm_outbox *o, int64_t start_ns, uint64_t file_seq, uint64_t offset,
                  uint64_t len, uint64_t lines, uint64_t *seq, hm_error *err)
{
    if (len == 0)
        return hm_error_set(err, "outbox: empty batch");
    hm_outbox_entry e = {.seq = o->next_seq, .start_ns = start_ns, .file_seq = file_seq,
                         .offset = offset, .len = len, .lines = lines, .state = HM_OUTBOX_UNSENT};
    if (append_record(o, err, "B %llu %lld %llu %llu %llu %llu\n", (unsigned long long)e.seq,
                      (long long)start_ns, (unsigned long long)file_seq,
                      (unsigned long long)offset, (unsigned long long)len,
                      (unsigned long long)lines) < 0)
        return -1;
    if (push_entry(o, &e, err) < 0)
        return -1;
    *seq = o->next_seq++;
    return 0;
}

hm_outbox_entry *hm_outbox_next_unsent(hm_outbox *o)
{
    for (size_t i = o->head; i < o->n; i++)
        if (o->e[i].state == HM_OUTBOX_UNSENT)
            return &o->e[i];
    return NULL;
}

void hm_outbox_mark_sent(hm_outbox *o, hm_outbox_entry *e, int64_t now_ns)
{
    if (e->state != HM_OUTBOX_SENT)
        o->inflight++;
    e->state = HM_OUTBOX_SENT;
    e->sent_ns = now_ns;
}

void hm_outbox_ack(hm_outbox *o, uint64_t seq)
{
    hm_outbox_entry *e = hm_outbox_find(o, seq);
    if (e == NULL)
        return;
    if (e->state == HM_OUTBOX_SENT)
        o->inflight--;
    e->state = HM_OUTBOX_ACKED;
    advance(o);
}

void hm_outbox_unsend(hm_outbox *o, hm_outbox_entry *e)
{
    if (e->state == HM_OUTBOX_SENT)
        o->inflight--;
    if (e->state == HM_OUTBOX_SENT || e->state == HM_OUTBOX_UNSENT)
        e->state = HM_OUTBOX_UNSENT;
}

uint64_t hm_outbox_requeue(hm_outbox *o, int64_t older_than_ns)
{
    uint64_t moved = 0;
    for (size_t i = o->head; i < o->n && o->inflight > 0; i++) {
        hm_outbox_entry *e = &o->e[i];
        if (e->state == HM_OUTBOX_SENT && e->sent_ns < older_than_ns) {
            hm_outbox_unsend(o, e);
            moved++;
        }
    }
    return moved;
}

int hm_outbox_drop(hm_outbox *o, uint64_t seq, uint64_t lines_lost, hm_error *err)
{
    hm_outbox_entry *e = hm_outbox_find(o, seq);
    if (e == NULL)
        return 0;
    if (append_record(o, err, "X %llu %llu\n", (unsigned long long)seq,
                      (unsigned long long)lines_lost) < 0)
        return -1;
    mark_dropped(o, e, lines_lost);
    advance(o);
    return 0;
}

int hm_outbox_file_removed(hm_outbox *o, int64_t start_ns, uint64_t file_seq, hm_error *err)
{
    for (size_t i = o->head; i < o->n; i++) {
        hm_outbox_entry *e = &o->e[i];
        if (e->start_ns != start_ns || e->file_seq != file_seq ||
            e->state == HM_OUTBOX_ACKED || e->state == HM_OUTBOX_DROPPED)
            continue;
        uint64_t seq = e->seq, lines = e->lines;
        if (append_record(o, err, "X %llu %llu\n", (unsigned long long)seq,
                          (unsigned long long)lines) < 0)
            return -1;
        mark_dropped(o, e, lines);
    }
    advance(o);
    return 0;
}

uint64_t hm_outbox_file_pending(const hm_outbox *o, int64_t start_ns, uint64_t file_seq)
{
    uint64_t last = 0;
    for (size_t i = o->head; i < o->n; i++) {
        const hm_outbox_entry *e = &o->e[i];
        if (e->start_ns == start_ns && e->file_seq == file_seq && e->state != HM_OUTBOX_ACKED &&
            e->state != HM_OUTBOX_DROPPED)
            last = e->seq;
    }
    return last;
}

bool hm_outbox_known_run(const hm_outbox *o, int64_t start_ns)
{
    for (size_t r = 0; r < o->nruns; r++)
        if (o->runs[r] == start_ns)
            return true;
    return false;
}

uint64_t hm_outbox_pending(const hm_outbox *o)
{
    uint64_t pending = 0;
    for (size_t i = o->head; i < o->n; i++)
        pending += o->e[i].state == HM_OUTBOX_UNSENT || o->e[i].state == HM_OUTBOX_SENT;
    return pending;
}

int hm_outbox_sync(hm_outbox *o, hm_error *err)
{
    if (o->records >= REWRITE_RECORDS)
        return rewrite(o, false, o->nruns > 0 ? o->runs[o->nruns - 1] : 0, err);
    if (o->acked_seq == o->acked_written)
        return 0;
    if (append_record(o, err, "A %llu\n", (unsigned long long)o->acked_seq) < 0)
        return -1;
    o->acked_written = o->acked_seq;
    return 0;
}
