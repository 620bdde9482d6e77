"""``hushmon bench`` command line: argument errors, and the runner driven by
stand-in programs under the real mpirun (the C program's own behaviour is
tested in test_bench_e2e.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from waiting import wait_until

from hushmon.bench.cli import expand_methods
from hushmon.bench.run import error_line, is_table_row
from hushmon.cli import main
from hushmon.errors import HushmonError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"

# A stand-in for build/bin/hushmon-bench: records its arguments, then acts
# as $FAKE_MODE says. Runs under the real mpirun.
FAKE_PROGRAM = r"""#!/bin/bash
printf '%s\n' "$@" > "$FAKE_ARGS"
json=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--json" ]; then json="$2"; fi
  shift
done
case "$FAKE_MODE" in
  # each rank writes its own copy and renames it into place: two ranks
  # cp'ing onto one path at once can fail with "File exists"
  ok)      echo "bcast 8 sync 1.0"; cp "$FAKE_RESULTS" "$json.$$" && mv -f "$json.$$" "$json" ;;
  fail)    echo "hushmon-bench: --op: unknown operation 'bcats' (see --list)" >&2; exit 2 ;;
  silent)  exit 3 ;;
  nojson)  exit 0 ;;
  badjson) echo '{"results": [' > "$json" ;;
  hang)    echo $$ > "$FAKE_ARGS.pid"; sleep 60 ;;
esac
"""


@pytest.fixture
def fake_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "hushmon-bench"
    exe.write_text(FAKE_PROGRAM)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    args_file = tmp_path / "args.txt"
    monkeypatch.setenv("HUSHMON_BIN", str(bin_dir))
    monkeypatch.setenv("FAKE_ARGS", str(args_file))
    # The stand-in runs as one process per rank, and its results say so.
    results = json.loads((FIXTURES / "sync_loop.json").read_text())
    results["meta"]["nprocs"] = 1
    results_file = tmp_path / "fixture.json"
    results_file.write_text(json.dumps(results))
    monkeypatch.setenv("FAKE_RESULTS", str(results_file))

    def use(mode: str) -> Path:
        monkeypatch.setenv("FAKE_MODE", mode)
        return args_file

    return use


def test_successful_run_keeps_raw_data_and_writes_report(
    tmp_path: Path, fake_bench, capsys
) -> None:
    args_file = fake_bench("ok")
    out = tmp_path / "out"
    code = main(
        [
            "bench",
            "--np",
            "1",
            "--op",
            "bcast",
            "--size",
            "1:64K:x4",
            "--method",
            "both",
            "--timer",
            "tsc",
            "--sync",
            "linear",
            "--out",
            str(out),
            "--",
            "--root",
            "1",
        ]
    )
    assert code == 0
    passed = args_file.read_text().split("\n")[:-1]
    assert passed == [
        "--op",
        "bcast",
        "--sizes",
        "1:64K:x4",
        "--timer",
        "tsc",
        "--sync",
        "linear",
        "--method",
        "sync,loop",
        "--root",
        "1",
        "--json",
        str(out / "results.json"),
    ]
    assert json.loads((out / "results.json").read_text())["meta"]["program"] == "hushmon-bench"
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["exit_code"] == 0 and provenance["nprocs"] == 1
    assert "-np" in provenance["mpirun"]
    assert (out / "stdout.txt").read_text() == "bcast 8 sync 1.0\n"
    assert "<h2>Loop vs synchronized" in (out / "report.html").read_text(encoding="utf-8")
    assert capsys.readouterr().out.strip() == f"report: {out / 'report.html'}"


def test_json_summary_to_stdout(tmp_path: Path, fake_bench, capsys) -> None:
    fake_bench("ok")
    out = tmp_path / "out"
    assert main(["bench", "--np", "1", "--out", str(out), "--json", "-"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["out_dir"] == str(out)
    assert data["report"] == str(out / "report.html")
    assert len(data["loop_vs_sync"]) == 19  # bcast and allreduce at 9 sizes, barrier
    assert captured.err.strip().endswith("report.html")


def test_failing_program_gives_its_one_line_error(tmp_path: Path, fake_bench, capsys) -> None:
    fake_bench("fail")
    code = main(["bench", "--np", "1", "--op", "bcats", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == "hushmon: hushmon-bench: --op: unknown operation 'bcats' (see --list)"
    assert not (tmp_path / "o" / "report.html").exists()
    assert json.loads((tmp_path / "o" / "provenance.json").read_text())["exit_code"] == 2


def message_lines(err: str) -> list[str]:
    """stderr without the progress lines a slow run prints every 10 s
    ('hushmon-bench (N ranks): K results, T s')."""
    return [ln for ln in err.splitlines() if not ln.startswith("hushmon-bench (")]


def test_singletons_of_another_mpi_are_named(tmp_path: Path, fake_bench, capsys) -> None:
    """A program built against another MPI than the launcher's runs as N
    copies of rank 0 of 1: the runner compares the process count of its JSON
    with what it asked for and says so in one line."""
    fake_bench("ok")
    assert main(["bench", "--np", "2", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "hushmon: hushmon-bench reports 1 process(es) but " in err
    assert "was asked for 2: the programs in " in err and "another MPI" in err
    assert len(message_lines(err)) == 1
    assert not (tmp_path / "o" / "report.html").exists()


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("silent", "exited with code 3 and printed no message"),
        ("nojson", "exited 0 but wrote no results.json"),
        ("badjson", "results.json: not valid JSON"),
    ],
)
def test_broken_program_output(
    tmp_path: Path, fake_bench, capsys, mode: str, expected: str
) -> None:
    fake_bench(mode)
    assert main(["bench", "--np", "1", "--out", str(tmp_path / "o")]) != 0
    err = capsys.readouterr().err
    assert expected in err
    assert len(message_lines(err)) == 1


def test_timeout_stops_the_whole_run(tmp_path: Path, fake_bench, capsys) -> None:
    args_file = fake_bench("hang")
    start = time.monotonic()
    code = main(["bench", "--np", "1", "--timeout", "2", "--out", str(tmp_path / "o")])
    assert code == 124
    assert time.monotonic() - start < 30
    assert "did not finish in 2 s" in capsys.readouterr().err
    pid = int(Path(f"{args_file}.pid").read_text())
    # the rank may take a moment to go after mpirun (longer on a loaded machine)
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), "the rank gone after the timeout")


def test_missing_program_says_how_to_build(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HUSHMON_BIN", str(tmp_path))
    assert main(["bench", "--out", str(tmp_path / "o")]) == 2
    assert "hushmon-bench not found: run 'make' first" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["bench", "bogus"], "unexpected argument 'bogus'"),
        (["bench", "--np", "0"], "--np must be 1 .. "),
        (["bench", "--np", "100000000"], "(64 per CPU of this machine, where mpirun starts"),
        (["bench", "--timeout", "0"], "--timeout must be positive"),
        (["bench", "--method", "sync,,loop"], "--method: empty name"),
    ],
)
def test_argument_errors(tmp_path: Path, capsys, argv: list[str], expected: str) -> None:
    assert main([*argv, "--out", str(tmp_path)] if argv[1] != "bogus" else argv) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_report_subcommand_argument_errors(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "report"])
    assert exc.value.code == 2
    assert "RESULTS" in capsys.readouterr().err.upper()


def test_bad_results_file_from_the_shell_is_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hushmon.cli", "bench", "report", str(FIXTURES / "bad_field.json")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ},
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "field 'mean' must be a number" in out.stderr


def test_expand_methods() -> None:
    assert expand_methods("both") == "sync,loop"
    assert expand_methods("loop_barrier,both") == "loop_barrier,sync,loop"
    assert expand_methods("sync") == "sync"
    with pytest.raises(HushmonError):
        expand_methods(",")


def test_error_line_prefers_the_programs_own_message() -> None:
    mpirun_noise = (
        "hushmon-bench: --size: '-8' is not a size\n"
        "--------------------------------------------------------------------------\n"
        "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 2.\n"
        "--------------------------------------------------------------------------\n"
    )
    assert error_line(mpirun_noise, 2) == "hushmon-bench: --size: '-8' is not a size"
    assert error_line("mpirun noticed that process rank 0\nsegfault in foo\n", 139) == (
        "segfault in foo"
    )


def test_table_rows_advance_progress_and_nothing_else() -> None:
    header = "op size procs method n_t n_c n_s mean_us ci95_us min_us max_us global_us"
    row = "bcast 1024 2 sync 16 15 9 1.634 0.101 1.452 1.859 1.652"
    loop_row = "bcast 1024 2 loop 10 10 6 1.201 0.049 1.157 1.281 -"
    closing = "# timer monotonic, sync ring: residual offset 0.010 us after sync, 0.006 us at"
    assert [is_table_row(x) for x in (header, row, loop_row, closing, "")] == [
        False,
        True,
        True,
        False,
        False,
    ]


def test_run_options_with_report_are_refused(capsys) -> None:
    argv = ["bench", "--np", "4", "report", str(FIXTURES / "minimal.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--np apply to a run, not to 'report'" in err and err.count("\n") == 1


def test_unwritable_outputs_are_one_line_errors(tmp_path: Path, fake_bench, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    html = blocker / "report.html"  # a directory that cannot exist
    assert main(["bench", "report", str(FIXTURES / "minimal.json"), "--html", str(html)]) == 2
    assert "cannot write the report" in capsys.readouterr().err
    fake_bench("ok")
    assert main(["bench", "--np", "1", "--out", str(blocker / "out")]) == 2
    err = capsys.readouterr().err
    assert "cannot create" in err and err.count("\n") == 1
