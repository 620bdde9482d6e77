"""Per-run statistics of a noise study, computed from a run's files alone
(so a report can be rebuilt without rerunning)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hushmon.noise.events import DetectorRun, load_detector_run
from hushmon.noise.folding import (
    FoldedStatistic,
    burst_windows,
    interval_statistic,
    known_phase_statistic,
    scan_statistic,
    window_ns,
)
from hushmon.noise.launch import DETECT_JSON, EVENTS_FILE, RunRecord
from hushmon.noise.schedtrace import TRACE_FILE, AgentTrace, read_trace, sham_bursts

# Where a study keeps the trace of the agent alone (the clean runs' template).
TEMPLATE_DIR = "agent-alone"


@dataclass(frozen=True)
class RunStats:
    index: int
    arm: str
    phase_s: float
    wall_s: float
    loop_time_s: float
    per_op_ns: float  # mean time per collective (the seed's loop time / count)
    folded_score: float  # the primary per-run statistic (mean window score, 1/2 = no agent)
    delay_ns: float  # mean excess of the agent's windows over their control windows
    windows: int
    detour_rate_per_s: float  # detours per second, rank with most
    excess_pct: float  # all detour excess / loop time, rank with most
    p99_ns: float
    p999_ns: float
    # scheduler-trace studies: the agent's on-CPU share of the detector's
    # span (noisy runs), trace events the ring buffer lost, and the agent's
    # slices whose start neither the trace nor a wake-up gives (left out)
    agent_cpu_pct: float = math.nan
    lost_trace_events: int = 0
    unmatched_trace_slices: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_stats(
    study_dir: Path,
    record: RunRecord,
    level_pct: float,
    period_s: float,
    known_phase: bool,
    run: DetectorRun | None = None,
    window_s: float | None = None,
    template: AgentTrace | None = None,
) -> RunStats:
    """known_phase: the injector or a given phase; otherwise a scan, or,
    with a template (the agent alone, traced), the scheduler-trace windows:
    the noisy run's own trace, the template's bursts shifted by the run's
    random phase in a clean run."""
    run_dir = study_dir / record.dir
    if run is None:
        run = load_detector_run(run_dir / DETECT_JSON, run_dir / EVENTS_FILE)
    period_ns = round(period_s * 1e9)
    # a real agent's work per activation is unknown: its window is given
    width = round(window_s * 1e9) if window_s else window_ns(level_pct, period_ns)
    agent_pct, lost, unmatched = math.nan, 0, 0
    if template is not None:
        folded, agent_pct, lost, unmatched = _traced(run_dir, record, run, template, period_ns)
    elif known_phase:
        folded = known_phase_statistic(run, period_ns, round(record.phase_s * 1e9), width)
    else:
        folded = scan_statistic(run, period_ns, width)
    ranks = run.summary.get("ranks", [])
    loop = run.loop_time_s
    detours = max((r.get("detours", 0) for r in ranks), default=0)
    excess = max((r.get("detour_excess_s", 0.0) for r in ranks), default=0.0)
    p99 = max((r.get("p99_ns") or math.nan for r in ranks), default=math.nan)
    p999 = max((r.get("p999_ns") or math.nan for r in ranks), default=math.nan)
    return RunStats(
        index=record.index,
        arm=record.arm,
        phase_s=record.phase_s,
        wall_s=record.wall_s,
        loop_time_s=loop,
        per_op_ns=1e9 * loop / max(1, int(run.summary.get("count", 1))),
        folded_score=folded.value,
        delay_ns=folded.delay_ns,
        windows=folded.windows,
        detour_rate_per_s=detours / loop if loop > 0 else math.nan,
        excess_pct=100.0 * excess / loop if loop > 0 else math.nan,
        p99_ns=float(p99),
        p999_ns=float(p999),
        agent_cpu_pct=agent_pct,
        lost_trace_events=lost,
        unmatched_trace_slices=unmatched,
    )


def _traced(
    run_dir: Path, record: RunRecord, run: DetectorRun, template: AgentTrace, period_ns: int
) -> tuple[FoldedStatistic, float, int, int]:
    lo, hi = run.span_ns()
    if record.arm == "noisy":
        trace = read_trace(run_dir / TRACE_FILE)
        bursts = trace.bursts()
        pct = 100.0 * trace.on_cpu_ns(lo, hi) / (hi - lo) if hi > lo else math.nan
        lost, unmatched = trace.lost_events, trace.unmatched_ends
    else:
        shift = round(record.phase_s * 1e9)
        bursts = sham_bursts(template, lo, shift)
        pct, lost, unmatched = math.nan, 0, 0
    starts, widths = burst_windows(bursts, run)
    return interval_statistic(run, starts, widths, period_ns), pct, lost, unmatched


def arm_values(stats: list[RunStats], arm: str, field: str) -> np.ndarray:
    vals = [getattr(s, field) for s in stats if s.arm == arm]
    a = np.asarray(vals, dtype=float)
    return a[np.isfinite(a)]
