"""The phases program (c/apps/phases.c) under mpirun: each phase lasts
--phase-s on rank 0's clock with every rank running the same units, its
results verified; --corrupt is caught in each phase; a bad --order fails
on every rank with one line. Under ``hushmon run`` (the real agent, its app
socket) the phases it reports through libhushmon become the digest's phases,
by name and in the program's order: the libhushmon path end to end on one
machine (the bed's version with racks: tests/testbed/test_bed_phases.py)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mpirun_types import MpiRun

from hushmon.digest.phases import APP, OUTSIDE
from hushmon.report.screenshot import screenshot
from hushmon.runner import mpirun_command

pytestmark = pytest.mark.mpi

PHASES = ["solve", "transpose", "random_access", "alltoall"]
# small units, so that a phase of 0.3 s holds several even on a loaded box
SMALL = ["--solve-n", "96", "--transpose-bytes", "64K", "--table-bytes", "4M", "--updates",
         "16K"]  # fmt: skip


def _summary(mpirun: MpiRun, *args: str) -> dict[str, Any]:
    out = mpirun(2, "phases", *SMALL, *args, "--json", "-", timeout=90)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_each_phase_lasts_its_time_and_verifies(mpirun: MpiRun) -> None:
    doc = _summary(mpirun, "--phase-s", "0.3")
    assert doc["verified"] is True and doc["failures"] == 0
    m = doc["metrics"]
    for name in PHASES:
        # until 0.3 s had passed on rank 0, then the unit under way: not far past it
        assert 0.3 <= m[f"{name}_s"] < 5.0, (name, m)
        assert m[f"{name}_units"] >= 1, (name, m)
    # the exchanges' bytes to the other rank: transposes of 64 KiB, 64 all-to-alls
    # of 8 bytes per unit
    sent = 2 * (m["transpose_units"] * 65536 + m["alltoall_units"] * 64 * 8)
    assert doc["bytes_moved"] == sent


def test_order_repeats_and_leaves_out_phases(mpirun: MpiRun) -> None:
    doc = _summary(mpirun, "--phase-s", "0", "--order", "solve,alltoall,solve")
    m = doc["metrics"]
    # --phase-s 0: one unit per phase, so solve ran twice
    assert (m["solve_units"], m["alltoall_units"]) == (2, 1)
    assert m["transpose_units"] == 0 and m["random_access_units"] == 0
    assert doc["bytes_moved"] == 2 * 64 * 8


def test_corrupt_is_caught_in_each_phase(mpirun: MpiRun) -> None:
    # rank 0 damages one result of each phase: a solution, a transposed block, a
    # table entry, a small block; each phase's check finds its own
    out = mpirun(2, "phases", *SMALL, "--phase-s", "0", "--corrupt", "--json", "-", timeout=90)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert {k: doc["metrics"][f"{k}_failures"] for k in PHASES} == dict.fromkeys(PHASES, 1)
    assert doc["failures"] == 4 and doc["verified"] is False


def test_bad_order_fails_on_every_rank(mpirun: MpiRun) -> None:
    out = mpirun(2, "phases", "--order", "solve,sort", timeout=60)
    assert out.returncode == 2
    assert "phases: --order: 'sort' is not a phase" in out.stderr
    assert "Traceback" not in out.stderr


def test_hushmon_run_names_the_programs_phases(bin_dir: Path, tmp_path: Path) -> None:
    agent = bin_dir / "hushmon-agent"
    if not os.access(agent, os.X_OK):
        pytest.skip(f"{agent} not built yet")
    summary = tmp_path / "run.json"
    # 1.5-s phases at 250-ms periods: 6 periods each, over the 4 the digest
    # analyzes a phase from
    program = [str(bin_dir / "phases"), *SMALL, "--phase-s", "1.5"]
    argv = [
        sys.executable, "-m", "hushmon.cli", "run", "--data-dir", str(tmp_path / "data"),
        "--job", "phases", "--period", "250", "--agent", str(agent), "--json", str(summary),
        "--", *mpirun_command(2, program),
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    paths = json.loads(summary.read_text())["digest"]
    digest = json.loads(Path(paths["json"]).read_text())
    phases = digest["phases"]
    assert phases["source"] == APP, phases["note"]
    named = [p["name"] for p in phases["phases"] if p["name"] != OUTSIDE]
    assert named == PHASES, phases
    # one after another, each about its 1.5 s (a period either side)
    spans = [(p["start_s"], p["end_s"]) for p in phases["phases"] if p["name"] != OUTSIDE]
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert abs(start - end) <= 0.25, spans
    for start, end in spans:
        assert 1.0 <= end - start <= 2.5, spans
    assert "phases (libhushmon):" in out.stderr  # hushmon run's lines
    # the report's Phases table names them, and the page renders in Chromium
    report = Path(paths["report"])
    html = report.read_text()
    table = html[html.index("<h2>Phases</h2>") :].split("</table>")[0]
    cells = [f"<td class='text'>{name}</td>" for name in PHASES]
    assert all(c in table for c in cells), table
    assert [table.index(c) for c in cells] == sorted(table.index(c) for c in cells)
    png = screenshot(report, tmp_path / "report.png", height=4000)
    assert png.stat().st_size > 10_000
