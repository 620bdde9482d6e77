/* hushmon-agent: the node agent. Parses the command line, builds the
 * config (defaults < TOML file < flags) and runs the loop. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "hm_log.h"
#include "hm_options.h"
#include "sinks/sink.h"

#define MAX_OVERRIDES 64

/* What the command line holds: the program's own options, and the config
 * options given as flags, kept as overrides (applied after the file, and
 * again after every reload). */
typedef struct agent_cli {
    const char *config_path, *pidfile, *send;
    bool once, daemonize, sink_given;
    int64_t once_interval_ms, cost_cycles, cost_gap_ms, send_timeout_ms;
    hm_config_override overrides[MAX_OVERRIDES];
    size_t n_overrides;
} agent_cli;

#define AT(field) .offset = offsetof(agent_cli, field)
static const hm_option program_rows[] = {
    {.name = "config", .kind = HM_OPT_STRING, AT(config_path), .arg = "FILE",
     .help = "TOML config; flags override it (also after reload)"},
    {.name = "once", .kind = HM_OPT_SET, AT(once),
     .help = "two readings --once-interval-ms apart, print the\n"
             "second batch, exit (default sink stdout)"},
    {.name = "once-interval-ms", .kind = HM_OPT_INT64, AT(once_interval_ms), .arg = "N",
     .min = 10, .max = 60000, .help = "(default 250)"},
    {.name = "measure-cost", .kind = HM_OPT_INT64, AT(cost_cycles), .arg = "N", .min = 1,
     .max = 10000000,
     .help = "run N cycles back to back and print each source's\n"
             "CPU time per sample (stderr), then exit"},
    {.name = "measure-cost-gap-ms", .kind = HM_OPT_INT64, AT(cost_gap_ms), .arg = "N", .min = 0,
     .max = 60000,
     .help = "sleep N ms before each of those cycles (cold caches,\n"
             "as in the daemon); default 0"},
    {.name = "daemon", .kind = HM_OPT_SET, AT(daemonize),
     .help = "detach and log to syslog (systemd: run in foreground)"},
    {.name = "pidfile", .kind = HM_OPT_STRING, AT(pidfile), .arg = "FILE",
     .help = "write the process id here"},
    {.name = "send", .kind = HM_OPT_STRING, AT(send), .arg = "REQUEST",
     .help = "send one control request to the agent on the\n"
             "control socket (--socket, or the config's) and\n"
             "print its answer; exit 0 on ok, 1 on error, 2 if\n"
             "no agent answers (e.g. --send 'job begin 42')"},
    {.name = "send-timeout-ms", .kind = HM_OPT_INT64, AT(send_timeout_ms), .arg = "N", .min = 1,
     .max = 600000, .help = "give up on the agent after N ms (default 3000)"},
    {.name = "help", .letter = 'h', .kind = HM_OPT_HELP, .help = "this text"},
};
#undef AT

#define PROGRAM_ROWS (sizeof program_rows / sizeof program_rows[0])

/* A config option given as a flag: kept by its key, checked when the
 * config is built (errors name the key, as for the file). */
static int add_override(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    agent_cli *cli = base;
    if (cli->n_overrides == MAX_OVERRIDES)
        return hm_error_set(err, "too many options (at most %d)", MAX_OVERRIDES);
    const char *key = opt->data;
    cli->sink_given |= strcmp(key, "sink.type") == 0;
    cli->overrides[cli->n_overrides++] = (hm_config_override){.key = key, .value = value};
    return 0;
}

/* The command line's table: the program's rows, then one per config
 * option that stores through add_override. */
static hm_option_table command_line(hm_option *rows, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < PROGRAM_ROWS && n < cap; i++)
        rows[n++] = program_rows[i];
    for (size_t i = 0; i < hm_config_option_count() && n < cap; i++) {
        const char *key;
        rows[n] = *hm_config_option(i, &key);
        rows[n].kind = HM_OPT_CALL;
        rows[n].call = add_override;
        rows[n].data = key;
        n++;
    }
    return (hm_option_table){rows, n};
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hushmon-agent [--config FILE] [options]\n"
            "\n"
            "Samples node sensors on wall-clock-aligned instants and writes one InfluxDB\n"
            "line-protocol batch per period to a sink (docs/agent.md, docs/formats.md).\n"
            "\n");
    hm_options_print_help(&(hm_option_table){program_rows, PROGRAM_ROWS}, out);
    fprintf(out, "\nOptions (flag, then [TOML key]):\n");
    hm_config_print_help(out);
    fprintf(out, "\nSources (--sources NAME,...; 'default' = those marked *):\n");
    for (size_t i = 0; i < hm_samplers_count; i++) {
        const hm_sampler_ops *s = hm_samplers[i];
        fprintf(out, "  %c %-8s %s\n             -> %s: %s\n", s->default_on ? '*' : ' ', s->name,
                s->reads, s->measurement, s->fields);
    }
    fprintf(out, "\nSinks:\n");
    for (size_t i = 0; i < hm_sinks_count; i++)
        fprintf(out, "  %-8s %s\n", hm_sinks[i]->name, hm_sinks[i]->description);
#ifndef HM_HAVE_NATS
    fprintf(out, "  %-8s (not in this build: no libnats)\n", "nats");
#endif
    fprintf(out,
            "\nControl socket requests: status | set [job=ID] period=DUR sources=+a,-b |\n"
            "  job begin ID [cgroup=PATH] [uid=N] | job end ID | app send|acks ... | flush |\n"
            "  reload   (one line each; answer starts with ok or error)\n");
}

/* Written to a temporary name and renamed, so a reader (systemd, a script
 * that waits for the file) never sees it empty or half written. */
static int write_pidfile(const char *path, hm_error *err)
{
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return hm_error_set(err, "pidfile path too long: %s", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return hm_error_errno(err, "creating pidfile %s", tmp);
    fprintf(f, "%ld\n", (long)getpid());
    if (fclose(f) != 0) {
        unlink(tmp);
        return hm_error_errno(err, "writing pidfile %s", tmp);
    }
    if (rename(tmp, path) < 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return hm_error_errno(err, "creating pidfile %s", path);
    }
    return 0;
}

/* --send: the socket comes from the same config as the daemon's (defaults,
 * file, flags). Exit 0 on "ok ...", 1 on "error ...", 2 when no agent
 * answered or the config is unusable; one line on stderr for 1 and 2. */
static int send_request(const char *config_path, const hm_config_override *overrides,
                        size_t n_overrides, const char *request, int timeout_ms)
{
    hm_agent_config cfg;
    hm_error err;
    if (request[0] == '\0' || strpbrk(request, "\r\n") != NULL) {
        fprintf(stderr, "hushmon-agent: --send: a request is one non-empty line\n");
        return 2;
    }
    if (hm_config_build(&cfg, config_path, overrides, n_overrides, &err) < 0) {
        hm_error_print("hushmon-agent", &err);
        return 2;
    }
    char reply[HM_CONTROL_LINE_MAX];
    if (hm_control_send(cfg.socket_path, request, timeout_ms, reply, sizeof reply, &err) < 0) {
        fprintf(stderr, "hushmon-agent: no agent answered: %s\n", err.msg); /* names the socket */
        return 2;
    }
    if (strncmp(reply, "ok", 2) == 0 && (reply[2] == '\0' || reply[2] == ' ')) {
        printf("%s\n", reply);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (strncmp(reply, "error", 5) == 0 && (reply[5] == '\0' || reply[5] == ' ')) {
        fprintf(stderr, "hushmon-agent: agent on %s: %s\n", cfg.socket_path,
                reply[5] ? reply + 6 : "error");
        return 1;
    }
    fprintf(stderr, "hushmon-agent: no agent answered: %s said '%.200s', not ok or error\n",
            cfg.socket_path, reply);
    return 2;
}

int main(int argc, char **argv)
{
    static agent_cli cli = {.once_interval_ms = 250, .send_timeout_ms = 3000};
    hm_option rows[PROGRAM_ROWS + 128];
    hm_option_table table = command_line(rows, sizeof rows / sizeof rows[0]);
    hm_error err;
    if (table.n != PROGRAM_ROWS + hm_config_option_count()) {
        fprintf(stderr, "hushmon-agent: internal: the command line holds %zu of %zu options\n",
                table.n, PROGRAM_ROWS + hm_config_option_count());
        return 1;
    }
    int parsed = hm_options_parse(&table, argc, argv, &cli, &err);
    if (parsed == 1) {
        usage(stdout);
        return 0;
    }
    if (parsed != 0) {
        hm_error_print("hushmon-agent", &err);
        return 2;
    }
    const char *config_path = cli.config_path, *pidfile = cli.pidfile, *send = cli.send;
    bool once = cli.once, daemonize = cli.daemonize;
    int64_t cost_cycles = cli.cost_cycles;
    hm_config_override *overrides = cli.overrides;
    size_t n_overrides = cli.n_overrides;
    if (send != NULL) {
        if (once || daemonize || cost_cycles > 0 || pidfile != NULL) {
            fprintf(stderr, "hushmon-agent: --send talks to a running agent: it does not go with "
                            "--once, --daemon, --measure-cost or --pidfile\n");
            return 2;
        }
        return send_request(config_path, overrides, n_overrides, send, (int)cli.send_timeout_ms);
    }
    if ((once || cost_cycles > 0) && !cli.sink_given && n_overrides < MAX_OVERRIDES)
        overrides[n_overrides++] = (hm_config_override){.key = "sink.type", .value = "stdout"};
    hm_agent_config cfg;
    if (hm_config_build(&cfg, config_path, overrides, n_overrides, &err) < 0 ||
        hm_agent_check_sources(cfg.sources, &err) < 0) {
        hm_error_print("hushmon-agent", &err);
        return 2;
    }
    if (cfg.cpus[0] != '\0' && hm_agent_pin(cfg.cpus, &err) < 0) {
        hm_error_print("hushmon-agent", &err);
        return 2;
    }
    if (daemonize) {
        if (daemon(1, 0) < 0) {
            hm_error_errno(&err, "daemon");
            hm_error_print("hushmon-agent", &err);
            return 1;
        }
        hm_log_use_syslog(true);
    }
    if (pidfile != NULL && write_pidfile(pidfile, &err) < 0) {
        hm_error_print("hushmon-agent", &err);
        return 1;
    }
    hm_agent agent;
    if (hm_agent_init(&agent, &cfg, overrides, n_overrides, &err) < 0) {
        hm_error_print("hushmon-agent", &err);
        return 1;
    }
    int rc = cost_cycles > 0 ? hm_agent_measure_cost(&agent, cost_cycles, cli.cost_gap_ms, &err)
             : once          ? hm_agent_once(&agent, cli.once_interval_ms, &err)
                             : hm_agent_run(&agent, &err);
    if (rc < 0)
        hm_error_print("hushmon-agent", &err);
    hm_agent_fini(&agent);
    if (pidfile != NULL)
        unlink(pidfile);
    return rc < 0 ? 1 : 0;
}
