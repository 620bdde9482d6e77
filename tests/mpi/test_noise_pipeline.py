"""``hushmon noise`` end to end on a short configuration: detect (injector and
a noise command), sweep with the A/A control, report rebuilt from the raw
files, and bad input leaving no process behind. Verdicts are not asserted
for small budgets on this noisy machine: only that they are complete and
consistent with the data kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi

VERDICT_KEYS = {"detected", "level", "p_value", "effect", "wall_seconds", "evidence", "runs"}
# nice 0: the tests must not push other work on the machine aside
SHORT = ["--run-seconds", "1.2", "--seed", "5", "--nice", "0", "--no-report"]


def hushmon(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hushmon.cli", *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=dict(os.environ),
    )  # fmt: skip


def leftovers(marker: Path) -> list[str]:
    """Processes whose command line mentions the test's directory."""
    out = subprocess.run(["pgrep", "-af", str(marker)], capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if "pgrep" not in ln]


def test_detect_end_to_end_and_report_rebuild(tmp_path: Path) -> None:
    out = tmp_path / "study"
    r = hushmon("noise", "detect", "--level", "2", "--budget", "10", "--out", str(out),
                "--json", "-", *SHORT[:-1])  # fmt: skip
    assert r.returncode == 0, r.stderr
    verdict = json.loads(r.stdout)
    assert verdict.keys() >= VERDICT_KEYS
    assert verdict["level"] == 2
    assert isinstance(verdict["detected"], bool)
    assert verdict["runs"]["clean"] + verdict["runs"]["noisy"] >= 2
    # The budget is checked before each run: one run may start just before it
    # ends, and on a loaded machine mpirun alone can take seconds.
    assert verdict["wall_seconds"] <= 10 + 30
    study = json.loads((out / "study.json").read_text())
    noisy_dirs = sorted((out / "runs").glob("*-noisy"))
    clean_dirs = sorted((out / "runs").glob("*-clean"))
    assert len(noisy_dirs) == verdict["runs"]["noisy"]
    assert len(clean_dirs) == verdict["runs"]["clean"]
    for d in noisy_dirs:  # the injector's activation log and duty check are kept
        assert (d / "inject.log").is_file() and (d / "inject.json").is_file()
        assert json.loads((d / "inject.json").read_text())["level_pct"] == 2
    for d in noisy_dirs + clean_dirs:
        assert (d / "events.bin").is_file() and (d / "detect.json").is_file()
    assert (out / "report.html").is_file()
    # rebuilding from the raw files gives the same verdict
    before = study["verdict"]
    r2 = hushmon("noise", "report", str(out))
    assert r2.returncode == 0, r2.stderr
    after = json.loads((out / "study.json").read_text())["verdict"]
    assert after["detected"] == before["detected"]
    assert after["p_value"] == pytest.approx(before["p_value"])
    html = (out / "report.html").read_text()
    assert "<svg" in html
    assert "<script" not in html and "<link" not in html  # self-contained
    assert not leftovers(out)


def test_sweep_with_aa_control(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    r = hushmon("noise", "sweep", "--levels", "1,0", "--budget", "7", "--aa-replays", "50",
                "--out", str(out), "--json", "-", *SHORT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert [it["level"] for it in result["levels"]] == [1, 0]
    aa = result["aa"]
    assert aa["pool_clean_runs"] >= 1
    if aa["trials"]:
        assert 0 <= aa["rate"] <= 1 and aa["detections"] <= aa["trials"]
    r2 = hushmon("noise", "report", str(out))
    assert r2.returncode == 0, r2.stderr
    assert (out / "report.html").is_file()
    assert (out / "level-1" / "report.html").is_file()


def test_noise_cmd_runs_beside_the_detector(tmp_path: Path) -> None:
    out = tmp_path / "cmd"
    marker = tmp_path / "agent-ran"
    cmd = f"touch {marker}; exec sleep 600"
    r = hushmon("noise", "detect", "--noise-cmd", cmd, "--budget", "6", "--out", str(out),
                *SHORT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    study = json.loads((out / "study.json").read_text())
    assert study["verdict"]["noise_cmd"] == cmd
    if study["verdict"]["runs"]["noisy"]:
        assert marker.exists()
    assert not leftovers(tmp_path)  # the agent's sleep was ended with its group


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--level", "150"], "percentage in 0..100"),
        (["--level", "-3"], "percentage in 0..100"),
        (["--level", "1", "--noise-cmd", "true"], "either --level or --noise-cmd"),
        ([], "give --level"),
        (["--level", "1", "--alpha", "2"], "--alpha"),
        (["--level", "1", "--np", "1"], "at least 2 processes"),
        (["--level", "1", "--noise-phase", "0"], "--noise-phase goes with --noise-cmd"),
        (["--noise-cmd", "true", "--noise-phase", "1.5"], "--noise-phase goes with"),
    ],
)
def test_detect_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    r = hushmon("noise", "detect", *args, "--out", str(tmp_path / "x"), "--budget", "5")
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_op_and_failing_noise_cmd_leave_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "op"
    r = hushmon("noise", "detect", "--level", "1", "--op", "nonesuch", "--budget", "10",
                "--out", str(out), *SHORT)  # fmt: skip
    assert r.returncode != 0
    assert "unknown operation 'nonesuch'" in r.stderr
    assert "Traceback" not in r.stderr
    out2 = tmp_path / "cmd"
    r = hushmon("noise", "detect", "--noise-cmd", "echo cannot start >&2; exit 3",
                "--budget", "15", "--out", str(out2), *SHORT)  # fmt: skip
    assert r.returncode != 0
    assert "exited at start (exit 3): cannot start" in r.stderr
    assert not leftovers(tmp_path)


def test_report_of_a_directory_without_a_study(tmp_path: Path) -> None:
    r = hushmon("noise", "report", str(tmp_path))
    assert r.returncode == 2
    assert "holds no noise study" in r.stderr


def test_calibrate_short(tmp_path: Path) -> None:
    out = tmp_path / "cal"
    args = ["--ops", "barrier,alltoall", "--sizes", "2K", "--runs", "2", "--run-seconds", "0.5",
            "--nice", "0"]  # fmt: skip
    r = hushmon("noise", "calibrate", *args, "--out", str(out), "--json", "-")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert [(c["op"], c["size"]) for c in result["configs"]] == [
        ("barrier", "2K"),
        ("alltoall", "2K"),
    ]
    for c in result["configs"]:
        assert c["cv"] >= 0 and len(c["per_op_ns"]) == 2
        assert c["reproducible"] == (c["cv"] < result["cv_max"])
    assert result["best"]["op"] in ("barrier", "alltoall")
    assert (out / "report.html").is_file()
    bad = hushmon("noise", "calibrate", "--runs", "1", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "at least 2 runs" in bad.stderr
