/* The agent's settings: defaults, then the TOML file, then command-line
 * flags. One table (config.c) lists every option with its TOML key and an
 * hm_options row (flag, type and range, help), so the file format, the
 * flags and --help cannot drift apart. */
#ifndef HM_AGENT_CONFIG_H
#define HM_AGENT_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hm_error.h"
#include "hm_options.h"

/* The sampling period's bounds, 10 ms .. 1 h: the file, the flags and the
 * control request `set period=` check these (python/hushmon keeps the same
 * pair in one constant; docs/agent.md cites them). */
#define HM_PERIOD_MS_MIN 10
#define HM_PERIOD_MS_MAX 3600000

typedef struct hm_agent_config {
    char config_path[PATH_MAX];   /* "" when none */
    char host[64];
    char root[PATH_MAX];          /* prefix of every /proc, /sys path */
    int64_t period_ms;
    int64_t offset_ms;            /* per-node shift from the aligned boundary */
    char sources[512];            /* comma-separated names, or "default" */
    char sink[16];                /* spool | stdout | nats */
    char spool_dir[PATH_MAX];
    int64_t spool_file_bytes;     /* a spool file is closed past this size */
    int64_t spool_total_bytes;    /* the spool directory is kept below this */
    char nats_url[1024];          /* sink nats: comma list of servers (the rack's leaf) */
    char nats_rack[64];           /* sink nats: subject token hm.raw.<rack>.<host> */
    int64_t nats_publish_every_ms; /* sink nats: publish at most this often (batches wait) */
    char nats_ca_file[PATH_MAX];  /* sink nats: TLS on, the servers' CA ("" = $HUSHMON_NATS_CA_FILE) */
    char nats_cert_file[PATH_MAX]; /* sink nats: the node's certificate and key */
    char nats_key_file[PATH_MAX];
    char nats_tls_hostname[256];  /* sink nats: the name the server shows ("" = the URL's host) */
    char socket_path[PATH_MAX];   /* "" = no control socket */
    char admin_uids[256];         /* uids allowed everything besides root, "1000,1001" */
    char admin_group[64];         /* its members are admins too (name or gid); "" none */
    char socket_mode[8];          /* control socket's mode, octal ("0660") */
    char socket_group[64];        /* control socket's group (name or gid); "" the agent's */
    int64_t control_client_idle_ms; /* a request line must come within this */
    int64_t control_clients_per_uid; /* control connections one user uid may hold */
    int64_t app_clients_per_uid;  /* app.sock connections one uid may hold */
    int64_t app_idle_ms;          /* an app client silent this long is dropped; 0 never */
    int64_t app_series_per_job;   /* series one job may fill per period */
    int64_t app_records_per_client; /* records taken from one client per period */
    int64_t batch_bytes;          /* capacity of one period's batch */
    char pmu_mode[16];            /* none | kernel | rotate */
    char pmu_backend[16];         /* perf | sim */
    char pmu_profile[128];        /* auto | profile name */
    char pmu_profile_dir[PATH_MAX];
    int64_t pmu_sim_counters;
    char cgroup_root[PATH_MAX];   /* cgroup v2 mount, relative to root */
    char slurm_dir[PATH_MAX];     /* Slurm's job cgroups, relative to cgroup_root */
    int64_t slurm_scan_ms;        /* how often to list slurm_dir; 0 = every period */
    int64_t net_link_bits_per_s;  /* the links' real rate, if the site knows it; 0 = unknown */
    char ib_sysfs_root[PATH_MAX]; /* ib: a sysfs tree to read instead of <root>/sys; "" = that */
    char rapl_sysfs_root[PATH_MAX]; /* rapl: likewise, for class/powercap */
    char scope_cgroup[PATH_MAX];  /* node scope: "" = host-wide, "self", or a cgroup path */
    char gpu_nvml_library[PATH_MAX]; /* gpu_nvidia: what dlopen() loads */
    int64_t gpu_process_every_ms; /* gpu_nvidia: per-process (job) readings this often; 0 = every period */
    int64_t gpu_energy_every_ms;  /* gpu_nvidia: the energy counter this often; 0 = every period */
    char sources_every[512];      /* "disk=10,net=10": those sources every N periods */
    int64_t perf_sw_migrations_every; /* perf_sw: migrations (IPIs to every CPU) every N periods; 0 never */
    char perf_sw_migrations[8];   /* auto (BPF where allowed, else reads) | read */
    char cpus[256];               /* the agent's CPUs ("0" or "0,64-65"); "" = anywhere */
    char bmc_backend[16];         /* bmc_power: none | redfish | dcmi */
    int64_t bmc_interval_ms;      /* bmc_power: its thread reads the BMC this often */
    int64_t bmc_timeout_ms;       /* bmc_power: one read gives up after this */
    char bmc_url[512];            /* bmc_power redfish: https://BMC[:port], or a resource's URL */
    char bmc_chassis[128];        /* bmc_power redfish: the Chassis member id */
    char bmc_credentials_file[PATH_MAX]; /* bmc_power redfish: user:password, mode 0600 */
    char bmc_ca_file[PATH_MAX];   /* bmc_power redfish: the site CA the BMC's certificate chains to */
    char bmc_ipmitool[PATH_MAX];  /* bmc_power dcmi: ipmitool, a path or a name on PATH */
} hm_agent_config;

/* One option that was given on the command line: applied after the file,
 * and again after every reload, so flags keep overriding the file. */
typedef struct hm_config_override {
    const char *key;
    const char *value;
} hm_config_override;

void hm_config_defaults(hm_agent_config *cfg);
/* Sets the option named by its TOML key from a string (flag value). */
int hm_config_set(hm_agent_config *cfg, const char *key, const char *value, hm_error *err);
/* Reads the TOML file into cfg (keys it does not mention keep their value). */
int hm_config_load_file(hm_agent_config *cfg, const char *path, hm_error *err);
/* defaults + file (if cfg->config_path set) + overrides, then checks. */
int hm_config_build(hm_agent_config *out, const char *config_path,
                    const hm_config_override *overrides, size_t n_overrides, hm_error *err);
/* Cross-field checks (offset < period, known modes). */
int hm_config_check(const hm_agent_config *cfg, hm_error *err);

/* A group given by name or number ("" -> -1); an unknown name is an
 * error naming the key. */
int hm_config_group_id(const char *key, const char *group, long *gid, hm_error *err);
/* control.socket_mode as a number (checked by hm_config_check). */
unsigned hm_config_socket_mode(const hm_agent_config *cfg);

/* The options, one hm_options row each (the flag: "period-ms" for the key
 * "period_ms"), for main.c's command line; i < hm_config_option_count(). */
size_t hm_config_option_count(void);
const hm_option *hm_config_option(size_t i, const char **key);
/* One row per option for --help: flag, help, [TOML key]. */
void hm_config_print_help(FILE *out);

#endif
