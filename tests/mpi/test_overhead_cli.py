"""hushmon overhead end to end: a short study (ep and is, class S, 2 runs,
no monitoring and hushmon-agent) finishes, prints the table, writes the
report and the JSON, leaves no agent behind; bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi


def hushmon(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hushmon.cli", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, "HUSHMON_DATA": os.environ.get("HUSHMON_DATA", "/nonexistent")},
    )  # fmt: skip


def agents_using(folder: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-af", str(folder)], capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if "hushmon-agent" in ln]


def test_short_study_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "study"
    r = hushmon(
        "overhead", "--kernels", "ep,is", "--config", "1-2-S", "--runs", "2",
        "--modes", "none,hushmon", "--settle-s", "0.5", "--period-s", "0.1",
        "--out", str(out), "--json", "-",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout is the JSON alone
    assert "Traceback" not in r.stderr
    # progress: every run with the total
    assert "[8/8]" in r.stderr and "min left" in r.stderr
    assert "hushmon: % slowdown vs none" in r.stderr
    runs = doc["runs"]
    assert len(runs) == 8
    assert all(run["time_s"] and run["time_s"] > 0 for run in runs)
    per_cell = {(run["kernel"], run["mode"]) for run in runs}
    assert per_cell == {(k, m) for k in ("ep", "is") for m in ("none", "hushmon")}
    rows = {(s["kernel"], s["config"], s["mode"]) for s in doc["analysis"]["slowdowns"]}
    assert rows == {("ep", "1-2-S", "hushmon"), ("is", "1-2-S", "hushmon")}
    for s in doc["analysis"]["slowdowns"]:
        assert s["n"] == 2 and s["n_base"] == 2
        assert s["mean_pct"] is not None
    # The agent really ran during its runs: it wrote samples to its spool.
    spools = list((out / "runs").glob("agent-*-hushmon/spool"))
    assert spools and any(f.stat().st_size > 0 for s in spools for f in s.rglob("*") if f.is_file())
    assert agents_using(out) == []
    (usage,) = doc["agent_usage"]  # the baseline has no agent
    assert usage["mode"] == "hushmon" and usage["starts"] >= 1
    # At 0.1 s the agent samples several times in each of its windows (at
    # the default 1 s a window of two class S runs may hold no sample, and
    # the agent's CPU then reads 0: the study says so in its notes).
    assert usage["cpu_s"] > 0 and 0 < usage["cpu_pct"] < 100
    assert "% of one CPU" in r.stderr
    report = Path(doc["report"]).read_text()
    assert "<svg" in report and "Slowdown" in report and "Anomalous runs" in report
    assert json.loads((out / "overhead.json").read_text())["settings"]["runs"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kernels", "ep,bt"], "unknown 'bt'"),
        (["--modes", "hushmon"], "must include none"),
        (["--modes", "none,zabbix"], "unknown 'zabbix'"),
        (["--config", "4-1-S"], "multi-node test bed"),
        (["--config", "1-2-C"], "class C"),
        (["--level", "1.5"], "--level"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    r = hushmon("overhead", *args, "--out", str(tmp_path / "x"), timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not (tmp_path / "x").exists()


def test_bad_runs_value_is_a_usage_error() -> None:
    r = hushmon("overhead", "--runs", "0", timeout=60)
    assert r.returncode == 2 and "--runs: must be positive" in r.stderr
