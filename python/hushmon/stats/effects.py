"""Effect sizes: how large a difference is, not only whether it exists."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from hushmon.stats.intervals import Interval


def _arr(x: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        raise ValueError("empty sample")
    return a


def cliffs_delta(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """P(X > Y) - P(X < Y) over all pairs, in [-1, 1] (= 2U/(n_x n_y) - 1)."""
    a, b = _arr(x), _arr(y)
    diff = a[:, None] - b[None, :]
    return float((np.sign(diff)).mean())


def hodges_lehmann_shift(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Median of all pairwise differences x_i - y_j: the shift estimate that
    goes with the Mann-Whitney test, robust to outliers."""
    a, b = _arr(x), _arr(y)
    return float(np.median(a[:, None] - b[None, :]))


def hedges_g(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Standardized difference of means with the small-sample correction
    J = 1 - 3 / (4 (n_x + n_y) - 9); NaN if the pooled spread is zero or
    undefined."""
    a, b = _arr(x), _arr(y)
    n_x, n_y = a.size, b.size
    if n_x < 2 or n_y < 2:
        return math.nan
    pooled = ((n_x - 1) * a.var(ddof=1) + (n_y - 1) * b.var(ddof=1)) / (n_x + n_y - 2)
    if pooled <= 0:
        return math.nan
    d = (a.mean() - b.mean()) / math.sqrt(pooled)
    return float(d * (1 - 3 / (4 * (n_x + n_y) - 9)))


def relative_difference(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, level: float = 0.99
) -> Interval:
    """(mean x - mean y) / mean y in percent, with a Welch interval of the
    difference divided by mean y (the seed's "slowdown" with its error)."""
    a, b = _arr(x), _arr(y)
    base = float(b.mean())
    diff = float(a.mean() - base)
    est = 100.0 * diff / base if base != 0 else math.nan
    if a.size < 2 or b.size < 2 or base == 0:
        return Interval(est, math.nan, math.nan, level, math.nan, a.size + b.size)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(est, est, est, level, level, a.size + b.size)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(sps.t.ppf((1 + level) / 2, df)) * se
    return Interval(
        est,
        100.0 * (diff - half) / base,
        100.0 * (diff + half) / base,
        level,
        level,
        a.size + b.size,
    )
