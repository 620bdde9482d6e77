"""Passes, the OSU / IMB procedures and progress in ``hushmon bench``: reading
the points and the tools' columns, the report sections built from them,
--repeat, and the progress line with a total and the time left."""

from __future__ import annotations

import argparse
import io
import json
import math
from pathlib import Path

import pytest

from hushmon.bench.cli import bench_args
from hushmon.bench.report import build_page, summary
from hushmon.bench.results import load_run, loads_run
from hushmon.bench.run import Progress, planned_results
from hushmon.errors import HushmonError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
# Written by: mpirun -np 2 hushmon-bench --op bcast,allreduce --sizes 8,16K
#   --method sync,osu,imb,loop,loop_barrier --passes 3 --stage-launches 4 --max-total 12
PASSES = FIXTURES / "passes_tools.json"


def test_points_and_one_result_per_point() -> None:
    run = load_run(PASSES)
    assert run.passes == 3
    assert len(run.all_results) == 2 * 2 * 5 * 3
    assert len(run.points) == len(run.results) == 2 * 2 * 5
    for point, r in zip(run.points, run.results, strict=True):
        assert (r.op, r.size, r.nprocs, r.method) == point.key
        # The representative is the pass nearest the median.
        passes = [x for x in run.all_results if (x.op, x.size, x.nprocs, x.method) == point.key]
        assert len(passes) == 3 and sorted(x.pass_index for x in passes) == [0, 1, 2]
        if not math.isnan(point.median):
            nearest = min(abs(x.mean - point.median) for x in passes)
            assert abs(r.mean - point.median) == nearest
            assert point.ci_low <= point.median <= point.ci_high
        assert sum(point.invalid_causes.values()) == point.n_total - point.n_valid


def test_tool_columns_are_read() -> None:
    run = load_run(PASSES)
    osu = [r for r in run.all_results if r.method == "osu"]
    imb = [r for r in run.all_results if r.method == "imb"]
    assert osu and imb
    for r in osu:
        assert r.tool["avg_latency_us"] == pytest.approx(r.mean * 1e6)
        assert r.tool["iterations"] == (100 if r.size > 8192 else 1000)
        assert r.buffers == "reuse"
    for r in imb:
        assert r.tool["t_min_usec"] <= r.tool["t_avg_usec"] <= r.tool["t_max_usec"]


def test_report_has_the_tool_repeat_and_cause_sections() -> None:
    html = build_page(load_run(PASSES)).render()
    assert "OSU / IMB procedures vs the synchronized method" in html
    assert "Repeatability over 3 passes" in html
    assert "Invalid launches by cause" in html
    assert "previous launch late" in html and "OSU max / avg" in html


def test_single_pass_file_has_no_repeat_section() -> None:
    html = build_page(load_run(FIXTURES / "sync_loop.json")).render()
    assert "Repeatability over" not in html


def test_summary_lists_points() -> None:
    data = summary(load_run(PASSES), None)
    assert data["passes"] == 3 and len(data["points"]) == 20
    assert {"median_s", "spread", "disagree", "invalid_causes"} <= data["points"][0].keys()
    json.dumps(data)


def test_disagreeing_points_are_a_finding() -> None:
    doc = json.loads(PASSES.read_text())
    for i, point in enumerate(doc["points"]):
        point["disagree"] = i == 0
    html = build_page(loads_run(json.dumps(doc))).render()
    assert "passes disagree at 1 of 20 points" in html


def test_bad_points_are_one_line_errors() -> None:
    doc = json.loads(PASSES.read_text())
    doc["points"][0]["pass_values"] = ["x"]
    with pytest.raises(HushmonError, match=r"points\[0\].*pass_values"):
        loads_run(json.dumps(doc), "f.json")


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "op": None, "size": None, "timer": None, "sync": None, "method": None, "repeat": None,
    }  # fmt: skip
    base.update(kw)
    return argparse.Namespace(**base)


def test_repeat_becomes_passes() -> None:
    assert bench_args(_args(repeat=4, method="sync,osu"), []) == [
        "--method", "sync,osu", "--passes", "4",
    ]  # fmt: skip
    with pytest.raises(HushmonError, match="--repeat"):
        bench_args(_args(repeat=0), [])


def test_planned_line() -> None:
    assert planned_results("# planned 48 results (16 points x 3 passes)\n") == 48
    assert planned_results("bcast 8 2 sync 0 16 12 6 0.3 0.1 0.2 0.4 0.3 ok") is None
    assert planned_results("# timer monotonic") is None


def test_progress_line_has_total_and_time_left() -> None:
    out = io.StringIO()
    with Progress("hushmon-bench (2 ranks)", stream=out, every_s=0.0) as progress:
        progress.planned(4)
        progress.advance()
        progress.advance()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("hushmon-bench (2 ranks): 1/4 results")
    assert "s left" in lines[1] and "2/4" in lines[1]
