#!/bin/sh
# Slurm Prolog (slurm.conf Prolog=): job $SLURM_JOB_ID of user $SLURM_JOB_UID
# begins on this node (the agent gets `job begin ID uid=UID`).
# hushmon-job.sh, installed beside this file, does the work; exits 0 always
# (a failing prolog drains the node). See README.md.
# Runs as root: a fixed search path, never one from the environment.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
case $0 in */*) helper="${0%/*}/hushmon-job.sh" ;; *) helper=./hushmon-job.sh ;; esac
if [ -r "$helper" ]; then
    /bin/sh "$helper" begin
else
    msg="hushmon: $helper missing; job ${SLURM_JOB_ID:-?} runs unmonitored"
    echo "$msg" >&2
    logger -t hushmon-slurm -p daemon.warning -- "$msg" 2>/dev/null
fi
exit 0
