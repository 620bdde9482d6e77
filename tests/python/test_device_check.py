"""bench/device_check.sh --short on this machine: every part runs or says
why not, the JSON and the Markdown table agree, and what the machine lacks
(a GPU, a PMU here) is skipped with its reason rather than failed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hushmon.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "bench" / "device_check.sh"
PARTS = ["agent_full_node", "sink_cost", "nvml_under_load", "bench_accuracy", "mux_overhead"]


@pytest.mark.slow
def test_short_mode_runs_what_it_can_and_says_what_it_skipped(
    bin_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dc"
    env = {**os.environ, "HUSHMON_BIN": str(bin_dir)}
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--short", "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((out / "device_check.json").read_text())
    assert doc["machine"]["cores"] == os.cpu_count() and doc["machine"]["short"] is True
    assert [p["part"] for p in doc["parts"]] == PARTS
    by_name = {p["part"]: p for p in doc["parts"]}
    for part in doc["parts"]:
        assert part["status"] in ("ran", "skipped"), part
        assert part["status"] == "ran" or part["why"], f"{part['part']} skipped without a reason"
        assert part["status"] == "skipped" or part["figures"], f"{part['part']} ran, no figures"
    if shutil.which("nvidia-smi") is None:
        assert by_name["nvml_under_load"]["status"] == "skipped"
        assert "nvidia-smi" in by_name["nvml_under_load"]["why"]
    if not doc["machine"]["pmu"]:
        assert by_name["mux_overhead"]["why"].startswith("no PMU")
    # the agent is built for the tests: its part always runs, with sane figures
    agent = by_name["agent_full_node"]
    assert agent["status"] == "ran", agent
    assert 0 < agent["figures"]["cpu_us_per_sample_process"] < agent["figures"]["period_ms"] * 1000
    table = (out / "device_check.md").read_text()
    for part in doc["parts"]:
        assert f"| {part['part']} | {part['status']} (" in table
    assert table in proc.stdout  # the table is printed as written


def test_a_bad_argument_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(SCRIPT), "--no-such"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "device_check: unknown argument '--no-such' (--short, --out DIR, --pack-libs DIR)"
    ]
