"""bench/sizing.py: a load run's CPU per batch -> a site's cores and
processes per daemon kind, with the figures it was given in place of the
run's, and what its hub figure stands for (a site's hub deletes as many
messages as it stores from 6 h on, which costs it more)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hushmon.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "bench" / "sizing.py"


def _load_json(tmp_path: Path, **extra: Any) -> Path:
    doc = {
        "agents": 1000,
        "values_per_batch": 77,
        "bytes_per_value": 11.0,
        "bytes_per_value_compacted": 1.0,
        "kinds": [
            {"kind": "hub nats-server", "unit": "batch", "cpu_us_per_unit": 100.0},
            {"kind": "leaf nats-server", "unit": "batch", "cpu_us_per_unit": 50.0},
            {"kind": "rack reducer", "unit": "batch", "cpu_us_per_unit": 25.0},
            {"kind": "top reducer", "unit": "batch", "cpu_us_per_unit": 2.0},
            {"kind": "collector, raw path", "unit": "batch", "cpu_us_per_unit": 60.0},
            {"kind": "collector, summaries", "unit": "message", "cpu_us_per_unit": 30000.0},
        ],
        **extra,
    }
    path = tmp_path / "load.json"
    path.write_text(json.dumps(doc))
    return path


def _sizing(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def _row(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "rows.json"
    r = _sizing(*args, "--nodes", "10000", "--periods-s", "1", "--json", str(out))
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    assert len(rows) == 1
    return {"stdout": r.stdout, **rows[0]}


def test_cores_are_batches_times_cpu_per_batch(tmp_path: Path) -> None:
    row = _row(tmp_path, "--from", str(_load_json(tmp_path)))
    # 10,000 batches a second x 100 us = 1 core; x 60 us = 0.6
    assert abs(row["cores"]["hub nats-server"] - 1.0) < 1e-9
    assert abs(row["cores"]["collector, raw path"] - 0.6) < 1e-9
    assert row["processes"]["collector, raw path"] == 2  # at half a core each
    assert row["processes"]["rack reducer"] == 2 * 250  # two per rack of 40 nodes
    # 250 racks x 3 + 157 jobs = 907 summary messages a second x 30 ms
    assert abs(row["cores"]["collector, summaries"] - 907 * 0.03) < 1e-9
    # 10,000 x 77 values x 86,400 s x 1.0 B (the compacted lake)
    assert abs(row["disk_bytes_per_day"] - 10_000 * 77 * 86_400) < 1


def test_a_run_whose_streams_kept_everything_says_its_hub_figure_is_low(tmp_path: Path) -> None:
    row = _row(tmp_path, "--from", str(_load_json(tmp_path, load_s=300, stream_max_age_s=None)))
    assert "the hub's from the load run, before any message expired" in row["stdout"]
    assert "--hub-us-per-batch" in row["stdout"]


def test_a_run_whose_messages_expired_says_so(tmp_path: Path) -> None:
    row = _row(tmp_path, "--from", str(_load_json(tmp_path, load_s=300, stream_max_age_s=120)))
    assert "its streams kept 120 s of its 300 s" in row["stdout"]
    assert "before any message expired" not in row["stdout"]


def test_given_figures_replace_the_run_s_and_are_named(tmp_path: Path) -> None:
    src = str(_load_json(tmp_path))
    row = _row(
        tmp_path,
        "--from", src,
        "--hub-us-per-batch", "115",
        "--collector-us-per-batch", "40",
        "--summary-ms-per-message", "1.5",
    )  # fmt: skip
    assert abs(row["cores"]["hub nats-server"] - 1.15) < 1e-9
    assert abs(row["cores"]["collector, raw path"] - 0.4) < 1e-9
    assert abs(row["cores"]["collector, summaries"] - 907 * 0.0015) < 1e-9
    for said in (
        "the hub's from --hub-us-per-batch (115 us)",
        "raw collectors' CPU per batch from --collector-us-per-batch (40 us)",
        "CPU per message from --summary-ms-per-message (1.5 ms)",
    ):
        assert said in row["stdout"], said


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    src = str(_load_json(tmp_path))
    for args in (
        ["--from", src, "--hub-us-per-batch", "0"],
        ["--from", src, "--nodes", "ten"],
    ):
        r = _sizing(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("sizing: "), r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = _sizing("--from", str(bad))
    assert r.returncode != 0 and r.stderr.startswith("sizing: ") and "Traceback" not in r.stderr
