"""Roofline: is the job compute-bound, memory-bound or below both roofs?

Per node and period, the PMU's floating-point operations (``flops_per_s``)
and memory traffic (``mem_bytes_per_s``: the profile's memory events x
bytes) give the arithmetic intensity AI = FLOP / byte and the achieved
GFLOP/s. The node type's ceilings (``hushmon probe``: triad GB/s and peak
GFLOP/s, :mod:`hushmon.probe.ceilings`) draw the roof min(peak, AI x GB/s).
A point near the memory roof (AI left of the ridge, traffic at
``near_roof`` of the bandwidth or more) is memory-bound, one near the flat
roof (right of the ridge, FLOPs at ``near_roof`` of the peak or more)
compute-bound, and one far below both is limited by something else:
latency (dependent loads, branches), communication or I/O, which the other
factors name.

Loss: the gap to the roof at the job's own intensity, 1 - achieved /
attainable per node and period, averaged: the run time that running at the
roof would save with the same work. The profiles count traffic as lines
fetched from beyond the last-level cache (writebacks not counted), so the
true traffic lies between that and ``traffic_upper_factor`` times it; the
range's low end takes the upper traffic (a lower roof, a smaller gap).

A node's record is the one whose host list names it, else the one of its
node type, found by the CPU model and online CPU count its agent published
(``cpu_info``, :mod:`hushmon.digest.cpu_models`); the finding says which
nodes were matched by model. Without a record for a node, the finding says
so and gives the measured AI and rates, never a verdict against guessed
ceilings.

On GPUs, NVML's GPM metrics (DRAM bandwidth and FP/tensor pipe
utilization) give a verdict of their own, a second finding
(:mod:`hushmon.digest.factors.gpu_roofline`); GPUs without GPM are named
as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hushmon.digest.cpu_models import CpuModel, read_cpu_models
from hushmon.digest.factors.base import AnalyzerSkip, Finding, Loss, SkipReason
from hushmon.digest.factors.gpu_roofline import GPM_FIELDS, gpu_findings, gpu_gap
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE
from hushmon.probe.ceilings import BY_CPU_MODEL, Ceilings, ceilings_path, find_record, load_ceilings

_KEY = "_roofline_ceilings"  # in JobData.__dict__: (file, records), set by attach_ceilings
_MODELS_KEY = "_roofline_cpu_models"  # host -> CpuModel, set by attach_ceilings

VERDICTS = ("compute-bound", "memory-bound", "below both roofs")


def attach_ceilings(job: JobData, db_path: Path) -> None:
    """The ceilings stored beside the store the job was read from, and the job's
    nodes' CPU models from the store (for nodes no host list names)."""
    path = ceilings_path(Path(db_path).parent)
    records = load_ceilings(path)
    job.__dict__[_KEY] = (path, records)
    job.__dict__[_MODELS_KEY] = (
        read_cpu_models(Path(db_path), job.job, int(job.info.end_ns)) if records else {}
    )


def ceilings_of(job: JobData) -> tuple[Path | None, list[Ceilings]]:
    """The ceilings file and records attached to the job (None, [] if none)."""
    path, records = job.__dict__.get(_KEY, (None, []))
    return path, list(records)


def _pmu_total(job: JobData, field: str) -> tuple[np.ndarray | None, bool, bool]:
    """hosts x periods of the node's pmu ``field`` (tag cpu=total), whether the
    PMU was the simulated one (tag backend=sim), and whether the series is
    host-wide (tag scope=host: an agent in node scope, a test bed node, counts
    the whole machine's CPUs; used when the node has no series of its own,
    as the ceilings are the machine's too)."""
    found: dict[bool, tuple[np.ndarray, bool]] = {}
    for name in job.base_sensors(f"pmu.{field}"):
        tags = name.partition("[")[2].rstrip("]").split(",")
        if "cpu=total" in tags:
            m = job.matrix(name)
            if m is not None:
                found.setdefault(
                    "scope=host" in tags, (m.astype(np.float64), "backend=sim" in tags)
                )
    for host_wide in (False, True):
        if host_wide in found:
            m, sim = found[host_wide]
            return m, sim, host_wide
    return None, False, False


@dataclass
class RooflinePoints:
    """Per node (rows, as job.hosts) and period: the measured rates, the node's
    ceilings (NaN without a record) and each point's class."""

    gflop_per_s: np.ndarray
    gb_per_s: np.ndarray
    peak_gflop_per_s: np.ndarray  # per host
    peak_gb_per_s: np.ndarray  # per host
    records: dict[str, Ceilings]  # node type key -> record, for the hosts covered
    host_type: list[str | None]  # per host: its node type key, None = no record
    by_model: list[str]  # the hosts matched by their CPU model, not a host list
    simulated: bool
    host_wide: bool  # the machine's counters (scope=host), not the node's own
    ceilings_file: Path | None

    @property
    def active(self) -> np.ndarray:
        return np.isfinite(self.gflop_per_s) & np.isfinite(self.gb_per_s) & (self.gb_per_s > 0)

    @property
    def intensity(self) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.gflop_per_s / self.gb_per_s

    def gap(self, traffic_factor: float = 1.0) -> np.ndarray:
        """1 - achieved / attainable (0 at or above the roof); NaN where unknown."""
        peak = self.peak_gflop_per_s[:, None]
        bw = self.peak_gb_per_s[:, None]
        with np.errstate(all="ignore"):
            attainable = np.minimum(peak, self.intensity / traffic_factor * bw)
            return 1.0 - np.minimum(1.0, self.gflop_per_s / attainable)

    def classes(self, near_roof: float) -> np.ndarray:
        """0 compute-bound, 1 memory-bound, 2 below both roofs, -1 unknown."""
        peak = self.peak_gflop_per_s[:, None]
        bw = self.peak_gb_per_s[:, None]
        known = self.active & np.isfinite(peak)
        with np.errstate(all="ignore"):
            right = self.intensity >= peak / bw
            compute = known & right & (self.gflop_per_s >= near_roof * peak)
            memory = known & ~right & (self.gb_per_s >= near_roof * bw)
        out = np.full(self.gflop_per_s.shape, -1, dtype=np.int8)
        out[known] = 2
        out[compute] = 0
        out[memory] = 1
        return out


def roofline_points(job: JobData, params: Mapping[str, Any]) -> RooflinePoints:
    flops, sim_f, wide_f = _pmu_total(job, "flops_per_s")
    traffic, sim_b, wide_b = _pmu_total(job, "mem_bytes_per_s")
    if flops is None or traffic is None:
        raise AnalyzerSkip(
            SkipReason.MISSING_SENSOR,
            "needs pmu flops_per_s and mem_bytes_per_s (a PMU profile with floating-point "
            "and memory-traffic events: skylake, icelake, zen4)",
        )
    f = flops / 1e9
    b = traffic / 1e9
    idle = (np.nan_to_num(f) < params["idle_gflop_per_s"]) & (
        np.nan_to_num(b) < params["idle_gb_per_s"]
    )
    f[idle] = np.nan  # no work: no intensity to speak of
    b[idle] = np.nan
    path, records = job.__dict__.get(_KEY, (None, []))
    models: dict[str, CpuModel] = job.__dict__.get(_MODELS_KEY, {})
    host_type: list[str | None] = []
    by_model: list[str] = []
    used: dict[str, Ceilings] = {}
    peak = np.full(len(job.hosts), np.nan)
    bw = np.full(len(job.hosts), np.nan)
    for i, host in enumerate(job.hosts):
        cpu = models.get(host)
        rec, how = find_record(records, host, cpu.model if cpu else None, cpu.cpus if cpu else None)
        host_type.append(None if rec is None else rec.key)
        if rec is not None:
            used[rec.key] = rec
            peak[i], bw[i] = rec.gflop_per_s, rec.gb_per_s
            if how == BY_CPU_MODEL:
                by_model.append(host)
    return RooflinePoints(
        f, b, peak, bw, used, host_type, by_model, sim_f or sim_b, wide_f or wide_b, path
    )


def _median(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return None if v.size == 0 else float(np.median(v))


def _sig(v: float | None) -> float | None:
    """Three significant digits: intensities span 0.01 to 1000 FLOP/byte."""
    return None if v is None else float(f"{v:.3g}")


class Roofline:
    name = "roofline"
    title = "Roofline"
    # The PMU's fields are read by tag (cpu=total, also with backend=sim), so the
    # runner's name check cannot see them: roofline_points skips when absent.
    requires: tuple[str, ...] = ()
    optional = ("pmu.flops_per_s", "pmu.mem_bytes_per_s", *(f"gpu.{f}" for f in GPM_FIELDS))
    # each node against its own node type's ceilings
    resolution = PER_NODE

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """The mean gap to the roof (0-1; bigger = further below what the node can do);
        on a job without PMU FLOPs, the GPUs' gap to their nearest roof."""
        try:
            pts = roofline_points(job, params)
        except AnalyzerSkip:
            gap_gpu = gpu_gap(job, params)
            if gap_gpu is None:
                raise
            return gap_gpu
        gap = pts.gap()
        return None if not np.isfinite(gap).any() else float(np.nanmean(gap))

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        """The CPU verdict (PMU) and the GPU verdict (GPM), each where its data is;
        skipped, with the CPU's reason, when neither gives one."""
        cpu_skip: AnalyzerSkip | None = None
        try:
            found = self._cpu(job, params)
        except AnalyzerSkip as skip:
            found, cpu_skip = [], skip
        try:
            found += gpu_findings(job, params, self.name)
        except AnalyzerSkip as skip:
            if cpu_skip is not None:
                raise AnalyzerSkip(
                    cpu_skip.reason, f"{cpu_skip.detail}; GPU: {skip.detail}"
                ) from skip
        if not found and cpu_skip is not None:
            raise cpu_skip
        return found

    def _cpu(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        pts = roofline_points(job, params)
        active = pts.active
        if int(active.sum()) < params["min_points"]:
            raise AnalyzerSkip(
                SkipReason.NOT_ENOUGH_DATA,
                f"{int(active.sum())} node-periods with FLOPs or memory traffic "
                f"(at least {params['min_points']})",
            )
        sim = " (SIMULATED PMU: synthetic rates)" if pts.simulated else ""
        measured = {
            "median_intensity_flop_per_byte": _sig(_median(pts.intensity[active])),
            "median_gflop_per_s": _sig(_median(pts.gflop_per_s[active])),
            "median_gb_per_s": _sig(_median(pts.gb_per_s[active])),
            "node_periods": int(active.sum()),
            "pmu": "simulated" if pts.simulated else "hardware",
            "pmu_scope": (
                "host-wide (scope=host: the machine's CPUs, other work on it counted too)"
                if pts.host_wide
                else "node"
            ),
            "ceilings_file": str(pts.ceilings_file) if pts.ceilings_file else "not looked up",
        }
        if pts.by_model:
            measured["nodes_matched_by_cpu_model"] = ", ".join(pts.by_model)
        missing = [h for h, t in zip(job.hosts, pts.host_type, strict=True) if t is None]
        if missing:
            where = str(pts.ceilings_file) if pts.ceilings_file else "beside the store"
            shown = ", ".join(missing[:8]) + (" …" if len(missing) > 8 else "")
            return [
                Finding(
                    self.name,
                    "Roofline: no probe record for the node type" + sim,
                    "info",
                    {**measured, "hosts_without_record": missing},
                    f"{len(missing)} of {len(job.hosts)} nodes ({shown}) have no stored "
                    f"ceilings ({where}: no host list names them, no record is of their "
                    "CPU model and CPU count), so no compute- or memory-bound verdict is "
                    "given: the "
                    f"job ran at a median {measured['median_gflop_per_s']} GFLOP/s on "
                    f"{measured['median_gb_per_s']} GB/s ("
                    f"{measured['median_intensity_flop_per_byte']} FLOP/byte). Run "
                    "'hushmon probe --hosts HOSTLIST' on a node of that type.",
                    loss_unknown="no ceilings for the node type: the roof is unknown",
                )
            ]
        cls = pts.classes(params["near_roof"])
        known = cls >= 0
        shares = [float((cls[known] == k).mean()) for k in range(3)]
        verdict = int(np.argmax(shares))
        gap = pts.gap()
        gap_low = pts.gap(params["traffic_upper_factor"])
        # a node-period with traffic and no FLOPs has no attainable rate: no gap
        with_gap = known & np.isfinite(gap)
        high = float(gap[with_gap].mean()) if with_gap.any() else float("nan")
        low = float(gap_low[with_gap].mean()) if with_gap.any() else float("nan")
        above = int((known & (gap <= 0) & (pts.gflop_per_s > 0)).sum())
        recs = list(pts.records.values())
        evidence = {
            **measured,
            "verdict": VERDICTS[verdict],
            "share_compute_bound": round(shares[0], 3),
            "share_memory_bound": round(shares[1], 3),
            "share_below_both_roofs": round(shares[2], 3),
            "node_types": [r.key for r in recs],
            "peak_gflop_per_s": [round(r.gflop_per_s, 2) for r in recs],
            "peak_gb_per_s": [round(r.gb_per_s, 2) for r in recs],
            "ridge_flop_per_byte": [round(r.ridge_flop_per_byte, 3) for r in recs],
            "mean_gap_to_roof": round(high, 3),
            "points_at_or_above_roof": above,
            "near_roof": params["near_roof"],
        }
        r0 = recs[0]
        roof = (
            f"the probe's {r0.gflop_per_s:.1f} GFLOP/s and {r0.gb_per_s:.1f} GB/s "
            f"(ridge {r0.ridge_flop_per_byte:.2f} FLOP/byte, {r0.key})"
            + (f" and {len(recs) - 1} more node types" if len(recs) > 1 else "")
        )
        what = {
            0: "near the FLOP peak: faster means fewer operations (a better algorithm, "
            "less redundant work) or more nodes; vector width and FMA use decide how close the "
            "peak is.",
            1: "near the memory bandwidth: raise the arithmetic intensity (blocking or tiling "
            "for the caches, fusing loops that stream the same arrays, smaller data types).",
            2: "far below both roofs: the time goes to latency (dependent loads, branches), "
            "communication or I/O rather than to arithmetic or bandwidth; see the other "
            "findings for which.",
        }[verdict]
        hint = (
            f"{shares[verdict]:.0%} of node-periods are {VERDICTS[verdict]} (compute-bound "
            f"{shares[0]:.0%}, memory-bound {shares[1]:.0%}, below both {shares[2]:.0%}) "
            f"against {roof}"
            + (
                f" ({len(pts.by_model)} nodes matched by their CPU model, not a host list)"
                if pts.by_model
                else ""
            )
            + f"; median {measured['median_intensity_flop_per_byte']} FLOP/byte at "
            f"{measured['median_gflop_per_s']} GFLOP/s: {what}"
            + (
                f" {above} node-periods lie at or above the roof: the ceilings are below what "
                "the PMU counted (a probe on a loaded node, or a simulated PMU)."
                if above
                else ""
            )
        )
        loss = Loss(
            low,
            high,
            f"mean gap to the roof at the job's own intensity {low:.0%}-{high:.0%} over "
            f"{int(known.sum())} node-periods (low end: memory traffic taken "
            f"{params['traffic_upper_factor']:g}x the counted lines, for uncounted writebacks)",
            [
                "the same FLOPs and bytes could run at the roof (the probe's ceilings are "
                "attainable by this code)",
                "the PMU's FLOP events count every floating-point operation the code does",
            ],
        )
        if not with_gap.any():
            evidence["mean_gap_to_roof"] = None
            return [
                Finding(
                    self.name,
                    f"Roofline: {VERDICTS[verdict]}" + sim,
                    "low",
                    evidence,
                    hint,
                    loss_unknown="no node-period did floating-point work: no gap to a roof",
                )
            ]
        return [
            Finding(
                self.name,
                f"Roofline: {VERDICTS[verdict]}" + sim,
                "medium",  # replaced by the [loss] rule
                evidence,
                hint,
                loss=loss,
            )
        ]


FACTOR = Roofline()
