"""Confidence intervals for the centre of a sample.

The seed (Khudoleeva & Stefanov) compares means with 99 % Student-t intervals;
Hoefler & Belli recommend the median with a non-parametric interval for
timings, which are rarely normal. Both are here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class Interval:
    """A point estimate and its two-sided interval at ``level``.

    ``coverage`` is the interval's actual confidence (order-statistic
    intervals are discrete: at least ``level`` when achievable)."""

    estimate: float
    low: float
    high: float
    level: float
    coverage: float
    n: int

    def overlaps(self, other: Interval) -> bool:
        return not (self.high < other.low or other.high < self.low)

    def as_dict(self) -> dict[str, float]:
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "level": self.level,
            "coverage": self.coverage,
            "n": self.n,
        }


def _values(x: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError("expected a one-dimensional sample")
    if not np.all(np.isfinite(a)):
        raise ValueError("sample contains NaN or infinite values")
    return a


def t_ci(x: Sequence[float] | np.ndarray, level: float = 0.99) -> Interval:
    """Mean with its Student-t interval: mean +- t_{(1+level)/2, n-1} s / sqrt(n).

    NaN bounds when n < 2 (no spread to estimate)."""
    a = _values(x)
    n = a.size
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, level, math.nan, 0)
    mean = float(a.mean())
    if n < 2:
        return Interval(mean, math.nan, math.nan, level, math.nan, n)
    half = float(sps.t.ppf((1 + level) / 2, n - 1)) * float(a.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, level, level, n)


def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int, float] | None:
    """1-based ranks (j, k) of the order statistics bounding the median's
    interval, and its exact coverage P(j <= B <= k-1), B ~ Binomial(n, 1/2).

    The interval is symmetric (k = n + 1 - j) with the largest j whose
    coverage is still >= level; None when even (1, n) falls short (n too
    small: e.g. n < 6 at 95 %)."""
    if n < 1:
        return None
    best: tuple[int, int, float] | None = None
    for j in range(1, n // 2 + 1):
        k = n + 1 - j
        coverage = 1.0 - 2.0 * float(sps.binom.cdf(j - 1, n, 0.5))
        if coverage >= level:
            best = (j, k, coverage)
        else:
            break
    return best


def median_ci(x: Sequence[float] | np.ndarray, level: float = 0.95) -> Interval:
    """Median with its distribution-free interval from order statistics.

    Bounds are NaN when the sample is too small for ``level``."""
    a = np.sort(_values(x))
    n = a.size
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, level, math.nan, 0)
    med = float(np.median(a))
    ranks = median_ci_ranks(n, level)
    if ranks is None:
        return Interval(med, math.nan, math.nan, level, math.nan, n)
    j, k, coverage = ranks
    return Interval(med, float(a[j - 1]), float(a[k - 1]), level, coverage, n)
