"""The Mann-Whitney U test (Wilcoxon rank-sum), exact even with ties.

With small samples (a few runs per arm, as in a noise study) the normal
approximation is poor and the exact distribution matters: it is computed here
by dynamic programming over the (mid)ranks of the pooled sample, i.e. the
permutation distribution of the rank sum conditional on the observed ties.
That is exact for any tie pattern and cheap for the sample sizes of a study
(hundreds of values). Larger samples use the normal approximation with the
tie correction and a continuity correction, as SciPy's ``asymptotic`` method.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

Alternative = Literal["greater", "less", "two-sided"]

# Above this many (pooled values x smaller sample) the exact DP would take
# long; the normal approximation is accurate there.
_EXACT_MAX_WORK = 4_000_000


@dataclass(frozen=True)
class MannWhitney:
    u: float  # U of the first sample: pairs (x, y) with x > y, ties count 1/2
    p_value: float
    alternative: str
    method: str  # "exact" or "asymptotic"
    n_x: int
    n_y: int

    def as_dict(self) -> dict[str, float | str | int]:
        return {
            "u": self.u,
            "p_value": self.p_value,
            "alternative": self.alternative,
            "method": self.method,
            "n_x": self.n_x,
            "n_y": self.n_y,
        }


def _rank_sum_distribution(doubled_ranks: np.ndarray, m: int) -> np.ndarray:
    """counts[s] = number of m-subsets of the pooled values whose doubled
    rank sum is s (doubled so midranks are integers)."""
    total = int(doubled_ranks.sum())
    # dist[j, s]: subsets of size j with doubled rank sum s
    dist = np.zeros((m + 1, total + 1), dtype=float)
    dist[0, 0] = 1.0
    for r in doubled_ranks.astype(int):
        # go down in j so each value is used at most once
        upper = min(m, dist.shape[0] - 1)
        for j in range(upper, 0, -1):
            dist[j, r:] += dist[j - 1, : total + 1 - r]
    return dist[m]


def min_exact_p(n_x: int, n_y: int) -> float:
    """The smallest one-sided p-value the exact test can give (no ties):
    1 / C(n_x + n_y, n_x). It depends only on the design, so a sequential
    plan may use it to decide where to look."""
    if n_x < 1 or n_y < 1:
        return 1.0
    return 1.0 / math.comb(n_x + n_y, n_x)


def mann_whitney_u(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    alternative: Alternative = "two-sided",
    method: Literal["auto", "exact", "asymptotic"] = "auto",
) -> MannWhitney:
    """Tests whether x tends to be larger ("greater"), smaller ("less") or
    either than y. p-values match scipy.stats.mannwhitneyu (exact without
    ties; asymptotic with use_continuity=True); with ties the exact p-value
    is the permutation p-value of the midrank statistic."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("both samples need at least one value")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("samples contain NaN or infinite values")
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(f"unknown alternative {alternative!r}")
    n_x, n_y = a.size, b.size
    pooled = np.concatenate([a, b])
    ranks = sps.rankdata(pooled)  # midranks for ties
    r_x = float(ranks[:n_x].sum())
    u = r_x - n_x * (n_x + 1) / 2.0
    n = n_x + n_y
    if method == "auto":
        method = "exact" if n * n * min(n_x, n_y) <= _EXACT_MAX_WORK else "asymptotic"
    if method == "exact":
        m = min(n_x, n_y)
        dist = _rank_sum_distribution(np.rint(2 * ranks).astype(int), m)
        probs = dist / dist.sum()
        # statistic on the smaller sample; map back to x's direction
        doubled_obs = round(2 * (r_x if m == n_x else float(ranks[n_x:].sum())))
        upper = float(probs[doubled_obs:].sum())  # P(R_m >= obs)
        lower = float(probs[: doubled_obs + 1].sum())  # P(R_m <= obs)
        if m != n_x:  # large R_y means small R_x
            upper, lower = lower, upper
        if alternative == "greater":
            p = upper
        elif alternative == "less":
            p = lower
        else:
            p = min(1.0, 2.0 * min(upper, lower))
        return MannWhitney(u, min(p, 1.0), alternative, "exact", n_x, n_y)
    # normal approximation with tie correction and continuity correction
    _, counts = np.unique(pooled, return_counts=True)
    tie_term = float((counts**3 - counts).sum())
    var = n_x * n_y / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    mean = n_x * n_y / 2.0
    if var <= 0:
        return MannWhitney(u, 1.0, alternative, "asymptotic", n_x, n_y)
    sd = math.sqrt(var)
    if alternative == "greater":
        p = float(sps.norm.sf((u - mean - 0.5) / sd))
    elif alternative == "less":
        p = float(sps.norm.cdf((u - mean + 0.5) / sd))
    else:
        z = (abs(u - mean) - 0.5) / sd
        p = min(1.0, 2.0 * float(sps.norm.sf(z)))
    return MannWhitney(u, p, alternative, "asymptotic", n_x, n_y)
