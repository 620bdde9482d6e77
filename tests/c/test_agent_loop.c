/* The daemon loop and the control socket, in-process, so that the
 * sanitizer build (`make test-asan`) runs them too: a child process runs
 * hm_agent_run on the fixture tree; the parent talks to it over its socket,
 * then stops it with SIGTERM and checks the spool. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "hm_test.h"

static int request(const char *path, const char *line, char *reply, size_t size)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        close(fd);
        return -1;
    }
    size_t len = strlen(line);
    if (write(fd, line, len) != (ssize_t)len || write(fd, "\n", 1) != 1) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t n = read(fd, reply + got, size - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (reply[got - 1] == '\n')
            break;
    }
    reply[got] = '\0';
    close(fd);
    return got > 0 ? 0 : -1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static long samples_of(const char *status)
{
    const char *p = strstr(status, "samples=");
    return p ? strtol(p + 8, NULL, 10) : -1;
}

int main(void)
{
    hm_test_counts counts = {0, 0}, *c = &counts;
    char dir[] = "/tmp/hm_agent_loop_XXXXXX";
    CHECK(c, mkdtemp(dir) != NULL);
    char sock[256], spool[256];
    snprintf(sock, sizeof sock, "%s/agent.sock", dir);
    snprintf(spool, sizeof spool, "%s/spool", dir);
    char admin[32];
    snprintf(admin, sizeof admin, "%ld", (long)getuid());
    hm_config_override o[] = {
        {"root", "tests/fixtures/agent/t0"},
        {"sources", "cpu,load,mem,vm,disk,net,ib,jobs,cgroup,pmu,self"},
        {"pmu.backend", "sim"},
        {"pmu.profile_dir", "c/agent/pmu/profiles"},
        {"pmu.profile", "skylake"}, /* named: no test leans on "auto" and the host CPU */
        {"period_ms", "20"},
        {"jobs.slurm_scan_ms", "0"},
        {"sink.spool_dir", spool},
        {"sink.file_bytes", "8192"},
        {"control.socket", sock},
        {"host", "n1"},
        {"control.admin_uids", admin},
    };
    size_t no = sizeof o / sizeof o[0];
    pid_t child = fork();
    if (child == 0) {
        hm_agent_config cfg;
        hm_error err;
        hm_agent agent;
        if (hm_config_build(&cfg, NULL, o, no, &err) < 0 ||
            hm_agent_init(&agent, &cfg, o, no, &err) < 0) {
            hm_error_print("agent", &err);
            _exit(3);
        }
        int rc = hm_agent_run(&agent, &err);
        if (rc < 0)
            hm_error_print("agent", &err);
        hm_agent_fini(&agent);
        _exit(rc < 0 ? 1 : 0);
    }
    char reply[2048] = "";
    int tries = 0;
    while (request(sock, "status", reply, sizeof reply) < 0 && tries++ < 500)
        sleep_ms(10);
    CHECK(c, strncmp(reply, "ok period_ms=20 ", 16) == 0);
    for (int i = 0; i < 300 && samples_of(reply) < 1; i++) { /* the first period */
        sleep_ms(10);
        request(sock, "status", reply, sizeof reply);
    }
    CHECK(c, strstr(reply, "jobs=1234") != NULL); /* the fixture's Slurm job */
    CHECK(c, request(sock, "job begin 7 cgroup=system.slice/slurmstepd.scope/job_1234", reply,
                     sizeof reply) == 0 &&
                 strcmp(reply, "ok job 7 begins\n") == 0);
    CHECK(c, request(sock, "frobnicate", reply, sizeof reply) == 0 &&
                 strncmp(reply, "error unknown request 'frobnicate'", 34) == 0);
    /* The retired `period MS` is an unknown request now. */
    CHECK(c, request(sock, "period 15", reply, sizeof reply) == 0 &&
                 strncmp(reply, "error unknown request 'period 15'", 33) == 0);
    CHECK(c, request(sock, "set period=15ms", reply, sizeof reply) == 0 &&
                 strncmp(reply, "ok applied host=n1 period_ms=15 ", 32) == 0);
    CHECK(c, request(sock, "status", reply, sizeof reply) == 0);
    long before = samples_of(reply);
    for (int i = 0; i < 300 && samples_of(reply) < before + 20; i++) {
        sleep_ms(10);
        request(sock, "status", reply, sizeof reply);
    }
    CHECK(c, samples_of(reply) >= before + 20);
    /* The loop re-arms its timer for a period a request changed: an hour
     * stops the samples (one may be on its way), 15 ms starts them again
     * at once, not an hour later. */
    CHECK(c, request(sock, "set period=1h", reply, sizeof reply) == 0 &&
                 strncmp(reply, "ok applied host=n1 period_ms=3600000 ", 37) == 0);
    request(sock, "status", reply, sizeof reply);
    before = samples_of(reply);
    sleep_ms(300);
    request(sock, "status", reply, sizeof reply);
    CHECK(c, samples_of(reply) <= before + 1);
    CHECK(c, request(sock, "set period=15ms", reply, sizeof reply) == 0);
    request(sock, "status", reply, sizeof reply);
    before = samples_of(reply);
    for (int i = 0; i < 300 && samples_of(reply) < before + 5; i++) {
        sleep_ms(10);
        request(sock, "status", reply, sizeof reply);
    }
    CHECK(c, samples_of(reply) >= before + 5);
    CHECK(c, strstr(reply, "jobs=1234,7") != NULL || strstr(reply, "jobs=7,1234") != NULL);
    /* set (docs/agent.md, "Control channel"); this uid is an admin (control.admin_uids). */
    CHECK(c, request(sock, "set period=25ms sources=-pmu,-ib", reply, sizeof reply) == 0 &&
                 strncmp(reply, "ok applied host=n1 period_ms=25 offset_ms=0 "
                                "sources=cpu,load,mem,vm,disk,net,jobs,cgroup,self ", 94) == 0);
    CHECK(c, request(sock, "set sources=+pmu", reply, sizeof reply) == 0 &&
                 strstr(reply, " sources=cpu,load,mem,vm,disk,net,jobs,cgroup,pmu,self ") != NULL);
    CHECK(c, request(sock, "set period=1.5ms", reply, sizeof reply) == 0 &&
                 strncmp(reply, "error set: period '1.5ms'", 25) == 0);
    CHECK(c, request(sock, "set sources=+pmu,cpu period=30ms", reply, sizeof reply) == 0 &&
                 strstr(reply, "mixes +/- items") != NULL);
    CHECK(c, request(sock, "set job=7 period=40ms", reply, sizeof reply) == 0 &&
                 strstr(reply, " period_ms=40 ") != NULL && strstr(reply, " scope=job:7") != NULL);
    CHECK(c, request(sock, "job end 7", reply, sizeof reply) == 0);
    CHECK(c, request(sock, "status", reply, sizeof reply) == 0 &&
                 strncmp(reply, "ok period_ms=25 ", 16) == 0 && strstr(reply, " scope=node") != NULL);
    CHECK(c, request(sock, "reload", reply, sizeof reply) == 0 &&
                 strncmp(reply, "ok reloaded period_ms=20", 24) == 0);
    CHECK(c, request(sock, "flush", reply, sizeof reply) == 0 && strcmp(reply, "ok flushed\n") == 0);
    kill(child, SIGTERM);
    int status = 0;
    CHECK(c, waitpid(child, &status, 0) == child);
    CHECK(c, WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The spool: closed files only, with the job's and the PMU's lines. */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "test -z \"$(ls %s | grep '\\.open$')\" && cat %s/*.lp | grep -q '^job,host=n1,job=7 ' "
             "&& cat %s/*.lp | grep -q '^cgroup,host=n1,job=7,' "
             "&& cat %s/*.lp | grep -q '^pmu,host=n1,cpu=total,backend=sim '",
             spool, spool, spool, spool);
    CHECK(c, system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(c, system(cmd) == 0);
    return hm_test_finish("test_agent_loop", c);
}
