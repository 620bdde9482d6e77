"""Idle or waiting CPUs: cores the job was given but did not use.

Idle time means fewer runnable threads than cores (blocking waits,
serial phases, under-subscription); iowait means waiting for storage.

With node-scoped agents (docs/agent.md "Node scope") a node's idle time is
that of its cgroup's CPUs, which other nodes of the same machine may be
using (a test bed: every node may use every CPU). Idle time is free only
when the machine's CPUs are idle too, so where the host-wide CPU
(``scope=host``) is known the idle time counted is the smaller of the two;
node idle time that the host did not have is reported as CPUs shared with
other nodes, not as idle, with what a rank per idle CPU would save from the
CPUs the machine left idle (:mod:`cpu_share`: 0 to the high end where the
work divides evenly; a busy machine's CPUs are not the job's to take).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import Finding, Loss, longest_run, span_of
from hushmon.digest.factors.cpu_share import computing_periods, idle_cpu_saving
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import ACROSS_NODES

# a task that got less than this share of a CPU waited for one more than it ran
OVERSUBSCRIBED_SHARE = 0.5


class IdleCpu:
    name = "idle_cpu"
    title = "Idle or waiting CPUs"
    requires = ("cpu.idle_pct",)
    optional = ("cpu.iowait_pct", "cpu.host_busy_pct")
    # what it needs (digest/resolution.py): idle share of CPU time, a mean over nodes and periods
    resolution = ACROSS_NODES

    def _waiting(self, job: JobData) -> tuple[np.ndarray, np.ndarray]:
        idle = job.matrix("cpu.idle_pct")
        assert idle is not None
        iowait = job.matrix("cpu.iowait_pct")
        return idle, (np.zeros_like(idle) if iowait is None else np.nan_to_num(iowait))

    def _free(self, job: JobData, idle: np.ndarray) -> np.ndarray | None:
        """Node idle time the machine had free too (None: host-wide CPU unknown)."""
        host_busy = job.matrix("cpu.host_busy_pct")
        if host_busy is None or not np.isfinite(host_busy).any():
            return None
        return np.where(np.isfinite(host_busy), np.fmin(idle, 100.0 - host_busy), idle)

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Job-average idle + iowait, % of the cores (idle the machine had free, in node scope)."""
        idle, iowait = self._waiting(job)
        free = self._free(job, idle)
        return float(np.nanmean((idle if free is None else free) + iowait))

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        idle, iowait = self._waiting(job)
        free = self._free(job, idle)
        node_avg = float(np.nanmean(idle + iowait))
        if free is not None:
            shared = self._shared(job, params, idle, free, node_avg)
            idle = free
        waiting = idle + iowait
        avg = float(np.nanmean(waiting))
        if avg < params["idle_medium_pct"]:
            return [] if free is None or shared is None else [shared]
        with np.errstate(all="ignore"):
            per_node = np.nanmean(waiting, axis=1)
            per_time = np.nanmean(waiting, axis=0)
        idle_nodes = [job.hosts[i] for i in np.flatnonzero(per_node >= params["node_idle_pct"])]
        evidence = {
            "idle_pct": round(float(np.nanmean(idle)), 1),
            "iowait_pct": round(float(np.nanmean(iowait)), 1),
            "nodes_mostly_idle": len(idle_nodes),
            "mostly_idle_nodes": ", ".join(idle_nodes[:10]) or "none",
            "share_of_time_over_threshold": round(
                float(np.mean(per_time >= params["idle_medium_pct"])), 3
            ),
        }
        if free is not None:
            evidence["node_idle_pct_before_host_check"] = round(node_avg, 1)
        disk_wait = ""
        host_iowait = job.matrix("cpu.iowait_pct[cpu=total,scope=host]")
        if not job.has("cpu.iowait_pct") and host_iowait is not None:
            hw = float(np.nanmean(host_iowait))
            evidence["iowait_pct_host_wide"] = round(hw, 1)
            if hw >= params["idle_medium_pct"] / 2:
                disk_wait = (
                    f" The node's cgroup has no I/O wait of its own, but the machine's CPUs "
                    f"waited for I/O {hw:.0f}% of the time (host-wide): much of this idle "
                    "time is waiting for the disk (see the disk factor)."
                )
        severity = "high" if avg >= params["idle_high_pct"] else "medium"
        waits = (
            f"or waiting for I/O ({evidence['iowait_pct']}%)"
            if job.has("cpu.iowait_pct")
            else "(the node's cgroup does not count I/O wait apart)"
        )
        hint = (
            f"On average {avg:.0f}% of the job's CPU time is idle ({evidence['idle_pct']}%) "
            f"{waits}; "
            f"{len(idle_nodes)} of {len(job.hosts)} node(s) are idle at least "
            f"{params['node_idle_pct']}% of the time.{disk_wait} Run one process (or thread) "
            "per core, overlap communication (and I/O) with computation, or look for serial "
            "phases."
        )
        over = per_time >= params["idle_medium_pct"]
        run = longest_run(over)
        finding = Finding(self.name, self.title, severity, evidence, hint, span_of(job, run))
        long_share = float(np.mean(over)) if over.size else 0.0
        with np.errstate(all="ignore"):
            idle_in_long = float(np.nanmean(per_time[over])) / 100 if over.any() else 0.0
        low = long_share * idle_in_long
        computing = computing_periods(job, params)
        reclaimed = "only the stretches of long idleness can be reclaimed (low end)"
        if computing is not None and computing.shape == waiting.shape and over.any():
            # more ranks or threads shorten the periods the job computed in, not srun's
            # launch nor its waits: the low end counts a node's idle time only there
            # (the bed's idle-cpu case: 8 periods, 1 rank at a whole CPU of 2; the launch
            # and end periods idle too: 49 % idle, 35 % in the computing periods, 43 %
            # saved by a second rank)
            with np.errstate(all="ignore"):
                low_per_time = np.nanmean(np.where(computing, waiting, 0.0), axis=0)
            low = float(np.sum(low_per_time[over])) / 100 / over.size
            reclaimed = (
                "only the idle time of the long idle stretches in which the job computed "
                "(its CPU use at least half its usual) is reclaimed (low end: not srun's "
                "launch, nor waits)"
            )
        finding.loss = Loss(
            low,
            avg / 100,
            f"the CPUs idle or wait {avg:.0f}% of the job's CPU time, {idle_in_long:.0%} in "
            f"the {long_share:.0%} of the run where the average node idles "
            f"{params['idle_medium_pct']}% or more",
            [
                "the job's work can use the idle CPUs (more ranks or threads per node, "
                "waits overlapped with computation)",
                f"{reclaimed}, or all of it (high end)",
            ],
        )
        return [finding]

    def _shared(
        self,
        job: JobData,
        params: Mapping[str, Any],
        idle: np.ndarray,
        free: np.ndarray,
        node_avg: float,
    ) -> Finding | None:
        """Node idle time the machine did not have: CPUs used by other nodes."""
        taken = float(np.nanmean(idle - free))
        if node_avg < params["idle_medium_pct"] or taken < params["idle_medium_pct"] / 2:
            return None
        host_busy = job.stats["cpu.host_busy_pct"].avg
        cpus = job.matrix("node_cgroup.cpus")
        cpus_text = (
            f"{float(np.nanmedian(cpus)):g}"
            if cpus is not None and np.isfinite(cpus).any()
            else "?"
        )
        evidence = {
            "node_idle_pct": round(node_avg, 1),
            "host_busy_pct": round(float(np.nanmean(host_busy)), 1),
            "idle_pct_the_host_had_free": round(float(np.nanmean(free)), 1),
            "idle_pct_used_by_others": round(taken, 1),
            "cpus_per_node": cpus_text,
            "nodes": len(job.hosts),
        }
        hint = (
            f"The nodes' cgroups left {node_avg:.0f}% of their {cpus_text} CPU(s) idle, but the "
            f"machine's CPUs were {evidence['host_busy_pct']:.0f}% busy (host-wide, "
            f"scope=host): {taken:.0f} of those points were CPU time other nodes or processes "
            "on the same machine used, not time the job could have had. Give each node "
            "CPUs of its own (fewer nodes per machine; on the test bed --cpus-per-node with "
            "nodes x CPUs per node within the machine's CPUs) before reading idle time as "
            "the job's."
        )
        finding = Finding(
            self.name, "CPUs shared with other nodes of the machine", "low", evidence, hint
        )
        saving = idle_cpu_saving(job, params)
        if isinstance(saving, str):
            finding.loss_unknown = f"what a rank per idle CPU would save cannot be told: {saving}"
            return finding
        evidence.update(
            {
                "job_cpus_used": round(saving.job_cpus, 2),
                "job_tasks_per_node": saving.tasks,
                "cpu_share_per_task": round(saving.share_before, 3),
                "machine_cpus": saving.host_cpus,
                "machine_idle_cpus": round(saving.machine_free_cpus, 2),
                "job_nodes_on_the_machine": saving.nodes_on_machine,
                "job_cpus_with_a_rank_per_cpu": round(saving.job_cpus_after, 2),
                "share_of_run_computing": round(saving.computing_share, 3),
            }
        )
        oversubscribed = saving.share_before < OVERSUBSCRIBED_SHARE
        finding.hint += (
            f" A rank per node CPU would get only the CPUs the machine left idle "
            f"({saving.machine_free_cpus:.2f} of {saving.host_cpus}): it would save at most "
            f"{saving.high_share:.0%} of the run time, and nothing if the program's work does "
            "not divide over more ranks"
            + (
                "; with the CPUs this oversubscribed, ranks that exchange messages may also "
                "wait for each other's turn and run slower."
                if oversubscribed
                else "."
            )
        )
        finding.loss = Loss(
            0.0,
            saving.high_share,
            saving.basis(),
            [
                "the job's work divides evenly over a rank per node CPU with nothing added "
                "(no more communication, no serial part) and its ranks stay as ready to run "
                "(high end); the program's scaling is not measured by one run, so it may gain "
                "nothing (low end: 0; hushmon compare of two sizes measures it)",
                "the new ranks get only the CPUs the machine left idle: its scheduler shares "
                "busy CPUs among groups (the job's cgroup, or its session with autogroup), "
                "not among tasks, so more ranks split their group's share rather than take "
                "the other tasks' CPU time",
                "only the periods the job computed in (not its waits) shrink",
                *(
                    [
                        f"on CPUs this oversubscribed (a task got {saving.share_before:.0%} of "
                        "a CPU) ranks that exchange messages do not wait for each other's turn "
                        "on the CPUs more than before; where they do, more ranks run slower, "
                        "which this range (a saving, 0 at least) cannot say"
                    ]
                    if oversubscribed
                    else []
                ),
            ],
        )
        return finding


FACTOR = IdleCpu()
