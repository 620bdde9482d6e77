/* The agent's parts and one sampling cycle: opening the configured
 * sources and the sink, running every source into one batch, `--once`,
 * `--measure-cost`, and reloading the config. The loop is agent_loop.c,
 * the control requests agent_control.c. */
#include "agent.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hm_timer.h"
#include "hm_log.h"

/* Calls fn(name, len, arg) for each comma-separated name. */
static int each_name(const char *list, int (*fn)(const char *, void *, hm_error *), void *arg,
                     hm_error *err)
{
    char name[64];
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len > 0 && *p == ' ') {
            p++;
            len--;
        }
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (len == 0 || len >= sizeof name)
            return hm_error_set(err, "bad source list '%s'", list);
        memcpy(name, p, len);
        name[len] = '\0';
        if (fn(name, arg, err) < 0)
            return -1;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return 0;
}

static int check_one(const char *name, void *arg, hm_error *err)
{
    (void)arg;
    if (strcmp(name, "default") == 0 || hm_sampler_find(name) != NULL)
        return 0;
    char known[512] = "";
    for (size_t i = 0; i < hm_samplers_count; i++) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, hm_samplers[i]->name, sizeof known - strlen(known) - 1);
    }
    return hm_error_set(err, "unknown source '%s' (known: %s)", name, known);
}

int hm_agent_check_sources(const char *sources, hm_error *err)
{
    if (strspn(sources, " ,") == strlen(sources))
        return hm_error_set(err, "no sources selected (see --help for the list)");
    return each_name(sources, check_one, NULL, err);
}

static int mark_wanted(const char *name, void *arg, hm_error *err)
{
    (void)err;
    bool *wanted = arg;
    for (size_t i = 0; i < hm_samplers_count; i++)
        if (strcmp(name, "default") == 0 ? hm_samplers[i]->default_on
                                         : strcmp(name, hm_samplers[i]->name) == 0)
            wanted[i] = true;
    return 0;
}

/* N of "name=N" in sources_every for this source, 1 if not listed. */
static int source_every(const char *list, const char *name, int64_t *every, hm_error *err)
{
    *every = 1;
    for (const char *p = list; *p != '\0';) {
        size_t len = strcspn(p, ",");
        char item[96];
        if (len >= sizeof item)
            return hm_error_set(err, "sources_every: item too long in '%s'", list);
        memcpy(item, p, len);
        item[len] = '\0';
        char *eq = strchr(item, '=');
        char *end = NULL;
        long long n = eq != NULL ? strtoll(eq + 1, &end, 10) : 0;
        if (eq == NULL || end == eq + 1 || *end != '\0' || n < 1 || n > 3600)
            return hm_error_set(err, "sources_every: '%s' is not name=N (N in 1..3600)", item);
        *eq = '\0';
        char *s = item + strspn(item, " ");
        if (hm_sampler_find(s) == NULL)
            return hm_error_set(err, "sources_every: unknown source '%s'", s);
        if (strcmp(s, name) == 0)
            *every = n;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

static void close_sources(hm_agent *a)
{
    for (size_t i = 0; i < a->nsources; i++)
        if (a->source[i].state != NULL)
            a->source[i].ops->close(a->source[i].state);
    a->nsources = 0;
}

/* Opens the configured sources in registry order. A source that cannot
 * open is logged and left out; the others run. */
static int open_sources(hm_agent *a, hm_error *err)
{
    bool wanted[HM_AGENT_SOURCES_MAX] = {false};
    if (hm_agent_check_sources(a->cfg.sources, err) < 0 ||
        each_name(a->cfg.sources, mark_wanted, wanted, err) < 0)
        return -1;
    hm_sampler_env env = {.cfg = &a->cfg, .jobs = &a->jobs};
    for (size_t i = 0; i < hm_samplers_count && i < HM_AGENT_SOURCES_MAX; i++) {
        if (!wanted[i])
            continue;
        hm_agent_source *s = &a->source[a->nsources];
        memset(s, 0, sizeof *s);
        s->ops = hm_samplers[i];
        if (source_every(a->cfg.sources_every, s->ops->name, &s->every, err) < 0)
            return -1;
        hm_error e;
        if (s->ops->open(&s->state, &env, &e) < 0) {
            hm_log_warn("source %s off: %s", s->ops->name, e.msg);
            continue;
        }
        if (s->state == NULL)
            continue; /* nothing to sample with this config */
        a->nsources++;
    }
    /* Node scope tags the host-wide lines; without the node's own lines
     * that is rarely what was meant. */
    for (size_t i = 0; i < hm_samplers_count && i < HM_AGENT_SOURCES_MAX; i++)
        if (a->cfg.scope_cgroup[0] != '\0' && strcmp(hm_samplers[i]->name, "node") == 0 &&
            !wanted[i])
            hm_log_warn("scope.cgroup is set but source 'node' is not in sources: host-wide "
                        "lines are tagged scope=host and no line describes the node");
    return 0;
}

/* The expanded source list ("default" as names) after edit: "+a,-b"
 * adds and removes, "a,b" replaces. */
int hm_agent_edit_sources(const char *current, const char *edit, char *out, size_t size,
                          hm_error *err)
{
    bool wanted[HM_AGENT_SOURCES_MAX] = {false};
    bool relative = edit[0] == '+' || edit[0] == '-';
    if (relative && each_name(current, mark_wanted, wanted, err) < 0)
        return -1;
    char list[512];
    if (snprintf(list, sizeof list, "%s", edit) >= (int)sizeof list)
        return hm_error_set(err, "sources: list too long");
    char *save = NULL;
    for (char *item = strtok_r(list, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char sign = item[0] == '+' || item[0] == '-' ? item[0] : 0;
        if ((sign != 0) != relative)
            return hm_error_set(err, "sources: '%s' mixes +/- items with plain names (either "
                                     "+a,-b to edit or a,b to replace)", edit);
        const char *name = item + (sign != 0);
        if (strcmp(name, "default") != 0 && hm_sampler_find(name) == NULL)
            return check_one(name, NULL, err);
        bool on[HM_AGENT_SOURCES_MAX] = {false};
        if (mark_wanted(name, on, err) < 0)
            return -1;
        for (size_t i = 0; i < hm_samplers_count && i < HM_AGENT_SOURCES_MAX; i++)
            if (on[i])
                wanted[i] = sign != '-';
    }
    out[0] = '\0';
    for (size_t i = 0; i < hm_samplers_count && i < HM_AGENT_SOURCES_MAX; i++)
        if (wanted[i] && strlen(out) + strlen(hm_samplers[i]->name) + 2 < size) {
            if (out[0] != '\0')
                strcat(out, ",");
            strcat(out, hm_samplers[i]->name);
        }
    if (out[0] == '\0')
        return hm_error_set(err, "sources: '%s' leaves no source", edit);
    return 0;
}

int hm_agent_set_sources(hm_agent *a, const char *sources, hm_error *err)
{
    bool wanted[HM_AGENT_SOURCES_MAX] = {false};
    if (hm_agent_check_sources(sources, err) < 0 || each_name(sources, mark_wanted, wanted, err) < 0)
        return -1;
    if (strlen(sources) >= sizeof a->cfg.sources)
        return hm_error_set(err, "sources: list too long");
    /* Sources kept stay open (their counters keep their last reading, so
     * rates go on without a gap); only added ones open, removed ones close. */
    hm_agent_source old[HM_AGENT_SOURCES_MAX];
    size_t nold = a->nsources;
    memcpy(old, a->source, sizeof old);
    hm_sampler_env env = {.cfg = &a->cfg, .jobs = &a->jobs};
    size_t n = 0;
    for (size_t i = 0; i < hm_samplers_count && i < HM_AGENT_SOURCES_MAX; i++) {
        if (!wanted[i])
            continue;
        hm_agent_source *kept = NULL;
        for (size_t k = 0; k < nold && kept == NULL; k++)
            if (old[k].ops == hm_samplers[i])
                kept = &old[k];
        if (kept != NULL) {
            a->source[n++] = *kept;
            kept->ops = NULL; /* not closed below */
            continue;
        }
        hm_agent_source *s = &a->source[n];
        memset(s, 0, sizeof *s);
        s->ops = hm_samplers[i];
        if (source_every(a->cfg.sources_every, s->ops->name, &s->every, err) < 0)
            s->every = 1; /* checked when the config was read */
        hm_error e;
        if (s->ops->open(&s->state, &env, &e) < 0) {
            hm_log_warn("source %s off: %s", s->ops->name, e.msg);
            continue;
        }
        if (s->state != NULL)
            n++;
    }
    for (size_t k = 0; k < nold; k++)
        if (old[k].ops != NULL && old[k].state != NULL)
            old[k].ops->close(old[k].state);
    a->nsources = n;
    strcpy(a->cfg.sources, sources);
    return 0;
}

int hm_agent_apply_socket_settings(hm_agent *a, hm_error *err)
{
    const hm_agent_config *cfg = &a->cfg;
    long admin_gid, socket_gid;
    if (hm_config_group_id("control.admin_group", cfg->admin_group, &admin_gid, err) < 0 ||
        hm_config_group_id("control.socket_group", cfg->socket_group, &socket_gid, err) < 0)
        return -1;
    a->admin_gid = admin_gid;
    hm_control_settings *c = &a->control.settings;
    if (a->control.listen_fd >= 0 &&
        (c->socket_mode != hm_config_socket_mode(cfg) || c->socket_gid != socket_gid))
        hm_log_warn("reload: the control socket's new mode or group takes effect at restart");
    else
        *c = (hm_control_settings){.socket_mode = hm_config_socket_mode(cfg),
                                   .socket_gid = socket_gid};
    c->client_idle_ms = cfg->control_client_idle_ms;
    c->clients_per_uid = cfg->control_clients_per_uid;
    a->app.limits = (hm_app_limits){.clients_per_uid = cfg->app_clients_per_uid,
                                    .idle_ms = cfg->app_idle_ms,
                                    .series_per_job = cfg->app_series_per_job,
                                    .records_per_client = cfg->app_records_per_client};
    return 0;
}

int hm_agent_init(hm_agent *a, const hm_agent_config *cfg, const hm_config_override *overrides,
                  size_t n_overrides, hm_error *err)
{
    memset(a, 0, sizeof *a);
    a->cfg = *cfg;
    a->overrides = overrides;
    a->n_overrides = n_overrides;
    a->timer_fd = a->signal_fd = -1;
    hm_control_init(&a->control);
    hm_app_init(&a->app);
    a->start_ns = hm_realtime_ns();
    a->self.cpu_us = NAN;
    a->self.jitter_us = NAN;
    a->self.period_ms = cfg->period_ms;
    if (hm_agent_apply_socket_settings(a, err) < 0)
        return -1;
    if (hm_lp_init(&a->lp, (size_t)cfg->batch_bytes, cfg->host, err) < 0)
        return -1;
    if (open_sources(a, err) < 0 || hm_sink_open(&a->sink, &a->cfg, a->start_ns, err) < 0) {
        hm_agent_fini(a);
        return -1;
    }
    return 0;
}

int hm_agent_cycle(hm_agent *a, int64_t ts_ns, int64_t mono_ns, hm_error *err)
{
    hm_lp_reset(&a->lp, ts_ns);
    int64_t period_ns = a->cfg.period_ms * 1000000;
    hm_sample_ctx ctx = {
        .ts_ns = ts_ns, .mono_ns = mono_ns, .jobs = &a->jobs, .node = &a->node, .self = &a->self,
        .period_index = a->measure_cost ? (int64_t)a->samples : ts_ns / period_ns,
    };
    a->self.samples_dropped = a->missed_periods + a->sink.ops->dropped_lines(a->sink.state);
    memcpy(a->self.control_refused, a->control.refused, sizeof a->self.control_refused);
    a->self.period_ms = a->cfg.period_ms;
    /* Applications' data queued since the last period (node's own: no scope tag). */
    hm_lp_set_scope(&a->lp, NULL);
    hm_app_collect(&a->app, &a->jobs, &a->lp);
    for (size_t i = 0; i < a->nsources; i++) {
        hm_agent_source *s = &a->source[i];
        if (s->every > 1 && ctx.period_index % s->every != 0)
            continue; /* sources_every: not this period */
        hm_error e;
        hm_lp_set_scope(&a->lp, hm_sampler_scope(s->ops, &a->cfg));
        double t0 = a->measure_cost ? hm_thread_cpu_us() : 0;
        int rc = s->ops->sample(s->state, &ctx, &a->lp, &e);
        if (a->measure_cost)
            s->cpu_ns_total += (hm_thread_cpu_us() - t0) * 1e3;
        if (rc < 0) {
            if (!s->failing)
                hm_log_warn("source %s: %s (other sources go on; said once until it recovers)",
                            s->ops->name, e.msg);
            s->failing = true;
        } else if (s->failing) {
            hm_log_notice("source %s recovered", s->ops->name);
            s->failing = false;
        }
    }
    hm_lp_set_scope(&a->lp, NULL);
    if (a->lp.lines_dropped > 0)
        hm_log_warn_once(&a->batch_full_said,
                         "batch buffer full: %llu lines dropped (raise sink.batch_bytes; said once)",
                         (unsigned long long)a->lp.lines_dropped);
    a->missed_periods += a->lp.lines_dropped;
    a->samples++;
    if (a->lp.len == 0)
        return 0;
    double t0 = a->measure_cost ? hm_thread_cpu_us() : 0;
    int rc = a->sink.ops->write(a->sink.state, a->lp.buf, a->lp.len, a->lp.lines, err);
    if (a->measure_cost)
        a->sink_cpu_ns_total += (hm_thread_cpu_us() - t0) * 1e3;
    if (rc < 0) {
        a->missed_periods += a->lp.lines;
        return -1;
    }
    return 0;
}

int hm_agent_measure_cost(hm_agent *a, int64_t n, int64_t gap_ms, hm_error *err)
{
    if (hm_agent_cycle(a, hm_realtime_ns(), hm_monotonic_ns(), err) < 0)
        return -1;
    a->measure_cost = true;
    double busy_us = 0;
    for (int64_t i = 0; i < n; i++) {
        /* gap 0: back to back, as the benchmark's kernel-cost loop reads the
         * files, both with warm caches. A gap as long as the period shows
         * what each source costs when it starts cold, as in the daemon. */
        if (gap_ms > 0) {
            struct timespec pause = {.tv_sec = gap_ms / 1000, .tv_nsec = (gap_ms % 1000) * 1000000};
            while (nanosleep(&pause, &pause) < 0 && errno == EINTR) {
            }
        }
        double t0 = hm_thread_cpu_us();
        if (hm_agent_cycle(a, hm_realtime_ns(), hm_monotonic_ns(), err) < 0)
            return -1;
        busy_us += hm_thread_cpu_us() - t0;
    }
    fprintf(stderr, "CPU time per sample over %lld samples%s (CLOCK_THREAD_CPUTIME_ID):\n",
            (long long)n, gap_ms > 0 ? ", one per gap" : ", back to back");
    for (size_t i = 0; i < a->nsources; i++)
        fprintf(stderr, "  %-8s %8.2f us\n", a->source[i].ops->name,
                a->source[i].cpu_ns_total / 1e3 / (double)n);
    fprintf(stderr, "  %-8s %8.2f us\n  %-8s %8.2f us\n", "sink", a->sink_cpu_ns_total / 1e3 / (double)n,
            "total", busy_us / (double)n);
    return a->sink.ops->flush(a->sink.state, err);
}

int hm_agent_once(hm_agent *a, int64_t interval_ms, hm_error *err)
{
    /* The first pass only primes the counters (rates need two readings);
     * its lines are not written. */
    double cpu0 = hm_thread_cpu_us();
    hm_lp_reset(&a->lp, hm_realtime_ns());
    hm_sample_ctx ctx = {
        .ts_ns = a->lp.ts_ns, .mono_ns = hm_monotonic_ns(), .jobs = &a->jobs, .node = &a->node,
        .self = &a->self,
    };
    for (size_t i = 0; i < a->nsources; i++) {
        hm_error e;
        hm_lp_set_scope(&a->lp, hm_sampler_scope(a->source[i].ops, &a->cfg));
        if (a->source[i].ops->sample(a->source[i].state, &ctx, &a->lp, &e) < 0) {
            hm_log_warn("source %s: %s", a->source[i].ops->name, e.msg);
            a->source[i].failing = true;
        }
    }
    hm_lp_set_scope(&a->lp, NULL);
    a->self.cpu_us = hm_thread_cpu_us() - cpu0;
    struct timespec pause = {.tv_sec = interval_ms / 1000, .tv_nsec = (interval_ms % 1000) * 1000000};
    while (nanosleep(&pause, &pause) < 0 && errno == EINTR) {
    }
    int64_t now = hm_realtime_ns();
    a->self.jitter_us = 0;
    if (hm_agent_cycle(a, now, hm_monotonic_ns(), err) < 0)
        return -1;
    return a->sink.ops->flush(a->sink.state, err);
}

int hm_agent_reload(hm_agent *a, hm_error *err)
{
    hm_agent_config cfg;
    if (hm_config_build(&cfg, a->cfg.config_path, a->overrides, a->n_overrides, err) < 0 ||
        hm_agent_check_sources(cfg.sources, err) < 0)
        return -1;
    if (strcmp(cfg.socket_path, a->cfg.socket_path) != 0)
        hm_log_warn("reload: a new control socket path takes effect at restart");
    bool new_sink = strcmp(cfg.sink, a->cfg.sink) != 0 || strcmp(cfg.spool_dir, a->cfg.spool_dir) != 0 ||
                    cfg.spool_file_bytes != a->cfg.spool_file_bytes ||
                    cfg.spool_total_bytes != a->cfg.spool_total_bytes || strcmp(cfg.host, a->cfg.host) != 0 ||
                    strcmp(cfg.nats_url, a->cfg.nats_url) != 0 || strcmp(cfg.nats_rack, a->cfg.nats_rack) != 0;
    if (cfg.batch_bytes != a->cfg.batch_bytes || strcmp(cfg.host, a->cfg.host) != 0) {
        hm_lp lp;
        if (hm_lp_init(&lp, (size_t)cfg.batch_bytes, cfg.host, err) < 0)
            return -1;
        hm_lp_free(&a->lp);
        a->lp = lp;
    }
    if (new_sink) {
        hm_sink sink;
        if (hm_sink_open(&sink, &cfg, hm_realtime_ns(), err) < 0)
            return -1;
        hm_error e;
        if (hm_sink_close(&a->sink, &e) < 0)
            hm_log_warn("closing the old sink: %s", e.msg);
        a->sink = sink;
    }
    int64_t every;
    if (source_every(cfg.sources_every, "", &every, err) < 0)
        return -1; /* before anything closes: a bad list leaves the agent as it was */
    if (strcmp(cfg.cpus, a->cfg.cpus) != 0)
        hm_log_warn("reload: new cpus take effect at restart");
    strcpy(cfg.socket_path, a->cfg.socket_path);
    close_sources(a);
    a->cfg = cfg;
    if (hm_agent_apply_socket_settings(a, err) < 0)
        return -1;
    if (open_sources(a, err) < 0)
        return -1;
    hm_log_notice("config reloaded: period %lld ms, %zu sources", (long long)cfg.period_ms, a->nsources);
    return 0;
}

int hm_agent_pin(const char *cpus, hm_error *err)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    const char *p = cpus;
    while (*p != '\0') {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || lo < 0)
            return hm_error_set(err, "cpus '%s': expected a list like 0 or 0,64-65", cpus);
        if (*end == '-') {
            const char *q = end + 1;
            hi = strtol(q, &end, 10);
            if (end == q || hi < lo)
                return hm_error_set(err, "cpus '%s': bad range", cpus);
        }
        if (hi >= CPU_SETSIZE)
            return hm_error_set(err, "cpus '%s': CPU %ld beyond %d", cpus, hi, CPU_SETSIZE - 1);
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, &set);
        if (*end != ',' && *end != '\0')
            return hm_error_set(err, "cpus '%s': expected a list like 0 or 0,64-65", cpus);
        p = *end == ',' ? end + 1 : end;
    }
    if (CPU_COUNT(&set) == 0)
        return hm_error_set(err, "cpus '%s': no CPU named", cpus);
    if (sched_setaffinity(0, sizeof set, &set) < 0)
        return hm_error_errno(err, "sched_setaffinity(cpus %s)", cpus);
    return 0;
}

void hm_agent_fini(hm_agent *a)
{
    close_sources(a);
    hm_error e;
    if (a->sink.ops != NULL && hm_sink_close(&a->sink, &e) < 0)
        hm_log_warn("closing sink: %s", e.msg);
    hm_control_close(&a->control);
    hm_app_close(&a->app);
    if (a->timer_fd >= 0)
        close(a->timer_fd);
    if (a->signal_fd >= 0)
        close(a->signal_fd);
    a->timer_fd = a->signal_fd = -1;
    hm_lp_free(&a->lp);
}
