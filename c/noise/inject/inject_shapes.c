/* The table of load shapes: adding one is a line here (and a kernel file if
 * it needs new work). */
#include <stddef.h>
#include <string.h>

#include "inject_shape.h"

static const hm_inject_shape shape_sum = {
    .name = "sum",
    .description = "sum an array of 250,000 long long (the seed's agent model)",
    .kernel = &hm_inject_kernel_sum,
    .burst = false,
};
static const hm_inject_shape shape_memory = {
    .name = "memory",
    .description = "stream through 64 MiB (a copy), evicting the job's cache lines",
    .kernel = &hm_inject_kernel_memory,
    .burst = false,
};
static const hm_inject_shape shape_syscall = {
    .name = "syscall",
    .description = "open/read/close /proc files, the way an agent samples the OS",
    .kernel = &hm_inject_kernel_syscall,
    .burst = false,
};
static const hm_inject_shape shape_burst = {
    .name = "burst",
    .description = "the sum kernel, all work of --burst-every periods in one detour",
    .kernel = &hm_inject_kernel_sum,
    .burst = true,
};

const hm_inject_shape *const hm_inject_shapes[] = {
    &shape_sum,
    &shape_memory,
    &shape_syscall,
    &shape_burst,
    NULL,
};

const hm_inject_shape *hm_inject_shape_find(const char *name)
{
    for (size_t i = 0; hm_inject_shapes[i] != NULL; i++)
        if (strcmp(hm_inject_shapes[i]->name, name) == 0)
            return hm_inject_shapes[i];
    return NULL;
}
