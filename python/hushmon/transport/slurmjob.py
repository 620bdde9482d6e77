"""The nodes a Slurm job runs on, for ``hushmon ctl --job N``: asking those
agents by name (instead of every agent on hm.ctl.all) lists the ones that
do not answer and returns as soon as all have answered."""

from __future__ import annotations

import shutil
import subprocess

from hushmon.hostlist import expand_hostlist

# A job that is still running or winding down; a finished job has no nodes to change.
_ACTIVE_STATES = "RUNNING,COMPLETING,SUSPENDED"


def job_nodes(job: str, timeout_s: float = 15.0) -> list[str] | None:
    """The hosts of the active Slurm job ``job``, or None when Slurm is not
    here or does not know it as active (a job id of `hushmon run` outside
    Slurm): the caller then asks every agent. squeue answers in milliseconds
    unless slurmctld is busy; the bound is long because a give-up turns a
    job's request into a broadcast that cannot name a silent node (a bed
    test under a loaded CI-like run got such a broadcast; 5 s running out
    is the likely cause, not shown)."""
    squeue = shutil.which("squeue")
    if squeue is None or not job.isdigit():
        return None
    try:
        out = subprocess.run(
            [squeue, "-h", "-j", job, "-t", _ACTIVE_STATES, "-o", "%N"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    hosts = [h for line in out.stdout.split() for h in expand_hostlist(line)]
    return sorted(set(hosts)) or None


def squeue_users(timeout_s: float = 10.0) -> dict[str, str] | None:
    """job id -> user name of every job squeue lists (one call for all: hushmon
    metrics' user label, hushmon serve's owners); None without Slurm."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    try:
        out = subprocess.run(
            [squeue, "-h", "-a", "-o", "%A %u"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    users: dict[str, str] = {}
    for line in out.stdout.splitlines():
        job, _, user = line.strip().partition(" ")
        if job and user:
            users[job] = user.strip()
    return users
