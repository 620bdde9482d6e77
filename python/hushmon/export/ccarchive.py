"""Jobs in ClusterCockpit's job-archive layout, so that cc-backend can load
hushmon's jobs (its archive import, or as its own archive folder).

Archive version 3 (cc-backend's pkg/archive ``Version``; its file backend
refuses an archive whose version.txt names another): meta.json says how
nodes were shared in ``shared`` (none, single_user, multi_user), where
version 2 had the integer ``exclusive``, and ``jobState`` takes Slurm's
states by name (preempted, boot_fail, deadline ...; no "stopped").

The layout (cc-backend's file archive): ``DIR/version.txt``;
``DIR/<cluster>/cluster.json``; per job
``DIR/<cluster>/<id // 1000>/<id % 1000, 3 digits>/<start, epoch s>/``
with ``meta.json`` (who, when, where, state, tags and the job-wide
statistics of each metric) and ``data.json`` (each metric's per-node time
series at a whole-second time step, with per-series min/avg/max; a period
with no value is ``null``). Field names, types and units follow the
published job-meta, job-data and cluster JSON schemas (ClusterCockpit's
cc-lib, schema/schemas, which cc-backend validates with); tests/python/
test_ccarchive.py validates the output against copies of them
(tests/fixtures/ccarchive-schemas/).

What hushmon has for ClusterCockpit's metrics (node scope):
``cpu_user`` (user CPU %), ``cpu_load`` (load1), ``mem_used`` (GB in use,
page cache excluded), ``net_bw`` (GB/s over the network, loopback
excluded), ``flops_any`` (GFLOP/s, where a PMU measured FLOPS). The
schema requires statistics of ``cpu_user, cpu_load, mem_used, flops_any,
mem_bw``; one hushmon did not measure gets 0 and is named in
``metaData.notMeasured`` (mem_bw always: no agent source measures it).
data.json holds only measured series: the job-data schema also lists
``mem_bw``, ``net_bw`` and ``filesystems`` as required, which a series of
invented zeros would satisfy and mislead; cc-backend checks data.json
against it only with ``"validate": true`` in its configuration."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hushmon.errors import HushmonError

ARCHIVE_VERSION = "3"
REQUIRED_STATS = ("cpu_user", "cpu_load", "mem_used", "flops_any", "mem_bw")
# Slurm's state -> the schema's jobState (a job Slurm stopped with SIGSTOP,
# STOPPED, is suspended in the schema's words)
STATES = {
    "COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "cancelled",
    "TIMEOUT": "timeout", "OUT_OF_MEMORY": "out_of_memory", "NODE_FAIL": "node_fail",
    "PREEMPTED": "preempted", "BOOT_FAIL": "boot_fail", "DEADLINE": "deadline",
    "SUSPENDED": "suspended", "STOPPED": "suspended", "RUNNING": "running",
    "PENDING": "pending",
}  # fmt: skip


@dataclass(frozen=True)
class Metric:
    name: str  # ClusterCockpit's
    sensors: tuple[str, ...]  # hushmon's, the first the job has is used (summed: all of them)
    unit: dict[str, str]
    scale: float  # hushmon's unit -> ClusterCockpit's
    aggregation: str  # how cc-backend adds nodes: sum or avg
    summed: bool = False


METRICS = (
    Metric("cpu_user", ("cpu.user_pct",), {"base_unit": "cpu_used"}, 1.0, "avg"),
    Metric(
        "cpu_load", ("load.load1[scope=host]", "load.load1"), {"base_unit": "cpu_load"}, 1.0, "sum"
    ),
    Metric("mem_used", ("mem.used_bytes",), {"base_unit": "B", "prefix": "G"}, 1e-9, "sum"),
    Metric(
        "net_bw",
        ("network.rx_bytes_per_s", "network.tx_bytes_per_s"),
        {"base_unit": "B/s", "prefix": "G"},
        1e-9,
        "sum",
        summed=True,
    ),
    Metric(
        "flops_any",
        ("pmu.flops_per_s[cpu=total]", "pmu.flops_per_s"),
        {"base_unit": "F/s", "prefix": "G"},
        1e-9,
        "sum",
    ),
)


@dataclass
class JobMeta:
    """What the store says of a job besides its samples."""

    job: str
    user: str = ""
    name: str = ""
    state: str = ""
    tags: tuple[str, ...] = ()
    findings: tuple[str, ...] = ()  # "factor:severity"


def job_number(job: str) -> int:
    """ClusterCockpit keys jobs by an integer id (Slurm's)."""
    if not job.isdigit():
        raise HushmonError(
            f"job {job!r}: ClusterCockpit's archive needs an integer job id (Slurm's)"
        )
    return int(job)


def job_dir(root: Path, cluster: str, job_id: int, start_s: int) -> Path:
    return root / cluster / str(job_id // 1000) / f"{job_id % 1000:03d}" / str(start_s)


def _per_second(m: np.ndarray, period_s: float) -> tuple[np.ndarray, int]:
    """hosts x periods -> hosts x steps at a whole-second step (the schema's
    timestep is an integer): periods shorter than a second are averaged in
    groups of round(1 / period)."""
    if period_s >= 1.0:
        return m, max(1, round(period_s))
    group = max(1, round(1.0 / period_s))
    hosts, n = m.shape
    padded = np.full((hosts, math.ceil(n / group) * group), np.nan)
    padded[:, :n] = m
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(padded.reshape(hosts, -1, group), axis=2), 1


def _series_matrix(matrix: Callable[[str], np.ndarray | None], metric: Metric) -> np.ndarray | None:
    if metric.summed:
        parts = [m for s in metric.sensors if (m := matrix(s)) is not None]
        return None if not parts else np.nansum(np.stack(parts), axis=0) * metric.scale
    for sensor in metric.sensors:
        m = matrix(sensor)
        if m is not None and np.isfinite(m).any():
            return m * metric.scale
    return None


def _stat(values: np.ndarray) -> dict[str, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return {"avg": 0.0, "min": 0.0, "max": 0.0}
    # the schema's statistics are >= 0; a sensor's rounding may dip below
    finite = np.maximum(finite, 0.0)
    return {"avg": float(finite.mean()), "min": float(finite.min()), "max": float(finite.max())}


def _nums(row: np.ndarray) -> list[float | None]:
    return [None if not math.isfinite(v) else round(max(float(v), 0.0), 6) for v in row]


def job_documents(
    meta: JobMeta,
    hosts: list[str],
    times_ns: np.ndarray,
    period_s: float,
    matrix: Callable[[str], np.ndarray | None],
    cluster: str,
    subcluster: str,
    shared: str,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, Any]]]:
    """(meta.json, data.json, {metric: (unit, timestep)}) of one job."""
    job_id = job_number(meta.job)
    if len(times_ns) == 0 or not hosts:
        raise HushmonError(f"job {meta.job}: no samples to export")
    start_s = int(times_ns[0] // 1_000_000_000)
    duration_s = max(1, round(float(times_ns[-1] - times_ns[0]) / 1e9 + period_s))
    data: dict[str, Any] = {}
    stats: dict[str, Any] = {}
    configs: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        m = _series_matrix(matrix, metric)
        if m is None:
            continue
        m, step = _per_second(m, period_s)
        rows = [
            (host, _stat(m[i]), m[i]) for i, host in enumerate(hosts) if np.isfinite(m[i]).any()
        ]
        if not rows:
            continue
        series = [{"hostname": h, "statistics": st, "data": _nums(row)} for h, st, row in rows]
        data[metric.name] = {"node": {"unit": metric.unit, "timestep": step, "series": series}}
        # job-wide: the mean of the node means, the extremes of every node
        whole = _stat(np.array([st["avg"] for _h, st, _r in rows]))
        whole["max"] = max(st["max"] for _h, st, _r in rows)
        whole["min"] = min(st["min"] for _h, st, _r in rows)
        stats[metric.name] = {"unit": metric.unit, **whole}
        configs[metric.name] = {
            "unit": metric.unit,
            "timestep": step,
            "aggregation": metric.aggregation,
        }
    not_measured = [n for n in REQUIRED_STATS if n not in stats]
    units = {m.name: m.unit for m in METRICS} | {"mem_bw": {"base_unit": "B/s", "prefix": "G"}}
    for name in not_measured:
        stats[name] = {"unit": units[name], "avg": 0.0, "min": 0.0, "max": 0.0}
    meta_doc: dict[str, Any] = {
        "jobId": job_id,
        "user": meta.user or "unknown",
        "project": "",
        "cluster": cluster,
        "subCluster": subcluster,
        "numNodes": len(hosts),
        "shared": shared,
        "jobState": STATES.get(meta.state.split()[0] if meta.state else "", "completed"),
        "startTime": start_s,
        "duration": duration_s,
        "resources": [{"hostname": h} for h in hosts],
        "statistics": stats,
        "tags": [{"name": t, "type": "hushmon"} for t in meta.tags],
        "metaData": {
            "jobName": meta.name,
            "hushmonFindings": " ".join(meta.findings),
            "notMeasured": " ".join(not_measured),
            "stateRecorded": meta.state or "not recorded (written as completed)",
        },
    }
    return meta_doc, data, configs


def write_job(root: Path, meta_doc: dict[str, Any], data_doc: dict[str, Any]) -> Path:
    folder = job_dir(root, meta_doc["cluster"], meta_doc["jobId"], meta_doc["startTime"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").write_text(json.dumps(meta_doc, indent=1), encoding="utf-8")
    (folder / "data.json").write_text(json.dumps(data_doc), encoding="utf-8")
    return folder


def cluster_doc(
    cluster: str, subcluster: str, hosts: list[str], cpus: int, configs: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """A cluster.json for a cluster cc-backend does not know yet: the
    metrics written, and one sub-cluster of the nodes seen (hushmon knows
    their CPU count, not their sockets or peak rates: those are 1 and 0)."""
    peaks = {"cpu_user": 100.0, "cpu_load": float(cpus)}
    metric_config = [
        {"name": name, "unit": c["unit"], "scope": "node", "timestep": c["timestep"],
         "aggregation": c["aggregation"], "peak": peaks.get(name, 0.0),
         "normal": peaks.get(name, 0.0) / 2, "caution": peaks.get(name, 0.0) / 5,
         "alert": peaks.get(name, 0.0) / 10}
        for name, c in sorted(configs.items())
    ]  # fmt: skip
    threads = list(range(max(1, cpus)))
    zero = {"unit": {"base_unit": "F/s", "prefix": "G"}, "value": 0.0}
    return {
        "name": cluster,
        "metricConfig": metric_config,
        "subClusters": [
            {"name": subcluster, "nodes": ",".join(sorted(hosts)), "processorType": "unknown",
             "socketsPerNode": 1, "coresPerSocket": len(threads), "threadsPerCore": 1,
             "flopRateScalar": zero, "flopRateSimd": zero,
             "memoryBandwidth": {"unit": {"base_unit": "B/s", "prefix": "G"}, "value": 0.0},
             "topology": {"node": threads, "socket": [threads], "memoryDomain": [threads],
                          "core": [[t] for t in threads]}}
        ],
    }  # fmt: skip
