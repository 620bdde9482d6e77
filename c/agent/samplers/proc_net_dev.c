/* net: traffic per network interface from /proc/net/dev, as rates, and
 * each interface's capacity: what the driver reports
 * (/sys/class/net/<iface>/speed) and, when configured, the rate the link
 * really has (a shaped, shared or virtual link reports a speed it does not
 * have: a veth says 10 Gbit/s whatever tc allows). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "entity.h"
#include "hm_log.h"
#include "procfile.h"
#include "sampler.h"

/* Columns after "iface:" (0-based): receive 0..7, transmit 8..15. */
typedef struct net_column {
    int column;
    const char *field;
} net_column;

/* Rates of counters: X(P, field, unit, help, column). */
#define NET_COUNTER_METRICS(X, P)                                                             \
    X(P, rx_bytes_per_s, "B/s", "received", 0)                                                \
    X(P, tx_bytes_per_s, "B/s", "sent", 8)                                                    \
    X(P, rx_packets_per_s, "1/s", "packets received", 1)                                      \
    X(P, tx_packets_per_s, "1/s", "packets sent", 9)                                          \
    X(P, rx_errors_per_s, "1/s", "receive errors", 2)                                         \
    X(P, tx_errors_per_s, "1/s", "transmit errors", 10)                                       \
    X(P, rx_drops_per_s, "1/s", "received packets dropped", 3)                                \
    X(P, tx_drops_per_s, "1/s", "packets dropped before sending", 11)
/* The link's rate, when known. */
#define NET_LINK_METRICS(X, P)                                                                \
    X(P, speed_bits_per_s, "bit/s", "reported by the driver (/sys/class/net/IFACE/speed)")    \
    X(P, capacity_bits_per_s, "bit/s", "net.link_bits_per_s, when set (not on lo)")
#define NET_METRICS(X, P) NET_COUNTER_METRICS(X, P) NET_LINK_METRICS(X, P)
HM_METRIC_ENUM(NET, NET_METRICS);

#define NET_ROW_(P, name, unit, help, column) {column, #name},
static const net_column columns[] = {NET_COUNTER_METRICS(NET_ROW_, _)};
#undef NET_ROW_

#define NCOLUMNS (sizeof columns / sizeof columns[0])
/* The slot of hm_entity.prev after the counters that holds the reported speed. */
#define SPEED_SLOT NCOLUMNS
_Static_assert(SPEED_SLOT < HM_ENTITY_COUNTERS, "no room for the speed in hm_entity.prev");

typedef struct net_dev_state {
    const char *root;
    double capacity_bits_per_s; /* configured; 0 = not known */
    hm_procfile file;
    hm_entity_table dev;
    int64_t stamp;
    bool warned_full;
} net_dev_state;

static void net_dev_close(void *state)
{
    net_dev_state *s = state;
    if (s == NULL)
        return;
    hm_procfile_close(&s->file);
    hm_entity_table_free(&s->dev);
    free(s);
}

static int net_dev_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    net_dev_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_set(err, "out of memory");
    s->root = env->cfg->root;
    s->capacity_bits_per_s = (double)env->cfg->net_link_bits_per_s;
    if (hm_procfile_open(&s->file, env->cfg->root, "proc/net/dev", err) < 0) {
        free(s);
        return -1;
    }
    size_t lines = 0;
    for (size_t i = 0; i < s->file.len; i++)
        lines += s->file.buf[i] == '\n';
    if (hm_entity_table_init(&s->dev, lines * 2 + 16, err) < 0) {
        net_dev_close(s);
        return -1;
    }
    *state = s;
    return 0;
}

/* The speed the driver reports, in bits/s; 0 when it reports none (lo,
 * a link that is down, a driver without it). Read once per interface:
 * it changes only when the link renegotiates. */
static uint64_t reported_speed_bits(const char *root, const char *iface)
{
    char rel[HM_ENTITY_NAME_MAX + 32], path[PATH_MAX];
    hm_error ignored;
    snprintf(rel, sizeof rel, "sys/class/net/%s/speed", iface);
    if (hm_path_join(path, sizeof path, root, rel, &ignored) < 0)
        return 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    long long mbit = 0;
    int got = fscanf(f, "%lld", &mbit);
    fclose(f);
    return got == 1 && mbit > 0 ? (uint64_t)mbit * 1000000u : 0;
}

static int net_dev_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    net_dev_state *s = state;
    if (hm_procfile_read(&s->file, err) < 0)
        return -1;
    s->stamp++;
    hm_scan c = hm_scan_of(s->file.buf, s->file.len);
    /* Two header lines. */
    if (!hm_scan_next_line(&c) || !hm_scan_next_line(&c))
        return 0;
    do {
        const char *name;
        size_t nl;
        hm_scan line = c;
        if (hm_scan_at_eol(&line))
            continue;
        if (!hm_scan_word(&line, &name, &nl, true) || !hm_scan_char(&line, ':'))
            return hm_error_set(err, "%s: malformed line", s->file.path);
        uint64_t col[16];
        int got = 0;
        while (got < 16 && hm_scan_u64(&line, &col[got]))
            got++;
        if (got < 16)
            return hm_error_set(err, "%s: %.*s has %d counters, expected 16", s->file.path,
                                (int)nl, name, got);
        bool created;
        hm_entity *d = hm_entity_get(&s->dev, name, nl, s->stamp, &created);
        if (d == NULL) {
            hm_log_warn_once(&s->warned_full, "%s: more interfaces than sized at start; some not sampled",
                             s->file.path);
            continue;
        }
        if (created)
            d->prev[SPEED_SLOT] = reported_speed_bits(s->root, d->name);
        double dt = hm_dt_s(d->prev_mono_ns, ctx->mono_ns);
        double rate[NCOLUMNS];
        for (size_t k = 0; k < NCOLUMNS; k++) {
            uint64_t now = col[columns[k].column];
            /* 32-bit: some drivers still keep 32-bit counters that wrap. */
            rate[k] = d->have_prev ? hm_counter_rate(d->prev[k], now, 32, dt) : NAN;
            d->prev[k] = now;
        }
        bool first = !d->have_prev;
        d->have_prev = true;
        d->prev_mono_ns = ctx->mono_ns;
        if (first)
            continue;
        hm_lp_begin(out, "net");
        hm_lp_tag(out, "iface", d->name);
        for (size_t k = 0; k < NCOLUMNS; k++)
            hm_lp_field_f64(out, columns[k].field, rate[k]);
        if (d->prev[SPEED_SLOT] > 0)
            hm_lp_field_f64(out, HM_M(NET, speed_bits_per_s), (double)d->prev[SPEED_SLOT]);
        if (s->capacity_bits_per_s > 0 && strcmp(d->name, "lo") != 0)
            hm_lp_field_f64(out, HM_M(NET, capacity_bits_per_s), s->capacity_bits_per_s);
        hm_lp_end(out);
    } while (hm_scan_next_line(&c));
    return 0;
}

const hm_sampler_ops hm_sampler_proc_net_dev = {
    .name = "net",
    .reads = "/proc/net/dev",
    .measurement = "net (tag iface)",
    .fields = HM_FIELDS(NET_METRICS),
    .default_on = true,
    .node_local = true,
    .open = net_dev_open,
    .sample = net_dev_sample,
    .close = net_dev_close,
};
