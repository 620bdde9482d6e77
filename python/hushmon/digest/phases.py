"""A job's phases and each phase's main limit (issue 21).

Where the program reports its phases through libhushmon (``app_phase``
lines: the seconds each rank spent in phase P that ended in the period),
those name the phases: a period belongs to the phase the slowest rank spent
at least half of it in (the innermost one when phases nest: the one with
the least time over the job). A phase that ends in a period and lasted
longer than it covered the periods before it too, so its seconds are
spread backwards. Otherwise the phases are the segments between change
points of the node sensors (changepoints.py), described by the sensors
that set them apart (states.py's words).

Every factor then runs on each phase's periods alone (phase_slice.py), and
the phase's main limit is its most severe finding with the largest
estimated loss; the loss is a share of the phase's time and, times the
phase's share, of the job's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hushmon.digest import changepoints
from hushmon.digest.factors import run_factors
from hushmon.digest.factors.base import SEVERITIES, Finding
from hushmon.digest.jobdata import JobData
from hushmon.digest.phase_slice import slice_job
from hushmon.digest.states import describe_periods, period_features

APP = "libhushmon"
SENSORS = "change points"
# A phase fills at least this share of a period to name it.
MIN_COVER = 0.5
# Fewer periods: the phase is listed but the factors are not run on it (their
# own minimums are 3-5 periods).
MIN_PHASE_PERIODS = 4
# Jobs larger than this (cube cells) get their phases' spans but no per-phase
# factors: each phase would cost a pass of every factor over its share of the cube.
MAX_CELLS = 100_000_000
# Sensors left out of the change points: levels, not rates.
LEVELS = ("mem.",)
# Factors whose findings name no limit of a phase: a correlation, the energy used.
NOT_LIMITS = ("app_timeline", "energy")
OUTSIDE = "(outside the program's phases)"

_PHASE = re.compile(r"phase=([^,\]]+)")


@dataclass
class Phase:
    name: str
    spans: list[tuple[int, int]]  # [start, end) period indices, in time order
    span_s: tuple[float, float]  # seconds from the job's start: first period to last
    share: float  # of the job's periods
    description: str = ""
    findings: list[Finding] = field(default_factory=list)
    not_analyzed: str = ""  # why the factors did not run on it

    @property
    def periods(self) -> int:
        return sum(b - a for a, b in self.spans)

    @property
    def main(self) -> Finding | None:
        """The most severe finding, with the largest estimated loss among equals."""
        serious = [f for f in self.findings if f.severity != "info"]
        if not serious:
            return None

        def rank(f: Finding) -> tuple[int, float]:
            return (SEVERITIES.index(f.severity), -(f.loss.mid_share if f.loss else 0.0))

        return min(serious, key=rank)

    def span_text(self) -> str:
        """Seconds from the job's start, to a tenth (periods may be shorter than 1 s)."""
        return f"{round(self.span_s[0], 1):g}-{round(self.span_s[1], 1):g}"

    def limit_text(self) -> str:
        if self.not_analyzed:
            return f"not analyzed: {self.not_analyzed}"
        main = self.main
        if main is None:
            return "no limit found"
        if main.loss is None:
            return f"[{main.severity}] {main.title} (no estimate: {main.loss_unknown})"
        lo, hi = main.loss.low_share * self.share, main.loss.high_share * self.share
        return (
            f"[{main.severity}] {main.title}: {main.loss.range_text()} of the phase "
            f"({100 * lo:.0f}-{100 * hi:.0f}% of the job)"
        )

    def to_json(self) -> dict[str, Any]:
        main = self.main
        doc: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "start_s": round(self.span_s[0], 3),
            "end_s": round(self.span_s[1], 3),
            "periods": self.periods,
            "spans": [list(s) for s in self.spans],
            "share": round(self.share, 4),
            "not_analyzed": self.not_analyzed,
            "main_limit": None if main is None else main.to_json(),
            "main_limit_job_share": None,
            "findings": [
                {
                    "factor": f.factor,
                    "title": f.title,
                    "severity": f.severity,
                    "loss": None
                    if f.loss is None
                    else [round(f.loss.low_share, 4), round(f.loss.high_share, 4)],
                }
                for f in self.findings
                if f.severity != "info"
            ],
        }
        if main is not None and main.loss is not None:
            doc["main_limit_job_share"] = [
                round(main.loss.low_share * self.share, 4),
                round(main.loss.high_share * self.share, 4),
            ]
        return doc


@dataclass
class Phases:
    source: str  # APP, SENSORS
    note: str
    phases: list[Phase]

    @property
    def several(self) -> bool:
        return len(self.phases) > 1

    def lines(self) -> list[str]:
        if not self.several:
            return [f"phases: {self.note}"]
        out = [f"{len(self.phases)} phases ({self.source}):"]
        for p in self.phases:
            out.append(f"  {p.name} ({p.span_text()} s, {p.share:.0%}): " + p.limit_text())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "note": self.note,
            "phases": [p.to_json() for p in self.phases],
        }


def app_phase_cover(job: JobData) -> dict[str, np.ndarray]:
    """Per phase the program reported: the share (0-1) of each period the slowest
    rank spent in it."""
    totals: dict[str, np.ndarray] = {}
    for sensor in job.base_sensors("app_phase.total_s"):
        m = _PHASE.search(sensor)
        mat = job.matrix(sensor)
        if m is None or mat is None:
            continue
        with np.errstate(all="ignore"):
            slowest = np.nanmax(np.where(np.isfinite(mat), mat, -np.inf), axis=0)
        slowest = np.where(np.isfinite(slowest), np.maximum(slowest, 0.0), 0.0)
        name = m.group(1)
        totals[name] = np.maximum(totals.get(name, 0.0), slowest)
    res = job.resolution
    out: dict[str, np.ndarray] = {}
    for name, seconds in totals.items():
        if res is not None and res.binned:
            # a bin's value is the mean of the periods that reported the phase, and how
            # many did is not kept: read as the phase's share of each of its periods
            # (right for a phase that ends every period; a long one marks its last bin)
            out[name] = np.clip(seconds / res.period_s, 0.0, 1.0)
        else:
            out[name] = np.clip(_spread_back(seconds, job.period_s) / job.period_s, 0.0, 1.0)
    return out


def _spread_back(seconds: np.ndarray, step_s: float) -> np.ndarray:
    """A phase that ended in period i after T seconds also ran in the periods before it.

    Where in period i it ended is not known (the agent reports what ended during the
    period): a phase longer than a period is taken to end at the period's middle, the
    expected place, so it fills half of period i and whole periods before it. Taking
    the period's end instead shifts every long phase half a period late, and
    between two long phases one after the other leaves a period that neither
    fills to half (seen on the bed with 5-s phases and 0.5-s periods). Shorter
    totals (a phase that ends several times a period) stay in their period."""
    spread = np.zeros(len(seconds))
    for i in np.flatnonzero(seconds > 0):
        left, j = float(seconds[i]), int(i)
        if left > step_s:
            spread[j] += step_s / 2
            left -= step_s / 2
            j -= 1
        while left > 1e-9 and j >= 0:
            take = min(left, step_s)
            spread[j] += take
            left -= take
            j -= 1
    return spread


def app_labels(cover: dict[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
    """Per period, the index of its phase in the returned names (-1: none named it)."""
    names = sorted(cover, key=lambda n: float(cover[n].sum()))  # innermost first
    mat = np.vstack([cover[n] for n in names])
    filled = mat >= MIN_COVER
    labels = np.where(filled.any(axis=0), np.argmax(filled, axis=0), -1)
    return names, labels


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    padded = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[0::2], edges[1::2], strict=True)]


def _span_s(job: JobData, spans: list[tuple[int, int]]) -> tuple[float, float]:
    secs = job.seconds
    return float(secs[spans[0][0]]), float(secs[spans[-1][1] - 1] + job.period_s)


def _from_app(job: JobData) -> Phases | None:
    cover = app_phase_cover(job)
    if not cover:
        return None
    names, labels = app_labels(cover)
    n = len(labels)
    phases = []
    for i, name in [*enumerate(names), (-1, OUTSIDE)]:
        spans = _runs(labels == i)
        if not spans:
            continue
        periods = sum(b - a for a, b in spans)
        if i == -1 and periods < MIN_PHASE_PERIODS:
            continue  # the job's start and end around its phases
        # the program names the phase; the sensors say what it looked like (what a
        # phase whose limit no factor can show still tells: busy CPUs, network sends)
        words, _ = describe_periods(job, labels == i)
        phases.append(Phase(name, spans, _span_s(job, spans), periods / n, words))
    phases.sort(key=lambda p: p.spans[0][0])
    note = (
        f"{len(names)} phase name(s) reported through libhushmon; a period belongs to the "
        f"phase the slowest rank spent {MIN_COVER:.0%}+ of it in"
    )
    return Phases(APP, note, phases)


def _from_sensors(job: JobData) -> Phases:
    names, x = period_features(job)
    # levels that drift as a program allocates or caches (memory) are no phase
    keep = [i for i, s in enumerate(names) if not s.startswith(LEVELS)]
    names, x = [names[i] for i in keep], x[:, keep]
    n = len(job.times_ns)
    cuts = changepoints.segments(x)
    if len(cuts) == 1:
        whole = Phase("whole job", [(0, n)], _span_s(job, [(0, n)]), 1.0)
        why = (
            "no sensor changed enough to cut the job into phases"
            if n >= 2 * changepoints.MIN_SEGMENT_PERIODS and names
            else f"{n} periods are too few to look for phases"
        )
        return Phases(SENSORS, f"one phase: {why} (the findings above are its)", [whole])
    phases = []
    for k, (a, b) in enumerate(cuts, start=1):
        mask = np.zeros(n, dtype=bool)
        mask[a:b] = True
        words, _ = describe_periods(job, mask)
        phases.append(Phase(f"phase {k}", [(a, b)], _span_s(job, [(a, b)]), (b - a) / n, words))
    note = (
        f"{len(cuts)} segments between change points of {len(names)} node sensors "
        "(the program reported no phases through libhushmon)"
    )
    return Phases(SENSORS, note, phases)


def find_phases(job: JobData) -> Phases:
    """The job's phases, each with its findings (the factors run on its periods)."""
    phases = _from_app(job) or _from_sensors(job)
    if not phases.several:
        return phases
    too_big = job.cube.size > MAX_CELLS
    for p in phases.phases:
        if too_big:
            p.not_analyzed = (
                f"the job's {job.cube.size:,} values exceed {MAX_CELLS:,}: phases' spans only"
            )
        elif p.periods < MIN_PHASE_PERIODS:
            p.not_analyzed = f"{p.periods} period(s), fewer than {MIN_PHASE_PERIODS}"
        else:
            found = run_factors(slice_job(job, p.spans)).findings
            # a correlation with a sensor is no limit of its own (app_timeline)
            p.findings = [f for f in found if f.factor not in NOT_LIMITS]
    return phases
