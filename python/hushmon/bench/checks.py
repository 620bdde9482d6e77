"""What a bench run can say about itself: timer sanity and the loop-method error.

Two kinds of evidence, both computed from one results file:

* Wait patterns have a known true time (seed 002: in WaitPatternUp rank i
  spins (i+1) us, so a synchronized start gives n us; WaitPatternDown spins
  (n-i) us, also n us; WaitPatternNull returns at once, 0 s). The distance of
  the measured local and global means from that value shows whether the
  timer, the clock offsets and the launch schedule are right.
* When both the synchronized and a loop method measured the same
  (op, size, nprocs), the ratio loop/sync is the systematic error of the
  loop (IMB/OSU style) measurement that the synchronized start removes.
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

# Acceptance from issue 2: within 10 % of the true time for the spinning
# patterns, under 1 us for the null pattern.
RELATIVE_TOLERANCE = 0.10
NULL_TOLERANCE_S = 1.0 * US


@dataclass(frozen=True)
class PatternCheck:
    op: str
    nprocs: int
    method: str
    true_s: float
    mean_s: float
    global_mean_s: float | None

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
    def passed(self) -> bool:
        """Local mean within tolerance, and the global mean too when reported."""
        ok = self.within(self.mean_s)
        if self.global_mean_s is not None:
            ok = ok and self.within(self.global_mean_s)
        return ok


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
