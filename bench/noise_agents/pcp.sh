#!/bin/sh
# PCP as users run it, in the foreground for `hushmon noise detect
# --noise-cmd "exec bench/noise_agents/pcp.sh" --noise-warmup 3`: pmcd with
# the Debian PMDAs (/etc/pcp/pmcd/pmcd.conf) on a private port, and pmlogger
# logging CPU (total and per CPU), load, memory, disk and network bytes
# every second. State in $HM_AGENT_DIR (default /tmp/hm-noise-pcp).
set -e
dir=${HM_AGENT_DIR:-/tmp/hm-noise-pcp}
port=${HM_PMCD_PORT:-44399}
mkdir -p "$dir"
cd "$dir"   # the PMDAs write their logs here
cat > pmlogger.conf <<CONF
log mandatory on 1 sec {
    kernel.all.cpu
    kernel.percpu.cpu
    kernel.all.load
    mem.util
    disk.dev.read_bytes
    disk.dev.write_bytes
    network.interface.in.bytes
    network.interface.out.bytes
}
CONF
/usr/lib/pcp/bin/pmcd -f -p "$port" -s "$dir/pmcd.socket" -l "$dir/pmcd.log" &
sleep 1
exec /usr/lib/pcp/bin/pmlogger -h "localhost:$port" -c "$dir/pmlogger.conf" \
    -l "$dir/pmlogger.log" -t 1 "$dir/archive-$$"
