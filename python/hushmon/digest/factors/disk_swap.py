"""Disk and swap use slowing computation (seed 001, Figs. 8-11).

The seed's Linpack that overflows memory: swap activity through the whole
run, and performance tied to it (low FLOPS while swapping, high only in the
few periods without disk exchange). Per period we take the across-node
average of swap pages in+out and of the work rate, split the periods into
swapping / not swapping, and report the time share and the work lost. Disk
traffic with the CPUs waiting on I/O and no swapping is reported too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason, longest_run, mb, span_of
from hushmon.digest.factors.work import work_matrix
from hushmon.digest.jobdata import JobData


class DiskSwap:
    name = "disk_swap"
    title = "Disk and swap use slowing computation"
    requires = ("swap.pages_per_s", "cpu.user_pct")
    optional = ("pmu.flops_per_s", "disk.bytes_per_s", "disk.max_busy_pct", "cpu.iowait_pct")

    def _swapping(self, job: JobData, params: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        swap = job.stats["swap.pages_per_s"].avg
        return swap, np.nan_to_num(swap) > params["swap_active_pages_per_s"]

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of the job's periods spent swapping."""
        _, swapping = self._swapping(job, params)
        return float(swapping.mean())

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        if len(job.times_ns) < 5:
            raise AnalyzerSkip(SkipReason.NOT_ENOUGH_DATA, "fewer than 5 periods")
        findings: list[Finding] = []
        swap, swapping = self._swapping(job, params)
        share = float(swapping.mean())
        work = work_matrix(job)
        assert work is not None  # cpu.user_pct is required
        work_name, wm = work
        with np.errstate(all="ignore"):
            work_avg = np.nanmean(wm, axis=0)
        if share >= params["min_swap_share"]:
            evidence: dict[str, Any] = {
                "share_of_time_swapping": round(share, 3),
                "swap_pages_per_s_while_swapping": round(float(np.nanmean(swap[swapping])), 1),
                "work_sensor": work_name,
            }
            slowdown = float("nan")
            if (~swapping).any():
                w_on = float(np.nanmean(work_avg[swapping]))
                w_off = float(np.nanmean(work_avg[~swapping]))
                slowdown = 1 - w_on / w_off if w_off > 0 else float("nan")
                evidence.update(
                    work_while_swapping=round(w_on, 3),
                    work_otherwise=round(w_off, 3),
                    work_lost_while_swapping=round(slowdown, 3),
                )
            ok = np.isfinite(swap) & np.isfinite(work_avg)
            if ok.sum() > 2 and np.std(swap[ok]) > 0 and np.std(work_avg[ok]) > 0:
                evidence["corr_swap_vs_work"] = round(
                    float(np.corrcoef(swap[ok], work_avg[ok])[0, 1]), 3
                )
            if job.has("disk.bytes_per_s"):
                disk = job.stats["disk.bytes_per_s"].avg
                evidence["disk_MB_per_s_while_swapping"] = mb(float(np.nanmean(disk[swapping])))
            if np.isnan(slowdown):
                severity = "high" if share > 0.5 else "medium"
                lost = "the job swapped the whole time, so there is no swap-free baseline"
            else:
                severity = (
                    "high"
                    if slowdown >= params["slowdown_high"]
                    else "medium"
                    if slowdown >= params["slowdown_medium"]
                    else "low"
                )
                lost = f"{work_name} averages {slowdown:.0%} lower while swapping"
            hint = (
                f"The nodes swap in {share:.0%} of the job's time "
                f"({evidence['swap_pages_per_s_while_swapping']:.0f} pages/s); {lost}. "
                "The job's memory does not fit: use more nodes (less data per node), fewer "
                "processes per node, or a smaller problem; check for memory leaks."
            )
            run = longest_run(swapping)
            findings.append(
                Finding(
                    self.name,
                    "Swapping slows computation",
                    severity,
                    evidence,
                    hint,
                    span_of(job, run),
                )
            )
        disk_finding = self._disk_finding(job, params, swapping, work_name, work_avg)
        if disk_finding is not None:
            findings.append(disk_finding)
        return findings

    def _disk_finding(
        self,
        job: JobData,
        params: Mapping[str, Any],
        swapping: np.ndarray,
        work_name: str,
        work_avg: np.ndarray,
    ) -> Finding | None:
        """Periods of heavy disk traffic without swapping (file I/O) and what they cost."""
        if job.has("disk.max_busy_pct"):
            busy = job.stats["disk.max_busy_pct"].avg
            active = np.nan_to_num(busy) > params["disk_busy_pct"]
        elif job.has("disk.bytes_per_s"):
            busy = None
            active = (
                np.nan_to_num(job.stats["disk.bytes_per_s"].avg) > params["disk_active_bytes_per_s"]
            )
        else:
            return None
        active &= ~swapping
        share = float(active.mean())
        if share < params["min_disk_share"]:
            return None
        evidence: dict[str, Any] = {"share_of_time_disk_busy": round(share, 3)}
        if busy is not None:
            evidence["disk_busy_pct"] = round(float(np.nanmean(busy[active])), 1)
        if job.has("disk.bytes_per_s"):
            evidence["disk_MB_per_s"] = mb(
                float(np.nanmean(job.stats["disk.bytes_per_s"].avg[active]))
            )
        iowait = job.stats["cpu.iowait_pct"].avg if job.has("cpu.iowait_pct") else None
        if iowait is not None:
            evidence["iowait_pct"] = round(float(np.nanmean(iowait[active])), 1)
        quiet = ~active & ~swapping
        slowdown = float("nan")
        if quiet.sum() >= 2:
            w_on = float(np.nanmean(work_avg[active]))
            w_off = float(np.nanmean(work_avg[quiet]))
            if w_off > 0:
                slowdown = 1 - w_on / w_off
                evidence.update(
                    work_sensor=work_name,
                    work_while_disk_busy=round(w_on, 3),
                    work_otherwise=round(w_off, 3),
                    work_lost_while_disk_busy=round(slowdown, 3),
                )
        waiting = iowait is not None and evidence["iowait_pct"] > params["iowait_pct"]
        if not waiting and not (slowdown >= params["slowdown_medium"]):
            return None  # the disk is busy but the computation does not suffer
        severity = "high" if slowdown >= params["slowdown_high"] else "medium"
        cost = (
            f"{work_name} is {slowdown:.0%} lower then than in the other periods"
            if np.isfinite(slowdown)
            else "there are no quiet periods to compare with"
        )
        wait = f", CPUs wait for I/O {evidence['iowait_pct']:.0f}% of the time" if waiting else ""
        hint = (
            f"In {share:.0%} of the time the disks are busy without swapping "
            f"({evidence.get('disk_MB_per_s', '?')} MB/s{wait}); {cost}. File I/O limits the "
            "job: write less often or in larger blocks, overlap I/O with computation, use "
            "node-local scratch or a parallel file system."
        )
        return Finding(
            self.name,
            "Disk I/O slows computation",
            severity,
            evidence,
            hint,
            span_of(job, longest_run(active)),
        )


FACTOR = DiskSwap()
