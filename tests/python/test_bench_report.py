"""The bench HTML report and summary, built from fixture JSON (no MPI needed)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hushmon.bench import report
from hushmon.bench.report import build_page, summary, write_report
from hushmon.bench.results import load_run, loads_run
from hushmon.cli import main
from hushmon.errors import HushmonError
from hushmon.report.html import Page
from hushmon.report.screenshot import chromium_path, screenshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"


def page_of(name: str, provenance: dict | None = None) -> str:
    return build_page(load_run(FIXTURES / name), provenance).render()


def test_loop_and_sync_report_has_every_part() -> None:
    html = page_of("sync_loop.json", {"wall_time_s": 12.5, "exit_code": 0})
    # Provenance a reader needs to trust the numbers.
    for text in (
        "Open MPI v4.1.4 (MPI 3.1)",
        "monotonic (resolution 1 ns)",
        "ring (stops after 100",
        "0.12 µs",
        "0.34 µs",
        "node01",
        "wall time s",
        "12.5",
    ):
        assert text in html, text
    # Timer checks with the known true times, and the loop error as a ratio.
    assert "waitpatternup on 2 ranks: timer and schedule OK" in html
    assert "waitpatternnull on 2 ranks: timer and schedule OK" in html
    assert "<h2>Loop vs synchronized" in html
    assert "the loop method misstates collective times" in html
    # Plots: sweep panels, single-point bars, loop/sync ratio.
    assert html.count("<svg") == 3
    # Seed's report fields in the per-operation tables.
    for header in (
        "n_t",
        "n_c",
        "n_s",
        "mean",
        "median",
        "SE",
        "min",
        "max",
        "CI 95%",
        "global mean",
    ):
        assert f">{header}</th>" in html, header
    assert "CI 90%" in html and "E 99%" in html
    assert "Per-rank times" in html


def test_report_values_are_in_microseconds() -> None:
    html = page_of("sync_loop.json")
    # bcast, 1 byte, synchronized: mean 0.9 us in the fixture (0.9002 us shown to 4 digits).
    row = re.search(
        r"<tr><td class='text'>1</td><td class=''>2</td><td class='text'>sync</td>"
        r"(.*?)</tr>",
        html,
    )
    assert row is not None
    assert "0.9002" in row.group(1)


def test_report_without_optional_fields_says_what_is_missing() -> None:
    html = page_of("minimal.json")
    assert "timer</th><td class='text'>not reported" in html
    assert "clock error not reported" in html
    assert "<h2>Loop vs synchronized" not in html
    assert "Per-rank times" not in html
    # scan had no valid launch: its statistics are dashes, not zeros or 'nan'.
    assert "nan" not in html.lower().replace("nanosecond", "")
    assert html.count("<svg") == 2  # gather swept sizes; scan is a single point


def test_bad_measurements_raise_findings() -> None:
    html = page_of("nprocs_sweep.json")
    assert "waitpatternup on 4 ranks is off its known time" in html
    assert "results rejected more than 25% of launches" in html
    # Drift of 2.5 us over times of 2-5 us: nothing measured is valid, though
    # the 2- and 3-rank wait patterns have the right times.
    assert "6 of 6 synchronized results are NOT VALID" in html
    assert "waitpatternup on 2 ranks: right times on clocks that disagree" in html
    assert html.count(">NOT VALID</td>") == 6


def test_report_is_self_contained(tmp_path: Path) -> None:
    path = write_report(load_run(FIXTURES / "sync_loop.json"), tmp_path / "r.html")
    html = path.read_text(encoding="utf-8")
    assert "<script" not in html
    assert not re.search(r"(src|href)=['\"]https?:", html)


def test_summary_lists_checks_and_ratios() -> None:
    run = load_run(FIXTURES / "sync_loop.json")
    data = summary(run, Path("r.html"))
    json.dumps(data)  # must be serializable as is
    assert data["report"] == "r.html"
    assert {c["op"] for c in data["pattern_checks"]} == {"waitpatternup", "waitpatternnull"}
    assert all(c["passed"] for c in data["pattern_checks"])
    bcast = [p for p in data["loop_vs_sync"] if p["op"] == "bcast"]
    assert len(bcast) == 9
    assert all(p["ratio"] == pytest.approx(p["loop_mean_s"] / p["sync_mean_s"]) for p in bcast)


def test_report_command_rebuilds_next_to_results(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results.json"
    shutil.copy(FIXTURES / "sync_loop.json", results)
    (tmp_path / "provenance.json").write_text(json.dumps({"wall_time_s": 42.0}))
    assert main(["bench", "report", str(results)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"report: {tmp_path / 'report.html'}"
    assert "42" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_report_command_json_to_stdout(tmp_path: Path, capsys) -> None:
    html = tmp_path / "out" / "x.html"
    code = main(
        ["bench", "report", str(FIXTURES / "minimal.json"), "--html", str(html), "--json", "-"]
    )
    assert code == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["report"] == str(html) and data["ops"] == ["gather", "scan"]
    assert "report:" in captured.err
    assert html.is_file()


@pytest.mark.skipif(chromium_path() is None, reason="chromium not installed")
def test_report_renders_in_a_browser(tmp_path: Path) -> None:
    html = write_report(load_run(FIXTURES / "sync_loop.json"), tmp_path / "report.html")
    png = screenshot(html, tmp_path / "report.png", width=1200, height=1600)
    pixels = np.asarray(Image.open(png).convert("L"))
    assert pixels.shape == (1600, 1200)
    # Rendered content, not a blank page: dark text and plot lines on white.
    assert (pixels < 100).mean() > 0.005
    assert (pixels > 240).mean() > 0.5


@pytest.mark.parametrize(
    ("load_before", "load_after", "busy"),
    [
        (0.1, 2.0, False),  # the run's own two ranks on two CPUs
        (3.5, 5.0, True),  # other work already queued
        (0.2, 4.5, True),  # other work started during the run
    ],
)
def test_machine_load_is_reported(load_before: float, load_after: float, busy: bool) -> None:
    provenance = {"cpus": 2, "load_before": load_before, "load_after": load_after}
    page = Page("load")
    report._load_findings(page, load_run(FIXTURES / "sync_loop.json"), provenance)
    html = page.render()
    assert ("the machine was busy during the run" in html) is busy
    assert ("the machine had a CPU for every rank" in html) is (not busy)


def test_report_of_real_program_output() -> None:
    html = page_of("real_2ranks.json")
    assert "Per-rank times" in html and "slowest rank" in html
    assert "Every launch (raw)" in html
    assert "waitpatternup on 2 ranks" in html


def test_clock_offsets_and_simulated_skew_are_shown() -> None:
    document = json.loads((FIXTURES / "minimal.json").read_text())
    document["meta"].update(
        sync="ring",
        sync_nodes=1,
        sync_ranks_pinged=2,
        simulated_skew_s=5e-5,
        clock_offsets_s=[0.0, -5e-5, -1e-4],
    )
    html = build_page(loads_run(json.dumps(document))).render()
    assert "clock offsets to rank 0</th><td class='text'>0, -50, -100 µs" in html
    assert "1 node(s), 2 rank(s) pinged" in html
    assert "clocks were skewed on purpose" in html
    document["meta"]["clock_offsets_s"] = ["0"]
    with pytest.raises(HushmonError, match="clock_offsets_s' must be a list of numbers"):
        loads_run(json.dumps(document))


def test_results_on_disagreeing_clocks_are_flagged_not_valid() -> None:
    # Real output of the per-rank TSC calibration bug: clocks 10 ms apart.
    run = load_run(FIXTURES / "tsc_unshared_calibration.json")
    html = build_page(run).render()
    assert "2 of 2 synchronized results are NOT VALID" in html
    assert "waitpatternup on 2 ranks: right times on clocks that disagree" in html
    assert html.count(">NOT VALID</td>") == 2
    assert "timer and schedule OK" not in html and "clocks stayed synchronized" not in html
    data = summary(run, None)
    assert data["clock_error_max_s"] == pytest.approx(9.966153e-3)
    assert [(r["op"], r["size"]) for r in data["results_clock_invalid"]] == [
        ("waitpatternup", 0),
        ("bcast", 8),
    ]
    (check,) = data["pattern_checks"]
    assert check["clock_valid"] is False and check["passed"] is False
