/* cpu_info: the node's CPU model, read once per agent start (node metadata).
 *
 * /proc/cpuinfo is read when the source opens; the first two periods
 * after that carry one line
 *   cpu_info,host=n1,model=<model name> family=6i,model_number=85i,
 *            stepping=4i,sockets=2i,cores=40i,cpus=80i
 * (two: `--once` writes only its second reading), and then one period an
 * hour: a store expires raw samples after its retention, and the digest
 * looks for the node's latest line at or before a job's end to map the
 * node to its type's roofline ceilings (python/hushmon/digest/cpu_models.py). `cpus` counts the processors
 * /proc/cpuinfo lists, the online ones: with the model it is the node
 * type's key that `hushmon probe` stores its ceilings under. `sockets`
 * counts the distinct physical ids, `cores` the distinct (physical id,
 * core id) pairs.
 *
 * The model is a tag, so the characters the store cannot keep in a tag
 * value (',' '=' which split its tag lists, '[' ']' which delimit a
 * sensor's tags, '"' '\\') become spaces, and runs of blanks one space;
 * the digest normalizes the probe's model the same way before comparing.
 * A CPU without "model name" (most Arm kernels) is "unknown", as the
 * probe names it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procfile.h"
#include "sampler.h"

#define CPUINFO_MODEL_MAX 128
#define CPUINFO_CORES_MAX 4096

#define CPUINFO_METRICS(X, P)                                                                 \
    X(P, family, "", "cpu family (x86)")                                                      \
    X(P, model_number, "", "model (x86)")                                                     \
    X(P, stepping, "", "stepping (x86)")                                                      \
    X(P, sockets, "", "distinct physical ids")                                                \
    X(P, cores, "", "distinct (physical id, core id) pairs")                                  \
    X(P, cpus, "", "processors listed (online)")
HM_METRIC_ENUM(CPUINFO, CPUINFO_METRICS);

typedef struct cpuinfo_state {
    char model[CPUINFO_MODEL_MAX];
    long family, model_number, stepping; /* -1: not given */
    long sockets, cores, cpus;
    int published;        /* lines written so far */
    int64_t last_mono_ns; /* when the last one was */
} cpuinfo_state;

#define CPUINFO_AGAIN_NS (3600 * 1000000000LL)

/* The value after "key<blanks>:" on a line, or NULL. */
static const char *value_of(const char *line, const char *key)
{
    size_t n = strlen(key);
    if (strncmp(line, key, n) != 0)
        return NULL;
    const char *p = line + n;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* The model name as a tag value the store keeps whole (see above). */
static void clean_model(char *out, size_t size, const char *v)
{
    size_t n = 0;
    bool blank = true; /* drops leading blanks and collapses runs */
    for (; *v && *v != '\n' && n + 1 < size; v++) {
        char c = *v;
        if (c == ',' || c == '=' || c == '[' || c == ']' || c == '"' || c == '\\' || c == '\t' ||
            (unsigned char)c < 0x20)
            c = ' ';
        if (c == ' ' && blank)
            continue;
        blank = c == ' ';
        out[n++] = c;
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
}

static bool seen_pair(const long (*pairs)[2], long n, long a, long b)
{
    for (long i = 0; i < n; i++)
        if (pairs[i][0] == a && pairs[i][1] == b)
            return true;
    return false;
}

static int cpuinfo_open(void **state, const hm_sampler_env *env, hm_error *err)
{
    char path[PATH_MAX];
    if (hm_path_join(path, sizeof path, env->cfg->root, "proc/cpuinfo", err) < 0)
        return -1;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0; /* no /proc/cpuinfo (a fixture tree without one): nothing to say */
    cpuinfo_state *s = calloc(1, sizeof *s);
    long (*pairs)[2] = calloc(CPUINFO_CORES_MAX, sizeof *pairs);
    long *packages = calloc(CPUINFO_CORES_MAX, sizeof *packages);
    if (s == NULL || pairs == NULL || packages == NULL) {
        fclose(f);
        free(s);
        free(pairs);
        free(packages);
        return hm_error_set(err, "out of memory");
    }
    snprintf(s->model, sizeof s->model, "unknown");
    s->family = s->model_number = s->stepping = -1;
    long npairs = 0, npackages = 0, physical = -1;
    char line[1024];
    const char *v;
    while (fgets(line, sizeof line, f) != NULL) {
        if ((v = value_of(line, "processor")) != NULL) {
            s->cpus++;
            physical = -1;
        } else if (s->cpus == 1 && (v = value_of(line, "model name")) != NULL) {
            clean_model(s->model, sizeof s->model, v);
            if (s->model[0] == '\0')
                snprintf(s->model, sizeof s->model, "unknown");
        } else if (s->cpus == 1 && (v = value_of(line, "cpu family")) != NULL) {
            s->family = strtol(v, NULL, 10);
        } else if (s->cpus == 1 && (v = value_of(line, "model")) != NULL) {
            s->model_number = strtol(v, NULL, 10);
        } else if (s->cpus == 1 && (v = value_of(line, "stepping")) != NULL) {
            s->stepping = strtol(v, NULL, 10);
        } else if ((v = value_of(line, "physical id")) != NULL) {
            physical = strtol(v, NULL, 10);
            bool known = false;
            for (long i = 0; i < npackages && !known; i++)
                known = packages[i] == physical;
            if (!known && npackages < CPUINFO_CORES_MAX)
                packages[npackages++] = physical;
        } else if ((v = value_of(line, "core id")) != NULL) {
            long core = strtol(v, NULL, 10);
            if (!seen_pair((const long (*)[2])pairs, npairs, physical, core) &&
                npairs < CPUINFO_CORES_MAX) {
                pairs[npairs][0] = physical;
                pairs[npairs][1] = core;
                npairs++;
            }
        }
    }
    fclose(f);
    s->sockets = npackages;
    s->cores = npairs;
    free(pairs);
    free(packages);
    *state = s;
    return 0;
}

static int cpuinfo_sample(void *state, const hm_sample_ctx *ctx, hm_lp *out, hm_error *err)
{
    (void)err;
    cpuinfo_state *s = state;
    if (s->published >= 2 && ctx->mono_ns - s->last_mono_ns < CPUINFO_AGAIN_NS)
        return 0;
    s->published++;
    s->last_mono_ns = ctx->mono_ns;
    hm_lp_begin(out, "cpu_info");
    hm_lp_tag(out, "model", s->model);
    const long v[] = {s->family, s->model_number, s->stepping};
    const char *const name[] = {HM_M(CPUINFO, family), HM_M(CPUINFO, model_number),
                                HM_M(CPUINFO, stepping)};
    for (int i = 0; i < 3; i++)
        if (v[i] >= 0)
            hm_lp_field_i64(out, name[i], v[i]);
    if (s->sockets > 0)
        hm_lp_field_i64(out, HM_M(CPUINFO, sockets), s->sockets);
    if (s->cores > 0)
        hm_lp_field_i64(out, HM_M(CPUINFO, cores), s->cores);
    hm_lp_field_i64(out, HM_M(CPUINFO, cpus), s->cpus);
    hm_lp_end(out);
    return 0;
}

static void cpuinfo_close(void *state)
{
    free(state);
}

const hm_sampler_ops hm_sampler_proc_cpuinfo = {
    .name = "cpu_info",
    .reads = "/proc/cpuinfo once at start: the CPU model, family/model/stepping, sockets, "
             "cores, online CPUs; published in the first two periods, then hourly",
    .measurement = "cpu_info (tag model)",
    .fields = HM_FIELDS(CPUINFO_METRICS),
    .default_on = true,
    .open = cpuinfo_open,
    .sample = cpuinfo_sample,
    .close = cpuinfo_close,
};
