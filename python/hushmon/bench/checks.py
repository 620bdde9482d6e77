"""What a bench run can say about itself: timer sanity, clocks and the loop-method error.

Three kinds of evidence, all computed from one results file:

* Wait patterns have a known true time (seed 002: in WaitPatternUp rank i
  spins (i+1) us, so a synchronized start gives n us; WaitPatternDown spins
  (n-i) us, also n us; WaitPatternNull returns at once, 0 s). The distance of
  the measured local and global means from that value shows whether the
  timer, the clock offsets and the launch schedule are right.
* The clock check: the ranks' clocks are compared after the sync and at the
  end of the run. Clocks that put one instant e apart start the ranks' launches
  e apart in real time and shift the global time by e, so a synchronized
  result whose time is not large next to e is not valid, however well its
  launches kept to their windows. A wait pattern cannot see this by itself:
  each rank times its own spin on its own clock.
* When both the synchronized and a loop method measured the same
  (op, size, nprocs), the ratio loop/sync is the systematic error of the
  loop measurement (hushmon's loops, or the OSU / IMB procedures) that the
  synchronized start removes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from hushmon.bench.results import LOOP_METHODS, SYNC_METHOD, BenchResult, BenchRun

US = 1e-6

# op name -> true time in seconds for n ranks. One line per pattern.
TRUE_TIME_S: dict[str, Callable[[int], float]] = {
    "waitpatternup": lambda n: n * US,
    "waitpatterndown": lambda n: n * US,
    "waitpatternnull": lambda n: 0.0,
}

# The program's rule (hm_clock_error_acceptable, --clock-error-share): the
# clock error may reach this share of a result's mean, or the late tolerance
# (the precision the schedule allows a start), whichever is larger.
CLOCK_ERROR_SHARE = 0.10
# --late-tolerance-us at its smallest, for files that do not say.
DEFAULT_LATE_TOLERANCE_S = 0.1 * US

# Acceptance from issue 2: within 10 % of the true time for the spinning
# patterns, under 1 us for the null pattern.
RELATIVE_TOLERANCE = 0.10
NULL_TOLERANCE_S = 1.0 * US


@dataclass(frozen=True)
class ClockVerdict:
    """Whether the clocks a synchronized result was measured on leave it valid."""

    valid: bool | None  # None: not judged (loop method, or no clock error reported)
    error_s: float | None
    allowed_s: float | None


def clock_error_s(run: BenchRun) -> float | None:
    """Largest disagreement between the ranks' clocks during the run."""
    m = run.meta
    if m.clock_error_max_s is not None:
        return m.clock_error_max_s
    # Files from before the program checked clocks: the residuals to rank 0,
    # which the disagreement between two other ranks can exceed up to twice;
    # without the end residual, the start one plus the drift bounds it.
    start, end = m.clock_offset_residual_max_s, m.clock_offset_residual_end_max_s
    if end is None and start is not None and m.clock_drift_max_s is not None:
        end = start + m.clock_drift_max_s
    known = [e for e in (start, end) if e is not None]
    return max(known) if known else None


def clock_verdict(run: BenchRun, result: BenchResult) -> ClockVerdict:
    """The program's verdict, checked again here; invalid if either says so.

    Files written before the program judged clocks get judged here only, so
    an old run on clocks milliseconds apart is not taken as valid.
    """
    if result.method != SYNC_METHOD:
        return ClockVerdict(None, None, None)
    m = run.meta
    share = CLOCK_ERROR_SHARE if m.clock_error_share is None else m.clock_error_share
    floor = DEFAULT_LATE_TOLERANCE_S if m.late_tolerance_us is None else m.late_tolerance_us * US
    allowed = floor if math.isnan(result.mean) else max(floor, share * result.mean)
    error = clock_error_s(run)
    if error is None:
        return ClockVerdict(result.clock_valid, None, allowed)
    valid = result.clock_valid is not False and error <= allowed
    return ClockVerdict(valid, error, allowed)


def clock_invalid(run: BenchRun) -> list[tuple[BenchResult, ClockVerdict]]:
    """Synchronized results measured on clocks that disagreed too much."""
    verdicts = ((r, clock_verdict(run, r)) for r in run.results)
    return [(r, v) for r, v in verdicts if v.valid is False]


@dataclass(frozen=True)
class PatternCheck:
    op: str
    nprocs: int
    method: str
    true_s: float
    mean_s: float
    global_mean_s: float | None
    clock: ClockVerdict = ClockVerdict(None, None, None)

    def error_s(self, measured: float | None) -> float:
        return math.nan if measured is None else measured - self.true_s

    def relative_error(self, measured: float | None) -> float:
        if measured is None or self.true_s == 0.0:
            return math.nan
        return (measured - self.true_s) / self.true_s

    def within(self, measured: float | None) -> bool:
        if measured is None or math.isnan(measured):
            return False
        if self.true_s == 0.0:
            return abs(measured) < NULL_TOLERANCE_S
        return abs(self.relative_error(measured)) <= RELATIVE_TOLERANCE

    @property
    def times_passed(self) -> bool:
        """Local mean within tolerance, and the global mean too when reported."""
        ok = self.within(self.mean_s)
        if self.global_mean_s is not None:
            ok = ok and self.within(self.global_mean_s)
        return ok

    @property
    def passed(self) -> bool:
        """Times right and measured on clocks that agreed (an offset between
        ranks leaves each rank's own spin time intact, so the times alone pass
        on clocks milliseconds apart)."""
        return self.times_passed and self.clock.valid is not False


def pattern_checks(run: BenchRun) -> list[PatternCheck]:
    """One check per wait-pattern result of the synchronized method."""
    checks = []
    for r in run.results:
        true_time = TRUE_TIME_S.get(r.op)
        if true_time is None or r.method != SYNC_METHOD:
            continue
        checks.append(
            PatternCheck(
                op=r.op,
                nprocs=r.nprocs,
                method=r.method,
                true_s=true_time(r.nprocs),
                mean_s=r.mean,
                global_mean_s=r.global_mean,
                clock=clock_verdict(run, r),
            )
        )
    return checks


@dataclass(frozen=True)
class LoopVsSync:
    op: str
    size: int
    nprocs: int
    loop_method: str
    sync: BenchResult
    loop: BenchResult

    @property
    def ratio(self) -> float:
        """Loop mean / synchronized mean: above 1, the loop overstates the time."""
        if not self.sync.mean or math.isnan(self.sync.mean) or math.isnan(self.loop.mean):
            return math.nan
        return self.loop.mean / self.sync.mean

    @property
    def difference_s(self) -> float:
        return self.loop.mean - self.sync.mean


def loop_vs_sync(run: BenchRun) -> list[LoopVsSync]:
    """Pairs of (synchronized, loop) results that measured the same operation.

    Wait patterns are left out: they check the timer, and the ratio of two
    near-zero times of the null pattern says nothing about the loop method.
    """
    sync_by_key = {r.key: r for r in run.results if r.method == SYNC_METHOD}
    pairs = []
    for r in run.results:
        if r.method not in LOOP_METHODS or r.op in TRUE_TIME_S:
            continue
        sync = sync_by_key.get(r.key)
        if sync is None:
            continue
        pairs.append(
            LoopVsSync(
                op=r.op, size=r.size, nprocs=r.nprocs, loop_method=r.method, sync=sync, loop=r
            )
        )
    return pairs


def invalid_share(result: BenchResult) -> float:
    """Share of launches the schedule rejected (late start or overrun)."""
    if result.n_total == 0:
        return math.nan
    return 1.0 - result.n_valid / result.n_total
