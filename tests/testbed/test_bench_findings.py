"""bench/bench_findings.py --short on the live bed (issue 21): two ranks in two
racks, then in one; the first run's digest predicts the saving, the bench
measures it, and the bytes that crossed the uplink (the fabric's counter) are
set beside the digest's share (measured from the bed's per-rack byte
counts). Timings are printed, not asserted (a loaded 2-core machine); the
counters and the table's shape are."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bedlib import bed_unavailable

from hushmon.paths import REPO_ROOT

# The case takes about a minute (one bed up, two runs, down); its
# commands' own limits add up to more than this (a hung run: 300 s).
TIMEOUT_S = 600
CLEANUP_S = 180  # testbed down (120 s at most) and the data folder


def test_bench_findings_short() -> None:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    proc = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "bench" / "bench_findings.py"), "--short", "--json", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # SIGTERM, not the SIGKILL of run(timeout=): the bench takes its bed
        # down on the way out, and the bed tests after this one find none up
        proc.terminate()
        stdout, stderr = proc.communicate(timeout=CLEANUP_S)
        pytest.fail(f"bench_findings --short ran over {TIMEOUT_S} s: {stderr[-2000:]}")
    assert proc.returncode == 0, stderr[-2000:]
    doc = json.loads(stdout)
    (case,) = doc["cases"]
    assert case["case"] == "pair-racks"
    # n1 is the job's only node in rack r1: all it sent crossed, by the uplink's own
    # counter and by the digest's bounds from the node counters alike
    assert case["crossed_measured"]["r1"] > 0.9
    assert case["crossed_bounds_digest"] is not None
    assert case["crossed_bounds_digest"][0] > 0.9
    # the bed counts the bytes each node received from each rack (testbed/rackcount.py):
    # the digest's crossed share is measured, not bounded
    assert case["partners"].startswith("measured"), case["partners"]
    assert case["finding"] != "no finding"
    assert case["predicted_low_share"] is not None
    assert 0 <= case["predicted_low_share"] <= case["predicted_high_share"] <= 1
    assert case["verdict"] in ("hit", "miss")
    a, b = case["run_time_s"]
    assert case["measured_share"] == pytest.approx(1 - b / a, abs=1e-3)
    # hushmon compare A B on the same two jobs finds the finding gone or smaller
    assert case["compare"].startswith("compare "), case["compare"]
    assert "measured" in case["compare"] and case["compare"].endswith(("hit", "miss"))
    assert "hits:" in stderr
