"""Each finding's estimated loss (issue 21): the share of the run time removing
the limit would save, as a range with its assumptions, and the severity it sets.
On the bed's recorded jobs (tests/fixtures/spool), whose programs' parameters
give the true answer where one is known."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hushmon.digest.build import Digest, build_digest
from hushmon.digest.factors import apply_loss_rule, parameters
from hushmon.digest.factors.base import Finding, Loss, severity_from_loss
from hushmon.paths import REPO_ROOT
from hushmon.store.ingest import ingest_spool

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "spool"


def _store(tmp: Path, fixture: Path) -> Path:
    spool = tmp / "spool"
    spool.mkdir()
    for f in fixture.glob("*.lp"):
        shutil.copy(f, spool / f.name)
    ingest_spool(tmp / "hushmon.duckdb", spool)
    return tmp / "hushmon.duckdb"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Digest:
    """testbed up --nodes 3 --racks 2 --uplink-rate 100mbit; srun -N 3 butterfly: ranks 0
    (n1, rack r1) and 2 (n3, rack r2) exchange, rank 1 (n2, rack r1) sits out."""
    fixture = FIXTURES / "testbed-3n2r-100M"
    tmp = tmp_path_factory.mktemp("pair")
    return build_digest(_store(tmp, fixture), "1", tmp / "r", fixture / "topology.conf")


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("bed"), FIXTURES / "testbed-4n2r")


def _one(digest: Digest, factor: str) -> Finding:
    (f,) = [f for f in digest.findings if f.factor == factor]
    return f


def test_severity_follows_the_middle_of_the_range() -> None:
    rule = parameters()["loss"]
    assert (rule["high_share"], rule["medium_share"]) == (0.20, 0.10)
    assert severity_from_loss(Loss(0.15, 0.35, "", []), rule) == "high"
    # a wide range whose low end is under 10 %: medium, however high its top
    assert severity_from_loss(Loss(0.02, 0.70, "", []), rule) == "medium"
    assert severity_from_loss(Loss(0.08, 0.14, "", []), rule) == "medium"
    assert severity_from_loss(Loss(0.0, 0.12, "", []), rule) == "low"
    # shares are clipped to 0-1 and ordered
    loss = Loss(1.4, -0.2, "b", ["a"])
    assert (loss.low_share, loss.high_share) == (0.0, 1.0)


def test_a_finding_without_an_estimate_keeps_its_rule_and_says_why() -> None:
    f = Finding("x", "t", "high", {}, "h", loss_unknown="no capacity known")
    apply_loss_rule(f, parameters()["loss"])
    assert f.severity == "high" and "no capacity known" in f.severity_rule
    g = Finding("x", "t", "high", {}, "h", loss=Loss(0.01, 0.05, "b", ["a"]))
    apply_loss_rule(g, parameters()["loss"])
    assert g.severity == "low" and "1-5%" in g.severity_rule
    info = Finding("x", "t", "info", {}, "h", loss=Loss(0.5, 0.6, "b", []))
    apply_loss_rule(info, parameters()["loss"])
    assert info.severity == "info"


def test_a_rack_with_one_sending_node_crossed_all_it_sent(pair: Digest) -> None:
    # n2 received nothing, so nothing n1 sent can have stayed in rack r1: the crossed
    # share is measured (100 %), not bounded, and the loss range is narrow
    topo = _one(pair, "topology")
    assert topo.evidence["share_that_crossed_racks_at_least"] >= 0.95
    assert "All of it crossed" in topo.hint
    net = _one(pair, "network_bandwidth")
    assert net.evidence["share_crossed_bounds"] == "100%-100%"
    assert net.loss is not None
    assert 0.3 < net.loss.low_share < net.loss.high_share < 0.95
    assert net.severity == "high" and "from the estimated loss" in net.severity_rule
    assert any("waits for these transfers" in a for a in net.loss.assumptions)


def test_digest_json_and_report_carry_the_loss(pair: Digest) -> None:
    data = json.loads(pair.json_path.read_text())
    net = next(f for f in data["findings"] if f["factor"] == "network_bandwidth")
    loss = net["loss"]
    assert 0 <= loss["low_share"] <= loss["high_share"] <= 1
    assert loss["assumptions"] and loss["basis"]
    assert loss["text"].startswith("Removing this limit would save ")
    shared = next(f for f in data["findings"] if f["factor"] == "idle_cpu")
    # the recorded bed job has no procio lines (the job's own CPU time and tasks)
    assert shared["loss"] is None and "procio" in shared["loss_unknown"]
    html = pair.report_path.read_text()
    assert "Cost: removing this would save" in html and "assuming:" in html
    assert "Cost:</b> not estimated" in html
    lines = "\n".join(pair.summary_lines())
    assert "Removing this limit would save" in lines


def test_topology_without_partners_gives_the_bound_and_names_no_pattern(
    bed: Path, tmp_path: Path
) -> None:
    # srun -N 4 butterfly: each rack's two nodes received as much as they sent, so the
    # counters cannot tell whether anything crossed
    digest = build_digest(bed, "3", tmp_path / "bf", FIXTURES / "testbed-4n2r" / "topology.conf")
    f = _one(digest, "topology")
    assert "cannot tell" in f.hint and "butterfly" not in f.hint
    assert f.evidence["share_that_crossed_racks_at_least"] < 0.2
    assert f.loss is not None and f.loss.low_share < 0.05
    assert any("per-destination" in a for a in f.loss.assumptions)


def test_imbalance_loss_holds_the_programs_own_answer(bed: Path, tmp_path: Path) -> None:
    # butterfly --cycles 3 --comm-ms 3000 --compute-ms 2000 --imbalance 2: rank r computes
    # 2 x (1 + 2r/3) s (2, 3.3, 4.7, 6 s); spread evenly, 4 s each: 2 s of every ~9 s cycle
    # (3 s of messages + 6 s waiting for the last rank) saved, 22 %
    digest = build_digest(bed, "5", tmp_path / "imb", FIXTURES / "testbed-4n2r" / "topology.conf")
    f = _one(digest, "imbalance")
    assert f.loss is not None
    assert f.loss.low_share <= 2 / 9 <= f.loss.high_share
    # user CPU counts the waiting ranks' polling: the high end reads 1 - min/max
    assert f.loss.high_share == pytest.approx(1 - 10.0 / 20.7, abs=0.08)
    assert f.severity == "high"  # the true 22 % is over the 20 % threshold too


def test_simulated_infiniband_is_not_counted_twice(pair: Digest, tmp_path: Path) -> None:
    # the bed's ibsim.py copies each node's eth0 bytes into InfiniBand-like counters
    # (lines tagged backend=sim): the links' traffic and capacities stay the Ethernet ones
    fixture = FIXTURES / "testbed-3n2r-100M"
    spool = tmp_path / "spool"
    spool.mkdir()
    for f in fixture.glob("*.lp"):
        lines = f.read_text().splitlines()
        ib = []
        for line in lines:
            if line.startswith("net,") and "iface=eth0" in line:
                head, fields, ts = line.split(" ")
                host = head.split(",")[1]
                keep = [
                    x
                    for x in fields.split(",")
                    if x.split("=")[0] in ("tx_bytes_per_s", "rx_bytes_per_s")
                ]
                ib.append(f"ib,{host},device=simib0,port=1,backend=sim {','.join(keep)} {ts}")
        (spool / f.name).write_text("\n".join(lines + ib) + "\n")
    ingest_spool(tmp_path / "hushmon.duckdb", spool)
    digest = build_digest(
        tmp_path / "hushmon.duckdb", "1", tmp_path / "r", fixture / "topology.conf"
    )
    net, before = _one(digest, "network_bandwidth"), _one(pair, "network_bandwidth")
    assert net.evidence["link_capacity_Mbit_per_s"] == 100
    assert net.evidence["ceiling_MB_per_s"] == before.evidence["ceiling_MB_per_s"]
    assert net.loss is not None and before.loss is not None
    assert net.loss.low_share == pytest.approx(before.loss.low_share)
    assert net.severity == before.severity
