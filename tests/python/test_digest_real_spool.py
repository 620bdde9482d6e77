"""The store and the digest on spool files written by the real agent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hushmon.digest.build import build_digest
from hushmon.digest.factors.base import SkipReason
from hushmon.paths import REPO_ROOT
from hushmon.store.ingest import ingest_spool

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "spool" / "butterfly-1node"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("real")
    shutil.copytree(FIXTURE, tmp / "spool")
    report = ingest_spool(tmp / "hushmon.duckdb", tmp / "spool")
    assert report.rejected_lines == 0, report.rejected[:3]
    assert report.jobs == ["bf1"]
    assert report.values_stored > 5000
    return tmp / "hushmon.duckdb"


def test_real_agent_data_gives_a_complete_digest(store: Path, tmp_path: Path) -> None:
    digest = build_digest(store, "bf1", tmp_path)
    data = json.loads(digest.json_path.read_text())
    assert data["job"] == "bf1" and data["nodes"] == ["vm"]
    names = {s["name"] for s in data["sensors"]}
    # the agent's names (docs/formats.md) and the derived sensors built from them
    assert {
        "cpu.user_pct[cpu=total]",
        "net.tx_bytes_per_s[iface=lo]",
        "vm.pswpin_per_s",
        "disk.busy_pct[device=vda]",
        "cpu.user_pct",
        "network.tx_bytes_per_s",
        "swap.pages_per_s",
        "disk.bytes_per_s",
    } <= names
    assert not any(n.startswith("hushmon_agent.") for n in names)  # the agent's own cost
    assert data["periods"] >= 80 and data["states"]["states"]
    skipped = {s.factor: SkipReason(s.reason) for s in digest.skipped}
    # one node: imbalance cannot apply, and says so; topology sees only the ranks'
    # TCP messages over loopback and says that nothing left the node
    assert skipped["imbalance"] is SkipReason.NOT_APPLICABLE
    (topo,) = [f for f in digest.findings if f.factor == "topology"]
    assert topo.severity == "info" and "loopback" in topo.hint
    assert topo.evidence["loopback_MB_per_s_peak"] > 5  # 19 MB/s in this recording
    assert skipped["decomposition"] is SkipReason.NEEDS_SEVERAL_RUNS
    for f in data["findings"]:
        assert f["factor"] and f["severity"] and f["evidence"]
