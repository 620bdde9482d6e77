"""hushmon export --cc-archive: stored jobs in ClusterCockpit's job-archive
layout (version 3), validated against copies of the published JSON schemas
(ccschema.py, tests/fixtures/ccarchive-schemas/), on a synthetic job
ingested into a real store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccschema import CLUSTER, DATA, META, errors
from hushmon.history.records import JobRecord, record_job
from hushmon.store.synthetic import START_NS, Scenario, synthetic_store

JOB = "1034871"  # the layout's own example id: 1034/871


def _hushmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hushmon.cli", *args],
                          capture_output=True, text=True, timeout=180, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cc")
    # 20 half-second periods: the archive's step is whole seconds
    sc = Scenario(nodes=3, seconds=20, job=JOB, period_ns=500_000_000, slow_node=1)
    store = synthetic_store(sc, folder)
    record_job(store, [JobRecord(job=JOB, owner="alice", name="cg", state="COMPLETED",
                                 start_ns=START_NS, tags=" load_imbalance ")])  # fmt: skip
    return folder


def test_archive_layout_and_schemas(data: Path, tmp_path: Path) -> None:
    root = tmp_path / "archive"
    out = _hushmon("export", "--cc-archive", str(root), JOB, "--data-dir", str(data),
                   "--cluster", "bed", "--json", "-")  # fmt: skip
    assert out.returncode == 0, out.stderr
    written = json.loads(out.stdout)
    folder = root / "bed" / "1034" / "871" / str(START_NS // 10**9)
    assert written["jobs"] == {JOB: str(folder)}
    assert (root / "version.txt").read_text() == "3\n"  # cc-backend's archive.Version
    meta = json.loads((folder / "meta.json").read_text())
    jobdata = json.loads((folder / "data.json").read_text())
    cluster = json.loads((root / "bed" / "cluster.json").read_text())
    assert errors(meta, META) == []
    assert errors(cluster, CLUSTER) == []
    # data.json: valid but for the required metrics hushmon did not measure
    # (no invented series), which meta.json names
    not_measured = set(meta["metaData"]["notMeasured"].split()) | {"filesystems"}
    assert errors(jobdata, DATA) == [f"$: missing {n!r}" for n in DATA["required"]
                                     if n in not_measured]  # fmt: skip
    assert meta["shared"] == "none" and "exclusive" not in meta
    assert (meta["jobId"], meta["user"], meta["numNodes"], meta["jobState"]) == (
        1034871, "alice", 3, "completed")  # fmt: skip
    assert meta["duration"] == 10 and meta["startTime"] == START_NS // 10**9
    assert meta["tags"] == [{"name": "load_imbalance", "type": "hushmon"}]
    assert "mem_bw" in meta["metaData"]["notMeasured"]
    # the synthetic job's PMU measured FLOPS: a real flops_any, not a zero
    assert meta["statistics"]["flops_any"]["max"] > 0
    cpu = jobdata["cpu_user"]["node"]
    assert cpu["timestep"] == 1 and len(cpu["series"]) == 3
    assert {len(s["data"]) for s in cpu["series"]} == {10}  # 20 half-second periods: 10 steps
    slow = next(s for s in jobdata["flops_any"]["node"]["series"] if s["hostname"] == "node001")
    other = next(s for s in jobdata["flops_any"]["node"]["series"] if s["hostname"] == "node000")
    assert slow["statistics"]["avg"] > 1.5 * other["statistics"]["avg"]


def test_the_checker_catches_a_broken_document(data: Path, tmp_path: Path) -> None:
    root = tmp_path / "archive"
    assert (
        _hushmon("export", "--cc-archive", str(root), JOB, "--data-dir", str(data)).returncode == 0
    )
    meta_path = next(root.rglob("meta.json"))
    meta = json.loads(meta_path.read_text())
    del meta["statistics"]["mem_used"]
    meta["jobState"] = "stopped"  # archive version 2's, gone from version 3
    meta["duration"] = 0
    meta["shared"] = 1  # version 2's "exclusive" as a number
    meta["statistics"]["cpu_load"]["unit"] = {"base_unit": "load"}
    meta["tags"] = [{"name": "a", "type": "t"}, {"name": "a", "type": "t"}]
    found = errors(meta, META)
    assert "$.statistics: missing 'mem_used'" in found, found
    assert any("'stopped' not in" in e for e in found), found
    assert "$.duration: 0 <= 0" in found and "$.shared: int is not string" in found, found
    assert any(e.startswith("$.statistics.cpu_load.unit.base_unit: 'load'") for e in found)
    assert "$.tags: items are not unique" in found, found


def test_an_archive_of_another_version_is_refused(data: Path, tmp_path: Path) -> None:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "version.txt").write_text("2\n")
    out = _hushmon("export", "--cc-archive", str(root), JOB, "--data-dir", str(data))
    assert out.returncode != 0 and "version 2 job archive" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in root.iterdir()) == ["version.txt"]


def test_bad_input_is_one_line(data: Path, tmp_path: Path) -> None:
    out = _hushmon("export", "--cc-archive", str(tmp_path / "a"), "x1", "--data-dir", str(data))
    assert out.returncode != 0 and "integer job id" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "a").exists()
    out = _hushmon("export", "--cc-archive", str(tmp_path / "a"), JOB, "--cluster", "a/b",
                   "--data-dir", str(data))  # fmt: skip
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
