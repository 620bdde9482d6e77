"""Decomposition limit and compare: which factor's influence grows with the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hushmon.digest.compare import compare_runs, parse_run
from hushmon.digest.factors import decomposition, parameters, run_factors
from hushmon.digest.factors.base import SkipReason
from hushmon.digest.jobdata import load_job
from hushmon.errors import HushmonError
from hushmon.store.synthetic import START_NS, Scenario, synthetic_store

HOUR_NS = 3600 * 10**9


@pytest.fixture(scope="module")
def runs_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One program at 2, 4 and 8 processes: the link saturates and the work rate falls."""
    tmp = tmp_path_factory.mktemp("runs")
    db = tmp / "hushmon.duckdb"
    cases = [
        ("p2", 2, "light", 88.0),
        ("p4", 4, "saturated", 75.0),
        ("p8", 8, "saturated", 45.0),
    ]
    for i, (job, nodes, net, busy) in enumerate(cases):
        sc = Scenario(
            nodes=nodes,
            seconds=60,
            job=job,
            network=net,
            busy_pct=busy,
            start_ns=START_NS + i * HOUR_NS,
        )
        synthetic_store(sc, tmp, db)
    return db


def test_single_job_digest_skips_with_reason(runs_db: Path) -> None:
    skipped = {s.factor: s for s in run_factors(load_job(runs_db, "p2")).skipped}
    assert skipped["decomposition"].reason is SkipReason.NEEDS_SEVERAL_RUNS
    assert "hushmon compare" in skipped["decomposition"].detail


def test_rate_drop_between_runs_is_the_decomposition_limit() -> None:
    (f,) = decomposition.FACTOR.analyze_runs(
        ["m1024", "m512"],
        [1024, 512],
        [420e6, 270e6],
        "pmu.flops_per_s",
        parameters()["decomposition"],
    )  # the seed's matrix multiplication figures
    assert f.evidence["rate_drop"] == pytest.approx(1 - 270 / 420, abs=1e-3)
    assert f.evidence["best_run"] == "m1024" and f.severity == "medium"
    assert (
        decomposition.FACTOR.analyze_runs(
            ["a", "b"], [1, 2], [100.0, 95.0], "cpu.user_pct", parameters()["decomposition"]
        )
        == []
    )


def test_compare_names_the_growing_factors(runs_db: Path, tmp_path: Path) -> None:
    cmp = compare_runs(runs_db, ["p8@8", "p2@2", "p4@4"], tmp_path / "cmp")
    assert [r.job for r in cmp.runs] == ["p2", "p4", "p8"]
    grown = {f.factor: f for f in cmp.findings}
    assert "network_bandwidth" in grown and grown["network_bandwidth"].severity == "high"
    assert "decomposition" in grown  # the work rate per node falls from 88 % to 45 %
    assert grown["decomposition"].evidence["values"]["p8@8"] > 0.4
    assert "disk_swap" not in grown
    data = json.loads(cmp.json_path.read_text())
    assert {r["job"] for r in data["runs"]} == {"p2", "p4", "p8"}
    assert cmp.report_path.stat().st_size > 10_000


def test_same_size_runs_are_compared_side_by_side(runs_db: Path, tmp_path: Path) -> None:
    # p2 (light traffic) and p8 (a saturated link) given the same size: which factor differs
    cmp = compare_runs(runs_db, ["p2@4", "p8@4"], tmp_path / "side")
    assert cmp.side_by_side
    differs = {f.factor: f for f in cmp.findings}
    assert "network_bandwidth" in differs
    f = differs["network_bandwidth"]
    assert f.evidence["values"]["p8@4"] > f.evidence["values"]["p2@4"]
    assert "job p8" in f.hint and "job p2" in f.hint
    data = json.loads(cmp.json_path.read_text())
    assert data["mode"] == "side_by_side"
    assert "differs between the runs" in cmp.summary_lines()[1]


def test_compare_bad_input(runs_db: Path, tmp_path: Path) -> None:
    with pytest.raises(HushmonError, match="at least two runs"):
        compare_runs(runs_db, ["p2@2"], tmp_path)
    with pytest.raises(HushmonError, match="not a number"):
        parse_run("p2@two")
    with pytest.raises(HushmonError, match="given twice"):
        compare_runs(runs_db, ["p2@2", "p2@4"], tmp_path)
    with pytest.raises(HushmonError, match="not in the store"):
        compare_runs(runs_db, ["p2@2", "nope@4"], tmp_path)
