"""CPUs shared with other work: a neighbour on the job's nodes.

A node's CPU time (its ``cpu`` lines: the node's cgroup in node scope, else
the machine) minus the job's own (its cgroup: the agent's ``cgroup`` source)
is work that is not the job's: another job, a daemon, a runaway process.
It costs the job only where the CPUs its ranks could run on had nothing
free (the node's, and where nodes share a machine, the machine's too): then
the neighbour's CPU time is time the job's runnable ranks did not get.

What stopping the neighbour would give the job, per node and period (all in
% of the node's CPUs): the neighbour's contended time ``c`` (its CPU time
beyond what the CPUs had free) goes back to whoever was waiting.

- low end: the job gets its fair share of it, in proportion to the CPU time
  it had among all the other work on those CPUs (the scheduler shares
  among runnable tasks by what each received): ``c x job / (busy - other)``;
- high end: the job's ranks get all of it; where the job's nodes share one
  machine, its ranks on all of them share it (``c x job / the job's CPU time
  on the machine``), since the machine's scheduler does not keep it for the
  neighbour's node.

Where the agent's ``procio`` source counts the job's tasks and their CPU
time (% of one CPU), the gain is at most what its tasks lacked of a whole
CPU each: ranks that each had a CPU of their own were not short of CPU,
however busy the node (a rank and a neighbour on a 2-CPU node).

The node's ranks then run ``job + gain`` instead of ``job``: they would take
``job / (job + gain)`` of the time, a saving of ``gain / (job + gain)``. The
job runs at its slowest node's pace, so each period saves the largest
node's saving; the loss is the mean over the periods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, Loss, SkipReason
from hushmon.digest.factors.work import JOB_CPU, job_cpu, job_cpu_sensors
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE
from hushmon.digest.scope import shared_host


class Neighbour:
    name = "neighbour"
    title = "CPUs shared with other work"
    requires = ("cpu.busy_pct",)
    optional = ("cpu.host_busy_pct", "node_cgroup.cpus")
    # what it needs (digest/resolution.py): each node's own and the job's CPU time
    resolution = PER_NODE

    def _inputs(self, job: JobData) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(the job's CPU %, the node's busy CPU %, the machine's busy CPU % or None)."""
        mine = job_cpu(job, JOB_CPU)
        if mine is None:
            raise AnalyzerSkip(
                SkipReason.MISSING_SENSOR,
                f"needs the job's own CPU time on every node ({JOB_CPU}: the agent's cgroup "
                "source, from a job cgroup)",
            )
        busy = job.matrix("cpu.busy_pct")
        assert busy is not None  # required
        host = job.matrix("cpu.host_busy_pct")
        if host is not None and not np.isfinite(host).any():
            host = None
        return mine, busy, host

    @staticmethod
    def _headroom(job: JobData) -> np.ndarray | None:
        """Per node and period, % of the node's CPUs the job's tasks lacked of one CPU
        each (procio's tasks and cpu_pct; None where not measured)."""
        cpus = job.matrix("node_cgroup.cpus")
        tasks = [job.matrix(s) for s in job_cpu_sensors(job, "procio.tasks")]
        used = [job.matrix(s) for s in job_cpu_sensors(job, "procio.cpu_pct")]
        if cpus is None or not tasks or not used:
            return None
        with np.errstate(all="ignore"):
            n = np.nansum(np.stack([t for t in tasks if t is not None]), axis=0)
            u = np.nansum(np.stack([m for m in used if m is not None]), axis=0)
            lack = np.clip(n * 100.0 - u, 0.0, None) / np.where(cpus > 0, cpus, np.nan)
        return np.where(n > 0, lack, np.nan)

    def _savings(
        self, job: JobData, mine: np.ndarray, busy: np.ndarray, host: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        """Per node and period: the neighbour's CPU, its contended part and the savings."""
        with np.errstate(all="ignore"):
            other = np.clip(busy - mine, 0.0, None)
            free = 100.0 - busy
            competing = busy.copy()
            if host is not None:
                # the machine's CPUs: the node's idle time may be another node's busy time
                free = np.where(np.isfinite(host), np.fmin(free, 100.0 - host), free)
                competing = np.where(np.isfinite(host), np.fmax(busy, host), busy)
            free = np.clip(free, 0.0, None)
            contended = np.clip(other - free, 0.0, other)
            rest = np.maximum(competing - other, 1e-9)
            gain_low = contended * np.clip(mine / rest, 0.0, 1.0)
            shares, _ = shared_host(job) if host is not None else (None, "")
            if shares and mine.shape[0] > 1:
                on_machine = np.nansum(mine, axis=0, keepdims=True)
                gain_high = contended * np.clip(mine / np.maximum(on_machine, 1e-9), 0.0, 1.0)
            else:
                gain_high = contended
            headroom = self._headroom(job)
            if headroom is not None:
                # np.fmin: a period without the tasks' count keeps the gain
                gain_low = np.fmin(gain_low, headroom)
                gain_high = np.fmin(gain_high, headroom)
            gain_high = np.fmax(gain_high, gain_low)
            save_low = gain_low / np.maximum(mine + gain_low, 1e-9)
            save_high = gain_high / np.maximum(mine + gain_high, 1e-9)
        ok = np.isfinite(mine) & np.isfinite(busy)
        return {
            "other": np.where(ok, other, np.nan),
            "free": np.where(ok, free, np.nan),
            "contended": np.where(ok, contended, np.nan),
            "save_low": np.where(ok & (mine > 0), save_low, np.nan),
            "save_high": np.where(ok & (mine > 0), save_high, np.nan),
        }

    @staticmethod
    def _per_period(save: np.ndarray) -> np.ndarray:
        """The job's saving per period: its slowest node's (NaN where no node is known)."""
        known = np.isfinite(save).any(axis=0)
        out = np.full(save.shape[1], np.nan)
        if known.any():
            out[known] = np.nanmax(save[:, known], axis=0)
        return out

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """The high end of the share of run time the neighbours cost."""
        try:
            mine, busy, host = self._inputs(job)
        except AnalyzerSkip:
            return None
        high = self._per_period(self._savings(job, mine, busy, host)["save_high"])
        return float(np.nanmean(high)) if np.isfinite(high).any() else None

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        mine, busy, host = self._inputs(job)
        s = self._savings(job, mine, busy, host)
        with np.errstate(all="ignore"):
            other_node = np.nanmean(s["other"], axis=1)
        if not np.isfinite(other_node).any():
            raise AnalyzerSkip(SkipReason.NOT_ENOUGH_DATA, "no period with the job's CPU time")
        worst = int(np.nanargmax(other_node))
        if other_node[worst] < params["min_other_pct"]:
            return []
        low_t, high_t = self._per_period(s["save_low"]), self._per_period(s["save_high"])
        known = np.isfinite(high_t)
        if not known.any():
            raise AnalyzerSkip(SkipReason.NOT_ENOUGH_DATA, "no period with the job's CPU time")
        low, high = float(np.mean(low_t[known])), float(np.mean(high_t[known]))
        if high < params["min_loss_share"]:
            return []
        with np.errstate(all="ignore"):
            job_node = np.nanmean(mine, axis=1)
            free_node = np.nanmean(s["free"], axis=1)
            contended_share = float(np.mean(np.nanmax(s["contended"][:, known], axis=0) > 0))
        host_text = (
            f"{float(np.nanmean(host)):.0f}" if host is not None else "not measured (node only)"
        )
        nodes = [
            job.hosts[i]
            for i in np.flatnonzero(np.nan_to_num(other_node) >= params["min_other_pct"])
        ]
        evidence: dict[str, Any] = {
            "node": job.hosts[worst],
            "other_work_cpu_pct": round(float(other_node[worst]), 1),
            "job_cpu_pct": round(float(job_node[worst]), 1),
            "free_cpu_pct": round(float(free_node[worst]), 1),
            "host_busy_pct": host_text,
            "nodes_with_other_work": ", ".join(nodes[:10]),
            "per_node_other_work_pct": ", ".join(
                f"{h} {v:.1f}" for h, v in zip(job.hosts, other_node, strict=True) if np.isfinite(v)
            ),
            "contended_share_of_periods": round(contended_share, 3),
            "job_cpu_from": JOB_CPU + " (the job's cgroup)",
            "node_cpu_from": ", ".join(job.derived_inputs.get("cpu.busy_pct", ["cpu.busy_pct"])),
        }
        h = job.hosts[worst]
        hint = (
            f"On {h} other work than the job's used {other_node[worst]:.0f}% of the node's CPUs "
            f"(the node's CPU time less the job's own cgroup: another job, a daemon or a "
            f"runaway process) while the job's ranks there used {job_node[worst]:.0f}% and the "
            f"CPUs they could run on had {free_node[worst]:.0f}% free"
            + (f" (the machine's CPUs {host_text}% busy)" if host is not None else "")
            + f": in {contended_share:.0%} of the periods the job's ranks waited for CPUs "
            "that work held. The job runs at its slowest node's pace, so every rank waits "
            f"for {h}'s. Find what runs beside the job there (the processes of the node that "
            "are not in the job's cgroup) and stop or move it, or ask for exclusive nodes."
        )
        finding = Finding(self.name, self.title, "medium", evidence, hint)
        finding.loss = Loss(
            low,
            high,
            f"per period the node where the other work costs most: its contended CPU time "
            f"given back to the job's ranks (mean of the {int(known.sum())} periods with the "
            f"job's CPU time; {h}: other work {other_node[worst]:.0f}%, job "
            f"{job_node[worst]:.0f}%, free {free_node[worst]:.0f}% of the node's CPUs)",
            [
                "the job's ranks were ready to run all the while (computing, or polling while "
                "they wait): a rank that sleeps in its waits gains less",
                "the other work's CPU time beyond what the CPUs had free was taken from "
                "runnable work: the job gets its fair share of it (low end: in proportion to "
                "the CPU time it had among all the other work on those CPUs) or all of it "
                "(high end; shared with its ranks on the other nodes of the same machine)",
                "the job runs at its slowest node's pace",
            ],
        )
        return [finding]


FACTOR = Neighbour()
