#!/bin/sh
# Tells this node's hushmon-agent that a Slurm job begins or ends, so the
# node's samples are joined to the job:   hushmon-job.sh begin|end
# (called by prolog.sh and epilog.sh; see README.md).
#
# It always exits 0. slurmd drains a node whose prolog fails, and a job
# that runs unmonitored is better than a node taken out of service: when
# the agent is down, missing or refuses, the reason is logged to syslog
# (tag hushmon-slurm) and to stderr, and the job goes on.

# This runs as root. slurmd gives prologs no search path, and a PATH or
# HUSHMON_AGENT that came with the environment may name a user's program:
# the search path is fixed, and the agent is found from root's files only
# (hushmon-job.conf beside this script, else the fixed PATH).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

event=${1:-}
job=${SLURM_JOB_ID:-}
node=${SLURMD_NODENAME:-$(uname -n)}

log() {
    msg="hushmon: job ${job:-?} $event on $node: $*"
    printf '%s\n' "$msg" >&2
    if command -v logger >/dev/null 2>&1; then
        logger -t hushmon-slurm -p daemon.warning -- "$msg" 2>/dev/null || :
    fi
}

case $event in
begin | end) ;;
*)
    log "usage: hushmon-job.sh begin|end (got '$event'); nothing sent"
    exit 0
    ;;
esac
if [ -z "$job" ]; then
    log "SLURM_JOB_ID is not set; nothing sent"
    exit 0
fi

# hushmon-job.conf beside this script: KEY=VALUE lines, read (never run):
#   agent=/usr/local/bin/hushmon-agent    the agent binary
#   agent_config=/etc/hushmon/agent.toml  the agent's config (its control.socket)
conf_agent= conf_agent_config=
case $0 in */*) conf="${0%/*}/hushmon-job.conf" ;; *) conf=./hushmon-job.conf ;; esac
if [ -r "$conf" ]; then
    while IFS="=" read -r key value || [ -n "$key" ]; do
        case $key in
        agent) conf_agent=$value ;;
        agent_config) conf_agent_config=$value ;;
        esac
    done <"$conf"
fi

agent=${conf_agent:-$(command -v hushmon-agent 2>/dev/null || :)}
if [ -z "$agent" ] || [ ! -x "$agent" ]; then
    log "hushmon-agent not found (agent= in $conf: '${conf_agent}', PATH=$PATH); the job runs unmonitored"
    exit 0
fi

# Where the agent listens: $HUSHMON_AGENT_SOCKET, else control.socket from
# the agent's config file, else the agent's default (/run/hushmon/agent.sock).
config=${conf_agent_config:-/etc/hushmon/agent.toml}
if [ -n "${HUSHMON_AGENT_SOCKET:-}" ]; then
    set -- --socket "$HUSHMON_AGENT_SOCKET"
elif [ -r "$config" ]; then
    set -- --config "$config"
else
    set --
fi

# The prolog runs as root: it names the job's user (SLURM_JOB_UID), so that
# user's programs may write into the job (libhushmon) and the user may steer
# its measurement (hushmon ctl set --job). Only root may name a uid.
request="job $event $job"
case $event:${SLURM_JOB_UID:-} in
begin:[0-9]*) request="$request uid=$SLURM_JOB_UID" ;;
esac

# --send gives up after the timeout, so a hung agent cannot hold the job.
if ! answer=$("$agent" "$@" --send-timeout-ms "${HUSHMON_AGENT_TIMEOUT_MS:-3000}" \
    --send "$request" 2>&1); then
    log "$answer; the job runs unmonitored"
fi
exit 0
