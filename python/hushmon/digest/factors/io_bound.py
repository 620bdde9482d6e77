"""I/O-bound: the job's CPUs wait for storage while it moves bytes.

A node-period counts as I/O-bound when its CPUs wait for I/O (``iowait``)
at least ``iowait_pct`` of the time (the job's tasks: of their CPU time +
wait, as before the loss took the wall-clock time, so that whether a job is
I/O-bound does not depend on the CPUs other work takes from it; only what
the waiting costs does) and the job moved at least
``min_bytes_per_s`` from or to storage in it (the job's own tasks'
``/proc/PID/io`` where the ``procio`` source runs, else every disk, NFS
mount and Lustre file system of the node). Waiting without bytes (a
network file system that hangs, a lock) is not counted: it is not the
bytes that cost. The file system is named from the sources' tags: the NFS
mount, the Lustre file system or the local disk that moved most bytes in
those periods.

Whose wait: the job's own tasks' where the ``procio`` source measures it
(``blkio_wait_pct``, the kernel's delay accounting, summed over the tasks of
the job's cgroup tree), which a machine's other work does not change. Else
the node's ``iowait``, else the machine's (host-wide); both are counted only
on idle CPUs, so on a loaded machine they hide a job's waiting (the test bed
on a busy 2-CPU VM).

The tasks' wait is a share of the **wall-clock time** the tasks had: their
summed wait over ``procio.tasks`` x 100 % x the period, i.e. the average
task's share of the period spent waiting for block I/O; without a task
count, over the CPUs the job's node holds (``node_cgroup.cpus``); with
neither, over the tasks' CPU time + wait (the old rule, an upper bound,
said in the evidence). Wait / (wait + CPU) bounds neither side: a task
also waits for a CPU (run queue), sleeps in an MPI wait or in reclaim, time
in neither term, which the I/O may or may not have caused (the two ends
below take it as not caused and as caused).

Loss, with the tasks' own wait: the run's saving summed over the I/O-bound
periods, as a range of two bounds.
- Low end: the average node's wall-clock share of the wait. Without the
  waits a period lasts its time less the waited share, when the tasks'
  other time off a CPU (waiting for one, MPI, sleep) stays as it is: a run
  queue that is other work's does not shrink when the I/O goes.
- High end: the share of the period the tasks were off a CPU (100 % less
  their CPU time per task), on the node where that is largest: all of it
  gone with the I/O. On a small machine the I/O costs the tasks more than
  its wait: the kernel's writeback and reclaim for them run on the CPUs
  they would run on. outofcore (1 GiB, 64 MiB buffer, 2 passes, no fsync)
  in a v1 memory cgroup of 512 MiB against 3 GiB on this 2-vCPU VM (load 3,
  10:15 UTC, the task's /proc/PID/stat and /proc/PID/schedstat): 15.6 ->
  11.0 s and 10.9 -> 7.5 s (30 % and 31 % saved) with the block I/O wait
  10 % and 18 % of the limited runs' time, their run-queue wait 8.3 -> 5.8
  s and 3.9 -> 1.8 s. The bench's memory case (bench_findings.py, five
  runs of --repeat 2 at load 0.2-22, 10:11-10:37 UTC) saved 25-41 %
  (medians); the wall share predicted 11-22 %, the share of CPU + wait
  (wait / (wait + CPU)) 19-28 %, and the range up to the time off a CPU
  19-34 %, 11-44 %, 22-31 %, 19-34 %, 14-30 %: each range meets its
  measured one.
What remains uncounted: within a node the share is the average task's, so
waits that do not overlap across a node's tasks (one rank waits while the
others wait for it) cost more than the low end says; a task counted that
never computes (a launcher) dilutes the low end and raises the high one;
the high end also counts a run queue that is other work's, and MPI waits,
so on a loaded machine the range is wide. CPU time the I/O costs the tasks
themselves (reclaim in their context) is in neither end. With the node's or
the machine's iowait the share is iowait / (iowait + busy) of the CPUs, as
before: the average node's (low end) and the most-waiting node's (high
end).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hushmon.digest.factors.base import (
    AnalyzerSkip,
    Finding,
    Loss,
    SkipReason,
    longest_run,
    mb,
    span_of,
    spans_text,
)
from hushmon.digest.factors.work import work_matrix
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import ACROSS_NODES
from hushmon.digest.sensors import scoped

HOST_IOWAIT = "cpu.iowait_pct[cpu=total,scope=host]"
JOB_OWN = "the job's tasks' own (block I/O wait by delay accounting, /proc/PID/stat)"
MIN_OTHER = 3  # node-periods off I/O needed to compare the work rate with
# what the tasks' wait is a share of (evidence "iowait_share_of")
TASKS_WALL = "the tasks' wall-clock time: summed wait / tasks read / period"
CPUS_WALL = "the node's CPUs' wall-clock time, no task count: summed wait / node_cgroup.cpus"
ACTIVE_ONLY = (
    "the tasks' CPU time + wait, no task or CPU count: an upper bound that leaves out "
    "their other waiting"
)


@dataclass(frozen=True)
class FileSystem:
    """One place the bytes went: its words for people and its bytes/s (nodes x periods)."""

    kind: str  # "NFS", "Lustre", "local disk"
    name: str
    rate: np.ndarray


def _tags(sensor: str) -> dict[str, str]:
    inner = sensor.partition("[")[2].rstrip("]")
    return dict(p.split("=", 1) for p in inner.split(",") if "=" in p)


def _sum(mats: list[np.ndarray]) -> np.ndarray | None:
    if not mats:
        return None
    stacked = np.stack(mats)
    out = np.nansum(stacked, axis=0)
    out[np.all(np.isnan(stacked), axis=0)] = np.nan
    return out


def _read_write(job: JobData, measurement: str, key: str) -> dict[str, np.ndarray]:
    """Read + write bytes/s of each instance of a measurement, by the tag ``key``."""
    groups: dict[str, list[np.ndarray]] = {}
    for field in ("read_bytes_per_s", "write_bytes_per_s"):
        for s in job.base_sensors(f"{measurement}.{field}"):
            tags = _tags(s)
            if tags.get("scope") == "host" and measurement != "disk":
                continue
            m = job.matrix(s)
            if m is not None:
                label = tags.get(key, "?")
                if measurement == "nfs" and tags.get("server"):
                    label = f"{label} (server {tags['server']})"
                groups.setdefault(label, []).append(m)
    return {k: v for k, v in ((k, _sum(ms)) for k, ms in groups.items()) if v is not None}


def file_systems(job: JobData) -> list[FileSystem]:
    """Every NFS mount, Lustre file system and local disk with its traffic."""
    out = [FileSystem("NFS", k, v) for k, v in _read_write(job, "nfs", "mount").items()]
    out += [FileSystem("Lustre", k, v) for k, v in _read_write(job, "lustre", "fs").items()]
    out += [FileSystem("local disk", k, v) for k, v in _read_write(job, "disk", "device").items()]
    return out


def _job_sum(job: JobData, field: str) -> np.ndarray | None:
    """A procio field summed over the job's own lines (nodes x periods)."""
    return _sum(
        [
            m
            for s in job.base_sensors(f"procio.{field}")
            if _tags(s).get("job") in (None, job.job)
            for m in [job.matrix(s)]
            if m is not None
        ]
    )


def job_bytes(job: JobData) -> tuple[str, np.ndarray | None]:
    """The job's storage bytes/s per node-period and where they come from."""
    own = [
        m
        for f in ("read_bytes_per_s", "write_bytes_per_s")
        for s in job.base_sensors(f"procio.{f}")
        if _tags(s).get("job") in (None, job.job)
        for m in [job.matrix(s)]
        if m is not None
    ]
    if own:
        return "the job's tasks: /proc/PID/io read_bytes + write_bytes", _sum(own)
    systems = file_systems(job)
    if systems:
        return "the node's disks and file systems, not the job's alone", _sum(
            [fs.rate for fs in systems]
        )
    return "not measured", None


@dataclass(frozen=True)
class Waits:
    """The I/O wait of each node-period and what it costs."""

    pct: np.ndarray  # % of the denominator's time waiting (``per``)
    lost: np.ndarray  # 0-1: the share of the period's wall-clock time the waits cost
    of: str  # whose wait (JOB_OWN, the node's, the machine's)
    per: str  # what the share is of, in words
    on_cpu_pct: np.ndarray | None = None  # the tasks' CPU time on the same scale
    # the tasks' wait as a % of their CPU time + wait, what ``iowait_pct`` is compared
    # with: whether the job is I/O-bound does not depend on the CPUs other work took
    # from it, only what the waiting costs does (None: the CPUs' iowait is compared)
    active_pct: np.ndarray | None = None
    # 0-1: the high end, the share of the period the tasks spent off a CPU (None: the
    # CPUs' iowait, whose high end is the most-waiting node's ``lost``)
    lost_high: np.ndarray | None = None

    @property
    def threshold_pct(self) -> np.ndarray:
        return self.pct if self.active_pct is None else self.active_pct


def tasks_wait(job: JobData) -> Waits | None:
    """The job's tasks' block I/O wait as a share of their wall-clock time: summed
    over the tasks, over the tasks read (else the node's CPUs, else their CPU time +
    wait); None where procio has no wait (delay accounting off, no procio)."""
    wait = _job_sum(job, "blkio_wait_pct")
    if wait is None or not np.isfinite(wait).any():
        return None
    w = np.nan_to_num(wait)
    run = _job_sum(job, "cpu_pct")
    r = np.zeros_like(w) if run is None else np.nan_to_num(run)
    tasks = _job_sum(job, "tasks")
    cpus = job.matrix("node_cgroup.cpus")
    waited = w > 0
    if tasks is not None and np.all(np.nan_to_num(tasks)[waited] > 0):
        n, per = np.nan_to_num(tasks), TASKS_WALL
    elif cpus is not None and np.all(np.nan_to_num(cpus)[waited] > 0):
        n, per = np.nan_to_num(cpus), CPUS_WALL
    else:
        # no count to divide by: each waited period's CPU time + wait, the rule that
        # leaves out a task's other waiting (a CPU, MPI, reclaim): an upper bound
        n, per = (w + r) / 100.0, ACTIVE_ONLY
    with np.errstate(all="ignore"):
        pct = np.where(n > 0, np.clip(w / np.maximum(n, 1e-9), 0.0, 100.0), 0.0)
        on_cpu = np.where(n > 0, np.clip(r / np.maximum(n, 1e-9), 0.0, 100.0), 0.0)
        active = np.where(w + r > 0, 100.0 * w / np.maximum(w + r, 1e-9), 0.0)
    # off a CPU: waiting for block I/O, for a CPU, in reclaim or for another rank; with
    # no count (ACTIVE_ONLY) the time off a CPU is not known beyond the wait
    off_cpu = pct if per == ACTIVE_ONLY else np.maximum(100.0 - on_cpu, pct)
    return Waits(pct, pct / 100.0, JOB_OWN, per, on_cpu, active, off_cpu / 100.0)


def _cpu_waits(job: JobData, iowait: np.ndarray, busy_sensor: str, of: str) -> Waits:
    """A node's (or the machine's) CPUs: in an I/O-bound period a CPU is computing or
    waiting, so the wait costs iowait / (iowait + busy) of the period."""
    busy_m = job.matrix(busy_sensor)
    busy = np.zeros_like(iowait) if busy_m is None else np.nan_to_num(busy_m)
    with np.errstate(all="ignore"):
        lost = iowait / np.maximum(iowait + busy, 1e-9)
    return Waits(
        iowait, np.where(iowait + busy > 0, lost, 0.0), of, "the CPUs' busy + waiting time"
    )


class IoBound:
    name = "io_bound"
    title = "Waiting for file I/O"
    # the node's I/O wait, else the machine's: checked in _cpu, not by the runner
    requires: tuple[str, ...] = ()
    optional = (
        "procio.blkio_wait_pct",
        "procio.tasks",
        "node_cgroup.cpus",
        "cpu.iowait_pct",
        HOST_IOWAIT,
        "procio.read_bytes_per_s",
        "nfs.read_bytes_per_s",
        "lustre.read_bytes_per_s",
        "disk.bytes_per_s",
        "load.procs_blocked",
        "cpu.busy_pct",
    )
    # what it needs (digest/resolution.py): each node's iowait and bytes per period,
    # which the summaries give as min / average / max over nodes
    resolution = ACROSS_NODES

    def _cpu(self, job: JobData) -> Waits:
        """I/O wait, %, its cost per node-period, and whose: the job's tasks', else
        the node's, else the machine's (a node-scoped agent's cgroup does not count I/O
        wait apart: the test bed)."""
        own = tasks_wait(job)
        if own is not None:
            return own
        node = job.matrix("cpu.iowait_pct")
        if node is not None and np.isfinite(node).any():
            return _cpu_waits(job, np.nan_to_num(node), "cpu.busy_pct", "the node's")
        host = job.matrix(HOST_IOWAIT)
        if host is None or not np.isfinite(host).any():
            raise AnalyzerSkip(
                SkipReason.MISSING_SENSOR, "needs cpu.iowait_pct (the node's or host-wide)"
            )
        return _cpu_waits(
            job,
            np.nan_to_num(host),
            "cpu.host_busy_pct",
            "the machine's (host-wide: the node's cgroup does not count I/O wait apart; "
            "other nodes of the machine wait in it too)",
        )

    def _bound(
        self, job: JobData, params: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray, Waits, str, np.ndarray | None]:
        """I/O-bound node-periods, the share of each that its waits cost (of its
        wall-clock time), the waits, and the bytes."""
        waits = self._cpu(job)
        source, moved = job_bytes(job)
        bound = waits.threshold_pct >= params["iowait_pct"]
        if moved is not None:
            bound &= np.nan_to_num(moved) >= params["min_bytes_per_s"]
        return bound, np.where(bound, waits.lost, 0.0), waits, source, moved

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of the run time the average node waits for I/O in I/O-bound periods."""
        _, wait_share, _, _, _ = self._bound(job, params)
        return float(np.mean(np.mean(wait_share, axis=0))) if wait_share.size else None

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        bound, wait_share, waits, source, moved = self._bound(job, params)
        iowait = waits.pct
        periods: np.ndarray = np.asarray(bound.any(axis=0))
        share = float(np.mean(periods)) if periods.size else 0.0
        if share < params["min_share"]:
            return []
        low = float(np.mean(np.mean(wait_share, axis=0)))
        high_share = (
            wait_share if waits.lost_high is None else np.where(bound, waits.lost_high, 0.0)
        )
        high = float(np.mean(np.max(high_share, axis=0)))
        evidence: dict[str, Any] = {
            "io_bound_share_of_time": round(share, 3),
            "periods": spans_text(job, periods),
            "iowait_pct_in_io_periods": round(float(np.mean(iowait[bound])), 1),
            "iowait_pct_elsewhere": round(float(np.mean(iowait[~bound])), 1)
            if (~bound).any()
            else None,
            "bytes_source": source,
            "iowait_share_of": waits.per,
        }
        if waits.active_pct is not None:
            evidence["iowait_pct_of_cpu_and_wait_in_io_periods"] = round(
                float(np.mean(waits.active_pct[bound])), 1
            )
        if waits.on_cpu_pct is not None:
            # the rest of the tasks' time: a CPU, MPI or reclaim waits, sleep
            evidence["tasks_on_cpu_pct_in_io_periods"] = round(
                float(np.mean(waits.on_cpu_pct[bound])), 1
            )
        if moved is not None:
            evidence["mb_per_s_per_node_in_io_periods"] = mb(np.nanmean(moved[bound]))
            evidence["gb_moved_per_node_in_io_periods"] = round(
                float(np.nansum(moved[bound])) * job.period_s / 1e9 / len(job.hosts), 2
            )
        evidence["iowait_of"] = waits.of
        blocked = job.matrix(scoped(job, "load.procs_blocked"))
        if blocked is not None and np.isfinite(blocked[bound]).any():
            evidence["d_state_tasks_in_io_periods"] = round(float(np.nanmean(blocked[bound])), 1)
            if (~bound).any():
                evidence["d_state_tasks_elsewhere"] = round(float(np.nanmean(blocked[~bound])), 1)
        rate_text = self._work(job, bound, evidence)
        where = self._where(job, bound, evidence)
        moved_text = (
            f", moving {evidence['mb_per_s_per_node_in_io_periods']} MB/s per node "
            f"(measured on {source})"
            if moved is not None
            else " (bytes moved not measured: no procio, disk, NFS or Lustre source)"
        )
        pct = evidence["iowait_pct_in_io_periods"]
        if waits.of != JOB_OWN:
            waited = f"the CPUs waited for I/O {pct}% of the time"
        elif waits.per == TASKS_WALL:
            waited = (
                f"the job's tasks waited for block I/O {pct}% of their wall-clock time "
                f"(on CPU {evidence['tasks_on_cpu_pct_in_io_periods']}%)"
            )
        else:
            waited = f"the job's tasks waited for block I/O {pct}% of {waits.per}"
        hint = (
            f"In {share:.0%} of the run ({evidence['periods']}) {waited}{moved_text}{where}"
            f"{rate_text}. Read and write in larger blocks, stage the data on local disk or "
            "in memory, overlap I/O with computation (asynchronous I/O, a writer thread), "
            "or give the node more page cache."
        )
        finding = Finding(
            self.name, self.title, "medium", evidence, hint, span_of(job, longest_run(periods))
        )
        waited_of = "" if waits.active_pct is None else " of the tasks' CPU time + wait"
        counted = (
            f"counting only the {share:.0%} of periods with iowait >= "
            f"{params['iowait_pct']}%{waited_of} and the job moving >= "
            f"{params['min_bytes_per_s'] / 1e6:g} MB/s"
        )
        if waits.lost_high is None:
            basis = (
                f"the CPUs waited {low:.0%} of the run time on the average node and "
                f"{high:.0%} on the most-waiting node ({waits.per}), {counted}"
            )
            assumptions = [
                "the nodes wait at different times (low end) or the job goes at the "
                "most-waiting node's pace (high end)"
            ]
            if waits.of != "the node's":
                assumptions.append("the machine's I/O wait (host-wide) is the job's nodes' own")
        else:
            basis = (
                f"the tasks waited for block I/O {low:.0%} of the run time on the average "
                f"node (a share of {waits.per}); they were off a CPU {high:.0%} of the run "
                f"time on the node where they were off one most; {counted}"
            )
            assumptions = [
                "low end: the tasks' other time off a CPU (waiting for one, MPI, sleep) "
                "stays without the I/O, and a node's tasks wait at the same time",
                "high end: all of the tasks' time off a CPU in those periods goes with the "
                "I/O (on a small machine the kernel's writeback and reclaim for them run "
                "on the CPUs they would run on), and the job goes at that node's pace",
            ]
        finding.loss = Loss(
            low,
            high,
            basis,
            [
                "the computation would take the same CPU time with the waits gone (faster "
                "storage, I/O overlapped with computation)",
                *assumptions,
            ],
        )
        return [finding]

    def _work(self, job: JobData, bound: np.ndarray, evidence: dict[str, Any]) -> str:
        work = work_matrix(job)
        if work is None or (~bound).sum() < MIN_OTHER or not bound.any():
            return ""
        name, m = work
        inside, outside = float(np.nanmean(m[bound])), float(np.nanmean(m[~bound]))
        if not (np.isfinite(inside) and np.isfinite(outside)) or outside <= 0:
            return ""
        rel = inside / outside
        evidence["work_sensor"] = name
        evidence["work_rate_in_io_periods_rel"] = round(rel, 2)
        return f"; meanwhile {name} was {rel:.0%} of its level in the other periods"

    def _where(self, job: JobData, bound: np.ndarray, evidence: dict[str, Any]) -> str:
        moved = [
            (float(np.nansum(fs.rate[bound])) * job.period_s / len(job.hosts), fs)
            for fs in file_systems(job)
        ]
        moved = [(b, fs) for b, fs in moved if b > 0]
        if not moved:
            evidence["file_system"] = "unknown (no disk, NFS or Lustre source)"
            return ""
        moved.sort(key=lambda x: -x[0])
        total = sum(b for b, _ in moved)
        top_bytes, top = moved[0]
        evidence["file_system"] = f"{top.kind} {top.name}"
        evidence["file_system_share_of_bytes"] = round(top_bytes / total, 3)
        evidence["file_systems_gb_per_node"] = ", ".join(
            f"{fs.kind} {fs.name}: {b / 1e9:.2f}" for b, fs in moved[:5]
        )
        return f", {top_bytes / total:.0%} of the bytes through {top.kind} {top.name}"


FACTOR = IoBound()
