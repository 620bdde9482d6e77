"""The analyzer contract: one factor per file, each declaring what it needs.

An analyzer names the sensors it requires (and optional ones it uses when
present). The runner checks them first: a missing sensor skips the analyzer
with a typed reason instead of an exception. ``analyze`` returns findings
(possibly none: the factor does not limit this job) and ``metric`` returns
one number for the factor's influence, which ``hushmon compare`` follows
across runs of different sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from hushmon import jsonio
from hushmon.digest.jobdata import JobData

SEVERITIES = ("high", "medium", "low", "info")


class SkipReason(StrEnum):
    MISSING_SENSOR = "missing_sensor"
    NOT_ENOUGH_DATA = "not_enough_data"
    NOT_APPLICABLE = "not_applicable"
    NEEDS_SEVERAL_RUNS = "needs_several_runs"


@dataclass
class Loss:
    """What removing a limit would save: a share of the job's run time, as a range.

    ``low_share`` / ``high_share``: 0-1 of the run time (the run would take
    ``1 - share`` of its time without the limit). ``basis`` says in words,
    with the numbers, how the factor computed it; ``assumptions`` what must
    hold for it to be true (the bench checks them: bench/bench_findings.py)."""

    low_share: float
    high_share: float
    basis: str
    assumptions: list[str]

    def __post_init__(self) -> None:
        lo, hi = sorted((self.low_share, self.high_share))
        self.low_share = float(min(1.0, max(0.0, lo)))
        self.high_share = float(min(1.0, max(0.0, hi)))

    @property
    def mid_share(self) -> float:
        return (self.low_share + self.high_share) / 2

    def range_text(self) -> str:
        lo, hi = round(100 * self.low_share), round(100 * self.high_share)
        return f"{lo}%" if lo == hi else f"{lo}-{hi}%"

    def words(self) -> str:
        """What a user acts on: 'removing this would save 12-25% of the run time, assuming ...'."""
        assuming = "; ".join(self.assumptions)
        return (
            f"Removing this limit would save {self.range_text()} of the run time "
            f"({self.basis})" + (f", assuming {assuming}." if assuming else ".")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "low_share": round(self.low_share, 4),
            "high_share": round(self.high_share, 4),
            "basis": self.basis,
            "assumptions": list(self.assumptions),
            "text": self.words(),
        }


@dataclass
class Finding:
    factor: str
    title: str
    severity: str  # one of SEVERITIES
    evidence: dict[str, Any]
    hint: str
    span_s: tuple[float, float] | None = None  # seconds from the job's start
    loss: Loss | None = None  # the run time removing the limit would save
    loss_unknown: str = ""  # why the factor cannot estimate it (loss is None)
    severity_rule: str = ""  # how the severity was set (from the loss, or the factor's own)

    def to_json(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "title": self.title,
            "severity": self.severity,
            "severity_rule": self.severity_rule,
            "loss": self.loss.to_json() if self.loss is not None else None,
            "loss_unknown": self.loss_unknown if self.loss is None else "",
            "evidence": {k: jsonio.plain(v) for k, v in self.evidence.items()},
            "span_s": list(self.span_s) if self.span_s else None,
            "hint": self.hint,
        }


def severity_from_loss(loss: Loss, params: Mapping[str, Any]) -> str:
    """The ``[loss]`` rule of parameters.toml: the middle of the range sets it
    (high / medium / low), and a high finding must cost at least
    ``high_min_low_share`` even at the low end (else medium)."""
    mid = loss.mid_share
    if mid >= params["high_share"] and loss.low_share >= params["high_min_low_share"]:
        return "high"
    if mid >= params["medium_share"]:
        return "medium"
    return "low"


def share_of_time(mask: np.ndarray) -> float:
    """Share of the job's run time in the periods of ``mask`` (periods are equal)."""
    return float(np.mean(mask)) if mask.size else 0.0


@dataclass
class Skipped:
    factor: str
    reason: SkipReason
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"factor": self.factor, "reason": self.reason.value, "detail": self.detail}


class AnalyzerSkip(Exception):
    """Raised inside ``analyze`` when the data cannot answer (typed reason)."""

    def __init__(self, reason: SkipReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class Factor(Protocol):
    # Read-only members: each analyzer declares them as plain class attributes.
    @property
    def name(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def requires(self) -> tuple[str, ...]: ...

    @property
    def optional(self) -> tuple[str, ...]: ...

    # hushmon.digest.resolution.PER_NODE or ACROSS_NODES: what data it can run on
    @property
    def resolution(self) -> str: ...

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]: ...

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None: ...


@dataclass
class FactorResult:
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # per factor: what it needs and what it had (digest.json "resolution")
    data_used: dict[str, dict[str, str]] = field(default_factory=dict)


def longest_run(mask: np.ndarray) -> tuple[int, int] | None:
    """[start, end) indices of the longest run of True, or None."""
    if not mask.any():
        return None
    padded = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    starts, ends = edges[0::2], edges[1::2]
    i = int(np.argmax(ends - starts))
    return int(starts[i]), int(ends[i])


def span_of(job: JobData, run: tuple[int, int] | None) -> tuple[float, float] | None:
    if run is None:
        return None
    secs = job.seconds
    return float(secs[run[0]]), float(secs[run[1] - 1] + job.period_s)


def mb(v: float) -> float:
    """Bytes/s -> MB/s (10^6, as the seed's figures)."""
    return round(float(v) / 1e6, 1)


def spans_text(job: JobData, mask: np.ndarray, limit: int = 6) -> str:
    """The periods in ``mask`` as spans of seconds from the job's start: '2-5, 8-11 s'."""
    if not mask.any():
        return "none"
    padded = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    secs = job.seconds
    spans = [
        f"{secs[a]:.0f}-{secs[b - 1] + job.period_s:.0f}"
        for a, b in zip(edges[0::2], edges[1::2], strict=True)
    ]
    more = f" and {len(spans) - limit} more" if len(spans) > limit else ""
    return ", ".join(spans[:limit]) + " s" + more


def pct(v: float) -> str:
    return f"{v:.0%}"
