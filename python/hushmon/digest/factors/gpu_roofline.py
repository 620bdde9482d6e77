"""The roofline factor's GPU verdict, from NVML's GPM metrics (not a factor).

On GPUs with GPU Performance Monitoring (Hopper and newer), the agent's
``gpu_nvidia`` source publishes per GPU and period the DRAM bandwidth used
as a share of its maximum (``dram_bw_util_pct``), the share of time the SMs
spent in each math pipe (``fp64_util_pct fp32_util_pct fp16_util_pct
tensor_util_pct``) and the SM occupancy. The same questions as the CPU's
roofline, asked of the GPU's own counters:

- compute-bound: a FP or tensor pipe busy ``gpu_pipe_high_pct`` of the time
  or more (the code is near the flat roof of the pipe it uses);
- memory-bound: DRAM bandwidth at ``gpu_dram_high_pct`` or more while every
  pipe is below ``gpu_pipe_low_pct`` (near the slanted roof);
- neither: below both (latency: too few warps, dependent loads, launch
  gaps; host-device transfers; waiting on the host). The other GPU
  factors (gpu_transfer, gpu_idle) name which.

A GPU-period where both DRAM and every pipe are below ``gpu_idle_pct`` did
no work to speak of and is left out (gpu_idle counts those).

Loss: per GPU-period, the gap to the nearest roof, 1 - max(DRAM %, the
busiest pipe %) / 100: the run time that running at that roof would save
with the same work, averaged over the working GPU-periods. The low end
takes the attainable roof as ``gpu_attainable_share`` of the theoretical
one (a streaming kernel does not reach the DRAM's nominal bandwidth, nor a
real kernel a pipe's every cycle).
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
    span_of,
    spans_text,
)
from hushmon.digest.factors.gpus import aligned, listing, per_gpu
from hushmon.digest.jobdata import JobData

PIPES = ("fp64_util_pct", "fp32_util_pct", "fp16_util_pct", "tensor_util_pct")
GPM_FIELDS = ("dram_bw_util_pct", *PIPES, "sm_occupancy_pct")
GPU_VERDICTS = ("compute-bound", "memory-bound", "neither (latency, transfers or waiting)")
UNKNOWN, COMPUTE, MEMORY, NEITHER = -1, 0, 1, 2


@dataclass
class GpuPoints:
    """Per GPU (rows, ``labels``) and period: the GPM percentages (NaN where
    not measured)."""

    labels: list[str]
    values: dict[str, np.ndarray]  # GPM field -> GPUs x periods, 0-100

    @property
    def dram(self) -> np.ndarray:
        return self.values["dram_bw_util_pct"]

    @property
    def top_pipe(self) -> np.ndarray:
        """The busiest FP or tensor pipe's %, NaN where no pipe was measured."""
        stack = np.stack([self.values[p] for p in PIPES])
        out = np.full(self.dram.shape, np.nan)
        seen = np.isfinite(stack).any(axis=0)
        out[seen] = np.nanmax(stack[:, seen], axis=0)
        return out

    def classes(self, params: Mapping[str, Any]) -> np.ndarray:
        """COMPUTE, MEMORY or NEITHER per GPU-period; UNKNOWN where not measured or idle."""
        dram, pipe = self.dram, self.top_pipe
        known = np.isfinite(dram) & np.isfinite(pipe)
        idle = known & (dram < params["gpu_idle_pct"]) & (pipe < params["gpu_idle_pct"])
        work = known & ~idle
        compute = work & (pipe >= params["gpu_pipe_high_pct"])
        memory = (
            work
            & ~compute
            & (dram >= params["gpu_dram_high_pct"])
            & (pipe < params["gpu_pipe_low_pct"])
        )
        out = np.full(dram.shape, UNKNOWN, dtype=np.int8)
        out[work] = NEITHER
        out[compute] = COMPUTE
        out[memory] = MEMORY
        return out

    def gap(self, attainable_share: float = 1.0) -> np.ndarray:
        """1 - (the nearest roof's %) / (attainable_share x 100), at least 0."""
        with np.errstate(all="ignore"):
            near = np.fmax(self.dram, self.top_pipe) / (100.0 * attainable_share)
        return 1.0 - np.minimum(1.0, near)


def gpu_points(job: JobData) -> GpuPoints | None:
    """The job's GPUs that published GPM's DRAM bandwidth; None if none did."""
    got = aligned(job, GPM_FIELDS)
    if got is None:
        return None
    labels, values = got
    return GpuPoints(labels, {k: v.astype(np.float64) for k, v in values.items()})


def _median(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return None if v.size == 0 else round(float(np.median(v)), 1)


def _or(v: float | None, default: float) -> float:
    return default if v is None else v


def _without_gpm(job: JobData, pts: GpuPoints | None) -> list[str]:
    """The job's GPUs (those with NVML's utilization) that published no GPM field."""
    seen = per_gpu(job, "sm_pct")
    if seen is None:
        return []
    have = set(pts.labels) if pts is not None else set()
    return [lab for lab in seen[0] if lab not in have]


def gpu_findings(job: JobData, params: Mapping[str, Any], factor: str) -> list[Finding]:
    """The GPU verdict; [] for a job without GPUs. AnalyzerSkip when the GPUs
    did too little work for one."""
    pts = gpu_points(job)
    missing = _without_gpm(job, pts)
    if pts is None:
        if not missing:
            return []
        names = listing(missing, np.ones(len(missing), dtype=bool))
        return [
            Finding(
                factor,
                "Roofline (GPU): GPM not available on these GPUs",
                "info",
                {"gpus_without_gpm": names, "source": "NVML (gpu_nvidia)"},
                f"GPM not available on these GPUs ({names}): NVML's GPU Performance "
                "Monitoring (DRAM bandwidth and FP/tensor pipe utilization) needs a Hopper "
                "or newer GPU and a driver from R520, outside a MIG or vGPU slice; without "
                "it no GPU compute- or memory-bound verdict is given.",
                loss_unknown="no GPM metrics: no roof to measure against",
            )
        ]
    cls = pts.classes(params)
    work = cls != UNKNOWN
    if int(work.sum()) < params["gpu_min_periods"]:
        raise AnalyzerSkip(
            SkipReason.NOT_ENOUGH_DATA,
            f"{int(work.sum())} GPU-periods with GPM metrics and work "
            f"(at least {params['gpu_min_periods']})",
        )
    shares = [float((cls[work] == k).mean()) for k in (COMPUTE, MEMORY, NEITHER)]
    verdict = int(np.argmax(shares))
    in_verdict = cls == verdict
    # the periods: those in which most of the working GPUs were in the verdict's class
    with np.errstate(all="ignore"):
        per_time = in_verdict.sum(axis=0) / np.maximum(work.sum(axis=0), 1)
    periods = per_time > 0.5
    top = pts.top_pipe
    pipe_medians = {p: _median(pts.values[p][work]) for p in PIPES}
    busiest = max(PIPES, key=lambda p: _or(pipe_medians[p], -1.0))
    per_gpu_rows = []
    for i, lab in enumerate(pts.labels[:8]):
        row_work = work[i]
        if not row_work.any():
            continue
        row_shares = [float((cls[i][row_work] == k).mean()) for k in (COMPUTE, MEMORY, NEITHER)]
        per_gpu_rows.append(
            {
                "gpu": lab,
                "periods": int(row_work.sum()),
                "verdict": GPU_VERDICTS[int(np.argmax(row_shares))],
                "median_dram_bw_util_pct": _median(pts.dram[i][row_work]),
                "median_top_pipe_pct": _median(top[i][row_work]),
            }
        )
    evidence: dict[str, Any] = {
        "verdict": f"GPU {GPU_VERDICTS[verdict]}",
        "gpus": listing(pts.labels, work.any(axis=1)),
        "gpu_periods": int(work.sum()),
        "periods": spans_text(job, periods),
        "share_compute_bound": round(shares[0], 3),
        "share_memory_bound": round(shares[1], 3),
        "share_neither": round(shares[2], 3),
        "median_dram_bw_util_pct": _median(pts.dram[work]),
        **{f"median_{p}": v for p, v in pipe_medians.items()},
        "median_sm_occupancy_pct": _median(pts.values["sm_occupancy_pct"][work]),
        "per_gpu": per_gpu_rows,
        "thresholds_pct": {
            "dram_high": params["gpu_dram_high_pct"],
            "pipe_low": params["gpu_pipe_low_pct"],
            "pipe_high": params["gpu_pipe_high_pct"],
            "idle": params["gpu_idle_pct"],
        },
        "source": "NVML GPM (gpu_nvidia)",
    }
    if missing:
        evidence["gpus_without_gpm"] = listing(missing, np.ones(len(missing), dtype=bool))
    what = {
        COMPUTE: f"the {busiest.removesuffix('_util_pct')} pipe is the roof: faster means fewer "
        "operations, a faster pipe (tensor cores, lower precision where the numerics allow) "
        "or more GPUs.",
        MEMORY: "DRAM bandwidth is the roof while the math pipes idle: raise the arithmetic "
        "intensity (fuse kernels that stream the same arrays, tile into shared memory, "
        "smaller data types).",
        NEITHER: "below both roofs: the time goes to latency (too few warps in flight: "
        "see the occupancy; dependent loads, kernel launch gaps), host-device transfers or "
        "waiting on the host; gpu_transfer and gpu_idle name which.",
    }[verdict]
    hint = (
        f"On {evidence['gpus']}, {shares[verdict]:.0%} of {int(work.sum())} working "
        f"GPU-periods were {GPU_VERDICTS[verdict]} (compute-bound {shares[0]:.0%}, "
        f"memory-bound {shares[1]:.0%}, neither {shares[2]:.0%}; periods "
        f"{evidence['periods']}): DRAM bandwidth at a median "
        f"{evidence['median_dram_bw_util_pct']}% of its maximum, the busiest pipe "
        f"{busiest.removesuffix('_util_pct')} at {pipe_medians[busiest]}%, SM occupancy "
        f"{evidence['median_sm_occupancy_pct']}%. {what}"
    )
    gap = pts.gap()[work]
    gap_low = pts.gap(params["gpu_attainable_share"])[work]
    high, low = float(gap.mean()), float(gap_low.mean())
    evidence["mean_gap_to_roof"] = round(high, 3)
    loss = Loss(
        low,
        high,
        f"mean gap to the nearest roof (DRAM bandwidth or the busiest pipe) "
        f"{low:.0%}-{high:.0%} over {int(work.sum())} working GPU-periods (low end: the "
        f"roofs taken as {params['gpu_attainable_share']:.0%} of their theoretical value)",
        [
            "the same work could run at the nearest roof (the GPU's bandwidth or pipe is "
            "attainable by this code)",
            "GPM's utilization is the share of the period the DRAM or the pipe was busy",
        ],
    )
    run = longest_run(periods)
    return [
        Finding(
            factor,
            f"Roofline (GPU): {GPU_VERDICTS[verdict]}",
            "medium",  # replaced by the [loss] rule
            evidence,
            hint,
            span_of(job, run),
            loss=loss,
        )
    ]


def gpu_gap(job: JobData, params: Mapping[str, Any]) -> float | None:
    """The mean gap to the nearest GPU roof over the working GPU-periods."""
    pts = gpu_points(job)
    if pts is None:
        return None
    work = pts.classes(params) != UNKNOWN
    return float(pts.gap()[work].mean()) if work.any() else None
