"""Phase folding: the detector's detours against the agent's period.

An agent that wakes every period P at phase phi delays the job right after
t_k = k P + phi. Within a window after each t_k the detector's excess time
(sum over detours of duration - threshold, on the rank that lost most) is
large when the agent runs and small otherwise. Against it stands the excess
the rest of the same period holds in a window of that width: the machine's
other load, which changes from second to second, cancels. The per-run
statistic is the median over the run's windows of that contrast: robust to
the odd long detour of another process, and it grows with the agent's work.

When the phase is unknown (a real agent), the same statistic is taken at
every phase of a grid and the largest is kept (a scan); clean runs get the
same scan, so the comparison stays fair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hushmon.noise.events import DetectorRun

# The window opens a little before the scheduled wake-up (a detour that
# starts an iteration early still holds the delay) and stays open for twice
# the work plus the time a busy CPU may take to run the woken agent.
WINDOW_BEFORE_NS = 250_000
WINDOW_SLACK_NS = 4_000_000


def window_ns(level_pct: float, period_ns: int) -> int:
    work = level_pct / 100.0 * period_ns
    return int(min(2 * work + WINDOW_SLACK_NS + WINDOW_BEFORE_NS, period_ns))


def _excess(run: DetectorRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = run.detours
    return (
        d["rank"].astype(int),
        d["start_ns"].astype(np.int64),
        (d["duration_ns"] - run.threshold_ns).astype(float),
    )


def window_starts(run: DetectorRun, period_ns: int, phase_ns: int, width_ns: int) -> np.ndarray:
    """Realtime starts of the windows [t_k - before, t_k - before + width)
    that lie wholly inside the recorded span."""
    lo, hi = run.span_ns()
    if hi <= lo:
        return np.empty(0, dtype=np.int64)
    first = (lo + WINDOW_BEFORE_NS - phase_ns) // period_ns
    ks = np.arange(first, (hi - phase_ns) // period_ns + 1, dtype=np.int64)
    starts = ks * period_ns + phase_ns - WINDOW_BEFORE_NS
    return starts[(starts >= lo) & (starts + width_ns <= hi)]


def _sum_in(t: np.ndarray, cum: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sum of the excess of detours starting in [lo, hi) (t sorted, cum its cumsum)."""
    a = np.searchsorted(t, lo, side="left")
    b = np.searchsorted(t, hi, side="left")
    return cum[b] - cum[a]


def window_contrast_ns(
    run: DetectorRun, starts: np.ndarray, width_ns: int, period_ns: int
) -> np.ndarray:
    """Per window: its detour excess minus what the rest of the surrounding
    period (half a period either side, within the recorded span) holds in
    the same width on average. The machine's other load, which changes from
    second to second and run to run, cancels out; the agent's excess stays.
    The largest contrast over ranks (the rank the agent delayed)."""
    if starts.size == 0:
        return np.empty(0)
    span_lo, span_hi = run.span_ns()
    ranks, t, ex = _excess(run)
    out = np.full((max(run.nranks, 1), starts.size), -np.inf)
    around_lo = np.maximum(starts - period_ns // 2, span_lo)
    around_hi = np.minimum(starts + period_ns // 2, span_hi)
    other_len = (around_hi - around_lo - width_ns).astype(float)
    for r in range(run.nranks):
        sel = ranks == r
        order = np.argsort(t[sel])
        tr = t[sel][order]
        cum = np.concatenate([[0.0], np.cumsum(ex[sel][order])])
        inside = _sum_in(tr, cum, starts, starts + width_ns)
        around = _sum_in(tr, cum, around_lo, around_hi)
        expected = np.where(other_len > 0, (around - inside) * width_ns / other_len, 0.0)
        out[r] = inside - expected
    return out.max(axis=0)


@dataclass(frozen=True)
class FoldedStatistic:
    value_ns: float  # median window contrast (NaN: no complete window)
    windows: int
    phase_ns: int  # the phase used (scan: the best one)
    per_window_ns: list[float]


def known_phase_statistic(
    run: DetectorRun, period_ns: int, phase_ns: int, width_ns: int
) -> FoldedStatistic:
    starts = window_starts(run, period_ns, phase_ns, width_ns)
    ex = window_contrast_ns(run, starts, width_ns, period_ns)
    value = float(np.median(ex)) if ex.size else math.nan
    return FoldedStatistic(value, int(ex.size), phase_ns, [float(v) for v in ex])


def scan_statistic(
    run: DetectorRun, period_ns: int, width_ns: int, step_ns: int = 1_000_000
) -> FoldedStatistic:
    """The known-phase statistic at every phase on a grid; the largest."""
    best = FoldedStatistic(math.nan, 0, 0, [])
    for phase in range(0, period_ns, step_ns):
        s = known_phase_statistic(run, period_ns, phase, width_ns)
        if s.windows and (math.isnan(best.value_ns) or s.value_ns > best.value_ns):
            best = s
    return best


def folded_profile(
    run: DetectorRun, period_ns: int, phase_ns: int, bins: int = 200
) -> tuple[np.ndarray, np.ndarray]:
    """Detour excess per unit time against the phase relative to phase_ns
    (bin centres in ms, excess in us per period): the picture of Fig. 'folded'."""
    ranks, t, ex = _excess(run)
    lo, hi = run.span_ns()
    periods = max((hi - lo) / period_ns, 1e-9)
    rel = (t - phase_ns) % period_ns
    edges = np.linspace(0, period_ns, bins + 1)
    total = np.zeros(bins)
    for r in range(run.nranks):
        h, _ = np.histogram(rel[ranks == r], bins=edges, weights=ex[ranks == r])
        total = np.maximum(total, h)
    centres_ms = (edges[:-1] + edges[1:]) / 2 / 1e6
    return centres_ms, total / periods / 1e3
