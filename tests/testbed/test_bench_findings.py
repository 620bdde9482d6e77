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


def test_bench_findings_short() -> None:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "bench_findings.py"), "--short", "--json", "-"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
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
    assert "hits:" in out.stderr
