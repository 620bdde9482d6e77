/* Syscall-heavy load: what an agent's OS sampling costs. A chunk opens,
 * reads and closes one /proc file of a small rotation, so most of the time
 * is spent in the kernel (and the detector feels kernel-side detours). */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "inject_shape.h"

static const char *const syscall_files[] = {
    "/proc/stat", "/proc/meminfo", "/proc/loadavg", "/proc/vmstat", "/proc/self/stat",
};
enum { SYSCALL_FILE_COUNT = sizeof syscall_files / sizeof syscall_files[0] };

typedef struct syscall_state {
    size_t next;
    char buf[16384];
} syscall_state;

static int syscall_init(void **state, hm_error *err)
{
    syscall_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return hm_error_errno(err, "allocating the syscall kernel");
    /* Fail at start, not silently during the run, if /proc is unreadable. */
    for (size_t i = 0; i < SYSCALL_FILE_COUNT; i++) {
        int fd = open(syscall_files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            free(s);
            return hm_error_errno(err, "opening %s", syscall_files[i]);
        }
        close(fd);
    }
    *state = s;
    return 0;
}

static uint64_t syscall_chunk(void *state)
{
    syscall_state *s = state;
    const char *path = syscall_files[s->next];
    s->next = (s->next + 1) % SYSCALL_FILE_COUNT;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* checked at init; a transient failure still costs a syscall */
    uint64_t total = 0;
    ssize_t got;
    while ((got = read(fd, s->buf, sizeof s->buf)) > 0)
        total += (uint64_t)got;
    close(fd);
    return total;
}

static void syscall_fini(void *state) { free(state); }

const hm_inject_kernel hm_inject_kernel_syscall = {
    .name = "syscall",
    .init = syscall_init,
    .chunk = syscall_chunk,
    .fini = syscall_fini,
};
