/* cxi: HPE Slingshot NIC (Cassini) counters from
 * /sys/class/cxi/cxi<N>/device/telemetry/<counter>.
 *
 * Each telemetry file holds "<value>@<seconds>.<nanoseconds>": the counter
 * and when the NIC last updated it. The counters are 56 bits wide and wrap
 * there. What is read, summed over the eight traffic classes where a
 * counter exists per class (those a NIC lacks are skipped):
 *   hni_pkts_sent_by_tc_K, hni_pkts_recv_by_tc_K   packets
 *   hni_tx_paused_K, hni_rx_paused_K                cycles of the 1 GHz NIC
 *       clock in which sending (the fabric held this NIC back) or
 *       receiving (this NIC held the fabric back) was paused by flow control
 *   parbs_tarb_pi_posted_pkts, parbs_tarb_pi_posted_blocked_cnt
 *       posted writes towards host memory and the cycles they were blocked:
 *       blocked cycles per packet above a few means the host (PCIe,
 *       memory) holds the NIC back, not the fabric.
 * NICs are found when the source opens; a node without Slingshot has no
 * cxi lines and no notice. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

#define CXI_NICS_MAX 8
#define CXI_TCS 8
#define CXI_CLOCK_HZ 1e9
#define CXI_COUNTER_MASK ((UINT64_C(1) << 56) - 1)

#define CXI_METRICS(X, P)                                                                     \
    X(P, tx_packets_per_s, "1/s", "packets sent, all traffic classes")                        \
    X(P, rx_packets_per_s, "1/s", "packets received, all traffic classes")                    \
    X(P, tx_paused_pct, "%", "share of NIC cycles sending was paused by the fabric "           \
                             "(summed over traffic classes)")                                 \
    X(P, rx_paused_pct, "%", "share of NIC cycles this NIC paused the fabric")                \
    X(P, host_blocked_cycles_per_pkt, "", "posted-write cycles blocked per packet (host "      \
                                          "backpressure)")
HM_METRIC_ENUM(CXI, CXI_METRICS);

enum { G_SENT, G_RECV, G_TX_PAUSED, G_RX_PAUSED, G_POSTED, G_BLOCKED, NGROUPS };
/* Per-class counters end in _<tc>; the two posted-write ones are single. */
static const char *const group_file[NGROUPS] = {
    "hni_pkts_sent_by_tc_", "hni_pkts_recv_by_tc_", "hni_tx_paused_", "hni_rx_paused_",
    "parbs_tarb_pi_posted_pkts", "parbs_tarb_pi_posted_blocked_cnt",
};
#define PER_CLASS(g) ((g) < G_POSTED)

typedef struct cxi_nic {
    char device[32];
    hm_procfile file[NGROUPS][CXI_TCS];
    bool have_prev;
    uint64_t prev[NGROUPS][CXI_TCS];
    int64_t prev_mono_ns;
} cxi_nic;

typedef struct cxi_state {
    cxi_nic nic[CXI_NICS_MAX];
    size_t n;
} cxi_state;

static void cxi_close(void *state)
{
    cxi_state *s = state;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        for (int g = 0; g < NGROUPS; g++)
            for (int t = 0; t < CXI_TCS; t++)
                hm_procfile_close(&s->nic[i].file[g][t]);
    free(s);
}

/* Opens what the NIC has; false if it has none of the packet counters. */
static bool open_nic(cxi_nic *n, const char *dir)
{
    bool any = false;
    for (int g = 0; g < NGROUPS; g++) {
        for (int t = 0; t < CXI_TCS; t++) {
            n->file[g][t].fd = -1;
            if (!PER_CLASS(g) && t > 0)
                continue;
            char path[PATH_MAX];
            int len = PER_CLASS(g)
                          ? snprintf(path, sizeof path, "%s/%s%d", dir, group_file[g], t)
                          : snprintf(path, sizeof path, "%s/%s", dir, group_file[g]);
            hm_error e;
            if (len > 0 && (size_t)len < sizeof path && access(path, R_OK) == 0 && hm_procfile_open_path(&n->file[g][t], path, &e) == 0)
                any |= g == G_SENT || g == G_RECV;
        }
    }
    return any;
}

static int cxi_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    char base[PATH_MAX];
    if (hm_path_join(base, sizeof base, env->cfg->root, "sys/class/cxi", err) < 0)
        return -1;
    DIR *d = opendir(base);
    if (d == NULL)
        return 0; /* no Slingshot NIC */
    cxi_state *s = calloc(1, sizeof *s);
    if (s == NULL) {
        closedir(d);
        return hm_error_set(err, "out of memory");
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "cxi", 3) != 0 || strlen(de->d_name) >= sizeof s->nic[0].device)
            continue;
        if (s->n == CXI_NICS_MAX) {
            hm_log_warn("cxi: more than %d NICs; %s not sampled", CXI_NICS_MAX, de->d_name);
            continue;
        }
        cxi_nic *n = &s->nic[s->n];
        memset(n, 0, sizeof *n);
        char dir[PATH_MAX];
        int len = snprintf(dir, sizeof dir, "%s/%s/device/telemetry", base, de->d_name);
        if (len < 0 || (size_t)len >= sizeof dir || !open_nic(n, dir)) {
            for (int g = 0; g < NGROUPS; g++)
                for (int t = 0; t < CXI_TCS; t++)
                    hm_procfile_close(&n->file[g][t]);
            continue;
        }
        strcpy(n->device, de->d_name);
        s->n++;
    }
    closedir(d);
    if (s->n == 0) {
        cxi_close(s);
        return 0;
    }
    *state = s;
    return 0;
}

static int cxi_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    cxi_state *s = state;
    int rc = 0;
    for (size_t i = 0; i < s->n; i++) {
        cxi_nic *n = &s->nic[i];
        uint64_t now[NGROUPS][CXI_TCS] = {{0}};
        bool ok = true;
        for (int g = 0; g < NGROUPS && ok; g++) {
            for (int t = 0; t < CXI_TCS && ok; t++) {
                hm_procfile *f = &n->file[g][t];
                if (f->fd < 0)
                    continue;
                if (hm_procfile_read(f, err) < 0) {
                    ok = false;
                    rc = -1;
                    break;
                }
                hm_scan c = hm_scan_of(f->buf, f->len); /* "<value>@<s>.<ns>" */
                if (!hm_scan_u64(&c, &now[g][t])) {
                    rc = hm_error_set(err, "%s: not a counter", f->path);
                    ok = false;
                }
            }
        }
        if (!ok) {
            n->have_prev = false;
            continue;
        }
        double dt = hm_dt_s(n->prev_mono_ns, ctx->mono_ns);
        bool first = !n->have_prev;
        double sum[NGROUPS] = {0};
        bool reset = false;
        for (int g = 0; g < NGROUPS; g++) {
            for (int t = 0; t < CXI_TCS; t++) {
                if (n->file[g][t].fd < 0)
                    continue;
                /* 56-bit counters: a drop from the upper half is a wrap
                 * (mod 2^56); any other drop is a reset (cleared): no rate. */
                uint64_t prev = n->prev[g][t];
                reset |= now[g][t] < prev && prev < (CXI_COUNTER_MASK >> 1);
                sum[g] += (double)((now[g][t] - prev) & CXI_COUNTER_MASK);
            }
        }
        memcpy(n->prev, now, sizeof n->prev);
        n->have_prev = true;
        n->prev_mono_ns = ctx->mono_ns;
        if (first || reset || dt <= 0)
            continue;
        hm_lp_begin(out, "cxi");
        hm_lp_tag(out, "device", n->device);
        hm_lp_field_f64(out, HM_M(CXI, tx_packets_per_s), sum[G_SENT] / dt);
        hm_lp_field_f64(out, HM_M(CXI, rx_packets_per_s), sum[G_RECV] / dt);
        if (n->file[G_TX_PAUSED][0].fd >= 0)
            hm_lp_field_f64(out, HM_M(CXI, tx_paused_pct),
                            100.0 * sum[G_TX_PAUSED] / (dt * CXI_CLOCK_HZ));
        if (n->file[G_RX_PAUSED][0].fd >= 0)
            hm_lp_field_f64(out, HM_M(CXI, rx_paused_pct),
                            100.0 * sum[G_RX_PAUSED] / (dt * CXI_CLOCK_HZ));
        if (n->file[G_POSTED][0].fd >= 0 && n->file[G_BLOCKED][0].fd >= 0 && sum[G_POSTED] > 0)
            hm_lp_field_f64(out, HM_M(CXI, host_blocked_cycles_per_pkt),
                            sum[G_BLOCKED] / sum[G_POSTED]);
        hm_lp_end(out);
    }
    return rc;
}

const hm_sampler_ops hm_sampler_sys_cxi = {
    .name = "cxi",
    .reads = "/sys/class/cxi/cxi*/device/telemetry (Slingshot NICs)",
    .measurement = "cxi (tag device)",
    .fields = HM_FIELDS(CXI_METRICS),
    .default_on = true,
    .open = cxi_open,
    .sample = cxi_sample,
    .close = cxi_close,
};
