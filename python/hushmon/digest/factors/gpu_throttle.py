"""GPU clocks throttled by power or temperature while the GPU works.

NVML says why the clocks are below their maximum; an idle GPU drops its
clocks anyway, so only periods with the GPU busy (SM utilization at least
``busy_sm_pct``) count. Power capping (SW power cap, HW power brake) and
thermal slowdown (SW or HW) slow the job's kernels by the clock ratio.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason, longest_run, span_of
from hushmon.digest.factors.gpus import aligned, listing
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE

FIELDS = (
    "sm_pct",
    "throttle_power",
    "throttle_thermal",
    "throttle_hw",
    "sm_clock_mhz",
    "temp_c",
    "power_w",
)


class GpuThrottle:
    name = "gpu_throttle"
    title = "GPU power or thermal throttling"
    requires = ("gpu.sm_pct",)
    optional = ("gpu.temp_c", "gpu.power_w")
    # what it needs (digest/resolution.py): busy GPU-periods: each GPU's series
    resolution = PER_NODE

    def _shares(
        self, job: JobData, params: Mapping[str, Any]
    ) -> tuple[list[str], dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
        got = aligned(job, FIELDS)
        if got is None:
            raise AnalyzerSkip(SkipReason.MISSING_SENSOR, "no GPU reported sm_pct")
        labels, m = got
        if not any(np.isfinite(m[f]).any() for f in FIELDS[1:4]):
            raise AnalyzerSkip(SkipReason.MISSING_SENSOR, "no GPU reported throttle reasons")
        busy = np.isfinite(m["sm_pct"]) & (m["sm_pct"] >= params["busy_sm_pct"])
        flags = {f: busy & (np.nan_to_num(m[f]) > 0) for f in FIELDS[1:4]}
        return labels, m, busy, flags

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of busy GPU-periods throttled for power, temperature or by hardware."""
        _, _, busy, flags = self._shares(job, params)
        if not busy.any():
            return 0.0
        any_flag = flags["throttle_power"] | flags["throttle_thermal"] | flags["throttle_hw"]
        return float(any_flag.sum() / busy.sum())

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        labels, m, busy, flags = self._shares(job, params)
        if busy.sum() < params["min_busy_gpu_periods"]:
            return []
        any_flag = flags["throttle_power"] | flags["throttle_thermal"] | flags["throttle_hw"]
        share = float(any_flag.sum() / busy.sum())
        if share < params["share_medium"]:
            return []
        shares = {f: float(flags[f].sum() / busy.sum()) for f in flags}
        clock = m["sm_clock_mhz"]
        free = busy & ~any_flag
        with np.errstate(all="ignore"):
            clk_thr = float(np.nanmedian(clock[any_flag])) if any_flag.any() else float("nan")
            clk_free = float(np.nanmedian(clock[free])) if free.any() else float("nan")
        evidence: dict[str, Any] = {
            "busy_gpu_periods": int(busy.sum()),
            "throttled_share": round(share, 3),
            "power_share": round(shares["throttle_power"], 3),
            "thermal_share": round(shares["throttle_thermal"], 3),
            "hw_slowdown_share": round(shares["throttle_hw"], 3),
            "throttled_gpus": listing(labels, any_flag.any(axis=1)),
        }
        if np.isfinite(clk_thr):
            evidence["sm_clock_mhz_throttled"] = round(clk_thr)
        if np.isfinite(clk_free):
            evidence["sm_clock_mhz_unthrottled"] = round(clk_free)
        if np.isfinite(m["temp_c"]).any():
            evidence["max_temp_c"] = round(float(np.nanmax(m["temp_c"])), 1)
        if np.isfinite(m["power_w"][busy]).any():
            evidence["avg_power_w_busy"] = round(float(np.nanmean(m["power_w"][busy])), 1)
        main = max(shares, key=lambda k: shares[k])
        advice = {
            "throttle_power": "the GPUs ran into their power limit: compare the enforced limit "
            "with the default (nvidia-smi -q -d POWER); a site or node power cap, or a shared "
            "PSU, lowers it",
            "throttle_thermal": "the GPUs ran too hot: check the node's cooling (fans, inlet "
            "air, blocked slots) and the temperatures of neighbouring GPUs",
            "throttle_hw": "the hardware slowed the clocks (HW slowdown: power brake or "
            "thermal protection from the board): report the node to its administrators",
        }[main]
        clocks = (
            f" (median SM clock {evidence['sm_clock_mhz_throttled']} MHz throttled vs "
            f"{evidence['sm_clock_mhz_unthrottled']} MHz not)"
            if "sm_clock_mhz_throttled" in evidence and "sm_clock_mhz_unthrottled" in evidence
            else ""
        )
        hint = (
            f"{share:.0%} of the busy GPU-periods had throttled clocks{clocks}: power "
            f"{shares['throttle_power']:.0%}, thermal {shares['throttle_thermal']:.0%}, HW "
            f"slowdown {shares['throttle_hw']:.0%}; {advice}. Kernels run slower by about "
            "the clock ratio."
        )
        severity = "high" if share >= params["share_high"] else "medium"
        run = longest_run(any_flag.any(axis=0))
        return [
            Finding(
                self.name,
                self.title,
                severity,
                evidence,
                hint,
                span_of(job, run),
                loss_unknown=(
                    "how kernel time follows the SM clock is not measured (no real GPU job "
                    "has been digested to check a clock-ratio rule)"
                ),
            )
        ]


FACTOR = GpuThrottle()
