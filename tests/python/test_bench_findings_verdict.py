"""bench/bench_findings.py's verdict with repeated runs (issue 21): a prediction
hits when its range overlaps the measured range (each pair's saving, lowest
to highest; "hit (spread)" when the median saving is outside), a single
run's saving must lie inside it, and a case without
the finding hits when the saving stays under the medium threshold. The bed
runs themselves are tests/testbed/test_bench_findings.py's."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import ModuleType

import pytest

from hushmon.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "bench" / "bench_findings.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_findings", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_one_run_must_lie_inside_the_range(bench: ModuleType) -> None:
    # pair-racks at 05:00: 42-59 % predicted, 59.5 % measured once
    assert bench.verdict(0.42, 0.59, 0.595, True) == "miss"
    assert bench.verdict(0.42, 0.59, 0.57, True) == "hit"


def test_repeated_runs_hit_when_the_ranges_overlap(bench: ModuleType) -> None:
    assert bench.verdict(0.42, 0.59, 0.57, True, (0.52, 0.64)) == "hit"
    # the median outside, only the spread reaching the range: said apart
    assert bench.verdict(0.42, 0.59, 0.595, True, (0.55, 0.64)) == "hit (spread)"
    assert bench.verdict(0.0, 0.38, -0.62, True, (-0.71, 0.07)) == "hit (spread)"
    assert bench.verdict(0.10, 0.20, 0.30, True, (0.25, 0.35)) == "miss"
    assert bench.verdict(0.30, 0.40, 0.10, True, (0.05, 0.29)) == "miss"
    assert bench.verdict(None, None, 0.3, True, (0.2, 0.4)) == "no estimate"


def test_no_finding_hits_below_the_medium_threshold(bench: ModuleType) -> None:
    assert bench.verdict(None, None, 0.05, False, (-0.1, 0.2)) == "hit"
    assert bench.verdict(None, None, 0.15, False, (0.1, 0.2)) == "miss"


def test_measured_range_spans_the_pairs_and_the_median(bench: ModuleType) -> None:
    case = bench.CASES["pair-racks"]
    row = bench.Row(case, "t", "high", 0.4, 0.6, 0.57, "", "", "", (8.9, 3.8), (8.1, 3.0),
                    "", ("1", "2"), measured_each=[0.516, 0.641, 0.57])  # fmt: skip
    assert row.measured_range == (0.516, 0.641)
    doc = row.to_json()
    assert doc["repeat"] == 3 and doc["measured_range"] == [0.516, 0.641]
    single = bench.Row(case, "t", "high", 0.4, 0.6, 0.57, "", "", "", (8.9, 3.8), (8.1, 3.0),
                       "", ("1", "2"))  # fmt: skip
    assert single.measured_range == (0.57, 0.57) and single.to_json()["repeat"] == 1


def test_repeat_out_of_range_is_one_line(bench: ModuleType) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--repeat", "0"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert out.stderr.strip().count("\n") == 0 and "--repeat" in out.stderr
