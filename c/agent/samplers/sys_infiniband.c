/* ib: InfiniBand port traffic from /sys/class/infiniband/<dev>/ports/<n>/
 * counters/, as rates (seed 001's main evidence of a network bound).
 *
 * The data counters count 4-byte words (IBA PortXmitData / PortRcvData).
 * Ports are found when the source opens (and again on `reload`); a node
 * without InfiniBand simply has no ib lines. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define IB_PORTS_MAX 32

typedef struct ib_counter {
    const char *file;
    const char *field;
    double scale;      /* to bytes or packets */
} ib_counter;

/* X(P, field, unit, help, counter file, its unit in bytes or packets):
 * the data counters count 4-byte words. */
#define IB_METRICS(X, P)                                                                      \
    X(P, rx_bytes_per_s, "B/s", "received", "port_rcv_data", 4.0)                             \
    X(P, tx_bytes_per_s, "B/s", "sent", "port_xmit_data", 4.0)                                \
    X(P, rx_packets_per_s, "1/s", "packets received", "port_rcv_packets", 1.0)                \
    X(P, tx_packets_per_s, "1/s", "packets sent", "port_xmit_packets", 1.0)

#define IB_ROW_(P, name, unit, help, file, scale) {file, #name, scale},
static const ib_counter counters[] = {IB_METRICS(IB_ROW_, _)};
#undef IB_ROW_

#define NCOUNTERS (sizeof counters / sizeof counters[0])

typedef struct ib_port {
    char device[64];
    char port[16];
    hm_procfile file[NCOUNTERS];
    bool have_prev;
    uint64_t prev[NCOUNTERS];
    int64_t prev_mono_ns;
    bool warned;
} ib_port;

typedef struct ib_state {
    ib_port port[IB_PORTS_MAX];
    size_t nports;
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
    for (size_t k = 0; k < NCOUNTERS; k++)
        p->file[k].fd = -1;
    for (size_t k = 0; k < NCOUNTERS; k++) {
        char path[PATH_MAX];
        int n = snprintf(path, sizeof path, "%s/%s/ports/%s/counters/%s", base, dev, port,
                         counters[k].file);
        if (n < 0 || (size_t)n >= sizeof path ||
            hm_procfile_open_path(&p->file[k], path, err) < 0) {
            for (size_t j = 0; j < k; j++)
                hm_procfile_close(&p->file[j]);
            return n < 0 || (size_t)n >= sizeof path ? hm_error_set(err, "path too long") : -1;
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
    if (hm_path_join(base, sizeof base, env->cfg->root, "sys/class/infiniband", err) < 0) {
        free(s);
        return -1;
    }
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
    for (size_t i = 0; i < s->nports; i++) {
        ib_port *p = &s->port[i];
        uint64_t now[NCOUNTERS];
        bool ok = true;
        for (size_t k = 0; k < NCOUNTERS && ok; k++) {
            hm_scan c;
            if (hm_procfile_read(&p->file[k], err) < 0) {
                ok = false;
                rc = -1; /* reported after the other ports are sampled */
                break;
            }
            c = hm_scan_of(p->file[k].buf, p->file[k].len);
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
        for (size_t k = 0; k < NCOUNTERS; k++) {
            /* Legacy 32-bit data counters saturate rather than wrap; a
             * saturated value cannot give a rate. */
            bool saturated = now[k] == UINT32_MAX;
            rate[k] = first || saturated ? NAN : hm_counter_rate(p->prev[k], now[k], 64, dt) * counters[k].scale;
            p->prev[k] = now[k];
        }
        p->have_prev = true;
        p->prev_mono_ns = ctx->mono_ns;
        if (first)
            continue;
        hm_lp_begin(out, "ib");
        hm_lp_tag(out, "device", p->device);
        hm_lp_tag(out, "port", p->port);
        for (size_t k = 0; k < NCOUNTERS; k++)
            hm_lp_field_f64(out, counters[k].field, rate[k]);
        hm_lp_end(out);
    }
    return rc;
}

const hm_sampler_ops hm_sampler_sys_infiniband = {
    .name = "ib",
    .reads = "/sys/class/infiniband/*/ports/*/counters",
    .measurement = "ib (tags device, port)",
    .fields = HM_FIELDS(IB_METRICS),
    .default_on = true,
    .open = ib_open,
    .sample = ib_sample,
    .close = ib_close,
};
