"""I/O-bound: the job's CPUs wait for storage while it moves bytes.

A node-period counts as I/O-bound when its CPUs wait for I/O (``iowait``)
at least ``iowait_pct`` of the time and the job moved at least
``min_bytes_per_s`` from or to storage in it (the job's own tasks'
``/proc/PID/io`` where the ``procio`` source runs, else every disk, NFS
mount and Lustre file system of the node). Waiting without bytes (a
network file system that hangs, a lock) is not counted: it is not the
bytes that cost. The file system is named from the sources' tags: the NFS
mount, the Lustre file system or the local disk that moved most bytes in
those periods.

Whose wait: the job's own tasks' where the ``procio`` source measures it
(``blkio_wait_pct``, the kernel's delay accounting, and ``cpu_pct``, both
summed over the tasks of the job's cgroup tree): the period's "I/O wait" is
then the share of the tasks' time on CPU or waiting for block I/O spent
waiting, which a machine's other work does not change (its tasks may also
wait for a CPU, which neither counts). Else the node's ``iowait``, else the
machine's (host-wide); both are counted only on idle CPUs, so on a loaded
machine they hide a job's waiting (the test bed on a busy 2-CPU VM).

Loss: in an I/O-bound period a core is either computing (busy) or waiting
(iowait), so without the wait the period would last busy / (busy + iowait)
of its time. The run's saving is that share summed over the I/O-bound
periods: the average node's (low end: a node's wait overlaps others') and
the most-waiting node's (high end: the job goes at its slowest node's pace).
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


class IoBound:
    name = "io_bound"
    title = "Waiting for file I/O"
    # the node's I/O wait, else the machine's: checked in _cpu, not by the runner
    requires: tuple[str, ...] = ()
    optional = (
        "procio.blkio_wait_pct",
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

    def _cpu(self, job: JobData) -> tuple[np.ndarray, np.ndarray, str]:
        """I/O wait and busy CPU, %, and whose: the job's tasks', else the node's,
        else the machine's (a node-scoped agent's cgroup does not count I/O wait
        apart: the test bed)."""
        wait, run = _job_sum(job, "blkio_wait_pct"), _job_sum(job, "cpu_pct")
        if wait is not None and run is not None and np.isfinite(wait).any():
            w, r = np.nan_to_num(wait), np.nan_to_num(run)
            active = w + r
            with np.errstate(all="ignore"):
                share = np.where(active > 0, 100.0 * w / np.maximum(active, 1e-9), 0.0)
            return share, np.where(active > 0, 100.0 - share, 0.0), JOB_OWN
        own = job.matrix("cpu.iowait_pct")
        if own is not None and np.isfinite(own).any():
            busy = job.matrix("cpu.busy_pct")
            return (
                np.nan_to_num(own),
                np.zeros_like(own) if busy is None else np.nan_to_num(busy),
                "the node's",
            )
        host = job.matrix(HOST_IOWAIT)
        if host is None or not np.isfinite(host).any():
            raise AnalyzerSkip(
                SkipReason.MISSING_SENSOR, "needs cpu.iowait_pct (the node's or host-wide)"
            )
        busy = job.matrix("cpu.host_busy_pct")
        return (
            np.nan_to_num(host),
            np.zeros_like(host) if busy is None else np.nan_to_num(busy),
            "the machine's (host-wide: the node's cgroup does not count I/O wait apart; "
            "other nodes of the machine wait in it too)",
        )

    def _bound(
        self, job: JobData, params: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, np.ndarray | None]:
        """I/O-bound node-periods, the wait share of each, iowait, and the bytes."""
        iowait, busy, _ = self._cpu(job)
        source, moved = job_bytes(job)
        bound = iowait >= params["iowait_pct"]
        if moved is not None:
            bound &= np.nan_to_num(moved) >= params["min_bytes_per_s"]
        with np.errstate(all="ignore"):
            wait_share = np.where(bound, iowait / np.maximum(iowait + busy, 1e-9), 0.0)
        return bound, wait_share, iowait, source, moved

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of the run time the average node waits for I/O in I/O-bound periods."""
        _, wait_share, _, _, _ = self._bound(job, params)
        return float(np.mean(np.mean(wait_share, axis=0))) if wait_share.size else None

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        bound, wait_share, iowait, source, moved = self._bound(job, params)
        periods: np.ndarray = np.asarray(bound.any(axis=0))
        share = float(np.mean(periods)) if periods.size else 0.0
        if share < params["min_share"]:
            return []
        low = float(np.mean(np.mean(wait_share, axis=0)))
        high = float(np.mean(np.max(wait_share, axis=0)))
        evidence: dict[str, Any] = {
            "io_bound_share_of_time": round(share, 3),
            "periods": spans_text(job, periods),
            "iowait_pct_in_io_periods": round(float(np.mean(iowait[bound])), 1),
            "iowait_pct_elsewhere": round(float(np.mean(iowait[~bound])), 1)
            if (~bound).any()
            else None,
            "bytes_source": source,
        }
        if moved is not None:
            evidence["mb_per_s_per_node_in_io_periods"] = mb(np.nanmean(moved[bound]))
            evidence["gb_moved_per_node_in_io_periods"] = round(
                float(np.nansum(moved[bound])) * job.period_s / 1e9 / len(job.hosts), 2
            )
        evidence["iowait_of"] = self._cpu(job)[2]
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
        waited = (
            "the job's tasks waited for block I/O "
            f"{evidence['iowait_pct_in_io_periods']}% of their time on CPU or waiting"
            if evidence["iowait_of"] == JOB_OWN
            else f"the CPUs waited for I/O {evidence['iowait_pct_in_io_periods']}% of the time"
        )
        hint = (
            f"In {share:.0%} of the run ({evidence['periods']}) {waited}{moved_text}{where}"
            f"{rate_text}. Read and write in larger blocks, stage the data on local disk or "
            "in memory, overlap I/O with computation (asynchronous I/O, a writer thread), "
            "or give the node more page cache."
        )
        finding = Finding(
            self.name, self.title, "medium", evidence, hint, span_of(job, longest_run(periods))
        )
        finding.loss = Loss(
            low,
            high,
            f"the {'tasks' if evidence['iowait_of'] == JOB_OWN else 'CPUs'} waited {low:.0%} "
            f"of the run time on the average node and {high:.0%} "
            f"on the most-waiting node, counting only the {share:.0%} of periods with "
            f"iowait >= {params['iowait_pct']}% and the job moving >= "
            f"{params['min_bytes_per_s'] / 1e6:g} MB/s",
            [
                "the computation would take the same CPU time with the waits gone (faster "
                "storage, I/O overlapped with computation)",
                "the nodes wait at different times (low end) or the job goes at the "
                "most-waiting node's pace (high end)",
            ]
            + (
                []
                if evidence["iowait_of"] in ("the node's", JOB_OWN)
                else ["the machine's I/O wait (host-wide) is the job's nodes' own"]
            ),
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
