#!/bin/sh
# Slurm Epilog (slurm.conf Epilog=): job $SLURM_JOB_ID ended on this node.
# hushmon-job.sh, installed beside this file, does the work; exits 0 always
# (a failing epilog drains the node). See README.md.
# Runs as root: a fixed search path, never one from the environment.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
case $0 in */*) helper="${0%/*}/hushmon-job.sh" ;; *) helper=./hushmon-job.sh ;; esac
if [ -r "$helper" ]; then
    /bin/sh "$helper" end
else
    msg="hushmon: $helper missing; end of job ${SLURM_JOB_ID:-?} not reported"
    echo "$msg" >&2
    logger -t hushmon-slurm -p daemon.warning -- "$msg" 2>/dev/null
fi
exit 0
