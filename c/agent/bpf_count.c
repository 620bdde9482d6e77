#include "bpf_count.h"

#include <errno.h>
#include <linux/bpf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perf_event.h"

static int sys_bpf(int cmd, union bpf_attr *attr)
{
    return (int)syscall(SYS_bpf, cmd, attr, sizeof *attr);
}

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
    struct bpf_insn i;
    memset(&i, 0, sizeof i);
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
}

/* The program: key 0 on the stack, look the CPU's slot up, add 1 (the slot
 * is this CPU's own: no atomic needed), return 0 (no sample is written). */
static size_t program(struct bpf_insn *p, int map_fd)
{
    size_t n = 0;
    p[n++] = insn(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, 0);          /* *(u32 *)(fp-4) = 0 */
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0); /* r2 = fp */
    p[n++] = insn(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4);         /* r2 -= 4 */
    p[n++] = insn(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map_fd);
    p[n++] = insn(0, 0, 0, 0, 0);                                            /* ld_imm64, high half */
    p[n++] = insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem);
    p[n++] = insn(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 3, 0);            /* NULL: out */
    p[n++] = insn(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_1, BPF_REG_0, 0, 0);   /* r1 = *r0 */
    p[n++] = insn(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_1, 0, 0, 1);          /* r1 += 1 */
    p[n++] = insn(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_0, BPF_REG_1, 0, 0);   /* *r0 = r1 */
    p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);          /* out: r0 = 0 */
    p[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    return n;
}

void hm_bpf_count_close(hm_bpf_count *c)
{
    if (c->event_fd != NULL)
        for (size_t i = 0; i < c->ncpu; i++)
            if (c->event_fd[i] >= 0)
                close(c->event_fd[i]);
    free(c->event_fd);
    free(c->values);
    if (c->prog_fd >= 0)
        close(c->prog_fd);
    if (c->map_fd >= 0)
        close(c->map_fd);
    memset(c, 0, sizeof *c);
    c->map_fd = c->prog_fd = -1;
}

static int fail(hm_bpf_count *c)
{
    hm_bpf_count_close(c);
    return -1;
}

/* The kernel's possible CPUs (a per-CPU map's lookup writes one value for
 * each): the highest index in /sys/devices/system/cpu/possible, plus one. */
static size_t possible_cpus(void)
{
    char buf[256];
    FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
    size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    size_t last = 0;
    bool any = false;
    for (char *p = buf; *p != '\0';) {
        if (*p >= '0' && *p <= '9') {
            last = (size_t)strtoul(p, &p, 10);
            any = true;
        } else {
            p++;
        }
    }
    return any ? last + 1 : 8192; /* unknown: room for the kernel's maximum */
}

int hm_bpf_count_open(hm_bpf_count *c, uint64_t config, size_t ncpu, hm_error *err)
{
    memset(c, 0, sizeof *c);
    c->map_fd = c->prog_fd = -1;
    c->nslots = possible_cpus();
    c->values = calloc(c->nslots, sizeof *c->values);
    c->event_fd = malloc(ncpu * sizeof *c->event_fd);
    if (c->values == NULL || c->event_fd == NULL) {
        hm_error_set(err, "out of memory");
        return fail(c);
    }
    c->ncpu = ncpu;
    for (size_t i = 0; i < ncpu; i++)
        c->event_fd[i] = -1;

    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_PERCPU_ARRAY;
    a.key_size = 4;
    a.value_size = 8;
    a.max_entries = 1;
    c->map_fd = sys_bpf(BPF_MAP_CREATE, &a);
    if (c->map_fd < 0) {
        hm_error_errno(err, "bpf(BPF_MAP_CREATE)");
        return fail(c);
    }
    struct bpf_insn prog[16];
    size_t n = program(prog, c->map_fd);
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_PERF_EVENT;
    a.insns = (uint64_t)(uintptr_t)prog;
    a.insn_cnt = (uint32_t)n;
    a.license = (uint64_t)(uintptr_t)"GPL";
    c->prog_fd = sys_bpf(BPF_PROG_LOAD, &a);
    if (c->prog_fd < 0) {
        hm_error_errno(err, "bpf(BPF_PROG_LOAD)");
        return fail(c);
    }
    size_t opened = 0;
    for (size_t i = 0; i < ncpu; i++) {
        struct perf_event_attr pa;
        memset(&pa, 0, sizeof pa);
        pa.size = sizeof pa;
        pa.type = PERF_TYPE_SOFTWARE;
        pa.config = config;
        pa.sample_period = 1;
        pa.disabled = 1;
        int fd = hm_perf_event_open(&pa, -1, (int)i, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (errno == ENODEV || errno == ENXIO) /* CPU offline */
                continue;
            hm_error_errno(err, "perf_event_open(cpu %zu)", i);
            return fail(c);
        }
        c->event_fd[i] = fd;
        if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, c->prog_fd) < 0) {
            hm_error_errno(err, "PERF_EVENT_IOC_SET_BPF(cpu %zu)", i);
            return fail(c);
        }
        if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0) {
            hm_error_errno(err, "PERF_EVENT_IOC_ENABLE(cpu %zu)", i);
            return fail(c);
        }
        opened++;
    }
    if (opened == 0) {
        hm_error_set(err, "no CPU accepted the event");
        return fail(c);
    }
    uint64_t total;
    if (hm_bpf_count_read(c, &total, err) < 0)
        return fail(c);
    return 0;
}

int hm_bpf_count_read(hm_bpf_count *c, uint64_t *total, hm_error *err)
{
    uint32_t key = 0;
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_fd = (uint32_t)c->map_fd;
    a.key = (uint64_t)(uintptr_t)&key;
    a.value = (uint64_t)(uintptr_t)c->values;
    if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &a) < 0)
        return hm_error_errno(err, "bpf(BPF_MAP_LOOKUP_ELEM)");
    uint64_t sum = 0;
    for (size_t i = 0; i < c->nslots; i++)
        sum += c->values[i];
    *total = sum;
    return 0;
}
