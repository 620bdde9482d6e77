#include "sink.h"

#include <string.h>

static const hm_sink_ops *const sinks[] = {
    &hm_sink_spool,
    &hm_sink_stdout,
#ifdef HM_HAVE_NATS
    &hm_sink_nats,
#endif
};

int hm_sink_open(hm_sink *sink, const hm_agent_config *cfg, int64_t start_ns, hm_error *err)
{
    for (size_t i = 0; i < sizeof sinks / sizeof sinks[0]; i++) {
        if (strcmp(sinks[i]->name, cfg->sink) == 0) {
            sink->ops = sinks[i];
            sink->state = NULL;
            if (sinks[i]->open(&sink->state, cfg, start_ns, err) < 0) {
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
