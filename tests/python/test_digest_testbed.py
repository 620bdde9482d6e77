"""The digest on real data from the test bed (no root needed): spools recorded
on `hushmon testbed up --nodes 4 --racks 2` (1 Gbit/s node links, 200 Mbit/s
uplinks) and on a bed with 512 MiB per node, trimmed to the jobs
(tests/fixtures/spool/README.md says how they were made)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hushmon.digest import fabric
from hushmon.digest.build import Digest, build_digest
from hushmon.digest.compare import compare_runs
from hushmon.digest.factors.base import Finding
from hushmon.paths import REPO_ROOT
from hushmon.report.screenshot import chromium_path, screenshot
from hushmon.store.ingest import ingest_spool

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "spool"
BED = FIXTURES / "testbed-4n2r"
TOPOLOGY = BED / "topology.conf"
# Slurm's job ids on the bed
BUTTERFLY, SNAKE, IMBALANCED = "3", "4", "5"
MATMUL = {1: "6", 2: "7", 4: "8"}
OUT_OF_CORE, FITS = "1", "2"


def _store(tmp: Path, fixture: Path) -> Path:
    spool = tmp / "spool"
    spool.mkdir()
    for f in fixture.glob("*.lp"):
        shutil.copy(f, spool / f.name)
    report = ingest_spool(tmp / "hushmon.duckdb", spool)
    assert report.rejected_lines == 0, report.rejected[:3]
    return tmp / "hushmon.duckdb"


@pytest.fixture(scope="module")
def bed_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("bed"), BED)


@pytest.fixture(scope="module")
def ooc_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("ooc"), FIXTURES / "testbed-ooc-512M")


@pytest.fixture(scope="module")
def butterfly(bed_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Digest:
    return build_digest(bed_db, BUTTERFLY, tmp_path_factory.mktemp("bf"), TOPOLOGY)


@pytest.fixture(scope="module")
def snake(bed_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Digest:
    return build_digest(bed_db, SNAKE, tmp_path_factory.mktemp("sn"), TOPOLOGY)


def _one(digest: Digest, factor: str) -> Finding:
    found = [f for f in digest.findings if f.factor == factor]
    assert len(found) == 1, [f.factor for f in digest.findings]
    return found[0]


@pytest.fixture
def no_slurm_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No topology.conf anywhere the digest looks (whatever bed this machine has up)."""
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setattr(fabric, "DEFAULT_SLURM_DIR", tmp_path / "no-slurm")


def test_butterfly_is_limited_by_the_uplink_and_says_whose_capacity(butterfly: Digest) -> None:
    assert butterfly.nodes == ["n1", "n2", "n3", "n4"]
    f = _one(butterfly, "network_bandwidth")
    # severity from the estimated loss (issue 21): the counters cannot tell how much of
    # a rack's traffic crossed (each rack's nodes received as much as they sent), so the
    # range starts near 0 and the finding is medium, not high
    assert f.severity == "medium"
    assert f.loss is not None and f.loss.low_share < 0.10 < f.loss.high_share
    ev = f.evidence
    # the uplink between the racks, 200 Mbit/s from topology.conf's LinkSpeed
    assert ev["link"].startswith("uplink of rack r")
    assert ev["link_capacity_Mbit_per_s"] == 200
    assert ev["link_capacity_MB_per_s"] == 25
    assert "topology.conf" in ev["link_capacity_source"]
    assert "LinkSpeed=200" in ev["link_capacity_source"]
    assert "upper bound" in f.hint and "traffic_is_upper_bound" in ev
    # measured on the bed: racks send 18-20 MB/s in message phases, 74-79 % of the uplink
    assert 0.65 < ev["ceiling_share_of_capacity"] < 0.95
    assert ev["share_of_message_periods_near_capacity"] >= 0.6
    assert ev["periods_near_capacity"].endswith(" s")
    # the nodes' own links: configured 1 Gbit/s, under 15 % used
    assert "net.capacity_bits_per_s = 1 Gbit/s" in ev["node_link_capacity_source"]
    assert "of 125.0 MB/s" in ev["busiest_node_link"]
    assert "at most 8% used" in f.hint or "at most 7% used" in f.hint
    assert f.span_s is not None


def test_snake_on_the_same_bed_has_a_weaker_topology_finding(
    butterfly: Digest, snake: Digest
) -> None:
    bf, sn = _one(butterfly, "topology"), _one(snake, "topology")
    # severity from the estimated loss: neither says how much crossed, both are medium;
    # snake's range is the narrower one (part of its traffic provably stayed inside)
    assert bf.severity == "medium" and sn.severity == "medium"
    assert bf.loss is not None and sn.loss is not None
    assert sn.loss.high_share < bf.loss.high_share
    assert "butterfly" not in bf.hint and "snake" not in sn.hint
    assert bf.evidence["share_that_may_cross_racks"] == 1.0
    # snake's racks sent more than their uplinks carry: at least ~19 % stayed inside
    assert sn.evidence["share_that_may_cross_racks"] < 0.9
    assert sn.evidence["rack_send_share_of_uplink"] > 1.05
    assert "stayed inside them" in sn.hint
    # snake's uplink may be full too, but that is a 'may': medium, not high
    assert _one(snake, "network_bandwidth").severity == "medium"


def test_compare_of_butterfly_and_snake_says_why(bed_db: Path, tmp_path: Path) -> None:
    cmp = compare_runs(bed_db, [BUTTERFLY, SNAKE], tmp_path / "cmp", topology=TOPOLOGY)
    assert cmp.side_by_side
    differs = {f.factor: f for f in cmp.findings}
    assert "topology" in differs
    f = differs["topology"]
    assert f.evidence["values"][f"{BUTTERFLY}@4"] == 1.0
    assert f.evidence["values"][f"{SNAKE}@4"] < 0.9
    assert f.evidence["severity_per_run"] == {BUTTERFLY: "medium", SNAKE: "medium"}
    # each run's own finding with its numbers, and the rates over the same links
    assert f"Job {BUTTERFLY}: [medium]" in f.hint and f"Job {SNAKE}: [medium]" in f.hint
    assert "MB/s" in f.hint and "over the same links" in f.hint
    data = json.loads(cmp.json_path.read_text())
    snake_run = next(r for r in data["runs"] if r["job"] == SNAKE)
    bf_run = next(r for r in data["runs"] if r["job"] == BUTTERFLY)
    # snake's neighbours share racks: it moves more per node over the same links
    assert (
        snake_run["network_send_bytes_per_s_per_node"] > bf_run["network_send_bytes_per_s_per_node"]
    )


def test_digest_json_records_racks_and_scopes(butterfly: Digest) -> None:
    data = json.loads(butterfly.json_path.read_text())
    fab = data["fabric"]
    assert fab["status"] == "known" and fab["source"] == str(TOPOLOGY)
    assert fab["job_racks"] == {"r1": ["n1", "n2"], "r2": ["n3", "n4"]}
    assert fab["uplink_bits_per_s"] == {"r1": 200e6, "r2": 200e6}
    sc = data["scopes"]
    assert sc["mode"] == "node" and sc["nodes_share_a_host"] is True
    node = {s for names in sc["node_scoped"].values() for s in names}
    assert "cpu.user_pct[cpu=total]" in node and "net.tx_bytes_per_s[iface=eth0]" in node
    assert "cpu.user_pct[cpu=total,scope=host]" in sc["host_wide"]
    assert not any("scope=host" in s for s in node)
    # analyzers read the node's own series where both exist, the host's where only it does
    assert sc["derived"]["cpu.user_pct"] == {"from": ["cpu.user_pct[cpu=total]"], "scope": "node"}
    assert sc["derived"]["swap.pages_per_s"]["scope"] == "host"
    assert sc["derived"]["network.tx_bytes_per_s"]["from"] == ["net.tx_bytes_per_s[iface=eth0]"]


def test_report_shows_racks_scopes_and_heat_maps(butterfly: Digest, tmp_path: Path) -> None:
    html = butterfly.report_path.read_text()
    for text in (
        "Network: links and racks",
        "Where the numbers come from",
        "host-wide",
        "cpu.user_pct per node and period",
        "network.tx_bytes_per_s per node and period",
        "State of the job in each period",
        "LinkSpeed=200",
    ):
        assert text in html, text
    if chromium_path() is None:
        pytest.skip("chromium not installed")
    png = screenshot(butterfly.report_path, tmp_path / "report.png")
    assert png.stat().st_size > 20_000


def test_rebuilt_later_the_report_uses_the_recorded_racks(
    bed_db: Path, tmp_path: Path, no_slurm_config: None
) -> None:
    out = tmp_path / "bf"
    first = build_digest(bed_db, BUTTERFLY, out, TOPOLOGY)
    again = build_digest(bed_db, BUTTERFLY, out)  # the bed (and its topology.conf) is gone
    fab = json.loads(again.json_path.read_text())["fabric"]
    assert fab["status"] == "known" and "earlier digest" in fab["source"]
    assert fab["origin"] == str(TOPOLOGY)
    assert _one(again, "network_bandwidth").evidence["link_capacity_MB_per_s"] == 25
    assert [f.severity for f in again.findings] == [f.severity for f in first.findings]


def test_without_racks_the_digest_says_so(
    bed_db: Path, tmp_path: Path, no_slurm_config: None
) -> None:
    digest = build_digest(bed_db, BUTTERFLY, tmp_path / "bf")
    fab = json.loads(digest.json_path.read_text())["fabric"]
    assert fab["status"] == "unknown" and fab["tried"]
    topo = _one(digest, "topology")
    assert "no topology.conf" in topo.evidence["racks"] and "--topology" in topo.hint
    # the node links alone are far from their 1 Gbit/s: no high network finding
    net = [f for f in digest.findings if f.factor == "network_bandwidth"]
    assert all(f.severity == "low" for f in net)
    for f in net:
        assert "net.capacity_bits_per_s" in f.evidence["link_capacity_source"]
    assert "Racks: unknown" in digest.report_path.read_text()


def test_idle_cpus_of_nodes_sharing_one_machine_are_not_called_idle(butterfly: Digest) -> None:
    f = _one(butterfly, "idle_cpu")
    assert f.title == "CPUs shared with other nodes of the machine"
    assert f.severity == "low"
    assert f.evidence["node_idle_pct"] > 60 and f.evidence["host_busy_pct"] > 85


def test_imbalance_option_names_the_busiest_node(bed_db: Path, tmp_path: Path) -> None:
    # srun -N 4 butterfly --imbalance 2: rank 3 (on n4) computes 3x as long as rank 0 (n1)
    digest = build_digest(bed_db, IMBALANCED, tmp_path / "imb", TOPOLOGY)
    f = _one(digest, "imbalance")
    assert f.evidence["busiest_node"] == "n4" and f.evidence["least_busy_node"] == "n1"
    assert f.evidence["balance_mean_over_max"] < 0.85
    assert "the node's own cgroup" in f.evidence["measured_by"]
    assert "poll" in f.hint  # the least busy node's ranks wait in the kernel


def test_matmul_at_1_2_4_nodes(bed_db: Path, tmp_path: Path) -> None:
    specs = [f"{job}@{n}" for n, job in MATMUL.items()]
    cmp = compare_runs(bed_db, specs, tmp_path / "mm", topology=TOPOLOGY)
    grown = {f.factor: f for f in cmp.findings}
    # at 4 nodes the ring crosses the 200 Mbit/s uplink; at 2 it stays in rack r1
    assert grown["topology"].evidence["values"] == {
        f"{MATMUL[1]}@1": 0.0,
        f"{MATMUL[2]}@2": 0.0,
        f"{MATMUL[4]}@4": 1.0,
    }
    assert "network_bandwidth" in grown
    dec = grown["decomposition"]
    assert dec.evidence["values"][f"{MATMUL[4]}@4"] > 0.4
    # the nodes share one 2-CPU machine: the drop per node is partly that, and it says so
    assert "share one machine" in dec.hint
    assert MATMUL[4] in dec.evidence["runs_on_a_saturated_shared_machine"]


def test_one_pair_across_a_100_mbit_uplink(tmp_path: Path) -> None:
    # testbed up --nodes 3 --racks 2 --uplink-rate 100mbit; srun -N 3 butterfly: rank 0 (n1)
    # and rank 2 (n3) exchange across racks, rank 1 (n2) sits out. One TCP flow each way
    # reaches 55-62 % of the uplink in the message periods (machine 97 % busy).
    fixture = FIXTURES / "testbed-3n2r-100M"
    db = _store(tmp_path, fixture)
    digest = build_digest(db, "1", tmp_path / "r", fixture / "topology.conf")
    f = _one(digest, "network_bandwidth")
    # severity from the estimated loss: n2 (rank 1) sat out, so all n1 sent crossed, and
    # 6 of 10 periods at 59 % of the uplink would move at the node links: high
    assert f.severity == "high"
    assert f.evidence["link_capacity_Mbit_per_s"] == 100
    assert "LinkSpeed=100" in f.evidence["link_capacity_source"]
    assert 0.5 < f.evidence["ceiling_share_of_capacity"] < 0.7
    assert _one(digest, "topology").severity == "high"


def test_out_of_core_under_a_memory_limit_without_swap(ooc_db: Path, tmp_path: Path) -> None:
    digest = build_digest(ooc_db, OUT_OF_CORE, tmp_path / "ooc")
    f = _one(digest, "disk_swap")
    assert f.title == "Memory at its limit: data streams through the disk"
    ev = f.evidence
    assert ev["node_memory_limit_MiB"] == 512
    assert ev["share_of_time_at_limit_with_disk_busy"] > 0.5
    assert ev["page_cache_MiB"] > 300
    assert ev["disk_MB_per_s"] > 100
    assert ev["swap"].startswith("no swap device") and ev["oom_kills"] == 0
    assert "host-wide" in ev["scopes"]
    assert "no swap device" in f.hint
    # the same program whose data fits in the node's page cache: disk I/O, not memory
    fits = build_digest(ooc_db, FITS, tmp_path / "fits")
    g = _one(fits, "disk_swap")
    assert g.title == "Disk I/O slows computation"
    assert g.evidence["iowait_scope"].startswith("host-wide")
