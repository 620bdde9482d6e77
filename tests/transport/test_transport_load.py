"""The CI variant of bench/bench_transport_load.py: 100 simulated agents in
two racks for 30 s through leaves, two rack reducers per rack, the top
reducer and the collectors on a lake, with two jobs that start and end
during the run and are digested while collection goes on. Checks the counts
only (every batch stored once, every daemon alive to the end, every agent in
its period's job summaries, each job's digest built with its nodes and
periods); the figures are the benchmark's business."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_whole_path_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    r = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench/bench_transport_load.py"),
            "--quick",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["published"] == 100 * 30
    assert figures["lost"] == 0 and figures["duplicated"] == 0
    assert figures["exited_non_zero"] == []
    # through the reducers: every period's job summaries (late ones included)
    # cover every agent exactly once
    assert figures["periods_complete_in_job_summaries"] == figures["periods"]
    # both jobs digested from the lake while the collectors ran, each with
    # the nodes and periods the load generator gave it
    assert [d["job"] for d in figures["digests"]] == ["1001", "1002"]
    assert all(d["ok"] for d in figures["digests"]), figures["digests"]
