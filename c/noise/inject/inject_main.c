/* hushmon-inject: a model of a monitoring agent's load (seed 000).
 *
 * Every period it works for level x period, then sleeps for the rest of the
 * period, until the duration is over; it logs each activation and checks its
 * own duty cycle. Runs standalone or one per node under mpirun (it does not
 * need MPI: --start boundary lines the nodes up on CLOCK_REALTIME). */
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hm_error.h"
#include "hm_json.h"
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

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROGRAM " [options]\n"
            "A model of a monitoring agent: every period, work for level x period, then sleep.\n\n"
            "  --level PCT        load in percent of the period, 0 (idle) .. 100 [1]\n"
            "  --period SEC       activation period [1]\n"
            "  --duration SEC     total time from the first activation [10]\n"
            "  --shape NAME       load shape [sum]\n"
            "  --burst-every N    burst shape: one detour every N periods [10]\n"
            "  --cpu N            pin to CPU N\n"
            "  --start MODE       boundary (next multiple of the period on CLOCK_REALTIME,\n"
            "                     the same instant on every node), random (random phase), now\n"
            "                     [boundary]\n"
            "  --phase SEC        offset added to the boundary, 0 <= SEC < period [0]\n"
            "  --seed N           seed of the random phase [time and pid]\n"
            "  --work-clock CLK   cpu: work until level x period of CPU time was used;\n"
            "                     wall: until that much wall time passed (the seed) [cpu]\n"
            "  --log FILE         activation log, one line per activation (%%h = host name)\n"
            "  --json FILE|-      summary and duty-cycle check as JSON\n"
            "  --quiet            no summary (on stdout; on stderr with --json -)\n"
            "  --help\n\nshapes:\n");
    for (size_t i = 0; hm_inject_shapes[i] != NULL; i++)
        fprintf(out, "  %-10s %s\n", hm_inject_shapes[i]->name, hm_inject_shapes[i]->description);
}

static int parse_seconds_ns(const char *s, double min_s, double max_s, int64_t *out,
                            hm_error *err)
{
    double v;
    if (hm_parse_double(s, min_s, max_s, &v, err) != 0)
        return -1;
    *out = (int64_t)llround(v * 1e9);
    return 0;
}

static int parse_options(int argc, char **argv, inject_options *o, hm_error *err)
{
    enum { OPT_LEVEL = 256, OPT_PERIOD, OPT_DURATION, OPT_SHAPE, OPT_BURST, OPT_CPU, OPT_START,
           OPT_PHASE, OPT_SEED, OPT_WORK_CLOCK, OPT_LOG, OPT_JSON, OPT_QUIET, OPT_HELP };
    static const struct option longopts[] = {
        {"level", required_argument, NULL, OPT_LEVEL},
        {"period", required_argument, NULL, OPT_PERIOD},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"shape", required_argument, NULL, OPT_SHAPE},
        {"burst-every", required_argument, NULL, OPT_BURST},
        {"cpu", required_argument, NULL, OPT_CPU},
        {"start", required_argument, NULL, OPT_START},
        {"phase", required_argument, NULL, OPT_PHASE},
        {"seed", required_argument, NULL, OPT_SEED},
        {"work-clock", required_argument, NULL, OPT_WORK_CLOCK},
        {"log", required_argument, NULL, OPT_LOG},
        {"json", required_argument, NULL, OPT_JSON},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    *o = (inject_options){
        .cfg = {.level_pct = 1.0, .period_ns = 1000000000LL, .duration_ns = 10000000000LL,
                .shape = hm_inject_shape_find("sum"), .burst_every = 10,
                .start = HM_INJECT_START_BOUNDARY,
                .seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32),
                .work_clock = HM_INJECT_WORK_CPU},
        .cpu = -1,
    };
    int64_t iv;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_LEVEL:
            if (hm_parse_double(optarg, 0.0, 100.0, &o->cfg.level_pct, err) != 0)
                return hm_error_wrap(err, "--level (percent, 0..100)");
            if (o->cfg.level_pct > 0 && o->cfg.level_pct < 0.001)
                return hm_error_set(err, "--level %s: the smallest load is 0.001 %%", optarg);
            break;
        case OPT_PERIOD:
            if (parse_seconds_ns(optarg, 0.001, 3600, &o->cfg.period_ns, err) != 0)
                return hm_error_wrap(err, "--period (seconds)");
            break;
        case OPT_DURATION:
            if (parse_seconds_ns(optarg, 0.001, 7 * 86400.0, &o->cfg.duration_ns, err) != 0)
                return hm_error_wrap(err, "--duration (seconds)");
            break;
        case OPT_SHAPE:
            o->cfg.shape = hm_inject_shape_find(optarg);
            if (o->cfg.shape == NULL)
                return hm_error_set(err, "--shape: unknown shape '%s' (see --help)", optarg);
            break;
        case OPT_BURST:
            if (hm_parse_int64(optarg, 1, 1000000, 0, &iv, err) != 0)
                return hm_error_wrap(err, "--burst-every");
            o->cfg.burst_every = (int)iv;
            break;
        case OPT_CPU:
            if (hm_parse_int64(optarg, 0, CPU_SETSIZE - 1, 0, &iv, err) != 0)
                return hm_error_wrap(err, "--cpu");
            o->cpu = (int)iv;
            break;
        case OPT_START:
            if (strcmp(optarg, "boundary") == 0)
                o->cfg.start = HM_INJECT_START_BOUNDARY;
            else if (strcmp(optarg, "random") == 0)
                o->cfg.start = HM_INJECT_START_RANDOM;
            else if (strcmp(optarg, "now") == 0)
                o->cfg.start = HM_INJECT_START_NOW;
            else
                return hm_error_set(err, "--start: '%s' is not boundary, random or now", optarg);
            break;
        case OPT_PHASE:
            if (parse_seconds_ns(optarg, 0, 3600, &o->cfg.phase_ns, err) != 0)
                return hm_error_wrap(err, "--phase (seconds)");
            break;
        case OPT_SEED:
            if (hm_parse_int64(optarg, 0, INT64_MAX, 0, &iv, err) != 0)
                return hm_error_wrap(err, "--seed");
            o->cfg.seed = (uint64_t)iv;
            break;
        case OPT_WORK_CLOCK:
            if (strcmp(optarg, "cpu") == 0)
                o->cfg.work_clock = HM_INJECT_WORK_CPU;
            else if (strcmp(optarg, "wall") == 0)
                o->cfg.work_clock = HM_INJECT_WORK_WALL;
            else
                return hm_error_set(err, "--work-clock: '%s' is not cpu or wall", optarg);
            break;
        case OPT_LOG: o->log_path = optarg; break;
        case OPT_JSON: o->json_path = optarg; break;
        case OPT_QUIET: o->quiet = true; break;
        case OPT_HELP: usage(stdout); exit(0);
        default:
            return hm_error_set(err, "unknown or incomplete option '%s' (see --help)",
                                argv[optind - 1]);
        }
    }
    if (optind < argc)
        return hm_error_set(err, "unexpected argument '%s' (see --help)", argv[optind]);
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
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (f == NULL)
        return hm_error_errno(err, "opening %s", path);
    hm_json j;
    hm_json_init(&j, f, true);
    hm_json_object_begin(&j);
    hm_json_kv_string(&j, "program", PROGRAM);
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
    hm_json_object_end(&j);
    int rc = hm_json_finish(&j);
    if (f != stdout && fclose(f) != 0)
        rc = -1;
    else if (f == stdout && fflush(stdout) != 0)
        rc = -1;
    if (rc != 0)
        return hm_error_set(err, "writing JSON to %s failed", path);
    return 0;
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
