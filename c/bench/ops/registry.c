/* The table of operations, expanded from ops.def. */
#include <string.h>

#include "op.h"

static const hm_op *const hm_ops[] = {
#define HM_OP(name) &hm_op_##name,
#include "ops.def"
#undef HM_OP
};

size_t hm_op_count(void) { return sizeof hm_ops / sizeof hm_ops[0]; }

const hm_op *hm_op_at(size_t i) { return i < hm_op_count() ? hm_ops[i] : NULL; }

const hm_op *hm_op_find(const char *name)
{
    for (size_t i = 0; i < hm_op_count(); i++)
        if (strcmp(hm_ops[i]->name, name) == 0)
            return hm_ops[i];
    return NULL;
}
