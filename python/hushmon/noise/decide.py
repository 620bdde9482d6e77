"""The decision rule of ``hushmon noise detect``, a pure function of the runs
so far: it is applied live after every run and replayed on recorded runs
(A/A control, reports).

Primary test: the per-run folded statistic (mean score of the agent's
windows among the other windows of their periods) of noisy runs against
clean runs, one-sided exact
Mann-Whitney (a randomization test: arms are assigned at random), tested at
the looks an alpha-spending plan allows. Everything else (the seed's means
with 99 % intervals, medians with order-statistic intervals, loop-time
Mann-Whitney, effect sizes, detour rates and quantiles) is evidence shown
beside it, never a second chance to detect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hushmon.noise.analysis import RunStats, arm_values
from hushmon.stats import (
    AlphaSpender,
    cliffs_delta,
    hodges_lehmann_shift,
    mann_whitney_u,
    median_ci,
    relative_difference,
    t_ci,
)
from hushmon.stats.ranktests import min_exact_p

MIN_RUNS_PER_ARM = 2


@dataclass
class Decision:
    detected: bool
    decided_at_run: int | None
    p_value: float | None  # primary test at the deciding (or last) look
    level_tested: float | None
    alpha: float
    alpha_spent: float
    looks: list[dict[str, Any]] = field(default_factory=list)


def primary_p(stats: list[RunStats]) -> tuple[float, int, int]:
    noisy = arm_values(stats, "noisy", "folded_score")
    clean = arm_values(stats, "clean", "folded_score")
    if noisy.size == 0 or clean.size == 0:
        return (1.0, int(noisy.size), int(clean.size))
    return (mann_whitney_u(noisy, clean, "greater").p_value, int(noisy.size), int(clean.size))


class SequentialRule:
    """Feed runs one at a time with :meth:`add`; it says when to stop."""

    def __init__(self, alpha: float, max_runs: int) -> None:
        self.spender = AlphaSpender(alpha, max_runs)
        self.stats: list[RunStats] = []
        self.decision = Decision(False, None, None, None, alpha, 0.0)

    def add(self, run: RunStats) -> bool:
        """Adds a run; True when the noise is detected (stop)."""
        self.stats.append(run)
        n_noisy = int(arm_values(self.stats, "noisy", "folded_score").size)
        n_clean = int(arm_values(self.stats, "clean", "folded_score").size)
        if min(n_noisy, n_clean) < MIN_RUNS_PER_ARM:
            return False
        look = self.spender.look(
            len(self.stats), min_exact_p(n_noisy, n_clean), lambda: primary_p(self.stats)[0]
        )
        self.decision.looks.append(
            {"runs": look.index, "level": look.level, "p_value": look.p_value,
             "noisy": n_noisy, "clean": n_clean}
        )  # fmt: skip
        self.decision.alpha_spent = self.spender.spent
        if look.p_value is not None:
            self.decision.p_value = look.p_value
            self.decision.level_tested = look.level
        if look.rejected:
            self.decision.detected = True
            self.decision.decided_at_run = look.index
            return True
        return False

    def finish(self) -> Decision:
        if self.decision.p_value is None and self.stats:
            # No look could test: report the plain p-value (not a detection).
            self.decision.p_value = primary_p(self.stats)[0]
        return self.decision


def replay(stats: list[RunStats], alpha: float, max_runs: int) -> Decision:
    rule = SequentialRule(alpha, max_runs)
    for s in stats:
        if rule.add(s):
            break
    return rule.finish()


def _interval(x: np.ndarray, kind: str, level: float) -> dict[str, Any]:
    if x.size == 0:
        return {"n": 0}
    ci = t_ci(x, level) if kind == "t" else median_ci(x, level)
    d = ci.as_dict()
    d["sd"] = float(x.std(ddof=1)) if x.size > 1 else math.nan
    return d


def evidence(stats: list[RunStats], period_s: float, level: float = 0.99) -> dict[str, Any]:
    """Everything the report shows beside the verdict."""
    out: dict[str, Any] = {}
    for field_name, label in (
        ("per_op_ns", "per_op_ns"),
        ("folded_score", "folded_score"),
        ("delay_ns", "delay_ns"),
    ):
        noisy = arm_values(stats, "noisy", field_name)
        clean = arm_values(stats, "clean", field_name)
        item: dict[str, Any] = {
            "clean_mean": _interval(clean, "t", level),
            "noisy_mean": _interval(noisy, "t", level),
            "clean_median": _interval(clean, "median", 0.95),
            "noisy_median": _interval(noisy, "median", 0.95),
        }
        if noisy.size and clean.size:
            item["mann_whitney_greater"] = mann_whitney_u(noisy, clean, "greater").as_dict()
            item["cliffs_delta"] = cliffs_delta(noisy, clean)
            item["hodges_lehmann_shift"] = hodges_lehmann_shift(noisy, clean)
            if noisy.size > 1 and clean.size > 1:
                c_ci, n_ci = t_ci(clean, level), t_ci(noisy, level)
                item["ci_overlap_99"] = c_ci.overlaps(n_ci)
                # the seed's criterion: noisy mean above the clean 99 % CI
                item["seed_criterion"] = bool(n_ci.estimate > c_ci.high)
        if field_name == "per_op_ns" and noisy.size > 1 and clean.size > 1:
            item["slowdown_pct"] = relative_difference(noisy, clean, level).as_dict()
        out[label] = item
    for field_name in ("detour_rate_per_s", "excess_pct", "p99_ns", "p999_ns"):
        out[field_name] = {
            "clean_median": float(np.median(arm_values(stats, "clean", field_name)))
            if arm_values(stats, "clean", field_name).size
            else math.nan,
            "noisy_median": float(np.median(arm_values(stats, "noisy", field_name)))
            if arm_values(stats, "noisy", field_name).size
            else math.nan,
        }
    agent = arm_values(stats, "noisy", "agent_cpu_pct")
    # the agent's own CPU share while the detector ran (scheduler trace)
    out["agent_cpu_pct"] = float(np.median(agent)) if agent.size else None
    noisy = arm_values(stats, "noisy", "delay_ns")
    clean = arm_values(stats, "clean", "delay_ns")
    out["measured_load_pct"] = (
        100.0 * hodges_lehmann_shift(noisy, clean) / (period_s * 1e9)
        if noisy.size and clean.size
        else math.nan
    )
    return out
