"""Communication topology: traffic leaving the node, on synthetic jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.fabric import load_fabric
from hushmon.digest.factors import parameters, topology
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.synthetic import Scenario, synthetic_store


def test_butterfly_like_traffic_leaves_the_node(tmp_path: Path) -> None:
    sc = Scenario(nodes=4, seconds=60, job="j", network="saturated", ceiling_bytes_per_s=1e9)
    job = load_job(synthetic_store(sc, tmp_path), "j")
    (f,) = topology.FACTOR.analyze(job, parameters()["topology"])
    assert f.severity == "medium"
    assert f.evidence["share_leaving_node"] > 0.99
    assert f.evidence["external_MB_per_s_per_node"] == pytest.approx(500, rel=0.05)
    # the racks are not known here: the influence is the share leaving the node
    assert "racks" in f.evidence and "--topology" in f.hint
    metric = topology.FACTOR.metric(job, parameters()["topology"])
    assert metric == pytest.approx(1.0, abs=0.01)


def _racked(tmp: Path, uplink_mbit: int) -> JobData:
    """4 nodes (2 per rack) whose nodes each send ~500 MB/s; racks from a topology.conf."""
    sc = Scenario(nodes=4, seconds=60, job="j", network="saturated", ceiling_bytes_per_s=1e9)
    job = load_job(synthetic_store(sc, tmp), "j")
    conf = tmp / "topology.conf"
    conf.write_text(
        "SwitchName=a Nodes=node[000-001] LinkSpeed=100000\n"
        "SwitchName=b Nodes=node[002-003] LinkSpeed=100000\n"
        f"SwitchName=top Switches=a,b LinkSpeed={uplink_mbit}\n"
    )
    job.fabric_info = load_fabric(conf, dict(parameters()["fabric"]), int(job.times_ns[0]))
    return job


def test_partners_behind_a_nearly_full_uplink_are_high(tmp_path: Path) -> None:
    # each rack sends 1000 MB/s on average, up to ~1400 (tx swings between 25 and 75 % of
    # 1 GB/s per node), through a 16 Gbit/s (2000 MB/s) uplink: ~70 %, all of it may cross
    job = _racked(tmp_path, 16_000)
    (f,) = topology.FACTOR.analyze(job, parameters()["topology"])
    assert f.severity == "high"
    assert f.evidence["share_that_may_cross_racks"] == 1.0
    assert f.evidence["rack_send_share_of_uplink"] == pytest.approx(0.7, abs=0.07)
    assert f.evidence["uplink_capacity_MB_per_s"] == 2000
    assert "SwitchName=top LinkSpeed=16000" in f.evidence["uplink_capacity_source"]
    assert topology.FACTOR.metric(job, parameters()["topology"]) == 1.0


def test_more_than_the_uplink_carries_stayed_in_the_rack(tmp_path: Path) -> None:
    # a rack sends ~1280 MB/s in its busiest periods (90th percentile) through a 4 Gbit/s
    # (500 MB/s, 525 with the 5 % allowance) uplink: at least 1 - 525/1280 stayed inside
    job = _racked(tmp_path, 4_000)
    (f,) = topology.FACTOR.analyze(job, parameters()["topology"])
    assert f.severity == "low"
    stayed = 1 - 525 / 1280
    assert f.evidence["share_that_stayed_in_racks_at_least"] == pytest.approx(stayed, abs=0.05)
    assert "stayed inside them" in f.hint
    metric = topology.FACTOR.metric(job, parameters()["topology"])
    assert metric == pytest.approx(1 - stayed, abs=0.05)


def test_one_rack_needs_no_uplink(tmp_path: Path) -> None:
    sc = Scenario(nodes=2, seconds=40, job="j", network="saturated", ceiling_bytes_per_s=1e9)
    job = load_job(synthetic_store(sc, tmp_path), "j")
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=a Nodes=node[000-003]\nSwitchName=top Switches=a LinkSpeed=1\n")
    job.fabric_info = load_fabric(conf, dict(parameters()["fabric"]), int(job.times_ns[0]))
    (f,) = topology.FACTOR.analyze(job, parameters()["topology"])
    assert f.severity == "info" and "switch a" in f.hint
    assert topology.FACTOR.metric(job, parameters()["topology"]) == 0.0


def test_quiet_network_is_an_info_finding(tmp_path: Path) -> None:
    job = load_job(
        synthetic_store(Scenario(nodes=3, seconds=40, job="j", network="none"), tmp_path), "j"
    )
    (f,) = topology.FACTOR.analyze(job, parameters()["topology"])
    assert f.severity == "info"
    assert "stays inside nodes" in f.hint
