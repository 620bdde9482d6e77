"""Communication topology: traffic leaving the node, on synthetic jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.factors import parameters, topology
from hushmon.digest.jobdata import load_job
from hushmon.store.synthetic import Scenario, synthetic_store


def test_butterfly_like_traffic_leaves_the_node(tmp_path: Path) -> None:
    sc = Scenario(nodes=4, seconds=60, job="j", network="saturated", ceiling_bytes_per_s=1e9)
    job = load_job(synthetic_store(sc, tmp_path), "j")
    (f,) = topology.FACTOR.analyze(job, parameters()["topology"])
    assert f.severity == "medium"
    assert f.evidence["share_leaving_node"] > 0.99
    assert f.evidence["external_MB_per_s_per_node"] == pytest.approx(500, rel=0.05)
    metric = topology.FACTOR.metric(job, parameters()["topology"])
    assert metric == pytest.approx(5e8, rel=0.05)


def test_quiet_network_is_an_info_finding(tmp_path: Path) -> None:
    job = load_job(
        synthetic_store(Scenario(nodes=3, seconds=40, job="j", network="none"), tmp_path), "j"
    )
    (f,) = topology.FACTOR.analyze(job, parameters()["topology"])
    assert f.severity == "info"
    assert "stays inside nodes" in f.hint
