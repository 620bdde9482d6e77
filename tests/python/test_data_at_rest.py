"""Job data at rest: a job id from the data never leads a path out of the
data folder (``digest``, ``ingest --export``, ``compare``), and what holds
job data (the agent's spool files, the store and its write-ahead log,
reports, exports) is readable by its owner only: a second uid (setpriv)
cannot read any of it, even in a folder that is open to everyone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hushmon.datadir import MAX_COMPONENT_BYTES, data_dir, path_component
from hushmon.store.synthetic import Scenario, write_spool

HUSHMON = [sys.executable, "-m", "hushmon.cli"]
OTHER_UID = 65534  # nobody
TRAVERSAL = "../../.."
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a second uid needs root (setpriv)")


def hushmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HUSHMON, *args], capture_output=True, text=True, timeout=300, check=False
    )


def other_uid_reads(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
         "cat", str(path)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every uid may enter (pytest's own are 0700), so what keeps
    the second uid out is each file's own mode."""
    folder = Path(tempfile.mkdtemp(prefix="hm-at-rest-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def test_path_component_keeps_every_name_inside_its_folder() -> None:
    names = ["42", "42_7", "42+1", "n1.example.org", ".", "..", TRAVERSAL, "/etc/passwd",
             "", "%", "%2E", "a/b", "a%2Fb", "\x00", ".hidden", "é", "\udcff", "x" * 1000,
             "x" * 999 + "y"]  # fmt: skip
    shown = [path_component(n) for n in names]
    assert shown[:4] == ["42", "42_7", "42+1", "n1.example.org"]  # Slurm ids, hosts unchanged
    assert len(set(shown)) == len(names)  # two names never share a folder
    root = Path("/data/reports")
    for name, comp in zip(names, shown, strict=True):
        assert "/" not in comp and "\x00" not in comp and comp not in (".", "..", ""), name
        assert not comp.startswith(".") and len(comp.encode()) <= MAX_COMPONENT_BYTES
        assert (root / comp).resolve().parent == root
    assert data_dir("/data").reports(TRAVERSAL) == Path("/data/reports/%2E.%2F..%2F..")


def test_a_job_id_from_the_data_writes_inside_the_data_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    data = outside / "a" / "b" / "data"
    write_spool(Scenario(job=TRAVERSAL, nodes=2, seconds=30), data / "spool")
    before = sorted(p for p in outside.rglob("*") if not p.is_relative_to(data))
    r = hushmon("ingest", "--data-dir", str(data))
    assert r.returncode == 0, r.stderr
    r = hushmon("digest", TRAVERSAL, "--data-dir", str(data))
    assert r.returncode == 0, r.stderr
    r = hushmon("ingest", "--data-dir", str(data), "--export", TRAVERSAL, "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert sorted(p for p in outside.rglob("*") if not p.is_relative_to(data)) == before
    report = data / "reports" / path_component(TRAVERSAL)
    assert (report / "report.html").is_file() and (report / "digest.json").is_file()
    assert (report / "samples.csv").is_file()
    assert [p.name for p in (data / "reports").iterdir()] == [path_component(TRAVERSAL)]


@needs_root
def test_store_reports_and_exports_are_the_owners_only(open_folder: Path) -> None:
    data = open_folder / "data"
    data.mkdir(mode=0o755)  # a site's shared folder: the files must keep the data in
    write_spool(Scenario(job="7", nodes=2, seconds=30), data / "spool")
    for args in (["ingest"], ["digest", "7"], ["ingest", "--export", "7", "--format", "csv"]):
        r = hushmon(*args, "--data-dir", str(data))
        assert r.returncode == 0, r.stderr
    store = data / "hushmon.duckdb"
    job_files = [store, *sorted((data / "reports" / "7").iterdir())]
    assert len(job_files) >= 4, job_files  # report.html, digest.json, samples.csv, vectors
    for path in job_files:
        mode = path.stat().st_mode & 0o777
        assert mode & 0o077 == 0, f"{path} is {mode:04o}"
        refused = other_uid_reads(path)
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, path
    assert (data / "reports").stat().st_mode & 0o077 == 0
    # the check can fail: a file left open to all is read by the same uid
    control = open_folder / "open.txt"
    control.write_text("open\n")
    control.chmod(0o644)
    assert other_uid_reads(control).stdout == "open\n"


@needs_root
def test_a_data_folder_hushmon_makes_is_private_and_an_old_store_loses_world_access(
    open_folder: Path,
) -> None:
    data = open_folder / "fresh"
    write_spool(Scenario(job="8", nodes=1, seconds=5), open_folder / "spool")
    r = hushmon("ingest", "--data-dir", str(data), "--spool", str(open_folder / "spool"))
    assert r.returncode == 0, r.stderr
    store = data / "hushmon.duckdb"
    assert store.stat().st_mode & 0o077 == 0
    store.chmod(0o644)  # as a store made before this release
    r = hushmon("ingest", "--data-dir", str(data), "--spool", str(open_folder / "spool"))
    assert r.returncode == 0, r.stderr
    assert store.stat().st_mode & 0o777 == 0o640  # the world's bits off; the group's kept
    assert other_uid_reads(store).returncode != 0


@needs_root
def test_agent_spool_files_are_unreadable_to_another_uid(bin_dir: Path, open_folder: Path) -> None:
    spool = open_folder / "spool" / "n1"
    proc = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--once", "--sink", "spool", "--spool-dir", str(spool),
         "--sources", "mem,load"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    files = list(spool.iterdir())
    assert files and all(f.name.endswith(".lp") for f in files)
    assert spool.stat().st_mode & 0o777 == 0o700
    for f in files:
        assert f.stat().st_mode & 0o777 == 0o600
        spool.chmod(0o755)  # even where the folder is opened, each file stays closed
        refused = other_uid_reads(f)
        assert refused.returncode != 0 and "Permission denied" in refused.stderr
        assert f.read_text().count("\n") >= 1  # its owner reads it


def test_ingest_list_shows_a_hostile_job_id_escaped(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_spool(Scenario(job="j\x1b]0;owned\x07\x1b[2J", nodes=1, seconds=3), data / "spool")
    assert hushmon("ingest", "--data-dir", str(data)).returncode == 0
    r = hushmon("ingest", "--list", "--data-dir", str(data))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout + r.stderr
    assert r"j\x1b]0;owned\x07\x1b[2J" + "\t1 node(s)" in r.stdout + r.stderr
