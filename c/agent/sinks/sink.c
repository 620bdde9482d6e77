#include "sink.h"

#include <string.h>

const hm_sink_ops *const hm_sinks[] = {
#define HM_SINK(name) &hm_sink_##name,
#include "sinks.def"
#undef HM_SINK
};

const size_t hm_sinks_count = sizeof hm_sinks / sizeof hm_sinks[0];

int hm_sink_open(hm_sink *sink, const hm_agent_config *cfg, int64_t start_ns, hm_error *err)
{
    for (size_t i = 0; i < hm_sinks_count; i++) {
        if (strcmp(hm_sinks[i]->name, cfg->sink) == 0) {
            sink->ops = hm_sinks[i];
            sink->state = NULL;
            if (hm_sinks[i]->open(&sink->state, cfg, start_ns, err) < 0) {
                sink->ops = NULL;
                return hm_error_wrap(err, "sink %s", cfg->sink);
            }
            return 0;
        }
    }
#ifndef HM_HAVE_NATS
    if (strcmp(cfg->sink, "nats") == 0)
        return hm_error_set(err, "sink 'nats': this hushmon-agent was built without libnats "
                            "(install libnats-dev and build again)");
#endif
    return hm_error_set(err, "unknown sink '%s' (spool, stdout, nats)", cfg->sink);
}

int hm_sink_close(hm_sink *sink, hm_error *err)
{
    if (sink->ops == NULL)
        return 0;
    int rc = sink->ops->close(sink->state, err);
    sink->ops = NULL;
    sink->state = NULL;
    return rc;
}
