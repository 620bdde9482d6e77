/* The agent's plumbing: line protocol formatting, counter wraps and
 * resets, the TOML subset and config errors, job ids, boundary alignment,
 * and the spool sink's rotation, bound and crash recovery. */
#include <dirent.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "bpf_count.h"
#include "perf_event.h"
#include "config.h"
#include "counter.h"
#include "entity.h"
#include "hm_timer.h"
#include "hm_test.h"
#include "jobs.h"
#include "lp.h"
#include "procfile.h"
#include "sinks/sink.h"
#include "toml.h"

static void test_lp(hm_test_counts *c)
{
    char num[32];
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 12.5)] = 0, num), "12.5"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 100.0)] = 0, num), "100"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 0.000123)] = 0, num), "0.000123"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, -3.25)] = 0, num), "-3.25"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 0.0)] = 0, num), "0"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 2.5e17)] = 0, num), "2.5e+17"));
    /* rounding that carries into the integer part, trailing zeros, six decimals */
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 999.9996)] = 0, num), "1000"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 0.9999996)] = 0, num), "1"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 12.005)] = 0, num), "12.005"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 7.1)] = 0, num), "7.1"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, 0.10203)] = 0, num), "0.10203"));
    CHECK(c, !strcmp((num[hm_lp_format_double(num, -0.5)] = 0, num), "-0.5"));

    hm_lp lp;
    hm_error err;
    CHECK(c, hm_lp_init(&lp, 256, "node 1,a=b", &err) == 0);
    hm_lp_reset(&lp, 1732270000000000000);
    hm_lp_begin(&lp, "disk");
    hm_lp_tag(&lp, "device", "sd a");
    hm_lp_field_f64(&lp, "busy_pct", NAN); /* absent */
    hm_lp_field_f64(&lp, "reads_per_s", 1.5);
    hm_lp_field_i64(&lp, "count", -7);
    hm_lp_end(&lp);
    hm_lp_begin(&lp, "empty");
    hm_lp_field_f64(&lp, "x", NAN);
    hm_lp_end(&lp); /* no field: rolled back */
    lp.buf[lp.len] = '\0';
    CHECK(c, !strcmp(lp.buf, "disk,host=node\\ 1\\,a\\=b,device=sd\\ a reads_per_s=1.5,count=-7i "
                             "1732270000000000000\n"));
    CHECK(c, lp.lines == 1);
    /* A line that does not fit is dropped whole and counted. */
    for (int i = 0; i < 10; i++) {
        hm_lp_begin(&lp, "a_rather_long_measurement_name");
        hm_lp_field_f64(&lp, "value_with_a_long_name", 1.0);
        hm_lp_end(&lp);
    }
    CHECK(c, lp.lines_dropped > 0);
    CHECK(c, lp.len <= lp.cap && lp.buf[lp.len - 1] == '\n');
    /* The next batch's lines all carry its own timestamp (negative too). */
    hm_lp_reset(&lp, -5);
    for (int i = 0; i < 2; i++) {
        hm_lp_begin(&lp, "m");
        hm_lp_field_f64(&lp, "v", i);
        hm_lp_end(&lp);
    }
    lp.buf[lp.len] = '\0';
    CHECK(c, !strcmp(lp.buf, "m,host=node\\ 1\\,a\\=b v=0 -5\nm,host=node\\ 1\\,a\\=b v=1 -5\n"));
    hm_lp_free(&lp);
}

static void test_counters(hm_test_counts *c)
{
    uint64_t d;
    CHECK(c, hm_counter_delta(10, 25, 64, &d) && d == 15);
    CHECK(c, hm_counter_delta(4294967000u, 704, 32, &d) && d == 1000); /* wrap */
    CHECK(c, !hm_counter_delta(5000, 10, 32, &d));                      /* reset */
    CHECK(c, !hm_counter_delta(UINT64_C(1) << 40, 10, 32, &d));         /* 64-bit value, reset */
    CHECK(c, !hm_counter_delta(100, 10, 64, &d));
    CHECK_NEAR(c, hm_counter_rate(0, 100, 64, 2.0), 50.0, 0);
    CHECK(c, isnan(hm_counter_rate(0, 100, 64, 0.0)));
    CHECK(c, isnan(hm_counter_rate(100, 0, 64, 1.0)));
}

static void test_scan(hm_test_counts *c)
{
    const char *cases[][2] = {
        {"0", "0"},
        {"  42 rest", "42"},
        {"18446744073709551615", "18446744073709551615"}, /* UINT64_MAX exactly */
        {"18446744073709551616", "18446744073709551615"}, /* saturates */
        {"999999999999999999999999999", "18446744073709551615"},
        {"1234567890123456789", "1234567890123456789"},  /* 19 digits */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hm_scan s = hm_scan_of(cases[i][0], strlen(cases[i][0]));
        uint64_t v = 0;
        CHECK(c, hm_scan_u64(&s, &v));
        CHECK(c, v == strtoull(cases[i][1], NULL, 10));
        CHECK(c, s.p == s.end || *s.p == ' '); /* all digits consumed */
    }
    hm_scan s = hm_scan_of("kB", 2);
    uint64_t v;
    CHECK(c, !hm_scan_u64(&s, &v));
    /* keys at the start of a line only, found again after they move */
    const char *text = "xMemFree: 1\nMemFree: 2\nMemTotal: 3\n";
    hm_key_hint h = {.key = "MemFree"};
    hm_scan k = hm_find_key(text, strlen(text), &h);
    CHECK(c, hm_scan_char(&k, ':') && hm_scan_u64(&k, &v) && v == 2);
    const char *moved = "MemTotal: 3\nMemFree: 22\n";
    k = hm_find_key(moved, strlen(moved), &h);
    CHECK(c, hm_scan_char(&k, ':') && hm_scan_u64(&k, &v) && v == 22);
    hm_key_hint none = {.key = "Shmem"};
    k = hm_find_key(moved, strlen(moved), &none);
    CHECK(c, k.p == k.end);
}

static void test_entities(hm_test_counts *c)
{
    hm_entity_table t;
    hm_error err;
    bool created;
    CHECK(c, hm_entity_table_init(&t, 2, &err) == 0);
    hm_entity *a = hm_entity_get(&t, "eth0", 4, 1, &created);
    CHECK(c, a != NULL && created && !strcmp(a->name, "eth0"));
    a->prev[0] = 42;
    CHECK(c, hm_entity_get(&t, "ib0", 3, 1, &created) != NULL && created);
    /* same name again: same state, not created */
    CHECK(c, hm_entity_get(&t, "eth0", 4, 2, &created) == a && !created && a->prev[0] == 42);
    CHECK(c, hm_entity_get(&t, "ib0", 3, 2, &created) != NULL);
    /* full, and both devices still present: the newcomer is refused */
    CHECK(c, hm_entity_get(&t, "eth1", 4, 2, &created) == NULL);
    /* ib0 vanished (not seen at 3): at 4 its slot goes to a new device */
    CHECK(c, hm_entity_get(&t, "eth0", 4, 3, &created) == a);
    hm_entity *n = hm_entity_get(&t, "eth1", 4, 4, &created);
    CHECK(c, n != NULL && created && !n->have_prev && !strcmp(n->name, "eth1"));
    hm_entity_table_free(&t);
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static void test_config(hm_test_counts *c)
{
    hm_toml_doc doc;
    hm_error err;
    CHECK(c, hm_toml_parse(&doc, "a = 1_000\n[t]\nb = \"x\\ty\" # c\nl = [\"p\", \"q\"]\nf = 2.5\n"
                                 "z = true\n", "mem", &err) == 0);
    int64_t i;
    double f;
    char s[16];
    bool z;
    CHECK(c, hm_toml_get_int(&doc, "a", &i, &err) == 1 && i == 1000);
    CHECK(c, hm_toml_get_string(&doc, "t.b", s, sizeof s, &err) == 1 && !strcmp(s, "x\ty"));
    CHECK(c, hm_toml_get_double(&doc, "t.f", &f, &err) == 1 && f == 2.5);
    CHECK(c, hm_toml_get_bool(&doc, "t.z", &z, &err) == 1 && z);
    CHECK(c, hm_toml_get_int(&doc, "t.b", &i, &err) == -1);
    hm_toml_free(&doc);
    const char *bad[][2] = {
        {"a = \"open\n", "mem:1: unterminated string"},
        {"a 1\n", "mem:1: expected '=' after key"},
        {"a = 1\na = 2\n", "mem:2: key 'a' defined twice"},
        {"[t\n", "mem:1: expected ']' after table name"},
        {"a = [1, \"x\"]\n", "mem:1: array mixes strings and numbers"},
        {"a = 12abc\n", "mem:1: bad number '12abc'"},
        {"a = 1 b\n", "mem:1: unexpected text after value"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CHECK(c, hm_toml_parse(&doc, bad[k][0], "mem", &err) == -1);
        if (strcmp(err.msg, bad[k][1]) != 0)
            fprintf(stderr, "got '%s' want '%s'\n", err.msg, bad[k][1]);
        CHECK(c, strcmp(err.msg, bad[k][1]) == 0);
    }

    const char *path = "/tmp/hm_test_agent.toml";
    hm_agent_config cfg;
    CHECK(c, write_file(path, "period_ms = 500\nsources = [\"cpu\", \"mem\"]\n[sink]\ntype = \"stdout\"\n"
                              "[pmu]\nmode = \"rotate\"\n") == 0);
    hm_config_override o[] = {{"period_ms", "250"}};
    CHECK(c, hm_config_build(&cfg, path, o, 1, &err) == 0);
    CHECK(c, cfg.period_ms == 250); /* flag beats file */
    CHECK(c, !strcmp(cfg.sources, "cpu,mem") && !strcmp(cfg.sink, "stdout") &&
                 !strcmp(cfg.pmu_mode, "rotate"));
    CHECK(c, write_file(path, "perod_ms = 500\n") == 0);
    CHECK(c, hm_config_build(&cfg, path, NULL, 0, &err) == -1);
    CHECK(c, strstr(err.msg, ":1: unknown key 'perod_ms'") != NULL);
    CHECK(c, write_file(path, "period_ms = 5\n") == 0);
    CHECK(c, hm_config_build(&cfg, path, NULL, 0, &err) == -1);
    CHECK(c, strstr(err.msg, "'period_ms' = 5 is outside [10, 3600000]") != NULL);
    CHECK(c, write_file(path, "[pmu]\nmode = \"sometimes\"\n") == 0);
    CHECK(c, hm_config_build(&cfg, path, NULL, 0, &err) == -1);
    CHECK(c, strstr(err.msg, "'sometimes' is not one of none|kernel|rotate") != NULL);
    hm_config_override off[] = {{"period_ms", "100"}, {"offset_ms", "100"}};
    CHECK(c, hm_config_build(&cfg, NULL, off, 2, &err) == -1);
    CHECK(c, strstr(err.msg, "offset_ms (100) must be less than period_ms (100)") != NULL);
    CHECK(c, hm_agent_check_sources("cpu,bogus", &err) == -1);
    CHECK(c, strstr(err.msg, "unknown source 'bogus' (known: node, cpu, load") != NULL);
    hm_config_override up[] = {{"scope.cgroup", "testbed/../../etc"}};
    CHECK(c, hm_config_build(&cfg, NULL, up, 1, &err) == -1);
    CHECK(c, strstr(err.msg, "scope.cgroup must not contain '..'") != NULL);
    CHECK(c, hm_config_build(&cfg, "/nonexistent/agent.toml", NULL, 0, &err) == -1);
    CHECK(c, strstr(err.msg, "opening config /nonexistent/agent.toml") != NULL);
    remove(path);
}

static void test_jobs_and_alignment(hm_test_counts *c)
{
    hm_jobs jobs;
    memset(&jobs, 0, sizeof jobs);
    hm_error err;
    CHECK(c, hm_jobs_begin(&jobs, "42", "slurm/job_42", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_begin(&jobs, "42", NULL, HM_JOB_SLURM, &err) == 0);
    CHECK(c, hm_jobs_count(&jobs) == 1);
    CHECK(c, hm_jobs_end(&jobs, "42", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_count(&jobs) == 1); /* Slurm still has it */
    CHECK(c, hm_jobs_end(&jobs, "42", HM_JOB_SLURM, &err) == 0 && hm_jobs_count(&jobs) == 0);
    CHECK(c, hm_jobs_end(&jobs, "42", HM_JOB_SLURM, &err) == -1);
    CHECK(c, hm_jobs_begin(&jobs, "a b", NULL, HM_JOB_ANNOUNCED, &err) == -1);
    CHECK(c, hm_jobs_begin(&jobs, "7", "../../etc", HM_JOB_ANNOUNCED, &err) == -1);

    /* An ended job keeps its slot, not running, until its last job line is
     * written; begun again before that, it takes the same slot (one line). */
    hm_job *j42 = &jobs.job[0];
    CHECK(c, strcmp(j42->id, "42") == 0 && !j42->used && j42->ending);
    CHECK(c, hm_jobs_find(&jobs, "42") == NULL);
    CHECK(c, hm_jobs_begin(&jobs, "42", NULL, HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_find(&jobs, "42") == j42 && j42->used && !j42->ending);
    CHECK(c, hm_jobs_end(&jobs, "42", HM_JOB_ANNOUNCED, &err) == 0 && j42->ending);
    CHECK(c, hm_jobs_begin(&jobs, "43", NULL, HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, j42->ending && hm_jobs_find(&jobs, "43") != j42); /* a free slot first */
    hm_jobs_written(&jobs);
    CHECK(c, !j42->ending && !j42->used);
    /* A table of jobs that all ended in this period still takes a new one. */
    memset(&jobs, 0, sizeof jobs);
    for (int i = 0; i < HM_JOBS_MAX; i++) {
        char id[16];
        snprintf(id, sizeof id, "%d", i);
        CHECK(c, hm_jobs_begin(&jobs, id, NULL, HM_JOB_ANNOUNCED, &err) == 0);
        CHECK(c, hm_jobs_end(&jobs, id, HM_JOB_ANNOUNCED, &err) == 0);
    }
    CHECK(c, hm_jobs_begin(&jobs, "new", NULL, HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_count(&jobs) == 1);

    /* A process's job from its /proc/PID/cgroup (the GPU source and the
     * application channel share this): any line, a path at or below the
     * job's cgroup, never a sibling whose name the job's is a prefix of;
     * on a hybrid machine the v2 line's "/x" is the job cgroup "unified/x"
     * and no v1 line's. */
    memset(&jobs, 0, sizeof jobs);
    CHECK(c, hm_jobs_begin(&jobs, "1", "slurm/job_1", HM_JOB_SLURM, &err) == 0);
    CHECK(c, hm_jobs_begin(&jobs, "7", "unified/bed/n1/job_7", HM_JOB_ANNOUNCED, &err) == 0);
    CHECK(c, hm_jobs_begin(&jobs, "9", NULL, HM_JOB_ANNOUNCED, &err) == 0); /* no cgroup */
    int j1 = (int)(hm_jobs_find(&jobs, "1") - jobs.job);
    int j7 = (int)(hm_jobs_find(&jobs, "7") - jobs.job);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "0::/slurm/job_1/step_0\n") == j1);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "0::/slurm/job_1") == j1); /* no newline */
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "0::/slurm/job_10\n") == -1);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "4:cpu,cpuacct:/slurm/job_1/step_0\n") == j1);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "4:memory:/bed/n1\n0::/bed/n1/job_7/t\n") == j7);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "4:memory:/bed/n1/job_7\n") == -1);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "4:memory:/unified/bed/n1/job_7\n") == j7);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "0::/\n") == -1);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "garbage\n") == -1);
    CHECK(c, hm_jobs_of_proc_cgroup(&jobs, "") == -1);

    int64_t s = 1000000000;
    CHECK(c, hm_agent_next_boundary(5 * s + 1, s, 0) == 6 * s);
    CHECK(c, hm_agent_next_boundary(5 * s, s, 0) == 6 * s); /* strictly after */
    CHECK(c, hm_agent_next_boundary(5 * s + 1, s, 250000000) == 5 * s + 250000000);
    CHECK(c, hm_agent_next_boundary(5 * s + 300000000, s, 250000000) == 6 * s + 250000000);
}

static size_t list(const char *dir, const char *suffix, char names[][256], size_t max)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name), sl = strlen(suffix);
        if (len > sl && !strcmp(de->d_name + len - sl, suffix) && n < max)
            snprintf(names[n++], 256, "%s", de->d_name);
    }
    if (d)
        closedir(d);
    return n;
}

static void test_spool(hm_test_counts *c)
{
    char dir[] = "/tmp/hm_spool_XXXXXX";
    CHECK(c, mkdtemp(dir) != NULL);
    hm_agent_config cfg;
    hm_config_defaults(&cfg);
    strcpy(cfg.spool_dir, dir);
    strcpy(cfg.host, "n1");
    cfg.spool_file_bytes = 100;
    cfg.spool_total_bytes = 300;
    hm_sink sink;
    hm_error err;
    CHECK(c, hm_sink_open(&sink, &cfg, 1000, &err) == 0);
    const char *batch = "m,host=n1 v=1 1732270000000000000\n"; /* 35 bytes, 1 line */
    for (int i = 0; i < 5; i++)
        CHECK(c, sink.ops->write(sink.state, batch, strlen(batch), 1, &err) == 0);
    char names[32][256];
    /* 2 batches fit in 100 bytes: after 5, two closed files + one open */
    CHECK(c, list(dir, ".lp", names, 32) == 2);
    CHECK(c, list(dir, ".lp.open", names, 32) == 1);
    char path[512];
    snprintf(path, sizeof path, "%s/n1-1000-0.lp", dir);
    struct stat st;
    CHECK(c, stat(path, &st) == 0 && st.st_size == (off_t)(2 * strlen(batch)));
    /* Over the 300-byte bound: oldest files go, their lines are counted. */
    for (int i = 0; i < 8; i++)
        CHECK(c, sink.ops->write(sink.state, batch, strlen(batch), 1, &err) == 0);
    CHECK(c, sink.ops->dropped_lines(sink.state) > 0);
    CHECK(c, stat(path, &st) != 0); /* the oldest was removed */
    uint64_t dropped = sink.ops->dropped_lines(sink.state);
    CHECK(c, dropped % 2 == 0); /* whole files of 2 lines */
    CHECK(c, sink.ops->flush(sink.state, &err) == 0);
    CHECK(c, list(dir, ".lp.open", names, 32) == 0);
    CHECK(c, hm_sink_close(&sink, &err) == 0);

    /* A crash leaves a .lp.open with half a line: the next start keeps the
     * complete lines and closes it. */
    snprintf(path, sizeof path, "%s/n1-2000-3.lp.open", dir);
    CHECK(c, write_file(path, "m,host=n1 v=1 1\nm,host=n1 v=2 2\nm,host=n1 v=") == 0);
    cfg.spool_total_bytes = 1 << 20;
    CHECK(c, hm_sink_open(&sink, &cfg, 3000, &err) == 0);
    snprintf(path, sizeof path, "%s/n1-2000-3.lp", dir);
    CHECK(c, stat(path, &st) == 0 && st.st_size == 32);
    CHECK(c, list(dir, ".lp.open", names, 32) == 0);
    CHECK(c, hm_sink_close(&sink, &err) == 0);

    /* An unwritable spool directory is a clear error. */
    strcpy(cfg.spool_dir, "/proc/hm_no_such_dir/spool");
    CHECK(c, hm_sink_open(&sink, &cfg, 1, &err) == -1);
    CHECK(c, strstr(err.msg, "sink spool: creating /proc/hm_no_such_dir") != NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(c, system(cmd) == 0);
}

/* A one-connection server in a child process: answers the first request
 * line with `answer` (NULL: closes without answering). */
static pid_t serve_once(const char *path, const char *answer)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 1) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int cl = accept(fd, NULL, NULL);
        char buf[256];
        ssize_t n = cl >= 0 ? read(cl, buf, sizeof buf) : -1;
        if (n > 0 && answer != NULL && write(cl, answer, strlen(answer)) < 0)
            _exit(1);
        _exit(0);
    }
    close(fd);
    return pid;
}

static void test_control_client(hm_test_counts *c)
{
    char dir[] = "/tmp/hm_control_client_XXXXXX";
    CHECK(c, mkdtemp(dir) != NULL);
    char path[100], reply[HM_CONTROL_LINE_MAX];
    hm_error err;
    /* No socket file: fails at once, naming it. */
    snprintf(path, sizeof path, "%s/none.sock", dir);
    CHECK(c, hm_control_send(path, "status", 3000, reply, sizeof reply, &err) == -1);
    CHECK(c, strstr(err.msg, "connecting to ") && strstr(err.msg, "none.sock: No such file"));
    /* An answer: one line, newline removed. */
    snprintf(path, sizeof path, "%s/ok.sock", dir);
    pid_t pid = serve_once(path, "ok job 42 begins\n");
    CHECK(c, pid > 0);
    CHECK(c, hm_control_send(path, "job begin 42", 3000, reply, sizeof reply, &err) == 0);
    CHECK(c, strcmp(reply, "ok job 42 begins") == 0);
    int status;
    CHECK(c, waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* A listener that never answers: gives up at the timeout, not later. */
    snprintf(path, sizeof path, "%s/silent.sock", dir);
    int silent = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    CHECK(c, bind(silent, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(silent, 1) == 0);
    int64_t t0 = hm_monotonic_ns();
    CHECK(c, hm_control_send(path, "status", 200, reply, sizeof reply, &err) == -1);
    double waited_ms = (double)(hm_monotonic_ns() - t0) / 1e6;
    CHECK(c, waited_ms >= 190 && waited_ms < 1500);
    CHECK(c, strstr(err.msg, "silent.sock within 200 ms") != NULL);
    close(silent);
    /* Closed without an answer. */
    snprintf(path, sizeof path, "%s/rude.sock", dir);
    pid = serve_once(path, NULL);
    CHECK(c, pid > 0);
    CHECK(c, hm_control_send(path, "status", 3000, reply, sizeof reply, &err) == -1);
    CHECK(c, strstr(err.msg, "closed the connection without answering") != NULL);
    CHECK(c, waitpid(pid, &status, 0) == pid);
    /* Not one line: refused before anything is sent. */
    CHECK(c, hm_control_send(path, "status\nflush", 3000, reply, sizeof reply, &err) == -1);
    CHECK(c, strstr(err.msg, "one non-empty line") != NULL);
    CHECK(c, hm_control_send("", "status", 3000, reply, sizeof reply, &err) == -1);
    CHECK(c, strstr(err.msg, "no control socket configured") != NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(c, system(cmd) == 0);
}

/* Migrations counted by BPF equal the kernel's own per-CPU counts
 * (perf_event reads) over the same time: this thread moved between two
 * CPUs 200 times. Skipped where BPF is not allowed (not root) or with one
 * CPU. */
static void test_bpf_count(hm_test_counts *c)
{
    cpu_set_t orig;
    CHECK(c, sched_getaffinity(0, sizeof orig, &orig) == 0);
    int cpus[2], found = 0;
    for (int i = 0; i < CPU_SETSIZE && found < 2; i++)
        if (CPU_ISSET(i, &orig))
            cpus[found++] = i;
    hm_bpf_count b;
    hm_error err;
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (found < 2 || ncpu > 256) {
        fprintf(stderr, "test_bpf_count skipped: needs 2 CPUs (at most 256)\n");
        return;
    }
    if (hm_bpf_count_open(&b, PERF_COUNT_SW_CPU_MIGRATIONS, (size_t)ncpu, &err) < 0) {
        fprintf(stderr, "test_bpf_count skipped: %s\n", err.msg);
        return;
    }
    int fd[256];
    for (int i = 0; i < ncpu; i++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_MIGRATIONS;
        fd[i] = hm_perf_event_open(&a, -1, i, -1, PERF_FLAG_FD_CLOEXEC);
    }
    uint64_t b0 = 0, b1 = 0, p0 = 0, p1 = 0, v;
    CHECK(c, hm_bpf_count_read(&b, &b0, &err) == 0);
    for (int i = 0; i < ncpu; i++)
        p0 += fd[i] >= 0 && read(fd[i], &v, sizeof v) == (ssize_t)sizeof v ? v : 0;
    for (int k = 0; k < 200; k++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[k % 2], &one);
        CHECK(c, sched_setaffinity(0, sizeof one, &one) == 0);
    }
    for (int i = 0; i < ncpu; i++)
        p1 += fd[i] >= 0 && read(fd[i], &v, sizeof v) == (ssize_t)sizeof v ? v : 0;
    CHECK(c, hm_bpf_count_read(&b, &b1, &err) == 0);
    CHECK(c, sched_setaffinity(0, sizeof orig, &orig) == 0);
    uint64_t by_bpf = b1 - b0, by_perf = p1 - p0;
    bool close_enough = by_bpf + 2 >= by_perf && by_bpf <= by_perf + by_perf / 20 + 2;
    if (by_perf < 199 || !close_enough)
        fprintf(stderr, "migrations: bpf %llu, perf %llu\n", (unsigned long long)by_bpf,
                (unsigned long long)by_perf);
    CHECK(c, by_perf >= 199); /* every move is one (the first may not be) */
    CHECK(c, close_enough);
    for (int i = 0; i < ncpu; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    hm_bpf_count_close(&b);
}

/* Lines of batch that begin with prefix. */
static int count_lines(const char *buf, size_t len, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < len; i++)
        if ((i == 0 || buf[i - 1] == '\n') && len - i >= pl && memcmp(buf + i, prefix, pl) == 0)
            n++;
    return n;
}

/* sources_every: a listed source is sampled on every N-th wall-clock
 * period (the same periods on every node), the others every period; a
 * bad list is refused at start and at reload leaves the agent as it was. */
static void test_sources_every(hm_test_counts *c)
{
    char dir[] = "/tmp/hm_agent_every_XXXXXX";
    CHECK(c, mkdtemp(dir) != NULL);
    hm_config_override o[] = {
        {"root", "tests/fixtures/agent/t0"}, {"sources", "load,vm"},
        {"sources_every", "vm=5"},           {"sink.spool_dir", dir},
        {"control.socket", ""},              {"host", "n1"},
    };
    hm_agent_config cfg;
    hm_agent a;
    hm_error err;
    CHECK(c, hm_config_build(&cfg, NULL, o, 6, &err) == 0);
    CHECK(c, hm_agent_init(&a, &cfg, o, 6, &err) == 0);
    int load = 0, vm = 0, vm_at[20] = {0};
    int64_t t0 = INT64_C(1732270000) * 1000000000; /* a multiple of 5 s */
    for (int k = 0; k < 20; k++) {
        CHECK(c, hm_agent_cycle(&a, t0 + k * INT64_C(1000000000), (k + 1) * INT64_C(1000000000), &err) == 0);
        load += count_lines(a.lp.buf, a.lp.len, "load,");
        vm_at[k] = count_lines(a.lp.buf, a.lp.len, "vm,");
        vm += vm_at[k];
    }
    CHECK(c, load == 20);
    /* periods 0, 5, 10, 15 read vm; the first only primes the rates */
    CHECK(c, vm == 3 && vm_at[5] == 1 && vm_at[10] == 1 && vm_at[15] == 1);
    hm_agent_fini(&a);

    hm_config_override bad[] = {{"root", "tests/fixtures/agent/t0"}, {"sources", "load"},
                                {"sources_every", "disk=0"}, {"sink.spool_dir", dir},
                                {"control.socket", ""}};
    CHECK(c, hm_config_build(&cfg, NULL, bad, 5, &err) == 0);
    CHECK(c, hm_agent_init(&a, &cfg, bad, 5, &err) < 0 && strstr(err.msg, "'disk=0'") != NULL);
    bad[2].value = "nosuch=3";
    CHECK(c, hm_config_build(&cfg, NULL, bad, 5, &err) == 0);
    CHECK(c, hm_agent_init(&a, &cfg, bad, 5, &err) < 0 && strstr(err.msg, "unknown source 'nosuch'"));

    CHECK(c, hm_agent_pin("0-1x", &err) < 0 && strstr(err.msg, "expected a list") != NULL);
    CHECK(c, hm_agent_pin("3-1", &err) < 0 && strstr(err.msg, "bad range") != NULL);
    CHECK(c, hm_agent_pin("", &err) < 0 && strstr(err.msg, "no CPU") != NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(c, system(cmd) == 0);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_sources_every(&c);
    test_bpf_count(&c);
    test_lp(&c);
    test_counters(&c);
    test_entities(&c);
    test_scan(&c);
    test_config(&c);
    test_jobs_and_alignment(&c);
    test_spool(&c);
    test_control_client(&c);
    return hm_test_finish("test_agent_core", &c);
}
