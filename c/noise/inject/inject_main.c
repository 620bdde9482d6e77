/* hushmon-inject: a model of a monitoring agent's load (seed 000).
 *
 * Every period it works for level x period, then sleeps for the rest of the
 * period, until the duration is over; it logs each activation and checks its
 * own duty cycle. Runs standalone or one per node under mpirun (it does not
 * need MPI: --start boundary lines the nodes up on CLOCK_REALTIME). */
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hm_error.h"
#include "hm_json_doc.h"
#include "hm_options.h"
#include "hm_parse.h"
#include "inject_run.h"
#include "inject_shape.h"

#define PROGRAM "hushmon-inject"

typedef struct inject_options {
    hm_inject_config cfg;
    int cpu;               /* -1: not pinned */
    const char *log_path;  /* NULL: no activation log */
    const char *json_path; /* NULL: no JSON */
    bool quiet;
} inject_options;

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static int set_level(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    inject_options *o = base;
    if (hm_parse_double(value, 0.0, 100.0, &o->cfg.level_pct, err) != 0)
        return hm_error_wrap(err, "--%s (percent, 0..100)", opt->name);
    if (o->cfg.level_pct > 0 && o->cfg.level_pct < 0.001)
        return hm_error_set(err, "--%s %s: the smallest load is 0.001 %%", opt->name, value);
    return 0;
}

static int set_shape(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    inject_options *o = base;
    o->cfg.shape = hm_inject_shape_find(value);
    if (o->cfg.shape == NULL)
        return hm_error_set(err, "--%s: unknown shape '%s' (see --help)", opt->name, value);
    return 0;
}

/* The enums are stored as int by HM_OPT_CHOICE, in the order of their
 * choices. */
_Static_assert(sizeof(hm_inject_start) == sizeof(int) && HM_INJECT_START_NOW == 2,
               "--start stores an int index");
_Static_assert(sizeof(hm_inject_work_clock) == sizeof(int) && HM_INJECT_WORK_WALL == 1,
               "--work-clock stores an int index");

#define AT(field) .offset = offsetof(inject_options, field)
static const hm_option option_rows[] = {
    {.name = "level", .kind = HM_OPT_CALL, .call = set_level, .arg = "PCT",
     .help = "load in percent of the period, 0 (idle) .. 100 [1]"},
    {.name = "period", .kind = HM_OPT_SCALED, AT(cfg.period_ns), .arg = "SEC", .unit = "seconds",
     .dmin = 0.001, .dmax = 3600, .scale = 1e9, .help = "activation period [1]"},
    {.name = "duration", .kind = HM_OPT_SCALED, AT(cfg.duration_ns), .arg = "SEC",
     .unit = "seconds", .dmin = 0.001, .dmax = 7 * 86400.0, .scale = 1e9,
     .help = "total time from the first activation [10]"},
    {.name = "shape", .kind = HM_OPT_CALL, .call = set_shape, .arg = "NAME",
     .help = "load shape [sum]"},
    {.name = "burst-every", .kind = HM_OPT_INT, AT(cfg.burst_every), .arg = "N", .min = 1,
     .max = 1000000, .help = "burst shape: one detour every N periods [10]"},
    {.name = "cpu", .kind = HM_OPT_INT, AT(cpu), .arg = "N", .min = 0, .max = CPU_SETSIZE - 1,
     .help = "pin to CPU N"},
    {.name = "start", .kind = HM_OPT_CHOICE, AT(cfg.start), .arg = "MODE",
     .choices = "boundary|random|now",
     .help = "boundary (next multiple of the period on CLOCK_REALTIME,\n"
             "the same instant on every node), random (random phase), now\n[boundary]"},
    {.name = "phase", .kind = HM_OPT_SCALED, AT(cfg.phase_ns), .arg = "SEC", .unit = "seconds",
     .dmin = 0, .dmax = 3600, .scale = 1e9,
     .help = "offset added to the boundary, 0 <= SEC < period [0]"},
    {.name = "seed", .kind = HM_OPT_INT64, AT(cfg.seed), .arg = "N", .min = 0, .max = INT64_MAX,
     .help = "seed of the random phase [time and pid]"},
    {.name = "work-clock", .kind = HM_OPT_CHOICE, AT(cfg.work_clock), .arg = "CLK",
     .choices = "cpu|wall",
     .help = "cpu: work until level x period of CPU time was used;\n"
             "wall: until that much wall time passed (the seed) [cpu]"},
    {.name = "log", .kind = HM_OPT_STRING, AT(log_path), .arg = "FILE",
     .help = "activation log, one line per activation (%h = host name)"},
    {.name = "json", .kind = HM_OPT_STRING, AT(json_path), .arg = "FILE|-",
     .help = "summary and duty-cycle check as JSON"},
    {.name = "quiet", .kind = HM_OPT_SET, AT(quiet),
     .help = "no summary (on stdout; on stderr with --json -)"},
    {.name = "help", .kind = HM_OPT_HELP, .help = "this text"},
};
#undef AT
static const hm_option_table options = HM_OPTION_TABLE(option_rows);

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROGRAM " [options]\n"
            "A model of a monitoring agent: every period, work for level x period, then sleep.\n\n");
    hm_options_print_help(&options, out);
    fprintf(out, "\nshapes:\n");
    for (size_t i = 0; hm_inject_shapes[i] != NULL; i++)
        fprintf(out, "  %-10s %s\n", hm_inject_shapes[i]->name, hm_inject_shapes[i]->description);
}

static int parse_options(int argc, char **argv, inject_options *o, hm_error *err)
{
    *o = (inject_options){
        .cfg = {.level_pct = 1.0, .period_ns = 1000000000LL, .duration_ns = 10000000000LL,
                .shape = hm_inject_shape_find("sum"), .burst_every = 10,
                .start = HM_INJECT_START_BOUNDARY,
                .seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32),
                .work_clock = HM_INJECT_WORK_CPU},
        .cpu = -1,
    };
    int rc = hm_options_parse(&options, argc, argv, o, err);
    if (rc == 1) {
        usage(stdout);
        exit(0);
    }
    if (rc != 0)
        return -1;
    if (o->cfg.phase_ns >= o->cfg.period_ns)
        return hm_error_set(err, "--phase must be smaller than --period");
    return 0;
}

static int pin_to_cpu(int cpu, hm_error *err)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return hm_error_errno(err, "reading the CPU affinity");
    if (!CPU_ISSET(cpu, &allowed))
        return hm_error_set(err, "--cpu %d: CPU %d is not available to this process", cpu, cpu);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return hm_error_errno(err, "pinning to CPU %d", cpu);
    return 0;
}

/* Expands %h in the log path to the host name (one log per node under mpirun). */
static int expand_path(const char *pattern, char *out, size_t size, hm_error *err)
{
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        return hm_error_errno(err, "reading the host name");
    host[sizeof host - 1] = '\0';
    size_t n = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        const char *piece = NULL;
        char one[2] = {*p, '\0'};
        if (p[0] == '%' && p[1] == 'h') {
            piece = host;
            p++;
        } else {
            piece = one;
        }
        size_t len = strlen(piece);
        if (n + len + 1 > size)
            return hm_error_set(err, "path '%s' is too long", pattern);
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    return 0;
}

static const char *start_name(hm_inject_start s)
{
    return s == HM_INJECT_START_BOUNDARY ? "boundary" : s == HM_INJECT_START_RANDOM ? "random"
                                                                                     : "now";
}

/* The log: provenance as "#@key=value" lines, then one activation a line. */
static int write_log(const char *path, const inject_options *o, const hm_inject_result *r,
                     hm_error *err)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return hm_error_errno(err, "opening the log %s", path);
    fprintf(f, "#@program=" PROGRAM "\n#@clock=CLOCK_REALTIME\n#@level_pct=%.6g\n"
               "#@period_ns=%lld\n#@shape=%s\n#@start=%s\n#@t0_realtime_ns=%lld\n"
               "#@end_realtime_ns=%lld\n# start_realtime_ns wall_ns cpu_ns\n",
            o->cfg.level_pct, (long long)o->cfg.period_ns, o->cfg.shape->name,
            start_name(o->cfg.start), (long long)r->t0_realtime_ns,
            (long long)r->end_realtime_ns);
    for (size_t i = 0; i < r->activation_count; i++) {
        const hm_inject_activation *a = &r->activations[i];
        fprintf(f, "%lld %lld %lld\n", (long long)a->start_realtime_ns, (long long)a->wall_ns,
                (long long)a->cpu_ns);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return hm_error_errno(err, "writing the log %s", path);
    return 0;
}

static int write_json(const char *path, const inject_options *o, const hm_inject_result *r,
                      const hm_inject_duty *d, hm_error *err)
{
    hm_json j;
    if (hm_json_doc_open(&j, path, PROGRAM, err) != 0)
        return -1;
    hm_json_kv_double(&j, "level_pct", o->cfg.level_pct);
    hm_json_kv_double(&j, "period_s", (double)o->cfg.period_ns / 1e9);
    hm_json_kv_string(&j, "shape", o->cfg.shape->name);
    hm_json_kv_int(&j, "burst_every", o->cfg.burst_every);
    hm_json_kv_string(&j, "start", start_name(o->cfg.start));
    hm_json_kv_string(&j, "work_clock", o->cfg.work_clock == HM_INJECT_WORK_CPU ? "cpu" : "wall");
    hm_json_kv_int(&j, "cpu", o->cpu);
    hm_json_kv_int(&j, "t0_realtime_ns", r->t0_realtime_ns);
    hm_json_kv_int(&j, "end_realtime_ns", r->end_realtime_ns);
    hm_json_kv_uint(&j, "activations", r->activation_count);
    hm_json_kv_bool(&j, "stopped_by_signal", r->stopped_by_signal);
    hm_json_key(&j, "duty_cycle");
    hm_json_object_begin(&j);
    hm_json_kv_double(&j, "intended_pct", d->intended_pct);
    hm_json_kv_double(&j, "measured_cpu_pct", d->measured_pct);
    hm_json_kv_double(&j, "error_pct", d->error_pct);
    hm_json_kv_double(&j, "tolerance_pct", d->tolerance_pct);
    hm_json_kv_bool(&j, "ok", d->ok);
    hm_json_object_end(&j);
    return hm_json_doc_close(&j, path, err);
}

int main(int argc, char **argv)
{
    hm_error err = {{0}};
    inject_options o;
    char log_path[4096];
    if (parse_options(argc, argv, &o, &err) != 0 ||
        (o.log_path != NULL && expand_path(o.log_path, log_path, sizeof log_path, &err) != 0) ||
        (o.cpu >= 0 && pin_to_cpu(o.cpu, &err) != 0)) {
        hm_error_print(PROGRAM, &err);
        return 2;
    }
    /* Fail before the run, not after it, if the log cannot be written. */
    if (o.log_path != NULL) {
        FILE *probe = fopen(log_path, "w");
        if (probe == NULL) {
            hm_error_errno(&err, "opening the log %s", log_path);
            hm_error_print(PROGRAM, &err);
            return 2;
        }
        fclose(probe);
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) {
        hm_error_errno(&err, "installing signal handlers");
        hm_error_print(PROGRAM, &err);
        return 1;
    }
    hm_inject_result r;
    if (hm_inject_run(&o.cfg, &stop_requested, &r, &err) != 0) {
        hm_error_print(PROGRAM, &err);
        return 1;
    }
    hm_inject_duty d;
    hm_inject_duty_check(&r, &d);
    int rc = 0;
    if (o.log_path != NULL && write_log(log_path, &o, &r, &err) != 0)
        rc = 1;
    if (rc == 0 && o.json_path != NULL && write_json(o.json_path, &o, &r, &d, &err) != 0)
        rc = 1;
    /* With --json - stdout holds the JSON alone: people read stderr. */
    bool json_stdout = o.json_path != NULL && strcmp(o.json_path, "-") == 0;
    if (rc == 0 && !o.quiet)
        fprintf(json_stdout ? stderr : stdout,
                "%s: %zu activations of shape %s over %.3f s; duty cycle intended %.4f %%, "
                "measured CPU %.4f %% (error %+.4f, tolerance %.4f): %s\n",
                PROGRAM, r.activation_count, o.cfg.shape->name, (double)r.wall_ns / 1e9,
                d.intended_pct, d.measured_pct, d.error_pct, d.tolerance_pct,
                d.ok ? "ok" : "OUT OF TOLERANCE");
    hm_inject_result_free(&r);
    if (rc != 0)
        hm_error_print(PROGRAM, &err);
    return rc;
}
