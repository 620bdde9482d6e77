/* The spool directory itself: rotating line-protocol files, bounded in
 * total size, recovered after a crash (docs/formats.md "Spool files").
 * Used by the spool sink (spool.c) and, as its write-ahead log, by the
 * nats sink (nats.c), so both leave exactly the files `hushmon ingest`
 * reads. */
#ifndef HM_SPOOL_FILES_H
#define HM_SPOOL_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "hm_error.h"

typedef struct hm_spool hm_spool;

/* Where one batch lies: file <host>-<start_ns>-<file_seq>.lp[.open], offset. */
typedef struct hm_spool_pos {
    int64_t start_ns;
    uint64_t file_seq;
    uint64_t offset;
} hm_spool_pos;

/* Called when the size bound removes a closed file, with its line count. */
typedef void (*hm_spool_removed_fn)(void *arg, int64_t start_ns, uint64_t file_seq,
                                    uint64_t lines);

/* Creates dir and its parents. */
int hm_spool_mkdir(const char *dir, hm_error *err);
/* Creates the directory, recovers .lp.open files left by a crash and
 * applies the bound (on_removed may be NULL). */
int hm_spool_open(hm_spool **out, const hm_agent_config *cfg, int64_t start_ns,
                  hm_spool_removed_fn on_removed, void *arg, hm_error *err);
/* Rotates if a batch of len bytes would take the open file past its
 * limit, opens a file if none is, and says where that batch will go. */
int hm_spool_reserve(hm_spool *s, size_t len, hm_spool_pos *pos, hm_error *err);
/* Appends a batch at the position hm_spool_reserve gave. */
int hm_spool_append(hm_spool *s, const char *buf, size_t len, hm_error *err);
/* Closes the open file (synced, renamed to .lp); none is open after. */
int hm_spool_flush(hm_spool *s, hm_error *err);
/* Flushes and frees. */
int hm_spool_close(hm_spool *s, hm_error *err);

/* Path of a file of this spool; is_open selects the .lp.open name. */
int hm_spool_path(const hm_spool *s, int64_t start_ns, uint64_t file_seq, bool is_open, char *out,
                  size_t size);
/* Whether (start_ns, file_seq) is the file being written now. */
bool hm_spool_is_open_file(const hm_spool *s, int64_t start_ns, uint64_t file_seq);
/* Removes a closed file whose batches are delivered (not counted as a drop). */
int hm_spool_remove(hm_spool *s, int64_t start_ns, uint64_t file_seq, hm_error *err);
/* "<host>-<start_ns>-<seq>.lp": true and the two numbers when name is a
 * closed file of host (the sanitized host tag). */
bool hm_spool_parse_name(const char *name, const char *host, int64_t *start_ns, uint64_t *seq);

const char *hm_spool_dir(const hm_spool *s);
const char *hm_spool_host(const hm_spool *s);
uint64_t hm_spool_dropped_lines(const hm_spool *s);
uint64_t hm_spool_bytes(const hm_spool *s);
uint64_t hm_spool_files_closed(const hm_spool *s);

#endif
