/* hushmon-agent: the node agent. Parses the command line, builds the
 * config (defaults < TOML file < flags) and runs the loop. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "hm_parse.h"
#include "hm_log.h"
#include "sinks/sink.h"

#define MAX_OVERRIDES 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hushmon-agent [--config FILE] [options]\n"
            "\n"
            "Samples node sensors on wall-clock-aligned instants and writes one InfluxDB\n"
            "line-protocol batch per period to a sink (docs/agent.md, docs/formats.md).\n"
            "\n"
            "  --config FILE                  TOML config; flags override it (also after reload)\n"
            "  --once                         two readings --once-interval-ms apart, print the\n"
            "                                 second batch, exit (default sink stdout)\n"
            "  --once-interval-ms N           (default 250)\n"
            "  --measure-cost N               run N cycles back to back and print each source's\n"
            "                                 CPU time per sample (stderr), then exit\n"
            "  --measure-cost-gap-ms N        sleep N ms before each of those cycles (cold caches,\n"
            "                                 as in the daemon); default 0\n"
            "  --daemon                       detach and log to syslog (systemd: run in foreground)\n"
            "  --pidfile FILE                 write the process id here\n"
            "  --send REQUEST                 send one control request to the agent on the\n"
            "                                 control socket (--socket, or the config's) and\n"
            "                                 print its answer; exit 0 on ok, 1 on error, 2 if\n"
            "                                 no agent answers (e.g. --send 'job begin 42')\n"
            "  --send-timeout-ms N            give up on the agent after N ms (default 3000)\n"
            "  --help\n"
            "\n"
            "Options (flag, then [TOML key]):\n");
    hm_config_print_help(out);
    fprintf(out, "\nSources (--sources NAME,...; 'default' = those marked *):\n");
    for (size_t i = 0; i < hm_samplers_count; i++) {
        const hm_sampler_ops *s = hm_samplers[i];
        fprintf(out, "  %c %-8s %s\n             -> %s: %s\n", s->default_on ? '*' : ' ', s->name,
                s->reads, s->measurement, s->fields);
    }
    fprintf(out, "\nSinks:\n  %-8s %s\n  %-8s %s\n", hm_sink_spool.name, hm_sink_spool.description,
            hm_sink_stdout.name, hm_sink_stdout.description);
#ifdef HM_HAVE_NATS
    fprintf(out, "  %-8s %s\n", hm_sink_nats.name, hm_sink_nats.description);
#else
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
    hm_config_override overrides[MAX_OVERRIDES];
    size_t n_overrides = 0;
    const char *config_path = NULL, *pidfile = NULL, *send = NULL;
    bool once = false, daemonize = false, sink_given = false;
    int64_t once_interval_ms = 250, cost_cycles = 0, cost_gap_ms = 0, send_timeout_ms = 3000;
    hm_error err;
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(arg, "--once") == 0) {
            once = true;
            continue;
        }
        if (strcmp(arg, "--daemon") == 0) {
            daemonize = true;
            continue;
        }
        /* --flag VALUE or --flag=VALUE */
        char flag[64];
        const char *value = NULL;
        char *eq = strchr(arg, '=');
        if (eq != NULL && (size_t)(eq - arg) < sizeof flag) {
            snprintf(flag, sizeof flag, "%.*s", (int)(eq - arg), arg);
            value = eq + 1;
        } else {
            snprintf(flag, sizeof flag, "%s", arg);
        }
        bool known = strcmp(flag, "--config") == 0 || strcmp(flag, "--pidfile") == 0 ||
                     strcmp(flag, "--once-interval-ms") == 0 || strcmp(flag, "--measure-cost") == 0 ||
                     strcmp(flag, "--measure-cost-gap-ms") == 0 || strcmp(flag, "--send") == 0 ||
                     strcmp(flag, "--send-timeout-ms") == 0 ||
                     hm_config_key_for_flag(flag) != NULL;
        if (!known) {
            fprintf(stderr, "hushmon-agent: unknown option '%s' (see --help)\n", arg);
            return 2;
        }
        if (value == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hushmon-agent: %s needs a value\n", flag);
                return 2;
            }
            value = argv[++i];
        }
        if (strcmp(flag, "--config") == 0) {
            config_path = value;
        } else if (strcmp(flag, "--pidfile") == 0) {
            pidfile = value;
        } else if (strcmp(flag, "--send") == 0) {
            send = value;
        } else if (strcmp(flag, "--send-timeout-ms") == 0) {
            if (hm_parse_int64(value, 1, 600000, 0, &send_timeout_ms, &err) < 0) {
                fprintf(stderr, "hushmon-agent: --send-timeout-ms: %s\n", err.msg);
                return 2;
            }
        } else if (strcmp(flag, "--measure-cost") == 0) {
            if (hm_parse_int64(value, 1, 10000000, 0, &cost_cycles, &err) < 0) {
                fprintf(stderr, "hushmon-agent: --measure-cost: %s\n", err.msg);
                return 2;
            }
        } else if (strcmp(flag, "--measure-cost-gap-ms") == 0) {
            if (hm_parse_int64(value, 0, 60000, 0, &cost_gap_ms, &err) < 0) {
                fprintf(stderr, "hushmon-agent: --measure-cost-gap-ms: %s\n", err.msg);
                return 2;
            }
        } else if (strcmp(flag, "--once-interval-ms") == 0) {
            if (hm_parse_int64(value, 10, 60000, 0, &once_interval_ms, &err) < 0) {
                fprintf(stderr, "hushmon-agent: --once-interval-ms: %s\n", err.msg);
                return 2;
            }
        } else {
            if (n_overrides == MAX_OVERRIDES) {
                fprintf(stderr, "hushmon-agent: too many options\n");
                return 2;
            }
            const char *key = hm_config_key_for_flag(flag);
            sink_given |= strcmp(key, "sink.type") == 0;
            overrides[n_overrides++] = (hm_config_override){.key = key, .value = value};
        }
    }
    if (send != NULL) {
        if (once || daemonize || cost_cycles > 0 || pidfile != NULL) {
            fprintf(stderr, "hushmon-agent: --send talks to a running agent: it does not go with "
                            "--once, --daemon, --measure-cost or --pidfile\n");
            return 2;
        }
        return send_request(config_path, overrides, n_overrides, send, (int)send_timeout_ms);
    }
    if ((once || cost_cycles > 0) && !sink_given && n_overrides < MAX_OVERRIDES)
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
    int rc = cost_cycles > 0 ? hm_agent_measure_cost(&agent, cost_cycles, cost_gap_ms, &err)
             : once          ? hm_agent_once(&agent, once_interval_ms, &err)
                             : hm_agent_run(&agent, &err);
    if (rc < 0)
        hm_error_print("hushmon-agent", &err);
    hm_agent_fini(&agent);
    if (pidfile != NULL)
        unlink(pidfile);
    return rc < 0 ? 1 : 0;
}
