/* Load shapes of hushmon-inject: what an agent's activation does (the
 * kernel) and how activations are spread over periods.
 *
 * A kernel does its work in small chunks (a few microseconds each) so the
 * driver can stop within microseconds of the work time it was asked for,
 * even at 0.001 % of a one-second period (10 us). Adding a kernel is a new
 * file kernel_<name>.c exporting one hm_inject_kernel, plus one line in the
 * table of inject_shapes.c. */
#ifndef HM_INJECT_SHAPE_H
#define HM_INJECT_SHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "hm_error.h"

typedef struct hm_inject_kernel {
    const char *name;
    /* Allocates and touches the kernel's data (so page faults are not part
     * of the first activation). Returns 0, or -1 with err set. */
    int (*init)(void **state, hm_error *err);
    /* One small unit of work; returns a value that depends on the work so
     * the compiler cannot drop it. */
    uint64_t (*chunk)(void *state);
    void (*fini)(void *state);
} hm_inject_kernel;

typedef struct hm_inject_shape {
    const char *name;
    const char *description;
    const hm_inject_kernel *kernel;
    /* true: the work of N periods is done in one longer detour every N
     * periods (same average load, rarer and longer interruptions). */
    bool burst;
} hm_inject_shape;

extern const hm_inject_kernel hm_inject_kernel_sum;
extern const hm_inject_kernel hm_inject_kernel_memory;
extern const hm_inject_kernel hm_inject_kernel_syscall;

/* NULL-terminated table of every shape; --help is printed from it. */
extern const hm_inject_shape *const hm_inject_shapes[];

/* The shape called `name`, or NULL. */
const hm_inject_shape *hm_inject_shape_find(const char *name);

#endif
