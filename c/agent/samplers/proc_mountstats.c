/* nfs: NFS client statistics per mount from /proc/self/mountstats.
 *
 * Each mount is a block that starts "device SERVER:/EXPORT mounted on
 * /PATH with fstype nfs[4] statvers=1.1"; an NFS block carries
 *   bytes: normalread normalwrite directread directwrite serverread
 *          serverwrite readpages writepages
 * (application bytes through the cache, O_DIRECT bytes, bytes on the
 * wire) and, under "per-op statistics", one line per RPC,
 *   READ: ops transmissions major_timeouts bytes_sent bytes_recv
 *         queue_ms rtt_ms execute_ms [errors]
 * whose times are cumulative milliseconds: the period's mean RTT of a
 * READ is its rtt_ms delta over its ops delta (execute = queue + RTT +
 * client overhead, what the application waited). Blocks of other file
 * systems are skipped at their first line. Mounts are keyed by mount
 * point. The kernel writes the file anew on each read, a line or more per
 * mount of any kind (about 20 us a read on a VM with 30 mounts, as much as
 * two other sources): while the node has no NFS mount it is read only
 * every NFS_RESCAN_S seconds, to see one appear; with one, every period. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define NFS_MOUNTS_MAX 64
#define NFS_RESCAN_S 30
#define NFS_NAME_MAX 256

#define NFS_METRICS(X, P)                                                                     \
    X(P, read_bytes_per_s, "B/s", "bytes applications read (normal + O_DIRECT)")             \
    X(P, write_bytes_per_s, "B/s", "bytes applications wrote (normal + O_DIRECT)")           \
    X(P, server_read_bytes_per_s, "B/s", "bytes read from the server (READ payloads)")       \
    X(P, server_write_bytes_per_s, "B/s", "bytes written to the server")                     \
    X(P, read_ops_per_s, "1/s", "READ RPCs")                                                  \
    X(P, write_ops_per_s, "1/s", "WRITE RPCs")                                                \
    X(P, read_rtt_ms, "ms", "mean round-trip time of the period's READs")                   \
    X(P, read_exe_ms, "ms", "mean execute time of the period's READs (queue + RTT)")        \
    X(P, write_rtt_ms, "ms", "mean round-trip time of the period's WRITEs")                 \
    X(P, write_exe_ms, "ms", "mean execute time of the period's WRITEs")                    \
    X(P, retrans_per_s, "1/s", "READ and WRITE retransmissions (transmissions - ops)")      \
    X(P, timeouts_per_s, "1/s", "READ and WRITE major timeouts")
HM_METRIC_ENUM(NFS, NFS_METRICS);

enum {
    C_NREAD, C_NWRITE, C_DREAD, C_DWRITE, C_SREAD, C_SWRITE,
    C_R_OPS, C_R_TRANS, C_R_TIMEOUTS, C_R_RTT, C_R_EXE,
    C_W_OPS, C_W_TRANS, C_W_TIMEOUTS, C_W_RTT, C_W_EXE,
    NCOUNTERS
};

typedef struct nfs_mount {
    bool used, seen, have_prev;
    char mount[NFS_NAME_MAX];
    char device[NFS_NAME_MAX];
    char fstype[16];
    uint64_t prev[NCOUNTERS];
    int64_t prev_mono_ns;
} nfs_mount;

typedef struct nfs_state {
    hm_procfile file;
    bool any_nfs;             /* the last read found an NFS mount */
    int64_t next_scan_mono_ns; /* without one: when to look again */
    nfs_mount mount[NFS_MOUNTS_MAX];
    bool warned_full;
} nfs_state;

static void nfs_close(void *state)
{
    nfs_state *s = state;
    if (s == NULL)
        return;
    hm_procfile_close(&s->file);
    free(s);
}

static int nfs_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    nfs_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    if (hm_procfile_open(&s->file, env->cfg->root, "proc/self/mountstats", err) < 0) {
        free(s);
        return 0; /* no mountstats (a very old kernel, a bare tree): nothing to sample */
    }
    *state = s;
    return 0;
}

static void copy_word(char *out, size_t size, const char *w, size_t len)
{
    if (len >= size)
        len = size - 1;
    memcpy(out, w, len);
    out[len] = '\0';
}

static nfs_mount *find_mount(nfs_state *s, const char *name, size_t len)
{
    nfs_mount *free_slot = NULL;
    for (int i = 0; i < NFS_MOUNTS_MAX; i++) {
        nfs_mount *m = &s->mount[i];
        if (!m->used) {
            if (free_slot == NULL)
                free_slot = m;
        } else if (strlen(m->mount) == len && memcmp(m->mount, name, len) == 0) {
            return m;
        }
    }
    if (free_slot == NULL || len >= NFS_NAME_MAX)
        return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = true;
    copy_word(free_slot->mount, sizeof free_slot->mount, name, len);
    return free_slot;
}

static void emit(nfs_mount *m, const uint64_t now[NCOUNTERS], const hm_sample_ctx *ctx,
                 hm_lp *out)
{
    double dt = hm_dt_s(m->prev_mono_ns, ctx->mono_ns);
    bool first = !m->have_prev;
    uint64_t d[NCOUNTERS];
    bool ok = !first && dt > 0;
    for (int k = 0; k < NCOUNTERS && ok; k++)
        ok = hm_counter_delta(m->prev[k], now[k], 64, &d[k]); /* remount: a reset */
    memcpy(m->prev, now, sizeof m->prev);
    m->have_prev = true;
    m->prev_mono_ns = ctx->mono_ns;
    if (!ok)
        return;
    hm_lp_begin(out, "nfs");
    hm_lp_tag(out, "mount", m->mount);
    hm_lp_tag(out, "server", m->device);
    hm_lp_tag(out, "fstype", m->fstype);
    hm_lp_field_f64(out, HM_M(NFS, read_bytes_per_s), (double)(d[C_NREAD] + d[C_DREAD]) / dt);
    hm_lp_field_f64(out, HM_M(NFS, write_bytes_per_s), (double)(d[C_NWRITE] + d[C_DWRITE]) / dt);
    hm_lp_field_f64(out, HM_M(NFS, server_read_bytes_per_s), (double)d[C_SREAD] / dt);
    hm_lp_field_f64(out, HM_M(NFS, server_write_bytes_per_s), (double)d[C_SWRITE] / dt);
    hm_lp_field_f64(out, HM_M(NFS, read_ops_per_s), (double)d[C_R_OPS] / dt);
    hm_lp_field_f64(out, HM_M(NFS, write_ops_per_s), (double)d[C_W_OPS] / dt);
    /* Mean times only over periods with RPCs: absent, not 0, without. */
    if (d[C_R_OPS] > 0) {
        hm_lp_field_f64(out, HM_M(NFS, read_rtt_ms), (double)d[C_R_RTT] / (double)d[C_R_OPS]);
        hm_lp_field_f64(out, HM_M(NFS, read_exe_ms), (double)d[C_R_EXE] / (double)d[C_R_OPS]);
    }
    if (d[C_W_OPS] > 0) {
        hm_lp_field_f64(out, HM_M(NFS, write_rtt_ms), (double)d[C_W_RTT] / (double)d[C_W_OPS]);
        hm_lp_field_f64(out, HM_M(NFS, write_exe_ms), (double)d[C_W_EXE] / (double)d[C_W_OPS]);
    }
    uint64_t trans = d[C_R_TRANS] + d[C_W_TRANS], ops = d[C_R_OPS] + d[C_W_OPS];
    hm_lp_field_f64(out, HM_M(NFS, retrans_per_s), trans > ops ? (double)(trans - ops) / dt : 0.0);
    hm_lp_field_f64(out, HM_M(NFS, timeouts_per_s),
                    (double)(d[C_R_TIMEOUTS] + d[C_W_TIMEOUTS]) / dt);
    hm_lp_end(out);
}

/* "READ:" or "WRITE:" per-op line: ops trans timeouts sent recv queue rtt exe. */
static bool parse_op(hm_scan *line, uint64_t now[NCOUNTERS], int base)
{
    uint64_t v[8];
    for (int i = 0; i < 8; i++)
        if (!hm_scan_u64(line, &v[i]))
            return false;
    now[base] = v[0];
    now[base + 1] = v[1];
    now[base + 2] = v[2];
    now[base + 3] = v[6];
    now[base + 4] = v[7];
    return true;
}

static int nfs_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    nfs_state *s = state;
    if (!s->any_nfs && ctx->mono_ns < s->next_scan_mono_ns)
        return 0;
    if (hm_procfile_read(&s->file, err) < 0)
        return -1;
    s->any_nfs = false;
    for (int i = 0; i < NFS_MOUNTS_MAX; i++)
        s->mount[i].seen = false;
    nfs_mount *m = NULL; /* the NFS block being read, NULL in others */
    uint64_t now[NCOUNTERS];
    unsigned got = 0;    /* 1 bytes, 2 READ, 4 WRITE */
    hm_scan c = hm_scan_of(s->file.buf, s->file.len);
    do {
        hm_scan line = c;
        const char *w;
        size_t wl;
        if (!hm_scan_word(&line, &w, &wl, false))
            continue;
        if (hm_word_eq(w, wl, "device")) {
            if (m != NULL && got == 7)
                emit(m, now, ctx, out);
            m = NULL;
            got = 0;
            const char *dev, *mnt, *fs, *tmp;
            size_t devl, mntl, fsl, tl;
            if (!hm_scan_word(&line, &dev, &devl, false) ||
                !hm_scan_word(&line, &tmp, &tl, false) || !hm_scan_word(&line, &tmp, &tl, false) ||
                !hm_scan_word(&line, &mnt, &mntl, false) ||
                !hm_scan_word(&line, &tmp, &tl, false) || !hm_scan_word(&line, &tmp, &tl, false) ||
                !hm_scan_word(&line, &fs, &fsl, false))
                continue;
            if (!(hm_word_eq(fs, fsl, "nfs") || hm_word_eq(fs, fsl, "nfs4")))
                continue;
            m = find_mount(s, mnt, mntl);
            if (m == NULL) {
                hm_log_warn_once(&s->warned_full, "nfs: more than %d NFS mounts (or a mount point "
                                 "longer than %d bytes): some not sampled",
                                 NFS_MOUNTS_MAX, NFS_NAME_MAX - 1);
                continue;
            }
            m->seen = true;
            s->any_nfs = true;
            copy_word(m->device, sizeof m->device, dev, devl);
            copy_word(m->fstype, sizeof m->fstype, fs, fsl);
            memset(now, 0, sizeof now);
            continue;
        }
        if (m == NULL)
            continue;
        if (hm_word_eq(w, wl, "bytes:")) {
            uint64_t v[6];
            int n = 0;
            while (n < 6 && hm_scan_u64(&line, &v[n]))
                n++;
            if (n == 6) {
                for (int k = 0; k < 6; k++)
                    now[C_NREAD + k] = v[k];
                got |= 1;
            }
        } else if (hm_word_eq(w, wl, "READ:")) {
            got |= parse_op(&line, now, C_R_OPS) ? 2 : 0;
        } else if (hm_word_eq(w, wl, "WRITE:")) {
            got |= parse_op(&line, now, C_W_OPS) ? 4 : 0;
        }
    } while (hm_scan_next_line(&c));
    if (m != NULL && got == 7)
        emit(m, now, ctx, out);
    if (!s->any_nfs)
        s->next_scan_mono_ns = ctx->mono_ns + (int64_t)NFS_RESCAN_S * 1000000000;
    /* Unmounted since: the slot is free for another mount. */
    for (int i = 0; i < NFS_MOUNTS_MAX; i++)
        if (s->mount[i].used && !s->mount[i].seen)
            s->mount[i].used = false;
    return 0;
}

const hm_sampler_ops hm_sampler_proc_mountstats = {
    .name = "nfs",
    .reads = "/proc/self/mountstats (NFS mounts: bytes, READ/WRITE ops, RTT and execute time)",
    .measurement = "nfs (tags mount, server, fstype)",
    .fields = HM_FIELDS(NFS_METRICS),
    .default_on = true,
    .open = nfs_open,
    .sample = nfs_sample,
    .close = nfs_close,
};
