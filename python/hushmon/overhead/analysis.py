"""The seed's table: % slowdown per kernel x configuration x mode against
the runs without monitoring, with anomalous runs found and reported.

Anomalies (the seed filtered them by hand): within each cell (kernel,
configuration, mode), a run whose modified z-score
0.6745 (t - median) / MAD exceeds 3.5 (Iglewicz & Hoaglin) is anomalous.
The median and MAD are not moved by the outliers they look for, unlike a
mean and standard deviation. The MAD is floored at 0.1 % of the median so
that cells of nearly identical times (a MAD of a few microseconds) do not
flag runs that differ by a fraction of a per mille. Anomalous runs are left
out of the estimates and listed; the estimate over all runs is kept too.

Slowdown of mode m: 100 (mean_m / mean_none - 1) with a Welch interval
(hushmon.stats.relative_difference), and 100 (median_m / median_none - 1)
with a percentile bootstrap interval (each sample resampled on its own)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hushmon.overhead.execute import RunResult
from hushmon.overhead.modes import BASELINE
from hushmon.stats import relative_difference

MODIFIED_Z_LIMIT = 3.5
MAD_FLOOR_FRACTION = 1e-3
BOOTSTRAP_SAMPLES = 4000


def modified_z(values: Sequence[float]) -> np.ndarray:
    """0.6745 (x - median) / MAD for each value, with the MAD floored."""
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return a
    med = float(np.median(a))
    mad = float(np.median(np.abs(a - med)))
    scale = max(mad, MAD_FLOOR_FRACTION * abs(med), 1e-12)
    return 0.6745 * (a - med) / scale


def anomalous(values: Sequence[float]) -> np.ndarray:
    """Which values are anomalous (needs at least 3 values to tell)."""
    z = modified_z(values)
    if z.size < 3:
        return np.zeros(z.size, dtype=bool)
    return np.abs(z) > MODIFIED_Z_LIMIT


def bootstrap_median_ratio(
    x: Sequence[float], base: Sequence[float], level: float, rng: np.random.Generator
) -> tuple[float, float, float]:
    """100 (median x / median base - 1) and its percentile bootstrap interval."""
    a, b = np.asarray(x, dtype=float), np.asarray(base, dtype=float)
    est = 100.0 * (float(np.median(a)) / float(np.median(b)) - 1.0)
    if a.size < 2 or b.size < 2:
        return est, math.nan, math.nan
    ia = rng.integers(0, a.size, size=(BOOTSTRAP_SAMPLES, a.size))
    ib = rng.integers(0, b.size, size=(BOOTSTRAP_SAMPLES, b.size))
    ratios = 100.0 * (np.median(a[ia], axis=1) / np.median(b[ib], axis=1) - 1.0)
    tail = (1.0 - level) / 2
    return est, float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1.0 - tail))


@dataclass
class Slowdown:
    kernel: str
    config: str
    mode: str
    mean_pct: float
    mean_low: float
    mean_high: float
    median_pct: float
    median_low: float
    median_high: float
    mean_pct_all_runs: float  # anomalies included
    n: int  # runs of the mode kept
    n_base: int  # runs of the baseline kept
    anomalies: int  # of the mode and the baseline in this cell


def analyse(
    results: list[RunResult],
    kernels: list[str],
    configs: list[str],
    modes: list[str],
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    cells: dict[tuple[str, str, str], list[RunResult]] = {}
    for r in results:
        if r.time_s is not None:
            cells.setdefault((r.kernel, r.config, r.mode), []).append(r)
    kept: dict[tuple[str, str, str], list[float]] = {}
    every: dict[tuple[str, str, str], list[float]] = {}
    anomalies: list[dict[str, object]] = []
    for key, runs in cells.items():
        times = [r.time_s for r in runs if r.time_s is not None]
        flags = anomalous(times)
        z = modified_z(times)
        med = float(np.median(times))
        every[key] = times
        kept[key] = [t for t, f in zip(times, flags, strict=True) if not f]
        for r, f, zi in zip(runs, flags, z, strict=True):
            if f:
                anomalies.append({
                    "index": r.index, "round": r.round, "kernel": r.kernel,
                    "config": r.config, "mode": r.mode, "time_s": r.time_s,
                    "cell_median_s": med, "modified_z": float(zi), "load1": r.load1,
                    "direction": "slow" if zi > 0 else "fast",
                })  # fmt: skip
    slowdowns: list[Slowdown] = []
    for k in kernels:
        for c in configs:
            base = kept.get((k, c, BASELINE), [])
            for m in modes:
                if m == BASELINE:
                    continue
                x = kept.get((k, c, m), [])
                if not x or not base:
                    continue
                mean = relative_difference(x, base, level)
                med, lo, hi = bootstrap_median_ratio(x, base, level, rng)
                all_x, all_b = every[(k, c, m)], every[(k, c, BASELINE)]
                slowdowns.append(Slowdown(
                    k, c, m, mean.estimate, mean.low, mean.high, med, lo, hi,
                    100.0 * (float(np.mean(all_x)) / float(np.mean(all_b)) - 1.0),
                    len(x), len(base),
                    (len(all_x) - len(x)) + (len(all_b) - len(base)),
                ))  # fmt: skip
    averages = {
        m: float(np.mean([s.mean_pct for s in slowdowns if s.mode == m]))
        for m in modes
        if any(s.mode == m for s in slowdowns)
    }
    failed = [
        {"index": r.index, "kernel": r.kernel, "config": r.config, "mode": r.mode,
         "error": r.error}
        for r in results if r.time_s is None
    ]  # fmt: skip
    return {
        "level": level,
        "slowdowns": slowdowns,
        "averages_mean_pct": averages,
        "anomalies": sorted(anomalies, key=lambda a: int(str(a["index"]))),
        "failed_runs": failed,
        "cells": [
            {
                "kernel": k,
                "config": c,
                "mode": m,
                "times_s": every[(k, c, m)],
                "kept": len(kept[(k, c, m)]),
                "median_s": float(np.median(every[(k, c, m)])),
            }
            for (k, c, m) in sorted(every)
        ],
    }


def text_table(analysis: dict[str, object]) -> str:
    """The table for people: one block per mode, a row per kernel x config."""
    slowdowns = analysis["slowdowns"]
    assert isinstance(slowdowns, list)
    level = float(str(analysis["level"]))
    lines: list[str] = []
    for mode in dict.fromkeys(s.mode for s in slowdowns):
        lines.append(f"{mode}: % slowdown vs none ({level:.0%} intervals)")
        lines.append(
            f"  {'kernel':<7}{'config':<9}{'mean %':>8}  {'interval':<18}"
            f"{'median %':>9}  {'interval':<18}{'runs':>7}  anomalies"
        )
        for s in (s for s in slowdowns if s.mode == mode):
            lines.append(
                f"  {s.kernel:<7}{s.config:<9}{s.mean_pct:>8.2f}  "
                f"{_iv(s.mean_low, s.mean_high):<18}{s.median_pct:>9.2f}  "
                f"{_iv(s.median_low, s.median_high):<18}{s.n:>3}/{s.n_base:<3}  {s.anomalies}"
            )
        avg = analysis["averages_mean_pct"]
        assert isinstance(avg, dict)
        lines.append(f"  {'avg.':<16}{avg[mode]:>8.2f}")
    return "\n".join(lines)


def _iv(low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return "[-]"
    return f"[{low:+.2f}, {high:+.2f}]"
