/* The spool directory: batches appended to rotating files in a local
 * directory (docs/formats.md "Spool files").
 *
 *   <dir>/<host>-<start_ns>-<seq>.lp.open   being written
 *   <dir>/<host>-<start_ns>-<seq>.lp        closed: complete, immutable
 *
 * A file is closed when the next batch would take it past file_bytes, on
 * flush, and on exit. On start, a .lp.open left by a crash is cut after
 * its last complete line and closed, so nothing written is lost and no
 * reader ever sees half a line in a .lp file. The directory is kept under
 * total_bytes by removing the oldest closed files; the lines removed are
 * counted (and the owner told, so the nats sink can count its batches). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hm_log.h"
#include "spool_files.h"
#include "write_all.h"

/* Spool files hold every job's measurements and the applications' event
 * text: the agent's user (root on a cluster) reads them, no one else. */
#define SPOOL_FILE_MODE 0600
#define SPOOL_DIR_MODE 0700 /* the spool folder itself; folders above it 0755 */

struct hm_spool {
    char dir[PATH_MAX];
    char host[64];
    int64_t start_ns;
    uint64_t seq;
    int fd;                     /* the .lp.open file, -1 if none */
    char open_path[PATH_MAX];
    uint64_t open_bytes;
    uint64_t closed_bytes;      /* total size of .lp files in dir */
    uint64_t file_limit, total_limit;
    uint64_t dropped_lines;
    uint64_t files_closed;
    uint64_t open_seq;          /* file seq of the .lp.open file */
    hm_spool_removed_fn on_removed;
    void *on_removed_arg;
};
typedef struct hm_spool spool_state;

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int mkdir_p(const char *path, hm_error *err)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return hm_error_errno(err, "creating %s", tmp);
        *p = '/';
    }
    if (mkdir(tmp, SPOOL_DIR_MODE) < 0 && errno != EEXIST)
        return hm_error_errno(err, "creating %s", tmp);
    return 0;
}

int hm_spool_mkdir(const char *dir, hm_error *err)
{
    return mkdir_p(dir, err);
}

/* Cuts a crashed .lp.open after its last newline and renames it to .lp. */
static int recover(spool_state *s, const char *name, hm_error *err)
{
    char path[PATH_MAX * 2], done[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    snprintf(done, sizeof done, "%.*s", (int)(strlen(path) - 5), path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return hm_error_errno(err, "opening %s", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return hm_error_errno(err, "stat %s", path);
    }
    /* Scan backwards in blocks for the last newline. */
    off_t keep = 0;
    char block[4096];
    for (off_t end = st.st_size; end > 0 && keep == 0;) {
        off_t start = end > (off_t)sizeof block ? end - (off_t)sizeof block : 0;
        ssize_t n = pread(fd, block, (size_t)(end - start), start);
        if (n < 0) {
            close(fd);
            return hm_error_errno(err, "reading %s", path);
        }
        for (ssize_t i = n - 1; i >= 0; i--) {
            if (block[i] == '\n') {
                keep = start + i + 1;
                break;
            }
        }
        end = start;
    }
    if (keep < st.st_size && ftruncate(fd, keep) < 0) {
        close(fd);
        return hm_error_errno(err, "truncating %s", path);
    }
    close(fd);
    if (keep == 0) {
        unlink(path); /* nothing complete in it */
        return 0;
    }
    if (rename(path, done) < 0)
        return hm_error_errno(err, "renaming %s", path);
    hm_log_notice("spool: recovered %s (%lld bytes of complete lines)", done, (long long)keep);
    return 0;
}

typedef struct closed_file {
    char name[256];
    int64_t start_ns;
    uint64_t seq;
    uint64_t bytes;
} closed_file;

static int cmp_closed(const void *a, const void *b)
{
    const closed_file *x = a, *y = b;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

/* "<host>-<start_ns>-<seq>.lp": host may contain '-', so parse from the end. */
static bool parse_name(const char *name, int64_t *start_ns, uint64_t *seq)
{
    return hm_spool_parse_name(name, NULL, start_ns, seq);
}

bool hm_spool_parse_name(const char *name, const char *host, int64_t *start_ns, uint64_t *seq)
{
    size_t len = strlen(name);
    if (len < 4 || strcmp(name + len - 3, ".lp") != 0)
        return false;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%.*s", (int)(len - 3), name);
    char *dash2 = strrchr(tmp, '-');
    if (dash2 == NULL)
        return false;
    *dash2 = '\0';
    char *dash1 = strrchr(tmp, '-');
    if (dash1 == NULL)
        return false;
    char *end;
    *seq = strtoull(dash2 + 1, &end, 10);
    if (*end != '\0')
        return false;
    *start_ns = strtoll(dash1 + 1, &end, 10);
    if (*end != '\0' || end == dash1 + 1 || *(dash2 + 1) == '\0')
        return false;
    *dash1 = '\0';
    return host == NULL || strcmp(tmp, host) == 0;
}

static uint64_t count_lines(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    uint64_t lines = 0;
    char buf[16384];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
    close(fd);
    return lines;
}

/* Rescans the closed files, then removes the oldest while over the bound.
 * Runs only when a file is closed, never in the per-period path. */
static int enforce_bound(spool_state *s, hm_error *err)
{
    DIR *d = opendir(s->dir);
    if (d == NULL)
        return hm_error_errno(err, "listing %s", s->dir);
    size_t n = 0, cap = 64;
    closed_file *files = malloc(cap * sizeof *files);
    if (files == NULL) {
        closedir(d);
        return hm_error_set(err, "out of memory");
    }
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        closed_file f;
        if (strlen(de->d_name) >= sizeof f.name || !parse_name(de->d_name, &f.start_ns, &f.seq))
            continue;
        char path[PATH_MAX * 2];
        snprintf(path, sizeof path, "%s/%s", s->dir, de->d_name);
        struct stat st;
        if (stat(path, &st) < 0)
            continue;
        strcpy(f.name, de->d_name);
        f.bytes = (uint64_t)st.st_size;
        total += f.bytes;
        if (n == cap) {
            closed_file *bigger = realloc(files, cap * 2 * sizeof *files);
            if (bigger == NULL) {
                free(files);
                closedir(d);
                return hm_error_set(err, "out of memory");
            }
            files = bigger;
            cap *= 2;
        }
        files[n++] = f;
    }
    closedir(d);
    qsort(files, n, sizeof *files, cmp_closed);
    for (size_t i = 0; i < n && total + s->open_bytes > s->total_limit; i++) {
        char path[PATH_MAX * 2];
        snprintf(path, sizeof path, "%s/%s", s->dir, files[i].name);
        uint64_t lines = count_lines(path);
        if (unlink(path) < 0) {
            hm_log_warn("spool: removing %s: %s", path, strerror(errno));
            continue;
        }
        total -= files[i].bytes;
        s->dropped_lines += lines;
        if (s->on_removed != NULL)
            s->on_removed(s->on_removed_arg, files[i].start_ns, files[i].seq, lines);
        hm_log_warn("spool over %llu bytes: removed %s (%llu lines not yet ingested)",
                    (unsigned long long)s->total_limit, files[i].name, (unsigned long long)lines);
    }
    s->closed_bytes = total;
    free(files);
    return 0;
}

static int close_current(spool_state *s, hm_error *err)
{
    if (s->fd < 0)
        return 0;
    /* Data first, then the name: a .lp file is always complete on disk. */
    if (fdatasync(s->fd) < 0 && errno != EINVAL) {
        hm_error_errno(err, "syncing %s", s->open_path);
        close(s->fd);
        s->fd = -1;
        return -1;
    }
    close(s->fd);
    s->fd = -1;
    char done[PATH_MAX];
    snprintf(done, sizeof done, "%.*s", (int)(strlen(s->open_path) - 5), s->open_path);
    if (rename(s->open_path, done) < 0)
        return hm_error_errno(err, "renaming %s", s->open_path);
    s->open_bytes = 0;
    s->files_closed++;
    return enforce_bound(s, err);
}

static int open_next(spool_state *s, hm_error *err)
{
    int n = snprintf(s->open_path, sizeof s->open_path, "%s/%s-%lld-%llu.lp.open", s->dir, s->host,
                     (long long)s->start_ns, (unsigned long long)s->seq);
    if (n < 0 || (size_t)n >= sizeof s->open_path)
        return hm_error_set(err, "spool path too long");
    s->fd = open(s->open_path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC,
                 SPOOL_FILE_MODE);
    if (s->fd < 0 && errno == ENOENT) {
        /* Someone removed the spool directory: make it again. */
        if (mkdir_p(s->dir, err) < 0)
            return -1;
        hm_log_warn("spool directory %s was missing; created it again", s->dir);
        s->fd = open(s->open_path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC,
                 SPOOL_FILE_MODE);
    }
    if (s->fd < 0)
        return hm_error_errno(err, "creating %s", s->open_path);
    s->open_seq = s->seq++;
    s->open_bytes = 0;
    return 0;
}

int hm_spool_open(hm_spool **out, const hm_agent_config *cfg, int64_t start_ns,
                  hm_spool_removed_fn on_removed, void *arg, hm_error *err)
{
    spool_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    s->fd = -1;
    s->on_removed = on_removed;
    s->on_removed_arg = arg;
    snprintf(s->dir, sizeof s->dir, "%s", cfg->spool_dir);
    snprintf(s->host, sizeof s->host, "%s", cfg->host);
    for (char *p = s->host; *p; p++)
        if (*p == '/')
            *p = '_';
    s->start_ns = start_ns;
    s->file_limit = (uint64_t)cfg->spool_file_bytes;
    s->total_limit = (uint64_t)cfg->spool_total_bytes;
    if (mkdir_p(s->dir, err) < 0) {
        free(s);
        return -1;
    }
    DIR *d = opendir(s->dir);
    if (d == NULL) {
        free(s);
        return hm_error_errno(err, "listing %s", cfg->spool_dir);
    }
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL && rc == 0)
        if (ends_with(de->d_name, ".lp.open"))
            rc = recover(s, de->d_name, err);
    closedir(d);
    if (rc < 0 || enforce_bound(s, err) < 0) {
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

int hm_spool_reserve(hm_spool *s, size_t len, hm_spool_pos *pos, hm_error *err)
{
    if (s->fd >= 0 && s->open_bytes > 0 && s->open_bytes + len > s->file_limit &&
        close_current(s, err) < 0)
        return -1;
    if (s->fd < 0 && open_next(s, err) < 0)
        return -1;
    pos->start_ns = s->start_ns;
    pos->file_seq = s->open_seq;
    pos->offset = s->open_bytes;
    return 0;
}

int hm_spool_append(hm_spool *s, const char *buf, size_t len, hm_error *err)
{
    if (s->fd < 0)
        return hm_error_set(err, "spool: no file open (append without reserve)");
    if (hm_write_all(s->fd, buf, len) < 0) {
        int saved = errno;
        /* A partial write would shift every later batch: cut it off. */
        if (ftruncate(s->fd, (off_t)s->open_bytes) < 0)
            hm_log_warn("spool: cutting %s after a failed write: %s", s->open_path, strerror(errno));
        errno = saved;
        return hm_error_errno(err, "writing %s", s->open_path);
    }
    s->open_bytes += len;
    return 0;
}

int hm_spool_flush(hm_spool *s, hm_error *err)
{
    return close_current(s, err);
}

int hm_spool_close(hm_spool *s, hm_error *err)
{
    int rc = close_current(s, err);
    free(s);
    return rc;
}

int hm_spool_path(const hm_spool *s, int64_t start_ns, uint64_t file_seq, bool is_open, char *out,
                  size_t size)
{
    int n = snprintf(out, size, "%s/%s-%lld-%llu.lp%s", s->dir, s->host, (long long)start_ns,
                     (unsigned long long)file_seq, is_open ? ".open" : "");
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

bool hm_spool_is_open_file(const hm_spool *s, int64_t start_ns, uint64_t file_seq)
{
    return s->fd >= 0 && s->start_ns == start_ns && s->open_seq == file_seq;
}

int hm_spool_remove(hm_spool *s, int64_t start_ns, uint64_t file_seq, hm_error *err)
{
    char path[PATH_MAX];
    if (hm_spool_path(s, start_ns, file_seq, false, path, sizeof path) < 0)
        return hm_error_set(err, "spool path too long");
    struct stat st;
    if (stat(path, &st) < 0)
        return errno == ENOENT ? 0 : hm_error_errno(err, "stat %s", path);
    if (unlink(path) < 0)
        return hm_error_errno(err, "removing %s", path);
    s->closed_bytes -= s->closed_bytes >= (uint64_t)st.st_size ? (uint64_t)st.st_size : s->closed_bytes;
    return 0;
}

const char *hm_spool_dir(const hm_spool *s)
{
    return s->dir;
}

const char *hm_spool_host(const hm_spool *s)
{
    return s->host;
}

uint64_t hm_spool_dropped_lines(const hm_spool *s)
{
    return s->dropped_lines;
}

uint64_t hm_spool_bytes(const hm_spool *s)
{
    return s->closed_bytes + s->open_bytes;
}

uint64_t hm_spool_files_closed(const hm_spool *s)
{
    return s->files_closed;
}
