"""The application's own timeline (libhushmon) against the system sensors:
which sensor moves with the application's slowdown.

For every application metric (``app.mean[...metric=M...]``) and phase
duration (``app_phase.mean_s[...phase=P...]``) the per-period value is the
slowest rank's (max over ranks and nodes: the loop waits for it). It is
compared with each system sensor present (job average over nodes, per
period) by Spearman's rank correlation over the periods where both were
measured, and slow periods (above the median by ``slow_factor``) are set
against normal ones: the sensor with the largest |rho| is named, with its
values in slow and in normal periods. Needs no fixed sensor: a job without
libhushmon data is skipped as not applicable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE

# System sensors the correlation looks at, when present (derived names
# where the digest has them, so node scope and host-wide read alike).
SYSTEM_SENSORS = (
    "cpu.user_pct",
    "cpu.system_pct",
    "cpu.idle_pct",
    "cpu.iowait_pct[cpu=total]",
    "load.load1",
    "mem.used_pct",
    "swap.pages_per_s",
    "vm.pgmajfault_per_s",
    "network.tx_bytes_per_s",
    "network.rx_bytes_per_s",
    "loopback.tx_bytes_per_s",
    "disk.bytes_per_s",
    "perf_sw.context_switches_per_s",
    "cpu.host_busy_pct",
    "gpu.sm_pct",
)

_NAME = re.compile(r"(?:metric|phase)=([^,\]]+)")


def app_series(job: JobData) -> dict[str, np.ndarray]:
    """Per-period slowest-rank value of every application metric and phase,
    keyed ``metric NAME`` / ``phase NAME``."""
    out: dict[str, list[np.ndarray]] = {}
    for prefix, kind in (("app.mean", "metric"), ("app_phase.mean_s", "phase")):
        for sensor in job.base_sensors(prefix):
            m = _NAME.search(sensor)
            mat = job.matrix(sensor)
            if m is None or mat is None:
                continue
            out.setdefault(f"{kind} {m.group(1)}", []).append(mat)
    result = {}
    for key, mats in out.items():
        stack = np.vstack(mats)
        with np.errstate(all="ignore"):
            finite = np.isfinite(stack).any(axis=0)
            result[key] = np.where(
                finite, np.nanmax(np.where(np.isfinite(stack), stack, -np.inf), axis=0), np.nan
            )
    return result


def _ranks(v: np.ndarray) -> np.ndarray:
    order = np.argsort(v, kind="mergesort")
    r = np.empty(len(v))
    r[order] = np.arange(len(v), dtype=float)
    # ties: average ranks
    _, inv, counts = np.unique(v, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=r)
    return (sums / counts)[inv]


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho of two equal-length finite vectors (NaN if constant)."""
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def correlations(
    job: JobData, y: np.ndarray, min_periods: int
) -> list[tuple[str, float, np.ndarray]]:
    rows = []
    for sensor in SYSTEM_SENSORS:
        mat = job.matrix(sensor)
        if mat is None:
            continue
        with np.errstate(all="ignore"):
            x = np.nanmean(np.where(np.isfinite(mat), mat, np.nan), axis=0)
        ok = np.isfinite(x) & np.isfinite(y)
        if ok.sum() < min_periods:
            continue
        rho = spearman(x[ok], y[ok])
        if np.isfinite(rho):
            rows.append((sensor, rho, x))
    rows.sort(key=lambda r: -abs(r[1]))
    return rows


class AppTimeline:
    name = "app_timeline"
    title = "Application timeline vs system sensors"
    requires: tuple[str, ...] = ()
    optional: tuple[str, ...] = SYSTEM_SENSORS
    # what it needs (digest/resolution.py): the slowest rank per period: each node's series
    resolution = PER_NODE

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        series = app_series(job)
        if not series:
            raise AnalyzerSkip(
                SkipReason.NOT_APPLICABLE, "the job reported nothing through libhushmon"
            )
        min_periods = int(params["min_periods"])
        findings = []
        for key, y in sorted(series.items()):
            n = int(np.isfinite(y).sum())
            if n < min_periods:
                continue
            rows = correlations(job, y, min_periods)
            if not rows:
                continue
            sensor, rho, x = rows[0]
            med = float(np.nanmedian(y))
            slow = np.isfinite(y) & (y > med * (1 + float(params["slow_factor"])))
            normal = np.isfinite(y) & ~slow
            strong = abs(rho) >= float(params["rho_medium"])
            sev = "medium" if strong and slow.any() else "info"
            evidence: dict[str, Any] = {
                "app_series": key,
                "periods": n,
                "median": round(med, 6),
                "max": round(float(np.nanmax(y)), 6),
                "slow_periods": int(slow.sum()),
                "sensor": sensor,
                "spearman_rho": round(rho, 3),
                "others": {s: round(r, 3) for s, r, _ in rows[1:4]},
            }
            moves = ""
            if slow.any() and normal.any():
                xs, xn = float(np.nanmean(x[slow])), float(np.nanmean(x[normal]))
                evidence["sensor_slow_mean"] = round(xs, 3)
                evidence["sensor_normal_mean"] = round(xn, 3)
                limit = 1 + float(params["slow_factor"])
                moves = (
                    f"; in the {int(slow.sum())} slow periods (> {limit:.2g} x median)"
                    f" {sensor} averages {xs:.3g} vs {xn:.3g} otherwise"
                )
            direction = "rises" if rho > 0 else "falls"
            findings.append(
                Finding(
                    factor=self.name,
                    title=f"{key}: moves with {sensor}",
                    severity=sev,
                    evidence=evidence,
                    hint=(
                        f"the application's {key} (slowest rank, median {med:.3g}, max "
                        f"{float(np.nanmax(y)):.3g}) {direction} with {sensor} "
                        f"(Spearman rho {rho:.2f} over {n} periods){moves}. "
                        "A correlation, not a cause: read it beside the other factors."
                    ),
                    loss_unknown="a correlation with a sensor, not a limit: it has no cost of "
                    "its own (read the factor of that sensor)",
                )
            )
        if not findings:
            raise AnalyzerSkip(
                SkipReason.NOT_ENOUGH_DATA,
                f"application series have fewer than {min_periods} periods with a system sensor",
            )
        return findings

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        return None  # not a size-dependent influence; compare does not follow it


FACTOR = AppTimeline()
