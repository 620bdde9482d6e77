"""What using a node's idle CPUs would save when the machine's CPUs are shared
(the ``idle_cpu`` factor's estimate for "CPUs shared with other nodes"; not a
factor).

A node that leaves CPUs idle while its job's ranks compute could run more
ranks (or threads). Where other nodes or processes of the machine use its
CPUs (a test bed: every node may use every CPU), the kernel shares the CPUs
among the runnable tasks: a new rank gets a share, and the job, with more of
the machine's runnable tasks, gets more of its CPUs than before.

Per node, over the periods in which the job computed (its CPU use at least
``cpu_bound_share`` of its usual, the 90th percentile: more CPUs do not
shorten a wait for messages or I/O):

- ``u``: the CPUs' worth the job's tasks used (``procio.cpu_pct``);
- ``R``: its tasks (``procio.tasks``: one per rank; a task that used more
  than a CPU runs threads, and counts as ``u``), so each got ``s = u / R`` of a
  CPU: the per-rank CPU time;
- ``C``: the node's CPUs (``node_cgroup.cpus``), ``H`` the machine's (its
  host-wide per-CPU sensors);
- the others' demand ``O``: on a machine whose CPUs were all busy (host-wide
  ``cpu_busy_host_pct`` or more; ``[idle_cpu]`` in parameters.toml) the
  kernel's fair share ``s = H / (R + O)`` gives it; on one with CPUs free,
  what the others used;
- with ``C`` ranks (one per node CPU) a task gets ``s' = min(1, H / (O + C))``
  and the job ``C s'`` CPUs: the computing periods take ``u / (C s')`` of
  their time.

That is the high end: it takes the work to divide evenly over the ranks with
nothing added (no more communication, no serial part), and the ranks to be
ready to run as much as before, which one run cannot show. The low end is 0:
a program whose work does not divide, or whose ranks wait on each other more
when they share the machine's CPUs with more tasks, gains nothing or loses
(``hushmon compare`` of runs at two sizes measures it: the decomposition
factor). The job moves at its slowest node: the node with the least saving
sets it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hushmon.digest.jobdata import JobData

_CPU_TAG = re.compile(r"cpu=cpu\d+")


@dataclass
class IdleCpuSaving:
    high_share: float  # of the job's run time; the low end is 0
    computing_share: float  # of the job's periods: those the job computed in
    node: str  # the node that sets it (least saving)
    node_cpus: float  # C
    job_cpus: float  # u
    tasks: float  # R
    share_before: float  # s: a task's share of a CPU
    share_after: float  # s', with C ranks
    others: float  # O: CPUs' worth the machine's other tasks demanded
    host_cpus: int  # H
    contended: bool  # the machine's CPUs were all busy

    def basis(self) -> str:
        others = (
            f"the machine's {self.host_cpus} CPUs were busy, so by the kernel's fair share "
            f"its other tasks wanted {self.others:.1f} CPUs"
            if self.contended
            else f"its other tasks used {self.others:.1f} of the machine's {self.host_cpus} CPUs"
        )
        return (
            f"on {self.node}, in the {self.computing_share:.0%} of the run the job computed, "
            f"its {self.tasks:g} task(s) used {self.job_cpus:.2f} of the node's "
            f"{self.node_cpus:g} CPUs ({self.share_before:.0%} of a CPU each); {others}; "
            f"with {self.node_cpus:g} ranks each would get {self.share_after:.0%} of a CPU, "
            f"{self.node_cpus * self.share_after:.2f} CPUs for the job"
        )


def host_cpu_count(job: JobData) -> int:
    """The machine's CPUs: its host-wide per-CPU sensors (0: not read)."""
    return sum(
        1
        for s in job.base_sensors("cpu.user_pct")
        if "scope=host" in s and _CPU_TAG.search(s) is not None
    )


def _job_matrix(job: JobData, name: str) -> np.ndarray | None:
    """The job's own ``procio`` sensor (tag ``job=<this job>``)."""
    for s in job.base_sensors(name):
        if f"job={job.job}]" in s or f"job={job.job}," in s:
            m = job.matrix(s)
            return m if m is not None and np.isfinite(m).any() else None
    return None


def idle_cpu_saving(job: JobData, params: Mapping[str, Any]) -> IdleCpuSaving | str:
    """The high end of what a rank per node CPU would save (the module's words), or
    why it cannot be told."""
    cpu = _job_matrix(job, "procio.cpu_pct")
    tasks_m = _job_matrix(job, "procio.tasks")
    cpus_m = job.matrix("node_cgroup.cpus")
    host_busy = job.matrix("cpu.host_busy_pct")
    host_cpus = host_cpu_count(job)
    if cpu is None or tasks_m is None:
        return "the job's own CPU time and tasks (procio) were not read"
    if cpus_m is None or host_busy is None or not host_cpus:
        return "the node's or the machine's CPU count or the machine's busy CPUs are not known"
    bound = float(params["cpu_bound_share"])
    busy_host = float(params["cpu_busy_host_pct"])
    u_all = np.nan_to_num(cpu) / 100.0
    n = u_all.shape[1]
    best: IdleCpuSaving | None = None
    for i, host in enumerate(job.hosts):
        usual = float(np.quantile(u_all[i], 0.9)) if n else 0.0
        computing = u_all[i] >= bound * usual
        c = float(np.nanmedian(cpus_m[i])) if np.isfinite(cpus_m[i]).any() else 0.0
        if usual < 0.05 or c <= 0 or not computing.any():
            return f"the job hardly used {host}'s CPUs: more of them would not help"
        u = float(np.mean(u_all[i][computing]))
        with np.errstate(all="ignore"):
            r_tasks = float(np.nanmedian(tasks_m[i][computing]))
            hb = float(np.nanmean(host_busy[i][computing]))
        if not np.isfinite(r_tasks) or r_tasks < 1 or not np.isfinite(hb):
            return f"the job's tasks or the machine's busy CPUs on {host} were not read"
        r = max(r_tasks, u)  # a task above a CPU runs threads: one CPU each
        s = u / r
        contended = hb >= busy_host
        others = max(0.0, host_cpus / s - r) if contended else max(0.0, hb / 100 * host_cpus - u)
        s_after = min(1.0, host_cpus / (others + c)) if others + c > 0 else 1.0
        saving = max(0.0, 1.0 - u / (c * s_after)) if r < c else 0.0
        share = float(np.mean(computing))
        node = IdleCpuSaving(
            saving * share, share, host, c, u, r_tasks, s, s_after, others, host_cpus, contended
        )
        if best is None or node.high_share < best.high_share:
            best = node
    if best is None:
        return "the job has no periods"
    return best
