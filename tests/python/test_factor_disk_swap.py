"""Disk and swap factor on a synthetic job with a known swapping phase."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hushmon.digest.factors import disk_swap, parameters, run_factors
from hushmon.digest.factors.base import SkipReason
from hushmon.digest.jobdata import load_job
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, synthetic_store


def test_swapping_phase_is_found_with_its_span_and_cost(tmp_path: Path) -> None:
    sc = Scenario(nodes=3, seconds=120, job="j", swap_phases=[(30, 60)])
    job = load_job(synthetic_store(sc, tmp_path), "j")
    findings = disk_swap.FACTOR.analyze(job, parameters()["disk_swap"])
    swap = [f for f in findings if f.title == "Swapping slows computation"]
    assert len(swap) == 1
    f = swap[0]
    assert f.evidence["share_of_time_swapping"] == pytest.approx(0.25, abs=0.01)
    assert f.span_s == (30.0, 60.0)
    assert f.evidence["work_sensor"] == "pmu.flops_per_s"
    assert f.evidence["work_lost_while_swapping"] > 0.7  # synthetic: 14 % vs 88 % busy
    assert f.evidence["corr_swap_vs_work"] < -0.8
    assert f.severity == "high"
    assert "25%" in f.hint


def test_without_pmu_user_cpu_is_the_work_rate(tmp_path: Path) -> None:
    # no job cgroup either: with one, the job's own user CPU is the work (factors/work.py)
    sc = Scenario(nodes=2, seconds=100, job="j", swap_phases=[(0, 50)], omit=("pmu", "cgroup"))
    job = load_job(synthetic_store(sc, tmp_path), "j")
    (f,) = [
        x for x in disk_swap.FACTOR.analyze(job, parameters()["disk_swap"]) if "Swap" in x.title
    ]
    assert f.evidence["work_sensor"] == "cpu.user_pct"
    assert f.evidence["work_while_swapping"] < 20 < 80 < f.evidence["work_otherwise"]


def test_no_swap_no_finding_and_missing_vm_is_skipped(tmp_path: Path) -> None:
    job = load_job(synthetic_store(Scenario(nodes=2, seconds=60, job="j"), tmp_path / "a"), "j")
    assert disk_swap.FACTOR.analyze(job, parameters()["disk_swap"]) == []
    sc = Scenario(nodes=2, seconds=60, job="j", omit=("vm",))
    job = load_job(synthetic_store(sc, tmp_path / "b"), "j")
    skipped = {s.factor: s for s in run_factors(job).skipped}
    assert skipped["disk_swap"].reason is SkipReason.MISSING_SENSOR
    assert "swap.pages_per_s" in skipped["disk_swap"].detail


def test_file_io_phase_without_swapping(tmp_path: Path) -> None:
    sc = Scenario(nodes=2, seconds=100, job="j", io_phases=[(20, 50)])
    job = load_job(synthetic_store(sc, tmp_path), "j")
    (f,) = disk_swap.FACTOR.analyze(job, parameters()["disk_swap"])
    assert f.title == "Disk I/O slows computation"
    assert f.evidence["share_of_time_disk_busy"] == pytest.approx(0.30, abs=0.01)
    assert f.evidence["iowait_pct"] == pytest.approx(30, abs=2)
    assert f.evidence["work_lost_while_disk_busy"] > 0.4  # 40 % vs 88 % busy
    assert f.span_s == (20.0, 50.0)
    assert f.severity == "high"


def test_the_tasks_own_block_io_wait_bounds_the_memory_limits_cost() -> None:
    """The bed's outofcore (1 GiB under a 512 MiB limit, 2026-11-27): 67 % of the run at
    the limit, the machine's I/O wait 0.4 % (its busy CPUs hide it), the work rate no
    lower than elsewhere, the tasks waiting for block I/O 24 % of their time. Raising
    the limit gained -5 to +10 %: the whole at-limit time (67 %) was no estimate."""
    loss = disk_swap._io_loss(0.667, 0.4, 11.7, 8.3, "at the limit", "more memory", 0.24)
    assert loss is not None
    assert loss.low_share == pytest.approx(0.667 * 0.004, abs=1e-3)
    assert loss.high_share == pytest.approx(0.667 * 0.24, abs=1e-3)
    assert "24% of their time" in loss.basis
    unbounded = disk_swap._io_loss(0.667, 0.4, 11.7, 8.3, "at the limit", "more memory")
    assert unbounded is not None and unbounded.high_share == pytest.approx(0.667)
    # the work rate lower at the limit than elsewhere is evidence of its own
    slower = disk_swap._io_loss(0.5, 0.0, 4.0, 10.0, "at the limit", "more memory", 0.2)
    assert slower is not None and slower.high_share == pytest.approx(0.5 * 0.6)
    # only the tasks' wait known: 0 to it
    alone = disk_swap._io_loss(0.5, float("nan"), None, None, "at the limit", "more memory", 0.3)
    assert alone is not None
    assert (alone.low_share, alone.high_share) == (0.0, pytest.approx(0.15))


def test_the_tasks_wait_is_read_per_task_on_the_most_waiting_node(tmp_path: Path) -> None:
    """procio's blkio_wait_pct is summed over a node's tasks (% of one task): node002
    with 2 tasks waiting 60 % together waits 30 % per task, more than node001's 1 task
    at 20 %; the periods outside the mask do not count."""
    spool = tmp_path / "spool"
    spool.mkdir()
    for host, tasks, wait in (("node001", 1, 20.0), ("node002", 2, 60.0)):
        lines = []
        for i in range(10):
            ts = START_NS + i * 1_000_000_000
            w = wait if i < 5 else 0.0
            lines.append(f"job,host={host},job=j active=1i {ts}\n")
            lines.append(f"procio,host={host},job=j tasks={tasks},blkio_wait_pct={w} {ts}\n")
        (spool / f"{host}-{START_NS}-900.lp").write_text("".join(lines), encoding="ascii")
    db = tmp_path / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    job = load_job(db, "j")
    first = np.arange(10) < 5
    assert disk_swap._tasks_blkio_share(job, first) == pytest.approx(0.30)
    assert disk_swap._tasks_blkio_share(job, ~first) == pytest.approx(0.0)
    assert disk_swap._tasks_blkio_share(job, np.zeros(10, dtype=bool)) is None
