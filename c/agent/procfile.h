/* A kernel text file kept open and re-read with pread() each period.
 *
 * Opening a /proc file costs about as much as reading it; keeping the
 * descriptor and reading from offset 0 makes the kernel regenerate the
 * contents without a path walk. The buffer grows only when a file outgrows
 * it (a new disk or interface), never in the steady state. */
#ifndef HM_PROCFILE_H
#define HM_PROCFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hm_error.h"

typedef struct hm_procfile {
    int fd;
    char *path;      /* for messages; heap, so idle slots stay small */
    char *buf;
    size_t cap, len;
} hm_procfile;

/* Joins root and rel ("/proc/stat") into out. Returns -1 if too long. */
int hm_path_join(char *out, size_t size, const char *root, const char *rel, hm_error *err);

/* Opens root + rel and reads it once to size the buffer. */
int hm_procfile_open(hm_procfile *f, const char *root, const char *rel, hm_error *err);
/* Opens an absolute path. */
int hm_procfile_open_path(hm_procfile *f, const char *path, hm_error *err);
/* Re-reads the whole file into f->buf (NUL-terminated, f->len bytes). */
int hm_procfile_read(hm_procfile *f, hm_error *err);
void hm_procfile_close(hm_procfile *f);
bool hm_procfile_is_open(const hm_procfile *f);

/* A cursor over text, for parsing without stdio. */
typedef struct hm_scan {
    const char *p, *end;
} hm_scan;

static inline hm_scan hm_scan_of(const char *s, size_t len)
{
    hm_scan c = {s, s + len};
    return c;
}

static inline void hm_scan_skip_blanks(hm_scan *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

/* Moves past the end of the current line. Returns false at end of text.
 * memchr: lines such as /proc/stat's "intr" hold thousands of numbers. */
static inline bool hm_scan_next_line(hm_scan *c)
{
    const char *nl = c->p < c->end ? memchr(c->p, '\n', (size_t)(c->end - c->p)) : NULL;
    c->p = nl != NULL ? nl + 1 : c->end;
    return c->p < c->end;
}

static inline bool hm_scan_at_eol(const hm_scan *c)
{
    return c->p >= c->end || *c->p == '\n';
}

/* Unsigned decimal after optional blanks. False (cursor unmoved past the
 * blanks) if there is no digit; values beyond 2^64 saturate. */
bool hm_scan_u64(hm_scan *c, uint64_t *out);
/* A non-negative decimal number like "0.65" (loadavg). */
bool hm_scan_udouble(hm_scan *c, double *out);
/* A run of non-blank characters (stops also at ':' when stop_colon). */
bool hm_scan_word(hm_scan *c, const char **word, size_t *len, bool stop_colon);
/* Consumes ch if it is next (after blanks). */
bool hm_scan_char(hm_scan *c, char ch);
/* True if the word equals the NUL-terminated s. */
bool hm_word_eq(const char *word, size_t len, const char *s);

/* Finding "key" lines (meminfo, vmstat, cpu.stat) fast: the kernel prints
 * them in a fixed order and numbers rarely change width, so the offset
 * where a key was found last time is checked first; only if the line is
 * not there is the text searched (memmem for "\nkey"). */
typedef struct hm_key_hint {
    const char *key;
    size_t offset;      /* where the line began last time */
} hm_key_hint;

/* Returns a cursor just after the key on its line (key followed by ' ',
 * ':' or tab at the start of a line), or a cursor with p == end if the
 * file has no such line. */
hm_scan hm_find_key(const char *text, size_t len, hm_key_hint *hint);

/* cgroup v2 io.stat ("MAJ:MIN rbytes=N wbytes=N rios=N ..." per device):
 * bytes read and written, summed over the devices. */
void hm_io_stat_totals(const char *text, size_t len, uint64_t *rbytes, uint64_t *wbytes);

#endif
