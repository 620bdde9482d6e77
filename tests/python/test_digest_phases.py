"""Findings per phase (issue 21): a job of two distinct phases, once reported through
libhushmon (app_phase lines) and once not (the change points of the node sensors),
gets each phase's own main limit in the report and digest.json.

The spool is written here as the agent writes it (docs/formats.md): 2 nodes, 1 s
periods, a 24-s "solve" phase (CPUs busy, the network quiet) then a 24-s
"exchange" phase (each node's 1 Gbit/s link near its capacity, the CPUs polling),
with seeded noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hushmon.digest import changepoints
from hushmon.digest.build import Digest, build_digest
from hushmon.digest.phases import APP, SENSORS, _spread_back, app_labels
from hushmon.store.ingest import ingest_spool

T0_NS = 1_795_000_000_000_000_000
SOLVE_S, EXCHANGE_S = 24, 24
LINK_BYTES_PER_S = 125e6  # 1 Gbit/s


def _spool(folder: Path, job: str, with_phases: bool) -> None:
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True)
    for node in ("n1", "n2"):
        lines = []
        for t in range(SOLVE_S + EXCHANGE_S):
            ts = T0_NS + t * 1_000_000_000
            solving = t < SOLVE_S
            # MPI polls while it waits for messages: busy CPUs in both phases, the
            # exchange's in the kernel's TCP stack as much as in user space
            user = (95 if solving else 55) + rng.normal(0, 2)
            system = 2 + rng.normal(0, 0.5) if solving else 38 + rng.normal(0, 1)
            idle = max(0.0, 100 - user - system)
            sent = (2e5 if solving else 0.9 * LINK_BYTES_PER_S) * (1 + rng.normal(0, 0.03))
            lines += [
                f"cpu,host={node},cpu=total user_pct={user:.3f},system_pct={system:.3f},"
                f"idle_pct={idle:.3f} {ts}",
                f"net,host={node},iface=eth0 rx_bytes_per_s={sent:.1f},tx_bytes_per_s={sent:.1f},"
                f"capacity_bits_per_s=1000000000 {ts}",
                f"node_cgroup,host={node} cpus=2,cpuset_cpus=2i {ts}",
                f"job,host={node},job={job} active=1i {ts}",
            ]
            if not with_phases:
                continue
            rank = 0 if node == "n1" else 1
            if t == SOLVE_S - 1:  # one long solve ends here: it covered the periods before
                total = SOLVE_S - 0.4 + 0.1 * rank
                lines.append(
                    f"app_phase,host={node},job={job},rank={rank},phase=solve count=1i,"
                    f"mean_s={total},min_s={total},max_s={total},total_s={total} {ts}"
                )
            if not solving:  # ten short exchanges a period
                lines.append(
                    f"app_phase,host={node},job={job},rank={rank},phase=exchange count=10i,"
                    f"mean_s=0.09,min_s=0.08,max_s=0.1,total_s=0.9 {ts}"
                )
        (folder / f"{node}-{job}.lp").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _digest(tmp: Path, with_phases: bool) -> Digest:
    _spool(tmp / "spool", "7", with_phases)
    ingest_spool(tmp / "hushmon.duckdb", tmp / "spool")
    return build_digest(tmp / "hushmon.duckdb", "7", tmp / "report")


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Digest:
    return _digest(tmp_path_factory.mktemp("reported"), True)


@pytest.fixture(scope="module")
def sensed(tmp_path_factory: pytest.TempPathFactory) -> Digest:
    return _digest(tmp_path_factory.mktemp("sensed"), False)


def _check_two_phases(d: Digest, source: str) -> list[dict]:
    doc = json.loads(d.json_path.read_text(encoding="utf-8"))["phases"]
    assert doc["source"] == source
    phases = doc["phases"]
    assert len(phases) == 2, phases
    solve, exchange = phases
    # the cut within one period of the true one
    assert abs(solve["end_s"] - SOLVE_S) <= 1 and abs(exchange["start_s"] - SOLVE_S) <= 1
    # the network limits the exchange phase, not the solve phase
    assert exchange["main_limit"]["factor"] == "network_bandwidth"
    assert exchange["main_limit"]["loss"] is not None
    # the phase's loss is a share of the phase; of the job, times the phase's share
    loss = exchange["main_limit"]["loss"]
    lo, hi = exchange["main_limit_job_share"]
    assert hi > 0 and hi == pytest.approx(loss["high_share"] * exchange["share"], abs=1e-3)
    assert lo == pytest.approx(loss["low_share"] * exchange["share"], abs=1e-3)
    assert not any(f["factor"] == "network_bandwidth" for f in solve["findings"])
    report = d.report_path.read_text(encoding="utf-8")
    assert "<h2>Phases</h2>" in report and "Network bandwidth limit" in report
    return phases


def test_libhushmon_phases_name_the_phases(reported: Digest) -> None:
    solve, exchange = _check_two_phases(reported, APP)
    assert (solve["name"], exchange["name"]) == ("solve", "exchange")
    # named by the program, described by the sensors as the change points' phases are
    assert "high user CPU" in solve["description"]
    assert "network send" in exchange["description"]
    lines = "\n".join(reported.summary_lines())
    assert "2 phases (libhushmon)" in lines and "exchange (24-48 s, 50%)" in lines


def test_change_points_find_the_phases_without_libhushmon(sensed: Digest) -> None:
    solve, exchange = _check_two_phases(sensed, SENSORS)
    assert "high user CPU" in solve["description"]
    assert "network send" in exchange["description"]


def test_a_long_phase_covers_the_periods_before_its_end() -> None:
    # phase a: one 3.5-s run ending in period 4; phase b: 0.8 s in periods 0-1
    # and nesting: "outer" covers everything, the inner phase wins where it fills half
    cover = {"a": np.array([0, 0, 0, 0, 3.5, 0]), "b": np.array([0.8, 0.8, 0, 0, 0, 0])}
    # its end is taken at the middle of the period it ended in (where is not known)
    assert list(_spread_back(cover["a"], 1.0)) == [0, 1, 1, 1, 0.5, 0]
    shares = {k: np.clip(_spread_back(v, 1.0), 0, 1) for k, v in cover.items()}
    shares["outer"] = np.ones(6)
    names, labels = app_labels(shares)
    assert [names[i] if i >= 0 else "-" for i in labels] == [
        "b", "b", "a", "a", "a", "outer"
    ]  # fmt: skip


def test_noise_and_a_repeating_pattern_make_no_phases() -> None:
    rng = np.random.default_rng(3)
    noise = rng.normal(0, 1, (120, 4))
    assert changepoints.segments(noise) == [(0, 120)]
    # message / compute periods alternating every 2 s: one phase, not thirty
    square = np.tile(np.repeat([[0.0], [10.0]], 2, axis=0), (30, 4)) + rng.normal(0, 0.5, (120, 4))
    assert changepoints.segments(square) == [(0, 120)]
    # a clear step in two of four sensors: one cut, at it
    step = noise.copy()
    step[70:, :2] += 6
    assert changepoints.segments(step) == [(0, 70), (70, 120)]


def test_long_phases_one_after_another_leave_no_gap() -> None:
    # the bed's phases program (0.5-s periods): four ~5-s phases, each reported in
    # the period it ended in (the agent's lines of job 1 at 07:06)
    seconds = {"solve": 5.053, "transpose": 5.211, "random_access": 5.115, "alltoall": 5.063}
    ends = {"solve": 12, "transpose": 23, "random_access": 33, "alltoall": 43}
    cover: dict[str, np.ndarray] = {}
    for name, end in ends.items():
        reported = np.zeros(44)
        reported[end] = seconds[name]
        cover[name] = np.clip(_spread_back(reported, 0.5) / 0.5, 0, 1)
    names, labels = app_labels(cover)
    named = [names[i] if i >= 0 else "-" for i in labels]
    # every period from the first phase's start to the last one's end has a phase,
    # and the phases follow one another in the program's order
    assert "-" not in named[3:]
    order = [n for k, n in enumerate(named[3:]) if k == 0 or n != named[3:][k - 1]]
    assert order == list(ends)
