"""The issue's acceptance run: ``hushmon run -- mpirun -np 2 butterfly ...``
with the real agent produces a report and a digest.json with job, nodes,
sensors, states and findings (each with factor, severity, evidence), and the
page renders in headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from hushmon.runner import launcher, mpirun_command

# One try's limit: the run takes about 6 s, 30-60 s on a loaded 2-core box.
RUN_TIMEOUT_S = 150

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def agent(bin_dir: Path) -> Path:
    path = bin_dir / "hushmon-agent"
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} not built yet")
    pytest.importorskip("hushmon.digest.build", reason="the digest is not in the tree yet")
    return path


@pytest.fixture(scope="module")
def butterfly_run(tmp_path_factory: pytest.TempPathFactory, bin_dir: Path, agent: Path):
    base = tmp_path_factory.mktemp("run")
    data, summary = base / "data", base / "run.json"
    # About 6 s: phases of messages (TCP, so the loopback interface carries
    # them) and compute, sampled at 250 ms.
    butterfly = [
        str(bin_dir / "butterfly"), "--length", "1M", "--cycles", "4", "--comm-ms", "700",
        "--compute-ms", "700",
    ]  # fmt: skip
    command = mpirun_command(2, butterfly, tcp=True)
    argv = [
        sys.executable, "-m", "hushmon.cli", "run", "--data-dir", str(data),
        "--job", "bfly", "--period", "250", "--agent", str(agent),
        "--json", str(summary), "--", *command,
    ]  # fmt: skip
    out = _run_ending_the_job(argv)
    if out.returncode == -signal.SIGTERM and "verified" in out.stdout and _is_hydra():
        # MPICH 4.0 over UCX 1.13's TCP transport sometimes never returns
        # from MPI_Finalize after the work is done and verified: one rank
        # waits for its endpoint flush while its peer already sits in the
        # PMI barrier (openucx/ucx#8738; about 1 run in 20 here). Not ours to
        # fix; a second try tells it from a hang of our own.
        warnings.warn(
            "butterfly under MPICH/UCX TCP hung in MPI_Finalize after its verified "
            "result (openucx/ucx#8738); ran it again",
            stacklevel=1,
        )
        shutil.rmtree(data, ignore_errors=True)
        summary.unlink(missing_ok=True)
        out = _run_ending_the_job(argv)
    return out, json.loads(summary.read_text()) if summary.exists() else None, data


def _is_hydra() -> bool:
    return launcher().kind == "hydra"


def _run_ending_the_job(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Runs ``hushmon run``; past RUN_TIMEOUT_S it gets SIGTERM, which it
    passes to the job's own session and then kills that session, so no
    launcher or rank outlives the test (a SIGKILL to hushmon run alone
    would leave them spinning on the box's two cores, as it once did).
    A run ended that way returns -SIGTERM."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
        return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        return subprocess.CompletedProcess(argv, -signal.SIGTERM, stdout, stderr)


def test_run_reports_success_and_paths(butterfly_run) -> None:
    out, result, data = butterfly_run
    assert out.returncode == 0, out.stderr
    assert "butterfly: 2 ranks" in out.stdout and "verified" in out.stdout
    assert result["agent"] == "embedded" and result["exit_code"] == 0
    assert result["digest"] is not None, out.stderr
    assert "diagnosis:" in out.stderr
    assert f"report: {result['digest']['report']}" in out.stderr  # the path is printed
    assert Path(result["digest"]["report"]).parent == data / "reports" / "bfly"


def test_digest_json_has_what_the_issue_asks(butterfly_run) -> None:
    _out, result, _data = butterfly_run
    digest = json.loads(Path(result["digest"]["json"]).read_text())
    for key in ("job", "nodes", "sensors", "states", "findings"):
        assert key in digest, f"digest.json lacks {key!r}"
    assert digest["job"] == "bfly" or digest["job"].get("id") == "bfly"
    assert len(digest["nodes"]) >= 1
    assert len(digest["sensors"]) > 0
    for finding in digest["findings"]:
        for key in ("factor", "severity", "evidence"):
            assert key in finding, f"finding lacks {key!r}: {finding}"
    assert result["digest"]["findings"] == len(digest["findings"])


def test_report_renders_in_chromium(butterfly_run, tmp_path: Path) -> None:
    from hushmon.report.screenshot import screenshot

    _out, result, _data = butterfly_run
    report = Path(result["digest"]["report"])
    html = report.read_text()
    assert "<svg" in html  # plots are inline
    for external in ('src="http', "src='http", 'href="http', "url(http"):
        assert external not in html, f"the report must not load {external}..."
    png = tmp_path / "report.png"
    screenshot(report, png)
    assert png.stat().st_size > 10_000
