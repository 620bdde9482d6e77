#include "config.h"

#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <grp.h>
#include <stdlib.h>

#include "app_channel.h"
#include "control.h"
#include "hm_nats_login.h"
#include "hm_parse.h"
#include "toml.h"

#ifndef HM_AGENT_PROFILE_DIR
#define HM_AGENT_PROFILE_DIR "/usr/share/hushmon/pmu"
#endif

/* One row per option: its TOML key, and the command-line flag as an
 * hm_options row (name, kind, where in hm_agent_config, range or choices,
 * help). main.c parses the flags with these rows; the values are applied
 * here by key, after the file and again after every reload. */
typedef struct option_def {
    const char *key; /* TOML key ("table.key") */
    bool list;       /* in TOML, an array of strings (joined with commas) */
    hm_option opt;
} option_def;

#define TEXT(field, choice_list)                                                              \
    .kind = HM_OPT_TEXT, .offset = offsetof(hm_agent_config, field),                          \
    .size = sizeof(((hm_agent_config *)0)->field), .choices = (choice_list),                  \
    .arg = (choice_list) != NULL ? (choice_list) : "VALUE"
#define INT(field) .kind = HM_OPT_INT64, .offset = offsetof(hm_agent_config, field), .arg = "N"

static const option_def options[] = {
    {"host", false, {.name = "host", TEXT(host, NULL), .help = "host tag on every line (default: short host name)"}},
    {"root", false, {.name = "root", TEXT(root, NULL), .help = "prefix of every /proc and /sys path (fixture trees)"}},
    {"period_ms", false, {.name = "period-ms", INT(period_ms), .min = HM_PERIOD_MS_MIN, .max = HM_PERIOD_MS_MAX, .help = "sampling period, 10 ms .. 1 h (default 1000)"}},
    {"offset_ms", false, {.name = "offset-ms", INT(offset_ms), .min = 0, .max = HM_PERIOD_MS_MAX, .help = "per-node offset from the aligned boundary (< period)"}},
    {"sources", true, {.name = "sources", TEXT(sources, NULL), .help = "comma-separated sources, or 'default' (see below)"}},
    {"sink.type", false, {.name = "sink", TEXT(sink, "spool|stdout|nats"), .help = "where batches go (default spool; nats: spool first, then JetStream)"}},
    {"sink.spool_dir", false, {.name = "spool-dir", TEXT(spool_dir, NULL), .help = "spool directory (default /var/spool/hushmon)"}},
    {"sink.file_bytes", false, {.name = "spool-file-bytes", INT(spool_file_bytes), .min = 4096, .max = INT64_C(1) << 40, .help = "close a spool file past this size (default 4M)"}},
    {"sink.total_bytes", false, {.name = "spool-total-bytes", INT(spool_total_bytes), .min = 8192, .max = INT64_C(1) << 50, .help = "keep the spool below this size, oldest files go first (default 256M)"}},
    {"sink.batch_bytes", false, {.name = "batch-bytes", INT(batch_bytes), .min = 4096, .max = INT64_C(1) << 30, .help = "capacity of one period's batch (default 1M)"}},
    {"nats.url", false, {.name = "nats-url", TEXT(nats_url, NULL), .help = "sink nats: servers, comma-separated (default nats://127.0.0.1:4222)"}},
    {"nats.rack", false, {.name = "nats-rack", TEXT(nats_rack, NULL), .help = "sink nats: rack name, subject hm.raw.<rack>.<host> (default r0)"}},
    {"nats.publish_every_ms", false, {.name = "nats-publish-every-ms", INT(nats_publish_every_ms), .min = 0, .max = 1000, .help = "sink nats: publish at most this often, periods in between wait (default 1000)"}},
    {"nats.ca_file", false, {.name = "nats-ca-file", TEXT(nats_ca_file, NULL), .help = "sink nats: TLS on, the server's certificate must chain to this CA (default $HUSHMON_NATS_CA_FILE; a setting here wins over its variable)"}},
    {"nats.cert_file", false, {.name = "nats-cert-file", TEXT(nats_cert_file, NULL), .help = "sink nats: this node's TLS certificate (default $HUSHMON_NATS_CERT_FILE)"}},
    {"nats.key_file", false, {.name = "nats-key-file", TEXT(nats_key_file, NULL), .help = "sink nats: its private key (default $HUSHMON_NATS_KEY_FILE)"}},
    {"nats.tls_hostname", false, {.name = "nats-tls-hostname", TEXT(nats_tls_hostname, NULL), .help = "sink nats: the name the server's certificate must carry (default $HUSHMON_NATS_TLS_HOSTNAME, else the URL's host)"}},
    {"control.socket", false, {.name = "socket", TEXT(socket_path, NULL), .help = "control socket path, '' for none (default /run/hushmon/agent.sock)"}},
    {"control.admin_uids", false, {.name = "admin-uids", TEXT(admin_uids, NULL), .help = "uids besides root that may do everything (announce jobs, change the measurement node-wide, reload), e.g. '1000,1001' (default none)"}},
    {"control.admin_group", false, {.name = "admin-group", TEXT(admin_group, NULL), .help = "members of this group (name or gid) are admins too (default none)"}},
    {"control.socket_mode", false, {.name = "socket-mode", TEXT(socket_mode, NULL), .help = "control socket's mode, octal; whoever may connect may ask status and act on their own jobs (default 0660)"}},
    {"control.socket_group", false, {.name = "socket-group", TEXT(socket_group, NULL), .help = "control socket's group, name or gid, e.g. the job users' group (default: the agent's)"}},
    {"control.client_idle_ms", false, {.name = "control-client-idle-ms", INT(control_client_idle_ms), .min = 10, .max = 600000, .help = "drop a control client whose request line is not complete this long after it connected or got its last answer (default 2000)"}},
    {"control.clients_per_uid", false, {.name = "control-clients-per-uid", INT(control_clients_per_uid), .min = 1, .max = HM_CONTROL_CLIENTS - HM_CONTROL_ADMIN_SLOTS, .help = "control connections one uid may hold at once; root and admins are not capped (default 2)"}},
    {"app.clients_per_uid", false, {.name = "app-clients-per-uid", INT(app_clients_per_uid), .min = 1, .max = HM_APP_CLIENTS_MAX, .help = "libhushmon connections one uid may hold at once (default 128)"}},
    {"app.idle_ms", false, {.name = "app-idle-ms", INT(app_idle_ms), .min = 0, .max = 86400000, .help = "drop a libhushmon client that sent nothing this long (it reconnects when it sends); 0 = never (default 300000)"}},
    {"app.series_per_job", false, {.name = "app-series-per-job", INT(app_series_per_job), .min = 1, .max = HM_APP_SERIES_MAX, .help = "series (rank, kind, name) one job may fill per period; the rest counted as dropped (default 512)"}},
    {"app.records_per_client", false, {.name = "app-records-per-client", INT(app_records_per_client), .min = 1, .max = INT64_C(1) << 30, .help = "records taken from one libhushmon client per period; the rest counted as dropped (default 4096)"}},
    {"pmu.mode", false, {.name = "pmu", TEXT(pmu_mode, "none|kernel|rotate"), .help = "hardware counters: none, kernel multiplexing, agent rotation (default kernel)"}},
    {"pmu.backend", false, {.name = "pmu-backend", TEXT(pmu_backend, "perf|sim"), .help = "perf_event_open, or the simulated PMU (default perf)"}},
    {"pmu.profile", false, {.name = "pmu-profile", TEXT(pmu_profile, NULL), .help = "event profile name, or 'auto' from /proc/cpuinfo"}},
    {"pmu.profile_dir", false, {.name = "pmu-profile-dir", TEXT(pmu_profile_dir, NULL), .help = "directory of profile files (*.toml)"}},
    {"pmu.sim_counters", false, {.name = "pmu-sim-counters", INT(pmu_sim_counters), .min = 0, .max = 64, .help = "general-purpose counters per CPU of the simulated PMU; 0 = the profile's (default)"}},
    {"jobs.cgroup_root", false, {.name = "cgroup-root", TEXT(cgroup_root, NULL), .help = "cgroup v2 mount under root (default sys/fs/cgroup)"}},
    {"jobs.slurm_dir", false, {.name = "slurm-dir", TEXT(slurm_dir, NULL), .help = "Slurm job cgroups under cgroup_root (default system.slice/slurmstepd.scope)"}},
    {"jobs.slurm_scan_ms", false, {.name = "slurm-scan-ms", INT(slurm_scan_ms), .min = 0, .max = 3600000, .help = "list Slurm's job cgroups this often; 0 = every period (default 5000)"}},
    {"net.link_bits_per_s", false, {.name = "net-link-bits-per-s", INT(net_link_bits_per_s), .min = 0, .max = INT64_C(1) << 50, .help = "the network links' real rate in bits/s (shaped or shared links); 0 = unknown (default)"}},
    {"ib.sysfs_root", false, {.name = "ib-sysfs-root", TEXT(ib_sysfs_root, NULL), .help = "ib: read class/infiniband under this sysfs tree instead of <root>/sys, e.g. the test bed's counters simulated from its links; '' = <root>/sys (default)"}},
    {"rapl.sysfs_root", false, {.name = "rapl-sysfs-root", TEXT(rapl_sysfs_root, NULL), .help = "rapl: read class/powercap under this sysfs tree instead of <root>/sys, e.g. the test bed's energy simulated from its nodes' CPU time; '' = <root>/sys (default)"}},
    {"scope.cgroup", false, {.name = "scope-cgroup", TEXT(scope_cgroup, NULL), .help = "node scope: CPU and memory of this cgroup (path under cgroup_root, or 'self'); '' = host-wide (default)"}},
    {"gpu.nvml_library", false, {.name = "nvml-library", TEXT(gpu_nvml_library, NULL), .help = "gpu_nvidia: NVML library to dlopen, a name or a path (default libnvidia-ml.so.1)"}},
    {"sources_every", false, {.name = "sources-every", TEXT(sources_every, NULL), .help = "sample these sources every N periods only, e.g. 'disk=10,net=10' (wall-clock aligned; default: all every period)"}},
    {"perf_sw.migrations_every", false, {.name = "perf-sw-migrations-every", INT(perf_sw_migrations_every), .min = 0, .max = 3600, .help = "perf_sw: read CPU migrations (an IPI to every CPU) every N periods; 1 = every period, 0 = never (default 10)"}},
    {"perf_sw.migrations", false, {.name = "perf-sw-migrations", TEXT(perf_sw_migrations, "auto|read"), .help = "perf_sw: count CPU migrations by BPF where allowed (no IPIs, every period), else read perf_events; read = always perf_event reads (default auto)"}},
    {"cpus", false, {.name = "cpus", TEXT(cpus, NULL), .help = "run the agent on these CPUs (a housekeeping core), e.g. '0' or '0,64'; '' = anywhere (default)"}},
    {"gpu.energy_every_ms", false, {.name = "gpu-energy-every-ms", INT(gpu_energy_every_ms), .min = 0, .max = 3600000, .help = "gpu_nvidia: read the energy counter (energy_mj, power_avg_w) this often: one read costs ~3 ms of CPU on an H100; 0 = every period (default 10000)"}},
    {"gpu.process_every_ms", false, {.name = "gpu-process-every-ms", INT(gpu_process_every_ms), .min = 0, .max = 3600000, .help = "gpu_nvidia: read GPU processes (per-job lines) this often; 0 = every period (default 5000)"}},
    {"bmc.backend", false, {.name = "bmc", TEXT(bmc_backend, "none|redfish|dcmi"), .help = "bmc_power: node power from the BMC, read by a thread of its own off the sampling path: Redfish over HTTPS, or ipmitool's DCMI power reading (default none)"}},
    {"bmc.interval_ms", false, {.name = "bmc-interval-ms", INT(bmc_interval_ms), .min = 1000, .max = 3600000, .help = "bmc_power: read the BMC this often; a reading older than 3 intervals is not published (default 10000)"}},
    {"bmc.timeout_ms", false, {.name = "bmc-timeout-ms", INT(bmc_timeout_ms), .min = 100, .max = 3600000, .help = "bmc_power: one read (HTTPS request, ipmitool run) gives up after this, at most the interval (default 5000)"}},
    {"bmc.url", false, {.name = "bmc-url", TEXT(bmc_url, NULL), .help = "bmc_power redfish: https://BMC[:port] (EnvironmentMetrics, else Power of the chassis), or the URL of the resource to read"}},
    {"bmc.chassis", false, {.name = "bmc-chassis", TEXT(bmc_chassis, NULL), .help = "bmc_power redfish: the Chassis member id, e.g. System.Embedded.1 (default 1)"}},
    {"bmc.credentials_file", false, {.name = "bmc-credentials-file", TEXT(bmc_credentials_file, NULL), .help = "bmc_power redfish: a file 'user:password', owned by the agent's user, mode 0600"}},
    {"bmc.ca_file", false, {.name = "bmc-ca-file", TEXT(bmc_ca_file, NULL), .help = "bmc_power redfish: the CA the BMC's certificate must chain to (default: the system's CAs)"}},
    {"bmc.ipmitool", false, {.name = "bmc-ipmitool", TEXT(bmc_ipmitool, NULL), .help = "bmc_power dcmi: the ipmitool to run, a path or a name on PATH (default ipmitool)"}},
};

#undef TEXT
#undef INT

static const option_def *find_option(const char *key)
{
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (strcmp(options[i].key, key) == 0)
            return &options[i];
    return NULL;
}

void hm_config_defaults(hm_agent_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if (gethostname(cfg->host, sizeof cfg->host - 1) != 0 || cfg->host[0] == '\0')
        strcpy(cfg->host, "localhost");
    char *dot = strchr(cfg->host, '.');
    if (dot != NULL)
        *dot = '\0';
    strcpy(cfg->root, "/");
    cfg->period_ms = 1000;
    cfg->perf_sw_migrations_every = 10;
    strcpy(cfg->perf_sw_migrations, "auto");
    cfg->offset_ms = 0;
    strcpy(cfg->sources, "default");
    strcpy(cfg->sink, "spool");
    strcpy(cfg->spool_dir, "/var/spool/hushmon");
    cfg->spool_file_bytes = INT64_C(4) << 20;
    cfg->spool_total_bytes = INT64_C(256) << 20;
    cfg->batch_bytes = INT64_C(1) << 20;
    strcpy(cfg->nats_url, "nats://127.0.0.1:4222");
    strcpy(cfg->nats_rack, "r0");
    cfg->nats_publish_every_ms = 1000;
    strcpy(cfg->socket_path, "/run/hushmon/agent.sock");
    snprintf(cfg->socket_mode, sizeof cfg->socket_mode, "%04o", HM_CONTROL_SOCKET_MODE);
    cfg->control_client_idle_ms = HM_CONTROL_CLIENT_IDLE_MS;
    cfg->control_clients_per_uid = HM_CONTROL_CLIENTS_PER_UID;
    cfg->app_clients_per_uid = HM_APP_CLIENTS_PER_UID;
    cfg->app_idle_ms = HM_APP_IDLE_MS;
    cfg->app_series_per_job = HM_APP_SERIES_PER_JOB;
    cfg->app_records_per_client = HM_APP_RECORDS_PER_CLIENT;
    strcpy(cfg->pmu_mode, "kernel");
    strcpy(cfg->pmu_backend, "perf");
    strcpy(cfg->pmu_profile, "auto");
    strcpy(cfg->pmu_profile_dir, HM_AGENT_PROFILE_DIR);
    cfg->pmu_sim_counters = 0; /* the profile's gp_counters */
    strcpy(cfg->cgroup_root, "sys/fs/cgroup");
    strcpy(cfg->slurm_dir, "system.slice/slurmstepd.scope");
    cfg->slurm_scan_ms = 5000;
    strcpy(cfg->gpu_nvml_library, "libnvidia-ml.so.1");
    cfg->gpu_process_every_ms = 5000;
    cfg->gpu_energy_every_ms = 10000;
    strcpy(cfg->bmc_backend, "none");
    cfg->bmc_interval_ms = 10000;
    cfg->bmc_timeout_ms = 5000;
    strcpy(cfg->bmc_chassis, "1");
    strcpy(cfg->bmc_ipmitool, "ipmitool");
}

static int set_string(const option_def *o, hm_agent_config *cfg, const char *value, hm_error *err)
{
    int index;
    if (o->opt.choices != NULL && !hm_options_choice(o->opt.choices, value, &index))
        return hm_error_set(err, "%s: '%s' is not one of %s", o->key, value, o->opt.choices);
    if (strlen(value) >= o->opt.size)
        return hm_error_set(err, "%s: value too long (max %zu characters)", o->key,
                            o->opt.size - 1);
    strcpy((char *)cfg + o->opt.offset, value);
    return 0;
}

int hm_config_set(hm_agent_config *cfg, const char *key, const char *value, hm_error *err)
{
    const option_def *o = find_option(key);
    if (o == NULL)
        return hm_error_set(err, "unknown option '%s'", key);
    /* Named by the key, from a flag as from the file. */
    if (o->opt.kind == HM_OPT_INT64) {
        int64_t v;
        if (hm_parse_int64(value, o->opt.min, o->opt.max, 1, &v, err) < 0)
            return hm_error_wrap(err, "%s", o->key);
        memcpy((char *)cfg + o->opt.offset, &v, sizeof v);
        return 0;
    }
    return set_string(o, cfg, value, err);
}

/* TOML array of strings -> "a,b,c". */
static int join_list(const hm_toml_entry *e, char *out, size_t size, const char *source,
                     hm_error *err)
{
    if (e->value.type == HM_TOML_STRING) {
        if (strlen(e->value.str) >= size)
            return hm_error_set(err, "%s:%d: '%s' too long", source, e->line, e->key);
        strcpy(out, e->value.str);
        return 0;
    }
    if (e->value.type != HM_TOML_ARRAY || (e->value.n > 0 && e->value.item_type != HM_TOML_STRING))
        return hm_error_set(err, "%s:%d: '%s' must be an array of strings", source, e->line, e->key);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < e->value.n; i++) {
        size_t len = strlen(e->value.items[i]);
        if (used + len + 2 > size)
            return hm_error_set(err, "%s:%d: '%s' too long", source, e->line, e->key);
        if (i > 0)
            out[used++] = ',';
        memcpy(out + used, e->value.items[i], len + 1);
        used += len;
    }
    return 0;
}

int hm_config_load_file(hm_agent_config *cfg, const char *path, hm_error *err)
{
    hm_toml_doc doc;
    if (hm_toml_load(&doc, path, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < sizeof options / sizeof options[0] && rc == 0; i++) {
        const option_def *o = &options[i];
        hm_toml_entry *e = hm_toml_get(&doc, o->key);
        if (e == NULL)
            continue;
        if (o->opt.kind == HM_OPT_INT64) {
            if (e->value.type != HM_TOML_INT) {
                rc = hm_error_set(err, "%s:%d: '%s' must be an integer", path, e->line, o->key);
            } else if (e->value.i < o->opt.min || e->value.i > o->opt.max) {
                rc = hm_error_set(err, "%s:%d: '%s' = %lld is outside [%lld, %lld]", path, e->line,
                                  o->key, (long long)e->value.i, (long long)o->opt.min,
                                  (long long)o->opt.max);
            } else {
                memcpy((char *)cfg + o->opt.offset, &e->value.i, sizeof(int64_t));
            }
        } else if (o->list) {
            rc = join_list(e, (char *)cfg + o->opt.offset, o->opt.size, path, err);
        } else if (e->value.type != HM_TOML_STRING) {
            rc = hm_error_set(err, "%s:%d: '%s' must be a string in quotes", path, e->line, o->key);
        } else if (set_string(o, cfg, e->value.str, err) < 0) {
            rc = hm_error_wrap(err, "%s:%d", path, e->line);
        }
    }
    if (rc == 0) {
        const hm_toml_entry *unknown = hm_toml_first_unused(&doc, NULL);
        if (unknown != NULL)
            rc = hm_error_set(err, "%s:%d: unknown key '%s'", path, unknown->line, unknown->key);
    }
    hm_toml_free(&doc);
    return rc;
}

/* A NATS subject token: no '.', '*', '>' or white space, not empty. */
static int check_subject_token(const char *what, const char *value, hm_error *err)
{
    if (value[0] == '\0')
        return hm_error_set(err, "%s must not be empty with sink 'nats'", what);
    for (const char *p = value; *p; p++)
        if (*p == '.' || *p == '*' || *p == '>' || (unsigned char)*p <= ' ' || *p == 0x7f)
            return hm_error_set(err, "%s '%s' is not a NATS subject token (no '.', '*', '>', "
                                "spaces or control characters)", what, value);
    return 0;
}

/* "nats://h:p,nats://h2:p": every item non-empty, no spaces inside. */
static int check_url_list(const char *urls, hm_error *err)
{
    const char *p = urls;
    if (strspn(urls, " ,") == strlen(urls))
        return hm_error_set(err, "nats.url must name at least one server");
    while (*p) {
        size_t len = strcspn(p, ",");
        size_t lead = strspn(p, " ");
        size_t body = len > lead ? len - lead : 0;
        while (body > 0 && p[lead + body - 1] == ' ')
            body--;
        if (body == 0 || memchr(p + lead, ' ', body) != NULL)
            return hm_error_set(err, "nats.url '%s': expected a comma list of servers "
                                "(nats://host:port,...)", urls);
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

int hm_config_group_id(const char *key, const char *group, long *gid, hm_error *err)
{
    *gid = -1;
    if (group[0] == '\0')
        return 0;
    char *end = NULL;
    long v = strtol(group, &end, 10);
    if (end != group && *end == '\0' && v >= 0) {
        *gid = v;
        return 0;
    }
    const struct group *g = getgrnam(group);
    if (g == NULL)
        return hm_error_set(err, "%s: no group '%s' on this host", key, group);
    *gid = (long)g->gr_gid;
    return 0;
}

unsigned hm_config_socket_mode(const hm_agent_config *cfg)
{
    return (unsigned)strtoul(cfg->socket_mode, NULL, 8);
}

int hm_config_check(const hm_agent_config *cfg, hm_error *err)
{
    if (cfg->offset_ms >= cfg->period_ms)
        return hm_error_set(err, "offset_ms (%lld) must be less than period_ms (%lld)",
                            (long long)cfg->offset_ms, (long long)cfg->period_ms);
    if (cfg->host[0] == '\0')
        return hm_error_set(err, "host must not be empty");
    if (cfg->root[0] == '\0')
        return hm_error_set(err, "root must not be empty");
    if ((strcmp(cfg->sink, "spool") == 0 || strcmp(cfg->sink, "nats") == 0) &&
        cfg->spool_dir[0] == '\0')
        return hm_error_set(err, "sink '%s' needs spool_dir", cfg->sink);
    if (strcmp(cfg->sink, "nats") == 0 &&
        (check_subject_token("nats.rack", cfg->nats_rack, err) < 0 ||
         check_subject_token("host", cfg->host, err) < 0 || check_url_list(cfg->nats_url, err) < 0 ||
         hm_nats_tls_readable("nats.ca_file", cfg->nats_ca_file, err) < 0 ||
         hm_nats_tls_readable("nats.cert_file", cfg->nats_cert_file, err) < 0 ||
         hm_nats_tls_readable("nats.key_file", cfg->nats_key_file, err) < 0))
        return -1;
    if ((cfg->nats_cert_file[0] == '\0') != (cfg->nats_key_file[0] == '\0'))
        return hm_error_set(err, "nats.cert_file and nats.key_file go together (set both or neither)");
    if (cfg->spool_total_bytes < 2 * cfg->spool_file_bytes)
        return hm_error_set(err, "sink.total_bytes must be at least twice sink.file_bytes");
    if (strcmp(cfg->bmc_backend, "none") != 0 && cfg->bmc_timeout_ms > cfg->bmc_interval_ms)
        return hm_error_set(err, "bmc.timeout_ms (%lld) must be at most bmc.interval_ms (%lld)",
                            (long long)cfg->bmc_timeout_ms, (long long)cfg->bmc_interval_ms);
    if (strcmp(cfg->bmc_backend, "redfish") == 0 && strncmp(cfg->bmc_url, "https://", 8) != 0)
        return hm_error_set(err, "bmc.backend redfish needs bmc.url https://BMC[:port] (HTTPS "
                                 "only: the request carries the BMC's password)");
    if (strstr(cfg->scope_cgroup, "..") != NULL)
        return hm_error_set(err, "scope.cgroup must not contain '..' (a path under cgroup_root)");
    size_t digits = strspn(cfg->socket_mode, "01234567");
    if (digits == 0 || cfg->socket_mode[digits] != '\0' || hm_config_socket_mode(cfg) > 0777)
        return hm_error_set(err, "control.socket_mode '%s' is not an octal mode (0600 .. 0777)",
                            cfg->socket_mode);
    if ((hm_config_socket_mode(cfg) & 0600) != 0600)
        return hm_error_set(err, "control.socket_mode %s: the agent's own user needs rw (06xx)",
                            cfg->socket_mode);
    long gid;
    if (hm_config_group_id("control.admin_group", cfg->admin_group, &gid, err) < 0 ||
        hm_config_group_id("control.socket_group", cfg->socket_group, &gid, err) < 0)
        return -1;
    return 0;
}

int hm_config_build(hm_agent_config *out, const char *config_path,
                    const hm_config_override *overrides, size_t n_overrides, hm_error *err)
{
    hm_agent_config cfg;
    hm_config_defaults(&cfg);
    if (config_path != NULL && config_path[0] != '\0') {
        if (strlen(config_path) >= sizeof cfg.config_path)
            return hm_error_set(err, "config path too long");
        strcpy(cfg.config_path, config_path);
        if (hm_config_load_file(&cfg, config_path, err) < 0)
            return -1;
    }
    for (size_t i = 0; i < n_overrides; i++)
        if (hm_config_set(&cfg, overrides[i].key, overrides[i].value, err) < 0)
            return -1;
    if (hm_config_check(&cfg, err) < 0)
        return -1;
    *out = cfg;
    return 0;
}

size_t hm_config_option_count(void)
{
    return sizeof options / sizeof options[0];
}

const hm_option *hm_config_option(size_t i, const char **key)
{
    *key = options[i].key;
    return &options[i].opt;
}

void hm_config_print_help(FILE *out)
{
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        char key[80];
        snprintf(key, sizeof key, "  [%s]", options[i].key);
        hm_option_print(&options[i].opt, key, out);
    }
}
