"""What using a node's idle CPUs would save when the machine's CPUs are shared
(the ``idle_cpu`` factor's estimate for "CPUs shared with other nodes"; not a
factor).

A node that leaves CPUs idle while its job's ranks compute could run more
ranks (or threads). Where other nodes or processes of the machine use its
CPUs (a test bed: every node may use every CPU), only the CPUs the machine
itself left idle are there to take: the kernel shares a busy machine's CPUs
among scheduling groups (Slurm's job cgroups; without them, with
``kernel.sched_autogroup_enabled``, each session), not among tasks, so
more ranks of one job step split their group's share instead of adding to
it. The bed measured that: a second rank on a busy machine (load 16-22)
got 13-20 % of a CPU, the two 0.26-0.39 CPUs together, no more than the
one rank had alone (27-42 %), and a matmul ring ran 24-78 % slower
(docs/digest.md). An estimate from a per-task fair share (the earlier
one) promised 20-40 % on such jobs.

Per node, over the periods in which the job computed (its CPU use at least
``cpu_bound_share`` of its usual, the 90th percentile: more CPUs do not
shorten a wait for messages or I/O):

- ``u``: the CPUs' worth the job's tasks used (``procio.cpu_pct``);
- ``R``: its tasks (``procio.tasks``: one per rank; a task that used more
  than a CPU runs threads, and counts as ``u``);
- ``C``: the node's CPUs (``node_cgroup.cpus``), ``H`` the machine's (its
  host-wide per-CPU sensors);
- ``F``: the CPUs the machine left idle, ``H`` x (1 - its host-wide busy
  share); where the job's nodes share one machine (:func:`shared_host`)
  each of its ``N`` nodes would add ranks, so each gets ``F / N``;
- with ``C`` ranks the node's tasks use ``u' = min(C, u + F / N)`` (a task
  uses at most one CPU), and its computing periods take ``u / u'`` of
  their time. A node that already runs a rank per CPU (``R >= C``) saves
  nothing.

That is the high end: it takes the work to divide evenly over the ranks with
nothing added (no more communication, no serial part), and the idle CPUs to
stay idle for the new ranks. The low end is 0: a program whose work does
not divide gains nothing (``hushmon compare`` of runs at two sizes
measures it: the decomposition factor). The job moves at its slowest node:
the node with the least saving sets it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hushmon.digest.jobdata import JobData
from hushmon.digest.scope import shared_host

_CPU_TAG = re.compile(r"cpu=cpu\d+")


@dataclass
class IdleCpuSaving:
    high_share: float  # of the job's run time; the low end is 0
    computing_share: float  # of the job's periods: those the job computed in
    node: str  # the node that sets it (least saving)
    node_cpus: float  # C
    job_cpus: float  # u
    tasks: float  # R
    share_before: float  # u / R: a task's share of a CPU
    job_cpus_after: float  # u', with C ranks
    machine_free_cpus: float  # F: CPUs' worth the machine left idle
    nodes_on_machine: int  # N: the job's nodes that would share F
    host_cpus: int  # H

    def basis(self) -> str:
        shared = (
            f", shared by the job's {self.nodes_on_machine} nodes on it"
            if self.nodes_on_machine > 1
            else ""
        )
        return (
            f"on {self.node}, in the {self.computing_share:.0%} of the run the job computed, "
            f"its {self.tasks:g} task(s) used {self.job_cpus:.2f} of the node's "
            f"{self.node_cpus:g} CPUs ({self.share_before:.0%} of a CPU each); the machine's "
            f"{self.host_cpus} CPUs had {self.machine_free_cpus:.2f} idle{shared}: with "
            f"{self.node_cpus:g} ranks the job's tasks would use {self.job_cpus_after:.2f} CPUs"
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


def computing_periods(job: JobData, params: Mapping[str, Any]) -> np.ndarray | None:
    """Per node and period, whether the job computed: its tasks' CPU use (``procio``)
    at least ``cpu_bound_share`` of the node's usual (90th percentile). More ranks or
    CPUs shorten only these periods, not srun's launch nor a wait for messages or I/O.
    None where the job's own CPU time was not read."""
    cpu = _job_matrix(job, "procio.cpu_pct")
    if cpu is None or cpu.shape[1] == 0:
        return None
    u = np.nan_to_num(cpu) / 100.0  # no tasks read (the launch, the end): not computing
    usual = np.quantile(u, 0.9, axis=1, keepdims=True)
    return (u >= float(params["cpu_bound_share"]) * usual) & (usual >= 0.05)


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
    u_all = np.nan_to_num(cpu) / 100.0
    computing_all = computing_periods(job, params)
    if computing_all is None:
        return "the job has no periods"
    on_machine = len(job.hosts) if shared_host(job)[0] else 1
    best: IdleCpuSaving | None = None
    for i, host in enumerate(job.hosts):
        computing = computing_all[i]
        c = float(np.nanmedian(cpus_m[i])) if np.isfinite(cpus_m[i]).any() else 0.0
        if c <= 0 or not computing.any():
            return f"the job hardly used {host}'s CPUs: more of them would not help"
        u = float(np.mean(u_all[i][computing]))
        with np.errstate(all="ignore"):
            r_tasks = float(np.nanmedian(tasks_m[i][computing]))
            hb = float(np.nanmean(host_busy[i][computing]))
        if not np.isfinite(r_tasks) or r_tasks < 1 or not np.isfinite(hb):
            return f"the job's tasks or the machine's busy CPUs on {host} were not read"
        r = max(r_tasks, u)  # a task above a CPU runs threads: one CPU each
        free = max(0.0, 100.0 - hb) / 100.0 * host_cpus
        u_after = min(c, u + free / on_machine) if r < c else u
        saving = max(0.0, 1.0 - u / u_after) if u_after > 0 else 0.0
        share = float(np.mean(computing))
        node = IdleCpuSaving(
            saving * share, share, host, c, u, r_tasks, u / r, u_after, free, on_machine,
            host_cpus,
        )  # fmt: skip
        if best is None or node.high_share < best.high_share:
            best = node
    if best is None:
        return "the job has no periods"
    return best
