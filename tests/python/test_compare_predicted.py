"""hushmon compare A B: each finding of A that is gone or smaller in B, with the
run time A's digest said removing it would save against the change measured
(issue 21). On the bed's recorded out-of-core jobs (tests/fixtures/spool)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hushmon.digest.compare import Check, compare_runs
from hushmon.paths import REPO_ROOT
from hushmon.store.ingest import ingest_spool

OOC = REPO_ROOT / "tests" / "fixtures" / "spool" / "testbed-ooc-512M"


def test_hit_or_miss_allows_the_sampling_resolution() -> None:
    c = Check("f", "t", "high", 0.20, 0.30, 0.33, 0.05, "gone")
    assert c.verdict == "hit"
    assert Check("f", "t", "high", 0.20, 0.30, 0.36, 0.05, "gone").verdict == "miss"
    assert Check("f", "t", "high", 0.20, 0.30, 0.14, 0.05, "gone").verdict == "miss"
    assert Check("f", "t", "low", None, None, 0.1, 0.05, "gone").verdict == "no estimate"
    assert "predicted 20-30%" in c.text() and "hit" in c.text()


def test_compare_before_and_after_shows_predicted_against_measured(tmp_path: Path) -> None:
    # job 1: outofcore --data 1G under a 512 MiB node limit (data streams through the
    # disk); job 2: --data 256M, which fits: the memory finding is gone in job 2
    spool = tmp_path / "spool"
    spool.mkdir()
    for f in OOC.glob("*.lp"):
        shutil.copy(f, spool / f.name)
    db = tmp_path / "hushmon.duckdb"
    ingest_spool(db, spool)
    cmp = compare_runs(db, ["1", "2"], tmp_path / "cmp")
    assert cmp.first is not None and cmp.second is not None
    assert (cmp.first.job, cmp.second.job) == ("1", "2")  # the order given, not by size
    checks = {c.title: c for c in cmp.checks}
    mem = checks["Memory at its limit: data streams through the disk"]
    assert mem.in_b == "gone" and mem.low_share is not None and mem.high_share is not None
    a, b = cmp.first.duration_s, cmp.second.duration_s
    assert mem.measured_share == 1 - b / a
    assert mem.verdict in ("hit", "miss")
    data = json.loads(cmp.json_path.read_text())
    pvm = data["predicted_vs_measured"]
    assert pvm["first"] == "1" and pvm["second"] == "2"
    assert any(c["verdict"] == mem.verdict for c in pvm["checks"])
    lines = "\n".join(cmp.summary_lines())
    assert "predicted against measured, job 1 -> job 2" in lines
    assert "Predicted against measured" in cmp.report_path.read_text()
    # given the other way round, the memory finding is not 'gone or smaller'
    back = compare_runs(db, ["2", "1"], tmp_path / "back")
    assert "Memory at its limit: data streams through the disk" not in {
        c.title for c in back.checks
    }
