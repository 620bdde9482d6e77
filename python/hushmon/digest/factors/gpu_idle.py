"""GPUs idle while the job runs: GPUs the job was given but did not keep busy.

NVML's SM utilization is the share of its sample period in which a kernel
ran on the GPU; a GPU below ``idle_sm_pct`` in a period counts as idle
then. Idle GPUs mean a job that uses fewer GPUs than it holds (one rank
per node instead of one per GPU, CUDA_VISIBLE_DEVICES), or GPUs waiting
on the host (data loading, MPI, serial phases).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import (
    AnalyzerSkip,
    Finding,
    SkipReason,
    longest_run,
    span_of,
)
from hushmon.digest.factors.gpus import listing, per_gpu
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE


class GpuIdle:
    name = "gpu_idle"
    title = "GPUs idle while the job runs"
    requires = ("gpu.sm_pct",)
    optional = ()
    # what it needs (digest/resolution.py): idle GPUs are named: each GPU's series
    resolution = PER_NODE

    def _idle(self, job: JobData, params: Mapping[str, Any]) -> tuple[list[str], np.ndarray]:
        got = per_gpu(job, "sm_pct")
        if got is None:
            raise AnalyzerSkip(SkipReason.MISSING_SENSOR, "no GPU reported sm_pct")
        return got

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of the job's GPU-periods below idle_sm_pct."""
        _, sm = self._idle(job, params)
        measured = np.isfinite(sm)
        return float((sm[measured] < params["idle_sm_pct"]).mean()) if measured.any() else None

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        labels, sm = self._idle(job, params)
        measured = np.isfinite(sm)
        if measured.sum() < params["min_gpu_periods"]:
            raise AnalyzerSkip(
                SkipReason.NOT_ENOUGH_DATA, f"{int(measured.sum())} GPU-periods measured"
            )
        idle = measured & (sm < params["idle_sm_pct"])
        share = float(idle.sum() / measured.sum())
        if share < params["idle_share_low"]:
            return []
        with np.errstate(all="ignore"):
            per_gpu_idle = idle.sum(axis=1) / np.maximum(measured.sum(axis=1), 1)
            per_time = idle.sum(axis=0) / np.maximum(measured.sum(axis=0), 1)
        mostly = per_gpu_idle >= params["gpu_mostly_idle_share"]
        avg_sm = float(np.nanmean(sm))
        evidence = {
            "gpus": len(labels),
            "idle_share_of_gpu_time": round(share, 3),
            "avg_sm_pct": round(avg_sm, 1),
            "gpus_mostly_idle": int(mostly.sum()),
            "mostly_idle_gpus": listing(labels, mostly),
            "idle_sm_pct_threshold": params["idle_sm_pct"],
        }
        severity = (
            "high"
            if share >= params["idle_share_high"]
            else "medium"
            if share >= params["idle_share_medium"]
            else "low"
        )
        if mostly.any() and not mostly.all():
            cause = (
                f"{int(mostly.sum())} of {len(labels)} GPUs were idle most of the time "
                f"({evidence['mostly_idle_gpus']}): the job uses fewer GPUs than it holds -- "
                "start one process per GPU (check CUDA_VISIBLE_DEVICES and the ranks per node) "
                "or ask for fewer GPUs."
            )
        else:
            cause = (
                "the GPUs wait for the host in turns: overlap data loading, copies and "
                "communication with kernels (more loader workers, pinned memory, CUDA streams), "
                "or give each GPU more work per step."
            )
        hint = (
            f"The job's GPUs ran kernels {avg_sm:.0f}% of the time on average; "
            f"{share:.0%} of GPU-periods were below {params['idle_sm_pct']}% SM utilization, "
            f"{cause}"
        )
        run = longest_run(per_time >= 0.5)
        return [
            Finding(
                self.name,
                self.title,
                severity,
                evidence,
                hint,
                span_of(job, run),
                loss_unknown=(
                    "idle GPUs cost the job time only if work could move onto them, which "
                    "the GPU counters do not show"
                ),
            )
        ]


FACTOR = GpuIdle()
