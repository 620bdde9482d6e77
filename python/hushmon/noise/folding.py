"""Phase folding: the detector's detours against the agent's period.

An agent that wakes every period P at phase phi delays the job right after
t_k = k P + phi. Within a window after each t_k the detector's excess time
(sum over detours of duration - threshold, on the rank that lost most) is
large when the agent runs and small otherwise. Against it stand the windows
of the same width in the rest of the same period: the window's score is the
fraction of them that hold less excess. Without an agent the score is
uniform on [0, 1] however busy the machine is (the machine's other load,
which changes from second to second, is in both); the agent pushes it
towards 1. The per-run statistic is the mean score over the run's windows.

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
# the work plus 1 ms (the injector's logs show it starts within ~0.1 ms of
# its schedule; a narrow window holds little of the machine's other load).
WINDOW_BEFORE_NS = 250_000
WINDOW_SLACK_NS = 1_000_000


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


def _rank_cumsums(run: DetectorRun) -> list[tuple[np.ndarray, np.ndarray]]:
    ranks, t, ex = _excess(run)
    out = []
    for r in range(max(run.nranks, 1)):
        sel = ranks == r
        order = np.argsort(t[sel])
        out.append((t[sel][order], np.concatenate([[0.0], np.cumsum(ex[sel][order])])))
    return out


def _window_excess(
    cums: list[tuple[np.ndarray, np.ndarray]], starts: np.ndarray, width_ns: int
) -> np.ndarray:
    """Excess in [start, start + width): the rank that lost most."""
    per_rank = [_sum_in(t, cum, starts, starts + width_ns) for t, cum in cums]
    return np.max(per_rank, axis=0) if per_rank else np.zeros(starts.size)


def window_scores(
    run: DetectorRun, starts: np.ndarray, width_ns: int, period_ns: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per window: the fraction of same-width control windows of the
    surrounding period (half a period either side, within the recorded
    span, not touching the window) that hold less detour excess (ties count
    half). Without an agent a window is one more window of the period and
    its score is uniform on [0, 1] (mean 1/2) however busy the machine is;
    the agent's detour pushes it towards 1. A rank score is robust to the
    long detours other processes cause (a slice of another task counts as
    much as any other "more").

    Also returns each window's excess minus the mean of its control windows
    (ns): the delay the agent adds, for the effect size."""
    if starts.size == 0:
        return np.empty(0), np.empty(0)
    span_lo, span_hi = run.span_ns()
    cums = _rank_cumsums(run)
    inside = _window_excess(cums, starts, width_ns)
    scores = np.full(starts.size, np.nan)
    delays = np.full(starts.size, np.nan)
    half = period_ns // 2
    for i, s in enumerate(starts):
        js = np.arange(-(half // width_ns), half // width_ns + 1)
        js = js[np.abs(js) >= 2]  # not the window nor its neighbours
        ctrl = s + js * width_ns
        ctrl = ctrl[(ctrl >= span_lo) & (ctrl + width_ns <= span_hi)]
        if ctrl.size == 0:
            continue
        c = _window_excess(cums, ctrl, width_ns)
        below = np.count_nonzero(c < inside[i]) + 0.5 * np.count_nonzero(c == inside[i])
        scores[i] = below / c.size
        delays[i] = inside[i] - float(c.mean())
    return scores, delays


@dataclass(frozen=True)
class FoldedStatistic:
    value: float  # mean window score in [0, 1], 1/2 without an agent (NaN: no window)
    delay_ns: float  # mean window excess over its control windows
    windows: int
    phase_ns: int  # the phase used (scan: the best one)
    per_window: list[float]


def known_phase_statistic(
    run: DetectorRun, period_ns: int, phase_ns: int, width_ns: int
) -> FoldedStatistic:
    starts = window_starts(run, period_ns, phase_ns, width_ns)
    sc, delay = window_scores(run, starts, width_ns, period_ns)
    ok = np.isfinite(sc)
    sc, delay = sc[ok], delay[ok]
    value = float(sc.mean()) if sc.size else math.nan
    mean_delay = float(delay.mean()) if delay.size else math.nan
    return FoldedStatistic(value, mean_delay, int(sc.size), phase_ns, [float(v) for v in sc])


def scan_statistic(
    run: DetectorRun, period_ns: int, width_ns: int, step_ns: int = 1_000_000
) -> FoldedStatistic:
    """The known-phase statistic at every phase on a grid; the largest."""
    best = FoldedStatistic(math.nan, math.nan, 0, 0, [])
    for phase in range(0, period_ns, step_ns):
        s = known_phase_statistic(run, period_ns, phase, width_ns)
        if s.windows and (math.isnan(best.value) or s.value > best.value):
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


# Windows around traced bursts: opened a little before the agent is switched
# in (the detector's iteration that it delays started earlier) and closed
# after it leaves the CPU (the preempted rank still has to finish).
BURST_BEFORE_NS = 250_000
BURST_AFTER_NS = 1_000_000


def burst_windows(bursts: np.ndarray, run: DetectorRun) -> tuple[np.ndarray, np.ndarray]:
    """Windows (start, width) around the agent's bursts that lie wholly in
    the detector's recorded span."""
    if bursts.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    lo, hi = run.span_ns()
    starts = bursts[:, 0] - BURST_BEFORE_NS
    ends = bursts[:, 1] + BURST_AFTER_NS
    ok = (starts >= lo) & (ends <= hi)
    return starts[ok].astype(np.int64), (ends - starts)[ok].astype(np.int64)


def _union(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint union of intervals [lo, hi) (lo sorted)."""
    out_lo: list[int] = []
    out_hi: list[int] = []
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        if out_hi and a <= out_hi[-1]:
            out_hi[-1] = max(out_hi[-1], b)
        else:
            out_lo.append(a)
            out_hi.append(b)
    return np.asarray(out_lo, dtype=np.int64), np.asarray(out_hi, dtype=np.int64)


def interval_statistic(
    run: DetectorRun, starts: np.ndarray, widths: np.ndarray, period_ns: int
) -> FoldedStatistic:
    """The folded score with windows where the agent actually ran (from the
    scheduler trace) instead of one per period at a phase: each window
    against the windows of its own width in the surrounding half-periods,
    leaving out those that touch any of the agent's windows. A window wider
    than a quarter of the period has too few controls and is skipped."""
    span_lo, span_hi = run.span_ns()
    cums = _rank_cumsums(run)
    order = np.argsort(starts)
    starts, widths = starts[order], widths[order]
    busy_lo, busy_hi = _union(starts, starts + widths)
    scores: list[float] = []
    delays: list[float] = []
    half = period_ns // 2
    for s, w in zip(starts.tolist(), widths.tolist(), strict=True):
        if w <= 0 or w > period_ns // 4:
            continue
        inside = float(_window_excess(cums, np.array([s]), w)[0])
        js = np.arange(-(half // w), half // w + 1)
        js = js[np.abs(js) >= 2]
        ctrl = s + js * w
        ctrl = ctrl[(ctrl >= span_lo) & (ctrl + w <= span_hi)]
        # no control window may hold any of the agent's own activity
        a = np.searchsorted(busy_hi, ctrl, side="right")
        touches = (a < busy_lo.size) & (busy_lo[np.minimum(a, busy_lo.size - 1)] < ctrl + w)
        ctrl = ctrl[~touches]
        if ctrl.size == 0:
            continue
        c = _window_excess(cums, ctrl, w)
        below = np.count_nonzero(c < inside) + 0.5 * np.count_nonzero(c == inside)
        scores.append(float(below / c.size))
        delays.append(inside - float(c.mean()))
    value = float(np.mean(scores)) if scores else math.nan
    delay = float(np.mean(delays)) if delays else math.nan
    return FoldedStatistic(value, delay, len(scores), 0, scores)
