"""A cgroup of its own for each Slurm job on a bed node, so the agent's
per-job sources (``procio``: the job's tasks' /proc/PID/io and
/proc/PID/stat; ``cgroup``: its cpu.stat) see the job apart from the node.

Why the bed needs this: its slurmd runs with proctrack/linuxproc and
task/none (python/hushmon/testbed/slurm.py: every node is a process tree on
one kernel, and Slurm's cgroup plugins would have each slurmd manage the
machine's one hierarchy), so Slurm makes no job cgroup. A job's tasks then
sit in their node's cgroup with slurmd, and the agent, which finds a job's
tasks through the job's cgroup (``job begin ID cgroup=PATH``, or Slurm's
own ``system.slice/slurmstepd.scope/job_ID`` on a cgroup v2 cluster), had
none to read: no procio or job cgroup lines for bed jobs.

What the bed does instead, as a site's Slurm would with task/cgroup:

- the prolog (root, on every node of the allocation) makes
  ``<node's v2 cgroup>/job_<id>`` and tells the node's agent
  ``job begin <id> cgroup=<path>``; the epilog removes it;
- the TaskProlog (run by slurmstepd in each task's process, as the job's
  user, just before the task execs its program) writes its parent, the
  task, into that cgroup, so the program and everything it starts run there.

The job's cgroup is in the v2 hierarchy: the node's own on a v2 machine,
else the controller-less one mounted beside v1's (this VM's
/sys/fs/cgroup/unified; python/hushmon/testbed/cgroups.py). Its memory is
bounded by the node's limit above it (``testbed up --node-memory``), which
is what gives a job like outofcore a small page cache. Moving a task needs
write access to cgroup.procs of the source and destination's common
ancestor (the node's, root's): jobs of other users stay in the node's
cgroup (one line on the task's stderr), as before.

While the bed is up, the kernel's delay accounting is on
(``kernel.task_delayacct = 1``; restored at ``down``), so procio's
``blkio_wait_pct`` (the tasks' wait for block I/O) is measured.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from hushmon.paths import build_bin_dir
from hushmon.testbed import cgroups
from hushmon.testbed.launcher import write_script
from hushmon.testbed.state import Bed

DELAYACCT = Path("/proc/sys/kernel/task_delayacct")
DELAYACCT_BEFORE = "task_delayacct.before"  # in the bed's folder: the value to restore


def job_script(bed: Bed) -> Path:
    return bed.bin / "job-cgroup"


def task_prolog(bed: Bed) -> Path:
    return bed.bin / "slurm-task-prolog"


def _parents(bed: Bed) -> Path | None:
    """The folder holding every node's v2 directory (None: no v2 hierarchy)."""
    some = cgroups.jobs_parent(bed.cgroups, "x")
    return None if some is None else some.parent


def write_job_scripts(bed: Bed) -> None:
    """The prolog's and epilog's helper and the TaskProlog (see the module's doc)."""
    parents = _parents(bed)
    if parents is None:
        body = "exit 0  # this machine mounts no cgroup v2 hierarchy: jobs stay in the node's\n"
        write_script(job_script(bed), "#!/bin/sh\n" + body)
        write_script(task_prolog(bed), "#!/bin/sh\n" + body)
        return
    rel = parents.relative_to(bed.cgroups.mount)
    q = shlex.quote
    agent = q(str(build_bin_dir() / "hushmon-agent"))
    check = """job=${SLURM_JOB_ID:-}
node=${SLURMD_NODENAME:-}
case $job in '' | *[!0-9]*) exit 0 ;; esac
case $node in '' | *[!a-z0-9-]*) exit 0 ;; esac
"""
    write_script(
        job_script(bed),
        f"""#!/bin/sh
# job-cgroup begin|end (root, from the bed's prolog and epilog): job
# $SLURM_JOB_ID's own cgroup on node $SLURMD_NODENAME, and the node's agent
# told where it is (python/hushmon/testbed/jobcgroups.py). Exits 0 always.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
{check}dir={q(str(parents))}/$node/job_$job
case ${{1:-}} in
begin)
    if ! mkdir -p "$dir" || ! chown "${{SLURM_JOB_UID:-0}}" "$dir/cgroup.procs"; then
        echo "hushmon testbed: no cgroup for job $job on $node" >&2
        exit 0
    fi
    {agent} --socket "${{HUSHMON_AGENT_SOCKET:?}}" --send-timeout-ms 3000 \\
        --send "job begin $job cgroup={q(str(rel))}/$node/job_$job" >/dev/null ||
        echo "hushmon testbed: the agent of $node was not told job $job's cgroup" >&2
    ;;
end) rmdir "$dir" 2>/dev/null ;;
esac
exit 0
""",
    )
    write_script(
        task_prolog(bed),
        f"""#!/bin/sh
# Slurm TaskProlog of the bed (the job's user, in each task's process just
# before it execs the program): the task joins its job's cgroup. Nothing
# on stdout (slurmstepd reads it for export lines). Exits 0 always.
{check}procs={q(str(parents))}/$node/job_$job/cgroup.procs
if ! echo "$PPID" 2>/dev/null >"$procs"; then
    echo "hushmon testbed: task $PPID of job $job stays in $node's cgroup ($procs refused)" >&2
fi
exit 0
""",
    )


def enable_delay_accounting(bed: Bed) -> bool:
    """Turns the kernel's delay accounting on for the bed's life; False where
    this kernel has no switch (before 5.14: on unless booted nodelayacct)."""
    try:
        before = DELAYACCT.read_text().strip()
    except OSError:
        return False
    if before != "1":
        (bed.root / DELAYACCT_BEFORE).write_text(before + "\n")
        DELAYACCT.write_text("1\n")
    return True


def restore_delay_accounting(root: Path) -> bool:
    """Puts back the value found at ``up`` (True if it did)."""
    saved = root / DELAYACCT_BEFORE
    try:
        before = saved.read_text().strip()
    except OSError:
        return False
    try:
        DELAYACCT.write_text(before + "\n")
    except OSError:
        return False
    saved.unlink()
    return True
