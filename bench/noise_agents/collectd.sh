#!/bin/sh
# collectd as users run it, in the foreground for `hushmon noise detect
# --noise-cmd "exec bench/noise_agents/collectd.sh"`: Interval 1 s, the
# configuration of `hushmon overhead`'s collectd mode (plugins cpu per CPU,
# load, memory, disk, interface; the csv writer). State in $HM_AGENT_DIR
# (default /tmp/hm-noise-collectd).
here=$(dirname "$0")
exec "$here/../../.venv/bin/python" -m hushmon.overhead.modes.collectd \
    "${HM_AGENT_DIR:-/tmp/hm-noise-collectd}" 1
