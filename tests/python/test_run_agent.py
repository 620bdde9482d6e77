"""``hushmon run`` with the real ``hushmon-agent`` in embedded mode: the job's
samples reach the spool and the store, the agent is stopped afterwards, and
Ctrl-C keeps what was gathered. Skips only while the agent is not built."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until


@pytest.fixture(scope="module")
def agent(bin_dir: Path) -> Path:
    path = bin_dir / "hushmon-agent"
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} not built yet")
    return path


def hushmon_run_cmd(data: Path, summary: Path, agent: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "hushmon.cli", "run", "--data-dir", str(data),
        "--agent", str(agent), "--period", "250", "--json", str(summary), *args,
    ]  # fmt: skip


def job_lines(data: Path, job: str) -> list[str]:
    lines = []
    for path in (data / "spool").glob("*.lp*"):
        try:
            text = path.read_text()
        except FileNotFoundError:  # an open file closed (renamed) while the job runs
            continue
        lines += [ln for ln in text.splitlines() if f"job={job} " in ln]
    return lines


def test_sleep_job_is_sampled_stored_and_agent_stopped(tmp_path: Path, agent: Path) -> None:
    data, summary = tmp_path / "data", tmp_path / "run.json"
    cmd = hushmon_run_cmd(data, summary, agent, "--job", "real1", "--no-digest", "--", "sleep", "2")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr
    result = json.loads(summary.read_text())
    assert result["agent"] == "embedded" and result["warnings"] == []
    # Every 250 ms period of the command is marked with the job, plus the
    # one that closes the interval it ended in.
    periods = result["duration_s"] / 0.25
    assert periods - 2 <= len(job_lines(data, "real1")) <= periods + 3
    assert not list((data / "spool").glob("*.lp.open")), "flush/stop must close the spool"
    assert not (data / "run" / "agent.sock").exists(), "the embedded agent must be stopped"
    ingest = result["ingest"]
    assert ingest is not None and "real1" in ingest["jobs"]
    assert ingest["values_stored"] > 0 and ingest["rejected_lines"] == 0


def test_ctrl_c_with_the_real_agent_keeps_the_data(tmp_path: Path, agent: Path) -> None:
    data, summary = tmp_path / "data", tmp_path / "run.json"
    marker = tmp_path / "started"
    cmd = hushmon_run_cmd(
        data, summary, agent, "--job", "real2", "--no-digest",
        "--", "sh", "-c", f"touch {marker}; sleep 3600",
    )  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(marker.exists, "the job started", timeout_s=90)
    # 4 periods of the job in the spool (about 1 s alone; longer on a loaded machine)
    wait_until(lambda: len(job_lines(data, "real2")) >= 4, "4 sampled periods of the job")
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=180)  # the job itself would run an hour
    assert proc.returncode == 130, err
    result = json.loads(summary.read_text())
    assert result["interrupted_by"] == "SIGINT"
    assert len(job_lines(data, "real2")) >= 4
    assert "real2" in result["ingest"]["jobs"]
