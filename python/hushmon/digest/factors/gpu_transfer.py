"""Host-device transfer bound: a GPU's PCIe link near its capacity.

The agent reads each GPU's PCIe byte counters and the link's capacity
(maximum generation x width, per direction). Periods with a direction at
``near_capacity_pct`` or more of it are transfer periods; when the SMs
are mostly idle in them the GPU waits for its data (copies not
overlapped, pageable memory, data that could stay on the GPU).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason, longest_run, span_of
from hushmon.digest.factors.gpus import aligned, listing
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE

FIELDS = ("pcie_capacity_bytes_per_s", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "sm_pct")


class GpuTransfer:
    name = "gpu_transfer"
    title = "Host-device transfers (PCIe) near capacity"
    requires = ("gpu.pcie_used_pct",)
    optional = ("gpu.sm_pct",)
    # what it needs (digest/resolution.py): each GPU's PCIe link over time
    resolution = PER_NODE

    def _used(self, job: JobData) -> tuple[list[str], dict[str, np.ndarray], np.ndarray]:
        got = aligned(job, FIELDS)
        if got is None:
            raise AnalyzerSkip(SkipReason.MISSING_SENSOR, "no GPU reported its PCIe capacity")
        labels, m = got
        cap = m["pcie_capacity_bytes_per_s"]
        with np.errstate(all="ignore"):
            both = np.fmax(m["pcie_tx_bytes_per_s"], m["pcie_rx_bytes_per_s"])
            used = np.where(cap > 0, 100.0 * both / cap, np.nan)
        return labels, m, used

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of the job's time with a GPU's PCIe direction near capacity."""
        _, _, used = self._used(job)
        ok = np.isfinite(used)
        if not ok.any():
            return None
        near = ok & (used >= params["near_capacity_pct"])
        return float(near.any(axis=0)[ok.any(axis=0)].mean())

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        labels, m, used = self._used(job)
        ok = np.isfinite(used)
        if not ok.any():
            raise AnalyzerSkip(SkipReason.NOT_ENOUGH_DATA, "no PCIe rate measured")
        near = ok & (used >= params["near_capacity_pct"])
        # Share of the job's time with some GPU near capacity: one GPU's link
        # limits the step of a synchronous job as much as all of them do.
        share = float(near.any(axis=0)[ok.any(axis=0)].mean())
        if share < params["min_share"]:
            return []
        sm = m["sm_pct"]
        sm_near = float(np.nanmean(sm[near])) if np.isfinite(sm[near]).any() else float("nan")
        direction = (
            "host to device"
            if np.nansum(m["pcie_rx_bytes_per_s"][near])
            >= np.nansum(m["pcie_tx_bytes_per_s"][near])
            else "device to host"
        )
        cap = m["pcie_capacity_bytes_per_s"]
        evidence: dict[str, Any] = {
            "share_of_time_near_capacity": round(share, 3),
            "peak_used_pct": round(float(np.nanmax(used)), 1),
            "link_capacity_gb_per_s": round(float(np.nanmax(cap)) / 1e9, 1),
            "peak_gb_per_s": round(
                float(np.nanmax(np.fmax(m["pcie_tx_bytes_per_s"], m["pcie_rx_bytes_per_s"]))) / 1e9,
                2,
            ),
            "main_direction": direction,
            "gpus_near_capacity": listing(labels, near.any(axis=1)),
            "near_capacity_pct_threshold": params["near_capacity_pct"],
        }
        bound = np.isfinite(sm_near) and sm_near < params["low_sm_pct"]
        if np.isfinite(sm_near):
            evidence["avg_sm_pct_while_near_capacity"] = round(sm_near, 1)
        waits = (
            f"and the SMs were busy only {sm_near:.0f}% of those periods: the GPUs wait for "
            "their data"
            if bound
            else "while the SMs kept working (copies overlap kernels, but the link is the "
            "next limit)"
        )
        hint = (
            f"PCIe {direction} traffic was at {params['near_capacity_pct']}% or more of the "
            f"{evidence['link_capacity_gb_per_s']} GB/s link in {share:.0%} of the job's time "
            f"(peak {evidence['peak_gb_per_s']} GB/s) {waits}. Keep data on the GPU between "
            "steps, use pinned host memory and asynchronous copies on CUDA streams, batch "
            "small transfers, or GPUDirect for I/O and MPI."
        )
        severity = "high" if bound and share >= params["share_high"] else "medium"
        if not bound:
            severity = "low"
        run = longest_run(near.any(axis=0))
        return [
            Finding(
                self.name,
                self.title,
                severity,
                evidence,
                hint,
                span_of(job, run),
                loss_unknown=(
                    "how much of the copies overlap the kernels is not measured, so the "
                    "time a faster link would save cannot be told"
                ),
            )
        ]


FACTOR = GpuTransfer()
