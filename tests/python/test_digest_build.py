"""The digest end to end on a synthetic job: JSON contract, exports, states, report."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from hushmon import cli
from hushmon.digest.build import Digest, build_digest
from hushmon.report.screenshot import chromium_path, screenshot
from hushmon.store.synthetic import Scenario, synthetic_store

SC = Scenario(nodes=4, seconds=200, job="42", network="saturated", swap_phases=[(120, 170)])


@pytest.fixture(scope="module")
def digest(tmp_path_factory: pytest.TempPathFactory) -> Digest:
    tmp = tmp_path_factory.mktemp("digest")
    return build_digest(synthetic_store(SC, tmp), "42", tmp / "report")


def test_json_has_the_contract(digest: Digest) -> None:
    data = json.loads(digest.json_path.read_text())
    assert data["job"] == "42"
    assert data["nodes"] == [f"node{i:03d}" for i in range(4)]
    names = {s["name"] for s in data["sensors"]}
    assert {"cpu.user_pct[cpu=total]", "network.tx_bytes_per_s", "swap.pages_per_s"} <= names
    assert data["periods"] == 200 and data["period_s"] == 1.0
    per_node = {s["name"]: s["node_means"] for s in data["sensors"]}
    assert len(per_node["cpu.user_pct"]) == 4 and all(v > 50 for v in per_node["cpu.user_pct"])
    factors = {f["factor"] for f in data["findings"]}
    assert {"network_bandwidth", "disk_swap"} <= factors
    for f in data["findings"]:
        assert f["severity"] in ("high", "medium", "low", "info")
        assert f["evidence"] and f["hint"]
    skipped = {s["factor"]: s["reason"] for s in data["skipped"]}
    gpu = {"gpu_idle", "gpu_memory", "gpu_throttle", "gpu_transfer"}  # a job without GPUs
    # energy, power_cap: no RAPL, GPU power or thermal counters in the synthetic job;
    # roofline: FLOPs but no memory traffic
    assert set(skipped) - gpu == {
        "decomposition",
        "app_timeline",
        "energy",
        "power_cap",
        "roofline",
    }
    assert skipped["roofline"] == "missing_sensor"
    assert all(skipped[f] == "missing_sensor" for f in gpu)
    assert skipped["app_timeline"] == "not_applicable"  # no libhushmon data
    corr = data["correlation"]
    # one row and column per sensor: a sensor listed twice would correlate 1.0 with itself
    assert len(corr["sensors"]) == len(set(corr["sensors"])) >= 3
    assert len(corr["matrix"]) == len(corr["sensors"])
    assert all(len(row) == len(corr["sensors"]) for row in corr["matrix"])
    assert "cpu.system_pct" in corr["sensors"]


def test_states_separate_the_swapping_phase(digest: Digest) -> None:
    states = digest.states.states
    assert len(states) >= 2
    swap_state = digest.states.labels[120:170]
    # one state covers (almost) exactly the swapping periods
    main = max(set(swap_state.tolist()), key=swap_state.tolist().count)
    assert (swap_state == main).mean() > 0.9
    assert (digest.states.labels[:120] != main).mean() > 0.9
    described = states[main].description
    assert "swapping" in described and "high" in described
    assert sum(s.share for s in states) == pytest.approx(1.0)


def test_vector_exports_agree(digest: Digest) -> None:
    csv = pacsv.read_csv(digest.exports["vectors_csv"])
    parquet = pq.read_table(digest.exports["vectors_parquet"])
    assert csv.num_rows == parquet.num_rows == 200
    assert csv.column_names == parquet.column_names
    assert "network.tx_bytes_per_s:max" in csv.column_names
    arff = digest.exports["vectors_arff"].read_text().splitlines()
    attrs = [line for line in arff if line.startswith("@ATTRIBUTE")]
    assert len(attrs) == len(csv.column_names)
    data = arff[arff.index("@DATA") + 1 :]
    assert len(data) == 200 and all(len(r.split(",")) == len(attrs) for r in data)


def test_summary_lines_lead_with_the_worst(digest: Digest) -> None:
    lines = digest.summary_lines()
    assert lines[0].startswith("job 42: 4 node(s), 200 s")
    assert lines[1].startswith("[high]")
    assert lines[-1] == f"report: {digest.report_path}"


@pytest.mark.skipif(chromium_path() is None, reason="chromium not installed")
def test_report_renders_in_headless_chromium(digest: Digest, tmp_path: Path) -> None:
    html = digest.report_path.read_text()
    # self-contained: nothing to fetch (SVG namespace URIs are names, not requests)
    for external in ('src="http', "src='http", 'href="http', "<link", "<script", "@import"):
        assert external not in html
    png = screenshot(digest.report_path, tmp_path / "report.png", height=3000)
    assert png.stat().st_size > 50_000  # a real page, not a blank one


def test_digest_cli(digest: Digest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = digest.out_dir.parent / "hushmon.duckdb"
    base = ["digest", "--db", str(db)]
    assert cli.main([*base, "42", "--out", str(tmp_path), "--json", "-"]) == 0
    captured = capsys.readouterr()  # --json -: stdout is the JSON alone
    assert json.loads(captured.out)["job"] == "42" and "report:" in captured.err
    assert cli.main([*base, "nope"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "hushmon: job 'nope' is not in the store (known jobs: 42)"
