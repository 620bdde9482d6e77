"""Phase folding, the event file reader and the decision rule, on synthetic
detector data (no MPI, no timing)."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest

from hushmon.errors import HushmonError
from hushmon.noise.analysis import RunStats
from hushmon.noise.decide import SequentialRule, evidence, replay
from hushmon.noise.events import EVENT_DTYPE, MAGIC, DetectorRun, read_events
from hushmon.noise.folding import (
    folded_profile,
    known_phase_statistic,
    scan_statistic,
    window_ns,
)

S = 1_000_000_000
MS = 1_000_000
T0 = 1_800_000_000 * S  # a realtime origin on a second boundary


def synthetic_run(
    seconds: int, phase_ns: int, agent_ns: int, background: list[tuple[int, int]], threshold=5000
) -> DetectorRun:
    """Two ranks; the agent delays rank 0 by agent_ns right after each
    T0 + k s + phase; background detours (start offset, duration) on rank 1."""
    events = []
    for k in range(seconds):
        if agent_ns:
            events.append((0, 0, T0 + k * S + phase_ns + 50_000, agent_ns + threshold))
    for start, dur in background:
        events.append((0, 1, T0 + start, dur))
    # blocks covering [T0, T0 + seconds) on both ranks, 10 ms each
    for r in (0, 1):
        for b in range(seconds * 100):
            events.append((1, r, T0 + b * 10 * MS, 10 * MS))
    arr = np.array(events, dtype=EVENT_DTYPE)
    return DetectorRun(
        summary={"loop_time_s": float(seconds), "count": 1000, "ranks": []},
        nranks=2,
        threshold_ns=threshold,
        detours=arr[arr["kind"] == 0],
        blocks=arr[arr["kind"] == 1],
    )


def test_known_phase_sees_the_agent_and_cancels_background() -> None:
    # 1 ms of agent per second at phase 300 ms; background of 3 ms detours spread
    # uniformly (the same amount in every window on average)
    rng = np.random.default_rng(1)
    bg = [(int(t), 3 * MS) for t in rng.uniform(0, 20 * S, size=200)]
    run = synthetic_run(20, 300 * MS, 1 * MS, bg)
    width = window_ns(0.1, S)
    stat = known_phase_statistic(run, S, 300 * MS, width)
    assert stat.windows == 20
    # the agent's windows hold more than (almost) every other window
    assert stat.value > 0.9
    assert stat.delay_ns == pytest.approx(1 * MS, rel=0.3)
    # a wrong phase is one window among others: a score near 1/2
    other = known_phase_statistic(run, S, 700 * MS, width)
    assert 0.3 < other.value < 0.7
    assert abs(other.delay_ns) < 0.3 * MS
    # the scan finds the agent without being told the phase
    scan = scan_statistic(run, S, width)
    assert scan.value > 0.9
    assert abs(scan.phase_ns - 300 * MS) <= window_ns(0.1, S)


def test_profile_peaks_at_the_activation() -> None:
    run = synthetic_run(10, 250 * MS, 2 * MS, [])
    centres, prof = folded_profile(run, S, 250 * MS, bins=1000)
    assert centres[np.argmax(prof)] < 1.0  # within the first ms after the activation
    assert prof.max() == pytest.approx(2 * MS / 1e3 * 10 / 10, rel=0.05)


def test_no_complete_window_gives_nan() -> None:
    run = synthetic_run(1, 990 * MS, 0, [])
    stat = known_phase_statistic(run, S, 990 * MS, window_ns(1, S))
    assert stat.windows == 0 and math.isnan(stat.value)


def test_event_file_roundtrip(tmp_path: Path) -> None:
    events = np.array([(0, 1, 123, 4567), (1, 0, 100, 1000)], dtype=EVENT_DTYPE)
    header = MAGIC + struct.pack("<qqqiiq", 10, 5000, 1000, 2, 24, 2) + b"\0" * 16
    path = tmp_path / "e.bin"
    path.write_bytes(header + events.tobytes())
    head, back = read_events(path)
    assert head["realtime_minus_clock_ns"] == 10 and head["nranks"] == 2
    assert back["duration_ns"].tolist() == [4567, 1000]
    path.write_bytes(header + events.tobytes()[:-3])
    with pytest.raises(HushmonError, match="truncated"):
        read_events(path)
    path.write_bytes(b"garbage" * 20)
    with pytest.raises(HushmonError, match="not a hushmon-detect event file"):
        read_events(path)


def _stats(arm: str, folded: float, i: int) -> RunStats:
    return RunStats(i, arm, 0.5, 5.0, 5.0, 500.0, folded, folded * 1e6, 4, 10.0, 1.0, 600.0, 900.0)


def test_rule_detects_clear_separation_and_spends_alpha_honestly() -> None:
    arms = ["clean", "noisy"] * 8
    runs = [_stats(a, (0.9 if a == "noisy" else 0.5) + i / 1000, i) for i, a in enumerate(arms)]
    d = replay(runs, alpha=0.01, max_runs=16)
    assert d.detected
    assert d.p_value is not None and d.level_tested is not None
    assert d.p_value <= d.level_tested
    assert d.alpha_spent <= 0.01 + 1e-15
    ev = evidence(runs, period_s=1.0)
    # delay_ns = score x 1e6 here: the shift of 0.4 is 0.4 ms per 1 s period
    assert ev["measured_load_pct"] == pytest.approx(0.04, rel=0.1)


def test_rule_does_not_detect_identical_arms() -> None:
    rng = np.random.default_rng(3)
    values = rng.uniform(0, 1, size=16)
    arms = rng.permutation(["clean", "noisy"] * 8)
    runs = [_stats(str(a), float(v), i) for i, (a, v) in enumerate(zip(arms, values, strict=True))]
    rule = SequentialRule(0.01, 16)
    assert not any(rule.add(r) for r in runs)
    assert not rule.finish().detected
