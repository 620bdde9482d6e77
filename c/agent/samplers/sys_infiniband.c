/* ib: InfiniBand port traffic, congestion and errors from
 * /sys/class/infiniband/<dev>/ports/<n>/ (seed 001's main evidence of a
 * network bound; port_xmit_wait tells a congested link from a busy one).
 *
 * counters/ holds the IBA PortCounters: the data counters count 4-byte
 * words (PortXmitData / PortRcvData). These are narrow in the spec and
 * saturate instead of wrapping (data and packets and xmit_wait 32 bits,
 * most error counters 16, link_downed and link_error_recovery 8): a
 * counter stuck at its top gives no rate (absent) and is counted in
 * `saturated` until someone clears it (perfquery -x -R), which reads as
 * a reset. Where the kernel has counters_ext/port_*_64 (the 64-bit
 * PortCountersExtended of some drivers) those are read for data and
 * packets instead; drivers that fill counters/port_xmit_data from the
 * extended counters show 64-bit values there, which never reach 2^32-1
 * in practice. hw_counters/ (mlx5) adds the RDMA transport's own
 * counters: receive-buffer drops, ACK timeouts, sequence errors and the
 * congestion notification packets of RoCE/IB congestion control; these
 * are 64-bit and optional (absent where the driver has none).
 *
 * Ports are found when the source opens (and again on `reload`); a node
 * without InfiniBand simply has no ib lines. A device directory holding a
 * `hushmon_sim` file is a simulated one (the test bed's counters made from
 * its Ethernet links, python/hushmon/testbed/ibsim.py, read through
 * ib.sysfs_root): its lines carry backend=sim, as the simulated PMU's do,
 * so no report takes them for a real fabric. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "counter.h"
#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define IB_PORTS_MAX 32

typedef struct ib_counter {
    const char *dir;   /* under the port's directory */
    const char *file;
    const char *field;
    double scale;      /* to bytes or packets */
    unsigned bits;     /* saturates at 2^bits - 1 (64: never) */
    bool required;     /* the port is skipped without it */
} ib_counter;

/* X(P, field, unit, help, directory, counter file, its unit in bytes or
 * packets, width in bits, required): the data counters count 4-byte
 * words. */
#define IB_METRICS(X, P)                                                                      \
    X(P, rx_bytes_per_s, "B/s", "received", "counters", "port_rcv_data", 4.0, 32, true)        \
    X(P, tx_bytes_per_s, "B/s", "sent", "counters", "port_xmit_data", 4.0, 32, true)           \
    X(P, rx_packets_per_s, "1/s", "packets received", "counters", "port_rcv_packets", 1.0, 32, \
      true)                                                                                   \
    X(P, tx_packets_per_s, "1/s", "packets sent", "counters", "port_xmit_packets", 1.0, 32,    \
      true)                                                                                   \
    X(P, xmit_wait_per_s, "1/s", "ticks with data to send and no credit (congestion)",        \
      "counters", "port_xmit_wait", 1.0, 32, false)                                           \
    X(P, xmit_discards_per_s, "1/s", "outbound packets discarded (port down or congested)",   \
      "counters", "port_xmit_discards", 1.0, 16, false)                                       \
    X(P, rcv_errors_per_s, "1/s", "received packets with errors", "counters",                 \
      "port_rcv_errors", 1.0, 16, false)                                                      \
    X(P, symbol_errors_per_s, "1/s", "minor link errors", "counters", "symbol_error", 1.0, 16, \
      false)                                                                                  \
    X(P, link_downed_per_s, "1/s", "link went down", "counters", "link_downed", 1.0, 8, false) \
    X(P, link_recoveries_per_s, "1/s", "link error recoveries", "counters",                   \
      "link_error_recovery", 1.0, 8, false)                                                   \
    X(P, rcv_remote_physical_errors_per_s, "1/s", "packets marked bad upstream", "counters",   \
      "port_rcv_remote_physical_errors", 1.0, 16, false)                                      \
    X(P, hw_out_of_buffer_per_s, "1/s", "drops: no receive buffer posted", "hw_counters",       \
      "out_of_buffer", 1.0, 64, false)                                                        \
    X(P, hw_ack_timeouts_per_s, "1/s", "ACK timeouts (retransmissions)", "hw_counters",        \
      "local_ack_timeout_err", 1.0, 64, false)                                                \
    X(P, hw_seq_errors_per_s, "1/s", "packet sequence errors (NAKs)", "hw_counters",           \
      "packet_seq_err", 1.0, 64, false)                                                       \
    X(P, hw_cnp_sent_per_s, "1/s", "congestion notifications sent (marked packets seen)",     \
      "hw_counters", "np_cnp_sent", 1.0, 64, false)                                           \
    X(P, hw_cnp_handled_per_s, "1/s", "congestion notifications acted on (rate cut)",         \
      "hw_counters", "rp_cnp_handled", 1.0, 64, false)                                        \
    X(P, saturated, "", "counters stuck at their maximum (integer; their rates absent)", "",   \
      "", 0.0, 0, false)

#define IB_ROW_(P, name, unit, help, dir, file, scale, bits, required) {dir, file, #name, scale, bits, required},
static const ib_counter counters[] = {IB_METRICS(IB_ROW_, _)};
#undef IB_ROW_
HM_METRIC_ENUM(IB, IB_METRICS);

/* The last row, `saturated`, is a count, not a file. */
#define NCOUNTERS ((size_t)IB_saturated)
#define NDATA 4 /* the first four: data and packets, with a 64-bit counters_ext twin */

typedef struct ib_port {
    char device[64];
    char port[16];
    hm_procfile file[NCOUNTERS];
    unsigned bits[NCOUNTERS]; /* as read: 64 where counters_ext was found */
    bool simulated;           /* the device directory has a hushmon_sim file */
    bool have_prev;
    uint64_t prev[NCOUNTERS];
    int64_t prev_mono_ns;
    bool warned;
} ib_port;

typedef struct ib_state {
    ib_port port[IB_PORTS_MAX];
    size_t nports;
    bool own_tree;     /* read through ib.sysfs_root: this node's own, no scope tag */
} ib_state;

static void ib_close(void *state)
{
    ib_state *s = state;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nports; i++)
        for (size_t k = 0; k < NCOUNTERS; k++)
            hm_procfile_close(&s->port[i].file[k]);
    free(s);
}

static int add_port(ib_state *s, const char *base, const char *dev, const char *port, hm_error *err)
{
    if (s->nports == IB_PORTS_MAX) {
        hm_log_warn("ib: more than %d ports; %s port %s not sampled", IB_PORTS_MAX, dev, port);
        return 0;
    }
    ib_port *p = &s->port[s->nports];
    memset(p, 0, sizeof *p);
    if (strlen(dev) >= sizeof p->device || strlen(port) >= sizeof p->port)
        return hm_error_set(err, "device or port name too long: %s/%s", dev, port);
    memcpy(p->device, dev, strlen(dev) + 1);
    memcpy(p->port, port, strlen(port) + 1);
    char marker[PATH_MAX];
    int m = snprintf(marker, sizeof marker, "%s/%s/hushmon_sim", base, dev);
    p->simulated = m > 0 && (size_t)m < sizeof marker && access(marker, F_OK) == 0;
    for (size_t k = 0; k < NCOUNTERS; k++)
        p->file[k].fd = -1;
    for (size_t k = 0; k < NCOUNTERS; k++) {
        char path[PATH_MAX];
        int n = -1;
        p->bits[k] = counters[k].bits;
        if (k < NDATA) {
            n = snprintf(path, sizeof path, "%s/%s/ports/%s/counters_ext/%s_64", base, dev, port,
                         counters[k].file);
            if (n > 0 && (size_t)n < sizeof path && access(path, R_OK) == 0)
                p->bits[k] = 64;
            else
                n = -1;
        }
        if (n < 0)
            n = snprintf(path, sizeof path, "%s/%s/ports/%s/%s/%s", base, dev, port,
                         counters[k].dir, counters[k].file);
        if (n < 0 || (size_t)n >= sizeof path) {
            for (size_t j = 0; j < k; j++)
                hm_procfile_close(&p->file[j]);
            return hm_error_set(err, "path too long");
        }
        if (!counters[k].required && access(path, F_OK) != 0)
            continue; /* an optional counter this driver does not have */
        if (hm_procfile_open_path(&p->file[k], path, err) < 0) {
            for (size_t j = 0; j < k; j++)
                hm_procfile_close(&p->file[j]);
            return -1;
        }
    }
    s->nports++;
    return 0;
}

static int ib_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    ib_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    char base[PATH_MAX];
    const char *sysfs = env->cfg->ib_sysfs_root;
    if ((sysfs[0] != '\0' ? hm_path_join(base, sizeof base, sysfs, "class/infiniband", err)
                          : hm_path_join(base, sizeof base, env->cfg->root, "sys/class/infiniband",
                                         err)) < 0) {
        free(s);
        return -1;
    }
    s->own_tree = sysfs[0] != '\0';
    DIR *d = opendir(base);
    if (d == NULL) {
        *state = s; /* no InfiniBand on this node: nothing to sample */
        return 0;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char ports_dir[PATH_MAX];
        int n = snprintf(ports_dir, sizeof ports_dir, "%s/%s/ports", base, de->d_name);
        if (n < 0 || (size_t)n >= sizeof ports_dir)
            continue;
        DIR *pd = opendir(ports_dir);
        if (pd == NULL)
            continue;
        struct dirent *pe;
        while ((pe = readdir(pd)) != NULL) {
            if (pe->d_name[0] == '.')
                continue;
            if (add_port(s, base, de->d_name, pe->d_name, err) < 0) {
                /* One unreadable port does not stop the others. */
                hm_log_warn("ib: %s", err->msg);
            }
        }
        closedir(pd);
    }
    closedir(d);
    *state = s;
    return 0;
}

static int ib_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    ib_state *s = state;
    int rc = 0;
    if (s->own_tree)
        hm_lp_set_scope(out, NULL); /* the tree given for this node: its own, as net's are */
    for (size_t i = 0; i < s->nports; i++) {
        ib_port *p = &s->port[i];
        uint64_t now[NCOUNTERS];
        bool have[NCOUNTERS];
        bool ok = true;
        for (size_t k = 0; k < NCOUNTERS && ok; k++) {
            have[k] = p->file[k].fd >= 0;
            if (!have[k])
                continue;
            if (hm_procfile_read(&p->file[k], err) < 0) {
                ok = false;
                rc = -1; /* reported after the other ports are sampled */
                break;
            }
            hm_scan c = hm_scan_of(p->file[k].buf, p->file[k].len);
            if (!hm_scan_u64(&c, &now[k])) {
                rc = hm_error_set(err, "%s: not a number", p->file[k].path);
                ok = false;
            }
        }
        if (!ok) {
            p->have_prev = false;
            continue;
        }
        double dt = hm_dt_s(p->prev_mono_ns, ctx->mono_ns);
        bool first = !p->have_prev;
        double rate[NCOUNTERS];
        int64_t saturated = 0;
        for (size_t k = 0; k < NCOUNTERS; k++) {
            rate[k] = NAN;
            if (!have[k])
                continue;
            /* Narrow counters saturate rather than wrap; a saturated
             * value cannot give a rate. */
            unsigned bits = p->bits[k];
            bool stuck = bits < 64 && now[k] == (UINT64_C(1) << bits) - 1;
            saturated += stuck;
            if (!first && !stuck)
                rate[k] = hm_counter_rate(p->prev[k], now[k], 64, dt) * counters[k].scale;
            p->prev[k] = now[k];
        }
        p->have_prev = true;
        p->prev_mono_ns = ctx->mono_ns;
        if (first)
            continue;
        hm_lp_begin(out, "ib");
        hm_lp_tag(out, "device", p->device);
        hm_lp_tag(out, "port", p->port);
        if (p->simulated)
            hm_lp_tag(out, "backend", "sim");
        for (size_t k = 0; k < NCOUNTERS; k++)
            if (have[k])
                hm_lp_field_f64(out, counters[k].field, rate[k]);
        hm_lp_field_i64(out, HM_M(IB, saturated), saturated);
        hm_lp_end(out);
    }
    return rc;
}

const hm_sampler_ops hm_sampler_sys_infiniband = {
    .name = "ib",
    .reads = "/sys/class/infiniband/*/ports/*/counters, counters_ext, hw_counters",
    .measurement = "ib (tags device, port)",
    .fields = HM_FIELDS(IB_METRICS),
    .default_on = true,
    .open = ib_open,
    .sample = ib_sample,
    .close = ib_close,
};
