#!/bin/sh
# collectd as users run it, in the foreground for `hushmon noise detect
# --noise-cmd "exec bench/noise_agents/collectd.sh"`: Interval 1 s, plugins
# cpu load memory disk interface, the csv writer. State in $HM_AGENT_DIR
# (default /tmp/hm-noise-collectd).
set -e
dir=${HM_AGENT_DIR:-/tmp/hm-noise-collectd}
mkdir -p "$dir"
cat > "$dir/collectd.conf" <<CONF
Interval 1
BaseDir "$dir"
PIDFile "$dir/collectd.pid"
PluginDir "/usr/lib/collectd"
TypesDB "/usr/share/collectd/types.db"
LoadPlugin cpu
LoadPlugin load
LoadPlugin memory
LoadPlugin disk
LoadPlugin interface
LoadPlugin csv
<Plugin csv>
  DataDir "$dir/csv"
</Plugin>
CONF
exec /usr/sbin/collectd -f -C "$dir/collectd.conf"
