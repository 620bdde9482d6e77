"""Load imbalance and idle CPUs on a synthetic job where one node does double work."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.factors import idle_cpu, imbalance, parameters, run_factors
from hushmon.digest.factors.base import SkipReason
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.synthetic import Scenario, synthetic_store


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> JobData:
    sc = Scenario(nodes=6, seconds=90, job="j", slow_node=2)
    return load_job(synthetic_store(sc, tmp_path_factory.mktemp("skew")), "j")


def test_imbalanced_node_is_named(skewed: JobData) -> None:
    (f,) = imbalance.FACTOR.analyze(skewed, parameters()["imbalance"])
    assert f.evidence["busiest_node"] == "node002"
    assert f.evidence["outlier_nodes"] == "node002"
    # synthetic: node002 at 97 % busy, five nodes at 45 % -> mean/max = (97+5*45)/6/97
    assert f.evidence["balance_mean_over_max"] == pytest.approx((97 + 5 * 45) / 6 / 97, abs=0.03)
    assert f.severity == "high"
    assert "node002" in f.hint


def test_waiting_nodes_show_as_idle(skewed: JobData) -> None:
    (f,) = idle_cpu.FACTOR.analyze(skewed, parameters()["idle_cpu"])
    assert f.evidence["nodes_mostly_idle"] == 5
    assert "node002" not in f.evidence["mostly_idle_nodes"]
    assert f.evidence["idle_pct"] == pytest.approx((5 * 52.5 + 0.5) / 6, abs=3)


def test_balanced_busy_job_has_neither(tmp_path: Path) -> None:
    job = load_job(synthetic_store(Scenario(nodes=4, seconds=60, job="j"), tmp_path), "j")
    assert imbalance.FACTOR.analyze(job, parameters()["imbalance"]) == []
    assert idle_cpu.FACTOR.analyze(job, parameters()["idle_cpu"]) == []
    m = imbalance.FACTOR.metric(job, parameters()["imbalance"])
    assert m is not None and m < 0.05


def test_one_node_cannot_be_imbalanced(tmp_path: Path) -> None:
    job = load_job(synthetic_store(Scenario(nodes=1, seconds=30, job="j"), tmp_path), "j")
    skipped = {s.factor: s.reason for s in run_factors(job).skipped}
    assert skipped["imbalance"] is SkipReason.NOT_APPLICABLE
    assert skipped["topology"] is SkipReason.NOT_APPLICABLE
