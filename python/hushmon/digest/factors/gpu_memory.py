"""GPU memory near full: the fullest GPU's memory close to its size.

Near full, a job is one step away from CUDA out-of-memory, and frameworks'
caching allocators start freeing and retrying (slow steps). NVML's
``used`` counts every process on the GPU and the driver's own reserve.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason, longest_run, span_of
from hushmon.digest.factors.gpus import aligned, listing
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE


class GpuMemory:
    name = "gpu_memory"
    title = "GPU memory near full"
    requires = ("gpu.mem_used_pct",)
    optional = ()
    # what it needs (digest/resolution.py): the fullest GPU: each GPU's series
    resolution = PER_NODE

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Peak GPU memory used, share of the GPU's memory (0-1, as the other factors)."""
        m = job.matrix("gpu.mem_used_pct")
        return None if m is None or not np.isfinite(m).any() else float(np.nanmax(m)) / 100.0

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        got = aligned(job, ("mem_used_pct", "mem_total_bytes"))
        if got is None:
            raise AnalyzerSkip(SkipReason.MISSING_SENSOR, "no GPU reported mem_used_pct")
        labels, mats = got
        used = mats["mem_used_pct"]
        measured = np.isfinite(used)
        full = measured & (used >= params["near_full_pct"])
        with np.errstate(all="ignore"):
            per_time = full.any(axis=0)
            share = float(per_time[measured.any(axis=0)].mean()) if measured.any() else 0.0
        if share < params["min_share"]:
            return []
        peak = float(np.nanmax(used))
        gpus_full = full.any(axis=1)
        total = mats["mem_total_bytes"]
        size_gib = round(float(np.nanmax(total)) / 2**30, 1) if np.isfinite(total).any() else None
        evidence = {
            "peak_mem_used_pct": round(peak, 1),
            "share_of_time_near_full": round(share, 3),
            "gpus_near_full": int(gpus_full.sum()),
            "near_full_gpus": listing(labels, gpus_full),
            "gpu_mem_gib": size_gib,
            "near_full_pct_threshold": params["near_full_pct"],
        }
        severity = "high" if peak >= params["high_pct"] else "medium"
        of = f" of {size_gib} GiB" if size_gib is not None else ""
        hint = (
            f"GPU memory reached {peak:.1f}%{of} ({evidence['near_full_gpus']}) and stayed "
            f"at or above {params['near_full_pct']}% for {share:.0%} of the job: one step from "
            "out-of-memory, and caching allocators free and retry (slow, irregular steps). "
            "Use smaller batches or micro-batches, activation checkpointing or mixed precision, "
            "or spread the model over more GPUs."
        )
        run = longest_run(per_time)
        return [
            Finding(
                self.name,
                self.title,
                severity,
                evidence,
                hint,
                span_of(job, run),
                loss_unknown=(
                    "a full GPU memory costs time only when it forces smaller batches or "
                    "transfers, which the counters do not show"
                ),
            )
        ]


FACTOR = GpuMemory()
