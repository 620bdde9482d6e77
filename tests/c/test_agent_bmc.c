/* bmc_power's parsers on recorded-shape answers (tests/fixtures/agent/bmc):
 * Redfish Power resources in two BMC vendors' shapes, EnvironmentMetrics,
 * a power Sensor, answers without a reading; ipmitool's DCMI power
 * reading, deactivated, refused and garbled; the credentials file and
 * its mode check. The thread, the HTTPS and the child process are tested
 * end to end by tests/python/test_agent_bmc.py. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "samplers/bmc_power_parse.h"
#include "hm_test.h"

#define FIXTURES "tests/fixtures/agent/bmc/"

static char *slurp(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, FIXTURES "%s", name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    static char buf[65536];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static int redfish(const char *name, double *w, hm_error *e)
{
    size_t len;
    char *text = slurp(name, &len);
    *w = -1;
    return hm_bmc_parse_redfish(text, len, w, e);
}

static int dcmi(const char *name, double *w, hm_error *e)
{
    size_t len;
    char *text = slurp(name, &len);
    *w = -1;
    return hm_bmc_parse_dcmi(text, len, w, e);
}

static void test_redfish(hm_test_counts *c)
{
    double w;
    hm_error e;
    /* iDRAC's shape: integers, MemberId "PowerControl", PSU input watts
     * beside it (312 = 164 + 148: the chassis' total is what is read). */
    CHECK(c, redfish("redfish-power-idrac.json", &w, &e) == 0);
    CHECK_NEAR(c, w, 312.0, 0);
    /* iLO's shape: one line, Oem.Hpe, a fractional reading. */
    CHECK(c, redfish("redfish-power-ilo.json", &w, &e) == 0);
    CHECK_NEAR(c, w, 245.5, 0);
    CHECK(c, redfish("redfish-environment-metrics.json", &w, &e) == 0);
    CHECK_NEAR(c, w, 498.5, 0);
    CHECK(c, redfish("redfish-sensor-power.json", &w, &e) == 0);
    CHECK_NEAR(c, w, 377.25, 0);
    /* A host powered off: the BMC answers null, which is no reading (not 0 W). */
    CHECK(c, redfish("redfish-power-off.json", &w, &e) < 0 && w == -1);
    CHECK(c, strstr(e.msg, "PowerConsumedWatts is null") != NULL);
    CHECK(c, redfish("redfish-service-root.json", &w, &e) < 0);
    CHECK(c, strstr(e.msg, "no PowerWatts.Reading") != NULL);

    const char *cases[][2] = {
        {"{\"PowerControl\": []}", "empty"},
        {"{\"PowerControl\": [{\"MemberId\": \"0\"}]}", "absent"},
        {"{\"PowerControl\": [{\"PowerConsumedWatts\": \"312\"}]}", "null"},
        {"{\"PowerControl\": [{\"PowerConsumedWatts\": -5}]}", "not a node's power"},
        {"{\"PowerWatts\": {\"Reading\": null}}", "null"},
        {"[1, 2]", "not a JSON object"},
        {"<html>502 Bad Gateway</html>", "bad JSON"},
        {"{\"PowerControl\": [{\"PowerConsumedWatts\": 3", "bad JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w = -1;
        int rc = hm_bmc_parse_redfish(cases[i][0], strlen(cases[i][0]), &w, &e);
        CHECK(c, rc < 0 && w == -1);
        if (strstr(e.msg, cases[i][1]) == NULL)
            fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, e.msg, cases[i][1]);
        CHECK(c, strstr(e.msg, cases[i][1]) != NULL);
    }
}

static void test_dcmi(hm_test_counts *c)
{
    double w;
    hm_error e;
    CHECK(c, dcmi("dcmi-reading.txt", &w, &e) == 0);
    CHECK_NEAR(c, w, 220.0, 0);
    /* The minimum, maximum and average lines are not the reading. */
    CHECK(c, dcmi("dcmi-deactivated.txt", &w, &e) < 0 && w == -1);
    CHECK(c, strstr(e.msg, "deactivated") != NULL);
    CHECK(c, dcmi("dcmi-not-available.txt", &w, &e) < 0 && w == -1);
    CHECK(c, strstr(e.msg, "Invalid command (c1)") != NULL);
    CHECK(c, dcmi("dcmi-garbled.txt", &w, &e) < 0 && w == -1);
    CHECK(c, strstr(e.msg, "not N Watts") != NULL);
    CHECK(c, hm_bmc_parse_dcmi("", 0, &w, &e) < 0 && strstr(e.msg, "(empty)") != NULL);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        perror(path);
        exit(2);
    }
    fchmod(fd, mode);
    close(fd);
}

static void test_credentials(hm_test_counts *c)
{
    char dir[] = "/tmp/hm-bmc-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    char path[64];
    snprintf(path, sizeof path, "%s/cred", dir);
    char user[64], password[64];
    hm_error e;
    write_file(path, "monitor:pa:ss word\n", 0600);
    CHECK(c, hm_bmc_read_credentials(path, user, sizeof user, password, sizeof password, &e) == 0);
    CHECK(c, strcmp(user, "monitor") == 0 && strcmp(password, "pa:ss word") == 0);
    write_file(path, "monitor:secret", 0400);
    CHECK(c, hm_bmc_read_credentials(path, user, sizeof user, password, sizeof password, &e) == 0);
    CHECK(c, strcmp(password, "secret") == 0);
    /* Readable by the group or others: refused before a byte is read. */
    strcpy(user, "untouched");
    write_file(path, "monitor:secret\n", 0640);
    CHECK(c, hm_bmc_read_credentials(path, user, sizeof user, password, sizeof password, &e) < 0);
    CHECK(c, strstr(e.msg, "mode 0640") != NULL && strstr(e.msg, "chmod 600") != NULL);
    CHECK(c, strcmp(user, "untouched") == 0);
    write_file(path, "monitor:secret\n", 0604);
    CHECK(c, hm_bmc_read_credentials(path, user, sizeof user, password, sizeof password, &e) < 0);
    write_file(path, "no colon here\n", 0600);
    CHECK(c, hm_bmc_read_credentials(path, user, sizeof user, password, sizeof password, &e) < 0);
    CHECK(c, strstr(e.msg, "user:password") != NULL);
    /* A link to a good file is not followed (the check is on what is opened). */
    char link[80];
    snprintf(link, sizeof link, "%s/link", dir);
    write_file(path, "monitor:secret\n", 0600);
    CHECK(c, symlink(path, link) == 0);
    CHECK(c, hm_bmc_read_credentials(link, user, sizeof user, password, sizeof password, &e) < 0);
    CHECK(c, hm_bmc_read_credentials("/nonexistent/cred", user, sizeof user, password,
                                     sizeof password, &e) < 0);
    unlink(link);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_redfish(&c);
    test_dcmi(&c);
    test_credentials(&c);
    return hm_test_finish("test_agent_bmc", &c);
}
