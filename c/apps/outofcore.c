/* outofcore: a data set larger than the memory budget, streamed through a
 * file chunk by chunk, as an out-of-core solver (or a job that outgrew RAM
 * and swaps) would.
 *
 * Each rank owns a file of --data bytes and one buffer of --memory bytes:
 *   pass 0        generate each chunk, write it
 *   passes 1..P   read each chunk, check it, update every word, write it back
 *   final pass    read each chunk, check it against freshly generated data
 * --fsync forces every chunk to disk, --direct bypasses the page cache
 * (O_DIRECT), so the disk sensors see the traffic instead of the cache.
 * The file is unlinked as soon as it is open, so nothing is left behind
 * even if the job is killed. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "app_common.h"

enum { OOC_ALIGN = 4096 };   /* O_DIRECT alignment of buffers, sizes, offsets */

typedef struct ooc_params {
    int64_t data_bytes;
    int64_t memory_bytes;
    int64_t passes;
    const char *dir;
    bool fsync_each;
    bool direct;
    bool corrupt;
} ooc_params;

typedef struct ooc_io {
    int fd;
    int64_t io_ns;
    double read_bytes, written_bytes;
} ooc_io;

/* ---- data --------------------------------------------------------------- */

/* xorshift64*: a stream of words any rank can regenerate for any chunk. */
static uint64_t next_word(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static uint64_t chunk_seed(int rank, int64_t chunk)
{
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(chunk + 1) ^ ((uint64_t)rank << 40);
    return s ? s : 1;
}

/* What pass p adds to every word (the "update" of an out-of-core sweep). */
static uint64_t pass_key(int64_t pass)
{
    return 0xD1B54A32D192ED03ull * (uint64_t)pass;
}

static uint64_t checksum_step(uint64_t h, uint64_t w)
{
    return (h ^ w) * 0x100000001B3ull;
}

static uint64_t checksum(const uint64_t *w, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++)
        h = checksum_step(h, w[i]);
    return h;
}

/* The checksum the chunk must have after `passes` updates, computed from
 * the generator alone (no second buffer: the memory budget holds). */
static uint64_t expected_checksum(int rank, int64_t chunk, size_t words, int64_t passes)
{
    uint64_t state = chunk_seed(rank, chunk), offset = 0, h = 0xCBF29CE484222325ull;
    for (int64_t p = 1; p <= passes; p++)
        offset += pass_key(p);
    for (size_t i = 0; i < words; i++)
        h = checksum_step(h, next_word(&state) + offset);
    return h;
}

/* ---- I/O ---------------------------------------------------------------- */

static int io_full(ooc_io *io, bool writing, void *buf, size_t len, off_t off, hm_error *err)
{
    int64_t t0 = app_now_ns();
    size_t done = 0;
    while (done < len) {
        ssize_t n = writing ? pwrite(io->fd, (char *)buf + done, len - done, off + (off_t)done)
                            : pread(io->fd, (char *)buf + done, len - done, off + (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return hm_error_errno(err, "%s %zu bytes at offset %lld",
                                  writing ? "writing" : "reading", len, (long long)off);
        if (n == 0)
            return hm_error_set(err, "file ended at offset %lld (expected %zu more bytes)",
                                (long long)(off + (off_t)done), len - done);
        done += (size_t)n;
    }
    io->io_ns += app_now_ns() - t0;
    if (writing)
        io->written_bytes += (double)len;
    else
        io->read_bytes += (double)len;
    return 0;
}

static int io_sync(ooc_io *io, hm_error *err)
{
    int64_t t0 = app_now_ns();
    if (fdatasync(io->fd) != 0)
        return hm_error_errno(err, "fdatasync");
    io->io_ns += app_now_ns() - t0;
    return 0;
}

static int open_scratch(const ooc_params *p, const app_context *ctx, ooc_io *io, hm_error *err)
{
    struct statvfs vfs;
    if (statvfs(p->dir, &vfs) != 0)
        return hm_error_errno(err, "--dir %s", p->dir);
    double free_bytes = (double)vfs.f_bavail * (double)vfs.f_frsize;
    /* Ranks on one node share the disk: each needs its own file. */
    if (free_bytes < 1.1 * (double)p->data_bytes)
        return hm_error_set(err, "--dir %s has %.3g GB free, the data set needs %.3g GB",
                            p->dir, free_bytes / 1e9, (double)p->data_bytes / 1e9);
    char path[4096];
    int len = snprintf(path, sizeof path, "%s/hushmon-outofcore-%ld-%d.dat", p->dir,
                       (long)getpid(), ctx->rank);
    if (len < 0 || (size_t)len >= sizeof path)
        return hm_error_set(err, "--dir path too long");
    int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | (p->direct ? O_DIRECT : 0);
    io->fd = open(path, flags, 0600);
    if (io->fd < 0) {
        if (errno == EINVAL && p->direct)
            return hm_error_set(err, "the file system of %s does not support O_DIRECT "
                                     "(use --no-direct or another --dir)", p->dir);
        return hm_error_errno(err, "creating %s", path);
    }
    if (unlink(path) != 0) {
        hm_error_errno(err, "unlinking %s", path);
        close(io->fd);
        io->fd = -1;
        return -1;
    }
    return 0;
}

/* ---- the run ------------------------------------------------------------ */

static int ooc_validate(const app_context *ctx, const void *data, hm_error *err)
{
    const ooc_params *p = data;
    (void)ctx;
    if (p->memory_bytes % OOC_ALIGN != 0 || p->data_bytes % OOC_ALIGN != 0)
        return hm_error_set(err, "--data and --memory must be multiples of %d bytes "
                                 "(O_DIRECT alignment)", OOC_ALIGN);
    if (p->data_bytes <= p->memory_bytes)
        return hm_error_set(err, "--data (%" PRId64 ") must exceed --memory (%" PRId64
                                 "): the point is a data set that does not fit",
                            p->data_bytes, p->memory_bytes);
    return 0;
}

/* One sweep over the file: pass 0 writes, 1..passes update, passes+1 checks. */
static int sweep(const ooc_params *p, const app_context *ctx, ooc_io *io, uint64_t *buf,
                 uint64_t *sums, int64_t pass, app_result *result, hm_error *err)
{
    const int64_t chunk_bytes = p->memory_bytes;
    const int64_t n_chunks = (p->data_bytes + chunk_bytes - 1) / chunk_bytes;
    for (int64_t c = 0; c < n_chunks; c++) {
        const off_t off = (off_t)(c * chunk_bytes);
        const size_t len = (size_t)(c + 1 < n_chunks ? chunk_bytes : p->data_bytes - off);
        const size_t words = len / sizeof(uint64_t);
        if (pass == 0) {
            uint64_t state = chunk_seed(ctx->rank, c);
            for (size_t i = 0; i < words; i++)
                buf[i] = next_word(&state);
        } else {
            if (io_full(io, false, buf, len, off, err) != 0)
                return hm_error_wrap(err, "pass %" PRId64 ", chunk %" PRId64, pass, c);
            /* What comes back must be what this run wrote last. */
            if (checksum(buf, words) != sums[c])
                result->failures++;
            if (pass > p->passes) {
                if (sums[c] != expected_checksum(ctx->rank, c, words, p->passes))
                    result->failures++;
                continue;
            }
            const uint64_t key = pass_key(pass);
            for (size_t i = 0; i < words; i++)
                buf[i] += key;
        }
        sums[c] = checksum(buf, words);
        if (io_full(io, true, buf, len, off, err) != 0)
            return hm_error_wrap(err, "pass %" PRId64 ", chunk %" PRId64, pass, c);
        if (p->fsync_each && io_sync(io, err) != 0)
            return hm_error_wrap(err, "pass %" PRId64 ", chunk %" PRId64, pass, c);
    }
    return 0;
}

/* --corrupt: flips one byte in the middle of the file behind the program's
 * back, to show the checks catch what a faulty disk would do. */
static int corrupt_file(const ooc_params *p, ooc_io *io, uint64_t *buf, hm_error *err)
{
    const off_t off = (off_t)((p->data_bytes / 2) / OOC_ALIGN * OOC_ALIGN);
    if (io_full(io, false, buf, OOC_ALIGN, off, err) != 0)
        return hm_error_wrap(err, "--corrupt");
    ((unsigned char *)buf)[17] ^= 0x40;
    if (io_full(io, true, buf, OOC_ALIGN, off, err) != 0)
        return hm_error_wrap(err, "--corrupt");
    return 0;
}

static int ooc_run(const app_context *ctx, const void *data, app_result *result, hm_error *err)
{
    const ooc_params *p = data;
    const int64_t n_chunks = (p->data_bytes + p->memory_bytes - 1) / p->memory_bytes;
    ooc_io io = {.fd = -1};
    uint64_t *buf = NULL;
    uint64_t *sums = calloc((size_t)n_chunks, sizeof *sums);
    int rc = 0;
    if (sums == NULL || posix_memalign((void **)&buf, OOC_ALIGN, (size_t)p->memory_bytes) != 0)
        rc = hm_error_set(err, "cannot allocate the %" PRId64 "-byte buffer", p->memory_bytes);
    if (rc == 0)
        rc = open_scratch(p, ctx, &io, err);
    /* No communication until the end, so a rank that fails can return and
     * the agreement in app_main stops the others cleanly. */
    int64_t compute_ns = 0;
    for (int64_t pass = 0; rc == 0 && pass <= p->passes + 1; pass++) {
        if (p->corrupt && pass == p->passes + 1)
            rc = corrupt_file(p, &io, buf, err);
        int64_t t0 = app_now_ns(), io0 = io.io_ns;
        if (rc == 0)
            rc = sweep(p, ctx, &io, buf, sums, pass, result, err);
        compute_ns += (app_now_ns() - t0) - (io.io_ns - io0);
    }
    if (io.fd >= 0 && close(io.fd) != 0 && rc == 0)
        rc = hm_error_errno(err, "closing the scratch file");
    free(buf);
    free(sums);
    if (rc != 0)
        return rc;

    result->bytes_moved = io.read_bytes + io.written_bytes;
    result->busy_ns = io.io_ns;
    app_result_extra(result, "read_bytes", io.read_bytes, APP_SUM);
    app_result_extra(result, "written_bytes", io.written_bytes, APP_SUM);
    app_result_extra(result, "io_s_max", (double)io.io_ns * 1e-9, APP_MAX);
    app_result_extra(result, "compute_s_max", (double)compute_ns * 1e-9, APP_MAX);
    app_result_extra(result, "chunks_per_rank", (double)n_chunks, APP_MAX);
    return 0;
}

int main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    /* Defaults: about 15-20 s with 2 ranks on a small machine; 1 GiB per
     * rank through a 64 MiB buffer, every chunk forced to disk. */
    ooc_params params = {
        .data_bytes = INT64_C(1) << 30,
        .memory_bytes = INT64_C(64) << 20,
        .passes = 4,
        .dir = (tmp && *tmp) ? tmp : "/tmp",
        .fsync_each = true,
        .direct = false,
        .corrupt = false,
    };
    app_option options[] = {
        APP_SIZE("data", &params.data_bytes, OOC_ALIGN, INT64_C(1) << 44, "BYTES",
                 "data set per rank (a file of this size)"),
        APP_SIZE("memory", &params.memory_bytes, OOC_ALIGN, INT64_C(1) << 36, "BYTES",
                 "memory budget per rank (one buffer; the chunk size)"),
        APP_INT("passes", &params.passes, 0, 1000, "P", "update passes (read, update, write)"),
        APP_STRING("dir", &params.dir, "DIR", "where the scratch files go"),
        APP_FLAG("fsync", &params.fsync_each, "fdatasync every chunk written"),
        APP_FLAG("direct", &params.direct, "O_DIRECT: bypass the page cache"),
        APP_FLAG("corrupt", &params.corrupt,
                 "(testing) flip one byte of the file before the final check"),
    };
    app_program program = {
        .name = "outofcore",
        .summary = "Streams a data set larger than its memory budget through a file.",
        .details = "Each rank writes --data bytes of generated words through a --memory "
                   "buffer, then makes --passes update sweeps (read a chunk, check its "
                   "checksum, add a constant to every word, write it back) and a final sweep "
                   "that checks every chunk against freshly generated data. Disk traffic and "
                   "computation alternate chunk by chunk, as in a job that swaps.",
        .min_ranks = 1,
        .options = options,
        .n_options = sizeof options / sizeof options[0],
        .validate = ooc_validate,
        .run = ooc_run,
        .data = &params,
    };
    return app_main(&program, argc, argv);
}
