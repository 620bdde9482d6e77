"""``hushmon bench`` end to end with the real build/bin/hushmon-bench under mpirun.

Tiny settings (two sizes, few launches) keep it to seconds. Only the
structure and the statistics' invariants are checked, never a timing: the
machine is shared and noisy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hushmon.bench.results import load_run
from hushmon.cli import main
from hushmon.paths import build_bin_dir

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(
        not (build_bin_dir() / "hushmon-bench").is_file(),
        reason=f"{build_bin_dir() / 'hushmon-bench'} is not built (run 'make')",
    ),
]

TINY = ["--", "--max-total", "24", "--max-valid", "12", "--min-valid", "4", "--sync-rounds", "10"]


def test_run_report_and_rebuild(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    argv = ["bench", "--np", "2", "--op", "waitpatternup,bcast", "--size", "8,1K"]
    argv += ["--method", "both", "--out", str(out), "--timeout", "240", *TINY]
    assert main(argv) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == f"report: {out / 'report.html'}"

    run = load_run(out / "results.json")
    assert run.meta.program == "hushmon-bench" and run.meta.nprocs == 2
    assert run.meta.timer and run.meta.sync and run.meta.hosts
    bcast = {(r.size, r.method) for r in run.results if r.op == "bcast"}
    assert bcast == {(8, "sync"), (1024, "sync"), (8, "loop"), (1024, "loop")}
    for r in run.results:
        assert r.nprocs == 2
        assert r.n_total >= r.n_valid >= r.n_used
        if r.n_used > 1 and not math.isnan(r.mean):
            assert r.min <= r.mean <= r.max
            assert r.ci_low <= r.mean <= r.ci_high
        if r.method == "sync":
            assert r.global_mean is not None
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["exit_code"] == 0

    html = (out / "report.html").read_text(encoding="utf-8")
    assert "waitpatternup on 2 ranks" in html  # the timer check, pass or fail
    assert "<h2>Loop vs synchronized" in html

    rebuilt = tmp_path / "again.html"
    assert main(["bench", "report", str(out / "results.json"), "--html", str(rebuilt)]) == 0
    assert rebuilt.is_file()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--op", "bcats"], "bcats"),
        (["--size", "-8"], "--sizes"),
        (["--size", "1:x:2"], "--sizes"),
    ],
)
def test_bad_input_is_the_programs_one_line_error(
    tmp_path: Path, capsys, argv: list[str], expected: str
) -> None:
    code = main(["bench", "--np", "2", *argv, "--out", str(tmp_path), "--timeout", "60"])
    assert code != 0
    err = capsys.readouterr().err
    assert err.startswith("hushmon: hushmon-bench: ") and err.count("\n") == 1
    assert expected in err
