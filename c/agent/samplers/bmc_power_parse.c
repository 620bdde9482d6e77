#include "bmc_power_parse.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json_read.h"

/* A BMC's node power is tens of watts to a few tens of kilowatts (a
 * chassis of GPU sleds); anything outside is a misread, not a reading. */
#define BMC_POWER_W_MAX 1e6

static int check_watts(double w, const char *what, double *watts, hm_error *err)
{
    if (!isfinite(w) || w < 0 || w > BMC_POWER_W_MAX)
        return hm_error_set(err, "%s is %g W: not a node's power", what, w);
    *watts = w;
    return 0;
}

/* 1: a number, 0: member absent, -1: present but null or not a number. */
static int number_of(const hm_jnode *n, double *out)
{
    if (n == NULL)
        return 0;
    if (n->type != HM_JNUM)
        return -1;
    *out = n->d;
    return 1;
}

int hm_bmc_parse_redfish(const char *body, size_t len, double *watts, hm_error *err)
{
    hm_jdoc doc;
    if (hm_json_read(body, len, &doc, err) < 0)
        return -1;
    int rc = -1;
    double w = NAN;
    const hm_jnode *root = doc.root;
    const hm_jnode *pw = root != NULL && root->type == HM_JOBJ ? hm_jget(root, "PowerWatts") : NULL;
    const hm_jnode *pc = root != NULL && root->type == HM_JOBJ ? hm_jget(root, "PowerControl") : NULL;
    const hm_jnode *rt = root != NULL && root->type == HM_JOBJ ? hm_jget(root, "ReadingType") : NULL;
    if (root == NULL || root->type != HM_JOBJ) {
        hm_error_set(err, "Redfish answer is not a JSON object");
    } else if (pw != NULL && pw->type == HM_JOBJ) {
        int got = number_of(hm_jget(pw, "Reading"), &w);
        rc = got == 1 ? check_watts(w, "PowerWatts.Reading", watts, err)
                      : hm_error_set(err, "PowerWatts.Reading is %s (the BMC has no reading)",
                                     got == 0 ? "absent" : "null or not a number");
    } else if (pc != NULL && pc->type == HM_JARR) {
        const hm_jnode *first = pc->n > 0 ? pc->items[0] : NULL;
        int got = first != NULL && first->type == HM_JOBJ
                      ? number_of(hm_jget(first, "PowerConsumedWatts"), &w)
                      : 0;
        if (pc->n == 0)
            hm_error_set(err, "PowerControl is empty (the BMC reports no power)");
        else
            rc = got == 1 ? check_watts(w, "PowerControl[0].PowerConsumedWatts", watts, err)
                          : hm_error_set(err,
                                         "PowerControl[0].PowerConsumedWatts is %s (the BMC has "
                                         "no reading: host off, or no power meter)",
                                         got == 0 ? "absent" : "null or not a number");
    } else if (rt != NULL && rt->type == HM_JSTR && strcmp(rt->s, "Power") == 0) {
        int got = number_of(hm_jget(root, "Reading"), &w);
        rc = got == 1 ? check_watts(w, "Reading", watts, err)
                      : hm_error_set(err, "the power sensor's Reading is %s",
                                     got == 0 ? "absent" : "null or not a number");
    } else {
        hm_error_set(err, "no PowerWatts.Reading, PowerControl[0].PowerConsumedWatts or power "
                          "Sensor Reading in the answer (not a Power, EnvironmentMetrics or "
                          "Sensor resource?)");
    }
    hm_jdoc_free(&doc);
    return rc;
}

/* The text after "label" on the line where it starts (spaces skipped). */
static const char *value_after(const char *text, size_t len, const char *label, size_t *vlen)
{
    size_t ll = strlen(label);
    const char *end = text + len;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl != NULL ? nl : end;
        const char *p = line;
        while (p < stop && (*p == ' ' || *p == '\t'))
            p++;
        if ((size_t)(stop - p) >= ll && strncmp(p, label, ll) == 0) {
            p += ll;
            while (p < stop && (*p == ' ' || *p == '\t'))
                p++;
            *vlen = (size_t)(stop - p);
            return p;
        }
        line = nl != NULL ? nl + 1 : end;
    }
    return NULL;
}

/* The first non-blank line of the output, for the message. */
static void first_line(const char *text, size_t len, char *out, size_t size)
{
    const char *p = text, *end = text + len;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    size_t n = 0;
    while (p + n < end && p[n] != '\n' && p[n] != '\r' && n + 1 < size)
        n++;
    memcpy(out, p, n);
    out[n] = '\0';
}

int hm_bmc_parse_dcmi(const char *text, size_t len, double *watts, hm_error *err)
{
    char head[160];
    first_line(text, len, head, sizeof head);
    size_t vlen = 0;
    const char *state = value_after(text, len, "Power reading state is:", &vlen);
    if (state != NULL && vlen >= 11 && strncmp(state, "deactivated", 11) == 0)
        return hm_error_set(err, "the BMC's power reading is deactivated (its DCMI power "
                                 "measurement is off)");
    const char *v = value_after(text, len, "Instantaneous power reading:", &vlen);
    if (v == NULL)
        return hm_error_set(err, "no \"Instantaneous power reading\" in ipmitool's output: %s",
                            head[0] != '\0' ? head : "(empty)");
    char num[64];
    size_t n = vlen < sizeof num - 1 ? vlen : sizeof num - 1;
    memcpy(num, v, n);
    num[n] = '\0';
    char *after = NULL;
    errno = 0;
    double w = strtod(num, &after);
    while (after != NULL && *after == ' ')
        after++;
    if (after == num || errno != 0 || after == NULL || strncmp(after, "Watts", 5) != 0)
        return hm_error_set(err, "\"Instantaneous power reading: %s\" is not N Watts", num);
    return check_watts(w, "the instantaneous power reading", watts, err);
}

int hm_bmc_read_credentials(const char *path, char *user, size_t user_size, char *password,
                            size_t password_size, hm_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return hm_error_errno(err, "%s", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return hm_error_errno(err, "%s", path);
    }
    /* Checked on the open file, not the path: what is read is what was
     * checked. A password others can read is a BMC others can drive. */
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        close(fd);
        return hm_error_set(err, "%s: mode %04o, owner uid %u: must be a file of the agent's "
                                 "user (uid %u) readable by it only (chmod 600)",
                            path, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
                            (unsigned)geteuid());
    }
    char buf[1024];
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got < 0)
        return hm_error_errno(err, "%s", path);
    buf[got] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    char *colon = strchr(buf, ':');
    int rc = 0;
    if (colon == NULL || colon == buf)
        rc = hm_error_set(err, "%s: the first line must be user:password", path);
    else if ((size_t)(colon - buf) >= user_size || strlen(colon + 1) >= password_size)
        rc = hm_error_set(err, "%s: user or password too long", path);
    if (rc == 0) {
        *colon = '\0';
        snprintf(user, user_size, "%s", buf);
        snprintf(password, password_size, "%s", colon + 1);
    }
    explicit_bzero(buf, sizeof buf);
    return rc;
}
