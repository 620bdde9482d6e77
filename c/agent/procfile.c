#include "procfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROCFILE_MIN_CAP 4096

int hm_path_join(char *out, size_t size, const char *root, const char *rel, hm_error *err)
{
    size_t rl = strlen(root);
    while (rl > 0 && root[rl - 1] == '/')
        rl--;
    while (*rel == '/')
        rel++;
    size_t need = rl + 1 + strlen(rel) + 1;
    if (need > size)
        return hm_error_set(err, "path %s/%s too long", root, rel);
    memcpy(out, root, rl);
    out[rl] = '/';
    strcpy(out + rl + 1, rel);
    return 0;
}

bool hm_procfile_is_open(const hm_procfile *f)
{
    return f->fd >= 0;
}

int hm_procfile_open_path(hm_procfile *f, const char *path, hm_error *err)
{
    memset(f, 0, sizeof *f);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return hm_error_errno(err, "opening %s", path);
    f->path = strdup(path);
    if (f->path == NULL) {
        hm_procfile_close(f);
        return hm_error_set(err, "out of memory");
    }
    f->cap = PROCFILE_MIN_CAP;
    f->buf = malloc(f->cap);
    if (f->buf == NULL) {
        hm_procfile_close(f);
        return hm_error_set(err, "out of memory reading %s", path);
    }
    if (hm_procfile_read(f, err) < 0) {
        hm_procfile_close(f);
        return -1;
    }
    return 0;
}

int hm_procfile_open(hm_procfile *f, const char *root, const char *rel, hm_error *err)
{
    char path[PATH_MAX];
    if (hm_path_join(path, sizeof path, root, rel, err) < 0) {
        memset(f, 0, sizeof *f);
        f->fd = -1;
        return -1;
    }
    return hm_procfile_open_path(f, path, err);
}

int hm_procfile_read(hm_procfile *f, hm_error *err)
{
    if (f->fd < 0)
        return hm_error_set(err, "%s is not open", f->path ? f->path : "file");
    for (;;) {
        /* One pread: /proc and sysfs files fill the whole buffer when they
         * can (seq_file keeps adding records until it is full), so a short
         * read is the end of the file. A second read "to see EOF" would
         * make the kernel generate the file again, doubling the cost. */
        ssize_t n = pread(f->fd, f->buf, f->cap - 1, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return hm_error_errno(err, "reading %s", f->path);
        }
        if ((size_t)n < f->cap - 1) {
            f->len = (size_t)n;
            f->buf[n] = '\0';
            return 0;
        }
        /* Full buffer: the file may be longer. Double and read again. */
        char *bigger = realloc(f->buf, f->cap * 2);
        if (bigger == NULL)
            return hm_error_set(err, "out of memory reading %s", f->path);
        f->buf = bigger;
        f->cap *= 2;
    }
}

void hm_procfile_close(hm_procfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    free(f->buf);
    free(f->path);
    f->buf = NULL;
    f->path = NULL;
    f->cap = f->len = 0;
}

bool hm_scan_u64(hm_scan *c, uint64_t *out)
{
    hm_scan_skip_blanks(c);
    const char *p = c->p, *start = c->p;
    if (p >= c->end || (unsigned)(*p - '0') > 9)
        return false;
    uint64_t v = 0;
    while (p < c->end && (unsigned)(*p - '0') <= 9) {
        uint64_t d = (uint64_t)(*p - '0');
        /* 19 digits always fit; only from the 20th on can it overflow. */
        if (p - start >= 19 && v > (UINT64_MAX - d) / 10) {
            v = UINT64_MAX; /* saturate, and skip the remaining digits */
            while (p < c->end && (unsigned)(*p - '0') <= 9)
                p++;
            break;
        }
        v = v * 10 + d;
        p++;
    }
    c->p = p;
    *out = v;
    return true;
}

bool hm_scan_udouble(hm_scan *c, double *out)
{
    uint64_t ip;
    if (!hm_scan_u64(c, &ip))
        return false;
    double v = (double)ip;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        double scale = 0.1;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            v += (*c->p - '0') * scale;
            scale *= 0.1;
            c->p++;
        }
    }
    *out = v;
    return true;
}

bool hm_scan_word(hm_scan *c, const char **word, size_t *len, bool stop_colon)
{
    hm_scan_skip_blanks(c);
    const char *p = c->p;
    while (p < c->end && *p != ' ' && *p != '\t' && *p != '\n' && !(stop_colon && *p == ':'))
        p++;
    if (p == c->p)
        return false;
    *word = c->p;
    *len = (size_t)(p - c->p);
    c->p = p;
    return true;
}

bool hm_scan_char(hm_scan *c, char ch)
{
    hm_scan_skip_blanks(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

bool hm_word_eq(const char *word, size_t len, const char *s)
{
    return strncmp(word, s, len) == 0 && s[len] == '\0';
}

static bool key_at(const char *text, size_t len, size_t off, const char *key, size_t kl)
{
    if (off + kl >= len || (off > 0 && text[off - 1] != '\n'))
        return false;
    char after = text[off + kl];
    return memcmp(text + off, key, kl) == 0 && (after == ' ' || after == ':' || after == '\t');
}

hm_scan hm_find_key(const char *text, size_t len, hm_key_hint *hint)
{
    size_t kl = strlen(hint->key);
    const char *end = text + len;
    if (key_at(text, len, hint->offset, hint->key, kl))
        return hm_scan_of(text + hint->offset + kl, len - hint->offset - kl);
    if (key_at(text, len, 0, hint->key, kl)) {
        hint->offset = 0;
        return hm_scan_of(text + kl, len - kl);
    }
    char needle[96];
    if (kl + 1 < sizeof needle) {
        needle[0] = '\n';
        memcpy(needle + 1, hint->key, kl);
        const char *p = text;
        while ((p = memmem(p, (size_t)(end - p), needle, kl + 1)) != NULL) {
            size_t off = (size_t)(p + 1 - text);
            if (key_at(text, len, off, hint->key, kl)) {
                hint->offset = off;
                return hm_scan_of(text + off + kl, len - off - kl);
            }
            p++;
        }
    }
    hm_scan none = {end, end};
    return none;
}

void hm_io_stat_totals(const char *text, size_t len, uint64_t *rbytes, uint64_t *wbytes)
{
    *rbytes = *wbytes = 0;
    for (const char *p = text; p < text + len; p++) {
        uint64_t *dst = NULL;
        if (strncmp(p, "rbytes=", 7) == 0)
            dst = rbytes;
        else if (strncmp(p, "wbytes=", 7) == 0)
            dst = wbytes;
        if (dst == NULL)
            continue;
        hm_scan c = hm_scan_of(p + 7, (size_t)(text + len - p - 7));
        uint64_t v;
        if (hm_scan_u64(&c, &v))
            *dst += v;
        p += 6;
    }
}
