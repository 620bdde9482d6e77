"""Disk and swap factor on a synthetic job with a known swapping phase."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.factors import disk_swap, parameters, run_factors
from hushmon.digest.factors.base import SkipReason
from hushmon.digest.jobdata import load_job
from hushmon.store.synthetic import Scenario, synthetic_store


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
