/* The table of sources, expanded from samplers.def so that the
 * declarations and the table cannot drift apart. */
#include <string.h>

#include "sampler.h"

#define HM_SAMPLER(sym) extern const hm_sampler_ops hm_sampler_##sym;
#include "samplers.def"
#undef HM_SAMPLER

const hm_sampler_ops *const hm_samplers[] = {
#define HM_SAMPLER(sym) &hm_sampler_##sym,
#include "samplers.def"
#undef HM_SAMPLER
};

const size_t hm_samplers_count = sizeof hm_samplers / sizeof hm_samplers[0];

const hm_sampler_ops *hm_sampler_find(const char *name)
{
    for (size_t i = 0; i < hm_samplers_count; i++)
        if (strcmp(hm_samplers[i]->name, name) == 0)
            return hm_samplers[i];
    return NULL;
}
