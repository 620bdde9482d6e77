/* Bad input never crashes the agent: every source parses mutated copies
 * of its fixture files (cut short, bytes flipped, numbers made huge, lines
 * dropped) and the TOML parser mutated configs. A source may report an
 * error; it must not read out of bounds (run under ASan/UBSan by
 * `make test-asan`) and whatever it writes must still be whole lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "hm_test.h"
#include "lp.h"
#include "sampler.h"
#include "toml.h"

#define ROUNDS 60

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = malloc(1 << 16);
    *len = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf)
        buf[*len] = '\0';
    return buf;
}

/* One random mutation of text into out (capacity cap); returns length. */
static size_t mutate(const char *text, size_t len, char *out, size_t cap)
{
    size_t n = len < cap ? len : cap;
    memcpy(out, text, n);
    switch (rnd() % 6) {
    case 0: /* cut anywhere */
        return n ? rnd() % n : 0;
    case 1: /* flip some bytes */
        for (int k = 0; k < 4 && n; k++)
            out[rnd() % n] = (char)(rnd() & 0xff);
        return n;
    case 2: { /* a huge number somewhere */
        const char *big = "99999999999999999999999999";
        size_t at = n ? rnd() % n : 0, bl = strlen(big);
        if (at + bl < cap) {
            memcpy(out + at, big, bl);
            return at + bl > n ? at + bl : n;
        }
        return n;
    }
    case 3: { /* drop a line */
        size_t at = n ? rnd() % n : 0;
        char *end = memchr(out + at, '\n', n - at);
        if (end == NULL)
            return at;
        size_t rest = n - (size_t)(end + 1 - out);
        memmove(out + at, end + 1, rest);
        return at + rest;
    }
    case 4: /* newlines everywhere */
        for (size_t i = 0; i < n; i++)
            if (out[i] == ' ')
                out[i] = '\n';
        return n;
    default: /* empty */
        return 0;
    }
}

static void write_bytes(const char *path, const char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return;
    fwrite(buf, 1, len, f);
    fclose(f);
}

static const char *const files[] = {
    "proc/stat", "proc/loadavg", "proc/meminfo", "proc/vmstat", "proc/diskstats",
    "proc/net/dev", "sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data",
    "sys/fs/cgroup/system.slice/slurmstepd.scope/job_1234/cpu.stat",
    "sys/fs/cgroup/system.slice/slurmstepd.scope/job_1234/io.stat",
};

static void test_sources(hm_test_counts *c)
{
    char root[] = "/tmp/hm_agent_fuzz_XXXXXX";
    CHECK(c, mkdtemp(root) != NULL);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cp -r tests/fixtures/agent/t0/. %s/", root);
    CHECK(c, system(cmd) == 0);
    hm_agent_config cfg;
    hm_config_defaults(&cfg);
    strcpy(cfg.root, root);
    cfg.slurm_scan_ms = 0;
    hm_jobs jobs;
    memset(&jobs, 0, sizeof jobs);
    hm_node_shared node = {0};
    hm_self_stats self = {0};
    hm_lp lp;
    hm_error err;
    CHECK(c, hm_lp_init(&lp, 1 << 16, "n1", &err) == 0);
    const char *names[] = {"cpu", "load", "mem", "vm", "disk", "net", "ib", "jobs", "cgroup"};
    void *state[9];
    hm_sampler_env env = {.cfg = &cfg, .jobs = &jobs};
    for (size_t i = 0; i < 9; i++)
        CHECK(c, hm_sampler_find(names[i])->open(&state[i], &env, &err) == 0);
    char *orig[9];
    size_t orig_len[9];
    for (size_t f = 0; f < 9; f++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", root, files[f]);
        orig[f] = read_all(path, &orig_len[f]);
        CHECK(c, orig[f] != NULL);
    }
    static char buf[1 << 16];
    int errors = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t f = 0; f < 9; f++) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", root, files[f]);
            size_t len = orig[f] ? mutate(orig[f], orig_len[f], buf, sizeof buf) : 0;
            write_bytes(path, buf, len);
        }
        int64_t mono = (int64_t)(round + 1) * 1000000000;
        hm_lp_reset(&lp, mono);
        hm_sample_ctx ctx = {.ts_ns = mono, .mono_ns = mono, .jobs = &jobs, .node = &node,
                             .self = &self};
        for (size_t i = 0; i < 9; i++)
            errors += hm_sampler_find(names[i])->sample(state[i], &ctx, &lp, &err) < 0;
        /* whatever was written is whole lines */
        CHECK(c, lp.len == 0 || lp.buf[lp.len - 1] == '\n');
    }
    printf("fuzzed sources: %d rounds, %d errors reported (and no crash)\n", ROUNDS, errors);
    for (size_t i = 0; i < 9; i++)
        hm_sampler_find(names[i])->close(state[i]);
    for (size_t f = 0; f < 9; f++)
        free(orig[f]);
    hm_lp_free(&lp);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(c, system(cmd) == 0);
}

static void test_toml(hm_test_counts *c)
{
    size_t len;
    char *text = read_all("c/agent/systemd/agent.toml", &len);
    CHECK(c, text != NULL);
    if (text == NULL)
        return;
    static char buf[1 << 16];
    int ok = 0, bad = 0;
    for (int round = 0; round < 3000; round++) {
        size_t n = mutate(text, len, buf, sizeof buf - 1);
        buf[n] = '\0';
        hm_toml_doc doc;
        hm_error err;
        if (hm_toml_parse(&doc, buf, "fuzz", &err) == 0) {
            ok++;
            hm_toml_free(&doc);
        } else {
            bad++;
            CHECK(c, strncmp(err.msg, "fuzz:", 5) == 0); /* every error names the line */
        }
    }
    printf("fuzzed configs: %d parsed, %d refused with file:line\n", ok, bad);
    CHECK(c, bad > 0 && ok > 0);
    free(text);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_sources(&c);
    test_toml(&c);
    return hm_test_finish("test_agent_fuzz", &c);
}
